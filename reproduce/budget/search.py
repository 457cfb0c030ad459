"""`python -m reproduce budget --gpu-hours H --out DIR`: which reproduction of the masking study
(Figure 3, Tables 2-5) decides the most of the paper's claims for H GPU-hours, before anything is
submitted (issue 91; docs/reproduce.md, "Sizing a reproduction to your allocation").

Designs and their cost: reproduce.budget.design (sizes, which of each size's configurations,
runs, seeds, the LR grid or one LR), in GPU-hours at the assumed MFU (`--mfu`, `--gpu-tflops`).

Each design is scored by the **decision power** of every claim it can test
(analysis.claims.power.decision_power): the chance that `analysis claims` on that design's records
calls the claim supported, every component and Holm across the claims the design can test, as the
report runs it, simulated with the published cell means and seed SDs as the truth (planning values)
at the design's seeds, and with the pretraining SD an explicit assumption:
- one run per configuration: each model's run moves all its cells by the pretraining SD times one
  effect, and the analysis is told the SD (`analysis claims --pretraining-sd`: it is added to each
  contrast's variance); at SD 0 this is the claims report's own power at the observed effects;
- 2-3 runs: the analysis estimates the pretraining SD per task type from every configuration's runs
  (method of moments, df configurations x (runs - 1)) and tests each claim with it; the simulation
  makes the same estimate (analysis.claims.power._pooled_replicate_tests).
With the LR grid the records also test the LR-spread claim (clm_less_lr_sensitive): it takes a slot
in Holm's family with p = 1 (not planned), as it would lower the others' power in the report.
`pipeline_check` compares all this with `analysis claims` itself on simulated run records.
The default SD is the claims report's planning rule, per task type: pretraining runs vary as much
as fine-tuning seeds (the median published seed SD of the study's cells of that task type);
`--pretraining-sd X` sets X points for every task type. Powers are also given at the ends of the
range 0 to 2x the default. A claim whose cells the design lacks, or tests only in part, is
undecidable by that design (power 0 here). With one LR the cells are assumed as good as with the
grid (the LR is assumed to be each cell's best: a poorer LR lowers the means; not modelled).

The chosen design under H decides the most claims at >= 80% power at the default SD (ties: fewer
GPU-hours); the frontier gives the most claims decided at a handful of budgets. Pure logic (the
command is reproduce.budget.command); `build_parser` imports nothing heavy (`--help` stays fast).
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass
from pathlib import Path

from reproduce.budget.design import (
    DEFAULT_SINGLE_LR,
    MODEL_SETS,
    REPLICATE_CHOICES,
    SIZES,
    Design,
    design_hours,
    designs,
    reproduce_config,
)

PRETRAINING_SD_RANGE = (0.0, 2.0)  # the range's ends, as multiples of the default SD
TARGET = 0.8
DEFAULT_SIMS = 1000
FRONTIER_BUDGETS = (250, 500, 1_000, 2_000, 5_000, 10_000, 20_000)
BUDGET_FILE = "budget.json"


class BudgetError(ValueError):
    """Bad options; one line."""


# --- power ----------------------------------------------------------------------------------------
@dataclass
class Family:
    """The claims a set of sizes can test, as the report tests them on the published cells of those
    sizes' models: components (None: not testable or not plannable), roles, which are complete."""

    ids: list[str]
    components: list  # per claim: list[ComponentStats] | None
    complete: list[bool]
    reasons: list[str]
    roles: list[str]
    lr_spread: list[bool]  # spread claims over the LR grid: tested (and in Holm's family) with 2+ LRs
    frame: object = None  # analysis.claims.power.ReplicatedFrame: every cell, for replicated designs


def published_cells(sizes=SIZES, ratios=MODEL_SETS["all"][0], clm: bool = True):
    """The published cells of the masking study's models at `sizes` (means, seed SDs, 5 seeds): the
    MLM models of `ratios`, and the CLM models if `clm`."""
    from analysis.claims import inputs_from_published
    from reproduce.plan.studies import STUDIES

    cells = inputs_from_published().cells  # described by the analysis (names are read there)
    objective = (cells["objective"] == "clm") if clm else False
    objective = objective | ((cells["objective"] == "mlm") & cells["masking_ratio"].isin(ratios))
    kept = cells["model"].isin(STUDIES["masking"].checkpoints) & cells["size"].isin(sizes) & objective
    return cells[kept].reset_index(drop=True)


def claim_family(sizes, ratios=MODEL_SETS["all"][0], clm: bool = True) -> Family:
    """Every claim evaluated by the report's own code on the published cells of those models
    (published_cells)."""
    import pandas as pd

    from analysis.claims import CLAIMS, NOT_TESTABLE, ClaimInputs, evaluate_claim
    from analysis.claims.power import ReplicatedFrame

    cells = published_cells(sizes, ratios, clm)
    seed_scores = pd.DataFrame(columns=["cell", "seed", "score"])
    inputs = ClaimInputs("budget planning values", cells, seed_scores, published=True)
    ids, comps, complete, reasons, roles, lr_spread = [], [], [], [], [], []
    for claim in CLAIMS:
        row, stats = evaluate_claim(claim, inputs, reps=0)
        lr_spread.append(claim.test == "spread" and claim.covariate == "lr" and not cells.empty)
        plannable = bool(stats) and all(s.terms is not None for s in stats)
        ids.append(claim.id)
        roles.append(claim.role)
        comps.append(stats if plannable else None)
        if row["verdict"] == NOT_TESTABLE:
            reasons.append(_short(row["reason"]))
        elif not plannable:
            reasons.append("a spread claim: its power is not planned")
        else:
            reasons.append(
                f"tests {row['cells_used']} of the {row['cells_needed']} cells it needs" if row["missing_cells"] else ""
            )
        complete.append(plannable and not row["missing_cells"])
    frame = ReplicatedFrame(cells["sd"].to_numpy(float), cells["task_type"].to_numpy(str), cells["model"].to_numpy(str))
    return Family(ids, comps, complete, reasons, roles, lr_spread, frame)


def _short(reason: str) -> str:
    return reason if len(reason) <= 90 else reason[:87] + "..."


def default_pretraining_sd() -> dict[str, float]:
    """Per task type: the median published seed SD of the masking study's cells (the claims report's
    planning rule: pretraining runs vary as much as fine-tuning seeds)."""
    cells = published_cells()
    return {t: round(float(v), 3) for t, v in cells.groupby("task_type")["sd"].median().items()}


def scaled(tau, factor: float):
    return {t: v * factor for t, v in tau.items()} if isinstance(tau, dict) else tau * factor


def family_power(
    family: Family, seeds: int, replicates: int, tau, sims: int = DEFAULT_SIMS, rng_seed: int = 0, lr_grid: bool = True
):
    """Per claim of CLAIMS: the decision power at the design (0 where the design cannot decide it).
    With an LR grid the records also test the LR-spread claim (clm_less_lr_sensitive), which then
    sits in Holm's family: it is given p = 1 (a slot that never rejects: its effect is not planned),
    so the other claims' powers are not overstated (found by the whole-pipeline check, pipeline_check)."""
    import numpy as np

    from analysis.claims.power import decision_power

    tested, claims, primary, observed_p = holm_family(family, lr_grid)
    out = [0.0] * len(family.ids)
    if not tested:
        return out
    power = decision_power(
        claims,
        seeds,
        replicates,
        [tau] * len(claims),
        primary,
        sims,
        np.random.default_rng(rng_seed),
        observed_p=observed_p,
        assumed_pretraining_sd=replicates == 1,
        replicated=family.frame,
    )
    for i, p in zip(tested, power):
        out[i] = float(p) if family.complete[i] else 0.0
    return out


def holm_family(family: Family, lr_grid: bool):
    """(indices of the planned claims, the claims Holm's family holds (planned claims, then a
    placeholder per LR-spread claim), which are confirmatory, their fixed p: NaN where simulated,
    1 for the placeholders)."""
    import numpy as np

    from analysis.claims.hypothesis_tests import ComponentStats, confirmatory

    tested = [i for i, c in enumerate(family.components) if c is not None]
    slots = [i for i, spread in enumerate(family.lr_spread) if spread and lr_grid] if tested else []
    placeholder = [ComponentStats("LR spread (not planned)", "", 0.0, "less", terms=None)]
    claims = [family.components[i] for i in tested] + [placeholder] * len(slots)
    observed_p = np.r_[np.full(len(tested), np.nan), np.ones(len(slots))]
    return tested, claims, confirmatory([family.roles[i] for i in tested + slots]), observed_p


# --- the search -----------------------------------------------------------------------------------
@dataclass
class Scored:
    design: Design
    hours: dict
    power: list[float]  # per claim of CLAIMS, at the default SD
    low: list[float] | None = None  # at the range's ends
    high: list[float] | None = None

    @property
    def decided(self) -> int:
        return sum(p >= TARGET for p in self.power)


def search(
    budget: float,
    mfu: float = 0.4,
    gpu_tflops: float = 989.0,
    pretraining_sd=None,
    sims: int = DEFAULT_SIMS,
    sizes=SIZES,
    single_lr: float = DEFAULT_SINGLE_LR,
) -> dict:
    """Every design priced and scored; the choice under `budget`, the frontier, the claims no design
    under it decides (with the hours that would). Returns the budget.json body plus `scored`."""
    if not budget > 0 or not math.isfinite(budget):
        raise BudgetError(f"--gpu-hours {budget} must be a number > 0")
    if not 0 < mfu <= 1 or gpu_tflops <= 0:
        raise BudgetError(f"--mfu {mfu} must be in (0, 1] and --gpu-tflops {gpu_tflops} > 0")
    if any(s not in SIZES for s in sizes) or not sizes:
        raise BudgetError(f"--sizes {','.join(sizes)}: give some of {','.join(SIZES)}")
    tau = default_pretraining_sd() if pretraining_sd is None else float(pretraining_sd)
    if isinstance(tau, float) and not (tau >= 0 and math.isfinite(tau)):
        raise BudgetError(f"--pretraining-sd {pretraining_sd} must be a finite number >= 0 (points)")
    families = {}
    power_cache = {}
    scored = []
    for design in designs(tuple(sizes), single_lr):
        if design.models_key not in families:
            families[design.models_key] = claim_family(*design.models_key)
        family = families[design.models_key]
        key = (design.models_key, design.seeds, design.replicates, len(design.lrs) > 1)
        if key not in power_cache:  # the LR grid adds the LR-spread claim to Holm's family (family_power)
            power_cache[key] = family_power(family, design.seeds, design.replicates, tau, sims, lr_grid=key[3])
        scored.append(Scored(design, design_hours(design, mfu, gpu_tflops), power_cache[key]))
    ids = next(iter(families.values())).ids
    within = [s for s in scored if s.hours["total"] <= budget]
    chosen = max(within, key=lambda s: (s.decided, -s.hours["total"])) if within else None
    if chosen is not None:
        key = (chosen.design.models_key, chosen.design.seeds, chosen.design.replicates)
        family = families[chosen.design.models_key]
        grid = len(chosen.design.lrs) > 1
        chosen.low, chosen.high = (
            family_power(family, key[1], key[2], scaled(tau, f), sims, lr_grid=grid) for f in PRETRAINING_SD_RANGE
        )
    paper = next((s for s in scored if s.design.is_paper), None)
    most = max(s.hours["total"] for s in scored)
    budgets = sorted({b for b in FRONTIER_BUDGETS if b < most} | {round(budget)} | {round(most)})
    if paper is not None:
        budgets = sorted(set(budgets) | {math.ceil(paper.hours["total"])})
    frontier = [
        {"gpu_hours": b, "claims_at_80": max((s.decided for s in scored if s.hours["total"] <= b), default=0)}
        for b in budgets
    ]
    chosen_power = chosen.power if chosen else [0.0] * len(ids)
    out_of_reach = []
    for i, claim in enumerate(ids):
        if chosen_power[i] >= TARGET:
            continue
        reaching = [s for s in scored if s.power[i] >= TARGET]
        cheapest = min(reaching, key=lambda s: s.hours["total"]) if reaching else None
        out_of_reach.append(
            {
                "id": claim,
                "gpu_hours_needed": round(cheapest.hours["total"], 1) if cheapest else None,
                "design": cheapest.design.describe() if cheapest else None,
                "why": "" if cheapest else _why_never(families, i, scored),
            }
        )
    assumptions = {
        "mfu": mfu,
        "gpu_tflops": gpu_tflops,
        "cost": "reproduce.slurm.cost (the dry run's model): 6 N x tokens to train, 2 N x tokens to evaluate",
        "pretraining_sd": tau,
        "pretraining_sd_source": "--pretraining-sd"
        if pretraining_sd is not None
        else (
            "per task type, the median published seed SD of the masking study's cells (runs assumed to vary as "
            "much as fine-tuning seeds)"
        ),
        "pretraining_sd_range": [scaled(tau, f) for f in PRETRAINING_SD_RANGE],
        "one_run": "the analysis is told the assumed SD (analysis claims --pretraining-sd)",
        "replicated": "the analysis estimates the SD per task type from every configuration's runs "
        "(df configurations x (runs - 1)), as analysis claims does with -rep<k> models",
        "lr_spread_claim": "with the LR grid, clm_less_lr_sensitive is tested too: "
        "a Holm slot with p = 1 (not planned)",
        "planning_values": "published cell means and seed SDs (Tables 2-5) as the truth",
        "single_lr": f"{single_lr:g} for every cell, assumed as good as the grid's best (not modelled)",
        "target_power": TARGET,
        "sims": sims,
        "holm": "across the claims the design can test, as the report runs it",
    }
    return {
        "gpu_hours_budget": budget,
        "gpu_hours": round(chosen.hours["total"], 1) if chosen else None,
        "gpu_hours_by_stage": (
            {k: round(v, 1) for k, v in chosen.hours.items() if k != "finetune_runs"} if chosen else None
        ),
        "design": chosen.design.as_dict() if chosen else None,
        "claims": [
            {
                "id": claim,
                "power": round(chosen_power[i], 3),
                **(
                    {"power_at_sd_range": [round(chosen.low[i], 3), round(chosen.high[i], 3)]}
                    if chosen and chosen.low
                    else {}
                ),
                "decidable": bool(chosen and families[chosen.design.models_key].complete[i]),
                **(
                    {"why_not": families[chosen.design.models_key].reasons[i]}
                    if chosen and families[chosen.design.models_key].reasons[i]
                    else {}
                ),
            }
            for i, claim in enumerate(ids)
        ],
        "frontier": frontier,
        "out_of_reach": out_of_reach,
        # The paper's own design beside the choice (the chosen one may be cheaper or decide more; issue 91)
        "paper_design": (
            {
                "gpu_hours": round(paper.hours["total"], 1),
                "fits": paper.hours["total"] <= budget,
                "claims_at_80": paper.decided,
                "claims": [{"id": claim, "power": round(paper.power[i], 3)} for i, claim in enumerate(ids)],
            }
            if paper is not None
            else None
        ),
        "assumptions": assumptions,
        "scored": scored,
        "chosen": chosen,
    }


def _why_never(families, i, scored) -> str:
    full = families.get((SIZES, *MODEL_SETS["all"]))
    if full is None or not full.complete[i]:
        reason = (full.reasons[i] if full else "") or "not testable from the masking study"
        return f"no design of the masking study decides it: {reason}"
    return f"no design up to {max(s.design.seeds for s in scored)} seeds x {max(REPLICATE_CHOICES)} runs reaches 80%"


# --- outputs --------------------------------------------------------------------------------------
def write_outputs(result: dict, out: Path) -> list[Path]:
    import yaml

    from contracts.config import config_to_dict
    from contracts.provenance import atomic_write_text, stable_hash

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    body = {k: v for k, v in result.items() if k not in ("scored", "chosen")}
    written = [out / BUDGET_FILE]
    atomic_write_text(written[0], json.dumps(body, indent=2) + "\n")
    if result["chosen"] is not None:
        cfg = config_to_dict(reproduce_config(result["chosen"].design, out))
        text = f"# python -m reproduce budget, config hash {stable_hash(cfg)}\n" + yaml.safe_dump(cfg, sort_keys=False)
        written.append(out / "reproduce.yaml")
        atomic_write_text(written[1], text)
    return written


def screen(result: dict) -> list[str]:
    """One screen: the chosen design, its hours by stage, the claims it decides, the frontier, the
    claims out of reach."""
    a, chosen = result["assumptions"], result["chosen"]
    tau = a["pretraining_sd"]
    tau_text = ", ".join(f"{t} {v:.2f}" for t, v in tau.items()) if isinstance(tau, dict) else f"{tau:.2f}"
    lines = [
        f"budget: {result['gpu_hours_budget']:,.0f} GPU-h at MFU {a['mfu']:.0%} of {a['gpu_tflops']:,.0f} TFLOP/s; "
        f"pretraining SD {tau_text} points (0 to 2x in brackets); {len(result['scored'])} designs of the masking study",
    ]
    if chosen is None:
        cheapest = min(result["scored"], key=lambda s: s.hours["total"])
        lines.append(
            f"budget: no design fits: the cheapest ({cheapest.design.describe()}) takes "
            f"{cheapest.hours['total']:,.0f} GPU-h"
        )
    else:
        h = chosen.hours
        lines += [
            f"design: {chosen.design.describe()}" + (" (the paper's)" if chosen.design.is_paper else ""),
            f"design: {chosen.design.as_dict()['models']} models, {h['finetune_runs']:,} fine-tuning runs on the "
            f"12 datasets; {h['total']:,.0f} GPU-h (pretraining {h['pretraining']:,.0f} + fine-tuning "
            f"{h['fine_tuning']:,.0f}); {h['at_paper_utilisation']:,.0f} at the paper's utilisation",
            f"decided at >= 80% power: {chosen.decided} claims",
        ]
        for c in result["claims"]:
            if c["decidable"] or c["power"] > 0:
                ends = c.get("power_at_sd_range")
                mark = "*" if c["power"] >= TARGET else " "
                lines.append(
                    f"  {mark} {c['id']:<34} {c['power']:.2f}" + (f" [{ends[0]:.2f}, {ends[1]:.2f}]" if ends else "")
                )
        lines.append(
            f"  not decidable by this design: {sum(not c['decidable'] for c in result['claims'])} claims (budget.json)"
        )
    paper = result.get("paper_design")
    if paper and paper["fits"] and not (chosen and chosen.design.is_paper):
        lines.append(
            f"the paper's design (all sizes, 1 run, 5 seeds, the 6-LR grid) fits too: {paper['gpu_hours']:,.0f} GPU-h, "
            f"{paper['claims_at_80']} claims at 80% (budget.json paper_design)"
        )
    lines.append(
        "frontier: " + ", ".join(f"{f['gpu_hours']:,} GPU-h -> {f['claims_at_80']}" for f in result["frontier"])
    )
    reachable = sorted(
        (c for c in result["out_of_reach"] if c["gpu_hours_needed"]), key=lambda c: c["gpu_hours_needed"]
    )
    # A claim a cheaper design decides, lost in the chosen one (a smaller Holm family, other sizes)
    other = [c for c in reachable if c["gpu_hours_needed"] <= result["gpu_hours_budget"]]
    more = [c for c in reachable if c["gpu_hours_needed"] > result["gpu_hours_budget"]]
    if other:
        lines.append(
            "decided by another design under this budget instead (budget.json out_of_reach): "
            + "; ".join(f"{c['id']} ({c['design']})" for c in other)
        )
    if more:
        lines.append(
            "more hours would decide: " + "; ".join(f"{c['id']} {c['gpu_hours_needed']:,.0f} GPU-h" for c in more)
        )
    never = [c for c in result["out_of_reach"] if not c["gpu_hours_needed"]]
    masking = [c["id"] for c in never if "no design up to" in c["why"] or "tests" in c["why"]]
    if masking:
        lines.append(f"no design of this family reaches 80%: {', '.join(masking)}")
    if len(never) > len(masking):
        lines.append(f"claims of the other studies (not testable from the masking study): {len(never) - len(masking)}")
    return lines


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m reproduce budget",
        description="Size a reproduction of the masking study (Figure 3, Tables 2-5) to a GPU-hour allocation: "
        "price every design (sizes, pretraining runs per configuration, seeds per cell, LR grid or one LR) with "
        "the dry run's cost model, score each by the power of the claims report's decision per claim, and write "
        "the best design under the budget as DIR/budget.json and DIR/reproduce.yaml "
        "(docs/reproduce.md, 'Sizing a reproduction to your allocation').",
    )
    p.add_argument("--gpu-hours", type=float, help="the allocation, GPU-hours at --mfu (not with --audit)")
    p.add_argument(
        "--audit",
        metavar="MODEL",
        help="instead: size a recipe reproduction of one of the paper's checkpoints (e.g. 610m-mlm40-42k): per "
        "dataset the pretraining runs x seeds that make `analysis audit` say reproduced with 80%% power, and "
        "their cost (DIR/audit_budget.json)",
    )
    p.add_argument("--out", required=True, help="folder for budget.json and reproduce.yaml (created)")
    p.add_argument("--mfu", type=float, default=0.4, help="model FLOPs utilisation of the estimate (default 0.4)")
    p.add_argument(
        "--gpu-tflops", type=float, default=989.0, help="peak bf16 TFLOP/s of one GPU (default 989, an H100 SXM)"
    )
    p.add_argument(
        "--pretraining-sd",
        type=float,
        help="SD of a configuration's pretraining runs, points, every task type (default: per task type, "
        "the median published seed SD of the study's cells); power is also printed at 0 and 2x",
    )
    p.add_argument(
        "--sizes",
        type=lambda t: tuple(x.strip() for x in t.split(",") if x.strip()),
        default=SIZES,
        help="sizes the designs may use (default 210m,610m,1b)",
    )
    p.add_argument(
        "--single-lr", type=float, default=DEFAULT_SINGLE_LR, help="the LR of the one-LR designs (default 5e-5)"
    )
    p.add_argument("--sims", type=int, default=DEFAULT_SIMS, help="simulations per design (default 1000)")
    return p
