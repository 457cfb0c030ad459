"""`python -m reproduce budget --audit MODEL`: how many pretraining runs of MODEL's recipe, and
fine-tuning seeds per run, make `analysis audit`'s verdict on each dataset `reproduced` with 80%
power, and what they cost (issue 91, item 4; docs/reproduce.md, "Sizing a reproduction to your
allocation").

The question is the audit's recipe question (analysis.equivalence.compare_means): our mean over
R runs x n seeds against the paper's printed cell, at the audit's default margin
(analysis.audit.default_margins: 2.40 x the median printed half-width of the dataset). Planning
values, per dataset:
- the truth: our recipe is the paper's (offset 0), its cell has the published seed SD (from the
  printed half-width, 5 seeds), and every pretraining run moves the cell by a run effect of SD tau
  (the budget's default per task type, or --pretraining-sd);
- the paper's printed mean is one such run: ours - published has variance
  tau^2 (1 + 1/R) + sd^2 / (R n) + se_pub^2;
- the test is the audit's: one run, tau taken as known (`--pretraining-sd`, infinite df;
  equivalence.recipe_se_df); 2+ runs, the runs' own between-run mean square with R - 1 df
  (equivalence.replicate_se_df, one configuration: the audit pools more where it has them);
  `reproduced` when the 90% interval lies inside the margin (equivalence.classify).
A dataset whose verdict no design reaches says so: the paper's one run carries tau whatever we
average (equivalence.reproduced_reachable). The three IR datasets share their runs (MS MARCO trains
the model NQ and MLDR evaluate): they get the largest of their designs. Fine-tuning uses the paper's
6-LR grid (the printed cell is the best LR of the grid). Pure logic apart from `audit_plan`'s inputs.
"""

from __future__ import annotations

import math

RUN_CHOICES = (1, 2, 3, 5)
AUDIT_SEEDS = (2, 3, 5, 10)
AUDIT_SIMS = 4000
IR_SHARED = ("msmarco", "nq", "mldr_en")


def simulated_audit(
    seed_sd: float, pub_halfwidth: float, margin: float, runs: int, seeds: int, tau: float, sims: int, rng
):
    """(verdict codes, draws) of the audit on `sims` simulated reproductions of a faithful recipe
    (module docstring): codes as equivalence.classify (0 reproduced); draws: `diff` (ours -
    published), `seed_var` (sims x runs, each run's cell s^2), `run_means` (sims x runs, ours)."""
    from analysis.equivalence import PAPER_SEEDS, classify, recipe_se_df, replicate_se_df
    from analysis.intervals import Z_95

    se_pub2 = (pub_halfwidth / Z_95) ** 2
    # our runs: each its run effect and seed noise; the paper's value: one more run (seed part se_pub)
    run_means = tau * rng.standard_normal((sims, runs)) + seed_sd / math.sqrt(seeds) * rng.standard_normal((sims, runs))
    paper = tau * rng.standard_normal(sims) + math.sqrt(se_pub2) * rng.standard_normal(sims)
    diff = run_means.mean(axis=1) - paper
    seed_var = seed_sd**2 * rng.chisquare(seeds - 1, (sims, runs)) / (seeds - 1)
    if runs == 1:
        se, df = recipe_se_df(seed_var[:, 0], seeds, 1, se_pub2, PAPER_SEEDS, tau)
    else:  # the runs' own spread (tau^2 + sd^2 / n), df runs - 1
        se, df = replicate_se_df(run_means.var(axis=1, ddof=1), runs - 1, runs, seed_var.mean(axis=1) / seeds, se_pub2)
    return classify(diff, se, df, margin), {"diff": diff, "seed_var": seed_var, "run_means": run_means}


def reproduced_power(
    seed_sd: float, pub_halfwidth: float, margin: float, runs: int, seeds: int, tau: float, sims: int, rng
) -> float:
    """P(the audit says `reproduced`) for R runs x n seeds of a faithful recipe."""
    codes, _ = simulated_audit(seed_sd, pub_halfwidth, margin, runs, seeds, tau, sims, rng)
    return float((codes == 0).mean())


def audit_plan(model: str, pretraining_sd=None, sims: int = AUDIT_SIMS, rng_seed: int = 0, mfu=0.4, gpu_tflops=989.0):
    """Per dataset of MODEL's published cells: the cheapest runs x seeds (RUN_CHOICES x AUDIT_SEEDS,
    cheapest first: fewer runs, then fewer seeds) with >= 80% power for `reproduced`, its power and
    GPU-hours; and the recipe's total (the most runs any dataset needs, pretrained once)."""
    import numpy as np

    from analysis.audit import default_margins, margin_key
    from analysis.equivalence import PAPER_SEEDS
    from analysis.intervals import halfwidth_sd
    from analysis.published import load_published_cells
    from contracts.paper import DATASET_BY_ID, PAPER_SHAPES, PRETRAIN_STEPS, TOKENS_PER_STEP_TABLE1
    from paper_figures.flops import count_parameters, training_flops
    from reproduce.budget.search import TARGET, BudgetError, default_pretraining_sd
    from reproduce.plan.studies import STUDIES
    from reproduce.slurm.cost import gpu_hours

    models = STUDIES["masking"].checkpoints
    if model not in models:
        raise BudgetError(f"--audit {model}: give a model of the masking study ({', '.join(models)})")
    published = load_published_cells()
    margins = default_margins(published)
    cells = published[(published["model"] == model) & (published["dataset"].isin(set(DATASET_BY_ID)))]
    cells = cells.drop_duplicates(["task_type", "dataset"])
    taus = default_pretraining_sd() if pretraining_sd is None else None
    size = model.split("-")[0]
    rows = []
    for cell in cells.itertuples(index=False):
        tau = taus[cell.task_type] if taus else float(pretraining_sd)
        margin = margins[margin_key(cell.task_type, cell.dataset)]["margin"]
        seed_sd = float(halfwidth_sd(cell.ci_halfwidth, PAPER_SEEDS))
        found = None
        for runs in RUN_CHOICES:
            for seeds in AUDIT_SEEDS:
                rng = np.random.default_rng(rng_seed)
                power = reproduced_power(seed_sd, cell.ci_halfwidth, margin, runs, seeds, tau, sims, rng)
                if power >= TARGET:
                    found = (runs, seeds, power)
                    break
            if found:
                break
        rows.append(
            {
                "dataset": cell.dataset,
                "task_type": cell.task_type,
                "margin": margin,
                "pretraining_sd": tau,
                "seed_sd": round(seed_sd, 3),
                "runs": found[0] if found else None,
                "seeds": found[1] if found else None,
                "power": round(found[2], 3) if found else None,
                "why_not": "" if found else _why_not(cell.ci_halfwidth, margin, tau),
            }
        )
    _share_ir_runs(rows)
    n_pretrain = count_parameters(PAPER_SHAPES[size])["matmul"]
    most_runs = max((r["runs"] for r in rows if r["runs"]), default=0)
    pre = most_runs * training_flops(PRETRAIN_STEPS, n_pretrain, TOKENS_PER_STEP_TABLE1)
    per_dataset, ir_training = fine_tuning_flops(rows, size)
    for r in rows:
        if r["dataset"] in per_dataset:
            r["fine_tuning_gpu_hours"] = round(gpu_hours(per_dataset[r["dataset"]], mfu, gpu_tflops), 2)
    fine = sum(per_dataset.values())
    if ir_training:  # NQ/MLDR decided, MS MARCO not: its training is still bought
        fine += ir_training["flops"]
        ir_training["gpu_hours"] = round(gpu_hours(ir_training.pop("flops"), mfu, gpu_tflops), 2)
    return {
        "model": model,
        "datasets": rows,
        "ir_training": ir_training,
        "runs": most_runs,
        "gpu_hours": {
            "pretraining": round(gpu_hours(pre, mfu, gpu_tflops), 1),
            "fine_tuning": round(gpu_hours(fine, mfu, gpu_tflops), 1),
            "total": round(gpu_hours(pre + fine, mfu, gpu_tflops), 1),
        },
        "assumptions": {
            "truth": "our recipe is the paper's (offset 0); cells at the published mean and seed SD",
            "pretraining_sd": taus if taus else float(pretraining_sd),
            "test": "analysis audit's recipe test at its default margin: one run, the SD taken as known "
            "(--pretraining-sd); 2+ runs, their own spread with runs - 1 df",
            "lrs": "the paper's 6-LR grid",
            "sims": sims,
            "mfu": mfu,
            "gpu_tflops": gpu_tflops,
        },
    }


def fine_tuning_flops(rows: list[dict], size: str) -> tuple[dict, dict | None]:
    """FLOPs of the fine-tuning each decided dataset needs (runs x seeds x the 6-LR grid), and the
    MS MARCO training NQ and MLDR evaluate when MS MARCO itself has no design: then it is trained at
    the IR group's design (`{"runs", "seeds", "flops"}`), else None (its own row prices it)."""
    from contracts.paper import FINETUNE_LRS
    from reproduce.slurm.cost import finetune_flops

    per_dataset = {
        r["dataset"]: r["runs"] * r["seeds"] * len(FINETUNE_LRS) * finetune_flops(size, r["dataset"])
        for r in rows
        if r["runs"]
    }
    ir = [r for r in rows if r["dataset"] in IR_SHARED and r["runs"]]
    if not ir or IR_SHARED[0] in per_dataset:
        return per_dataset, None
    runs, seeds = max((r["runs"], r["seeds"]) for r in ir)
    flops = runs * seeds * len(FINETUNE_LRS) * finetune_flops(size, IR_SHARED[0])
    return per_dataset, {"runs": runs, "seeds": seeds, "flops": flops}


def _why_not(halfwidth: float, margin: float, tau: float) -> str:
    from analysis.equivalence import PAPER_SEEDS, reproduced_reachable

    if not bool(reproduced_reachable(halfwidth, PAPER_SEEDS, margin, max(RUN_CHOICES), 0.0)):
        return f"no design: the published interval (+-{halfwidth:g}) alone is too wide for the margin {margin:g}"
    if not bool(reproduced_reachable(halfwidth, PAPER_SEEDS, margin, max(RUN_CHOICES), tau)):
        return (
            f"no design: the paper's one run carries the pretraining SD ({tau:.2f}) whatever we average, "
            f"wider than the margin {margin:g} allows"
        )
    return f"more than {max(RUN_CHOICES)} runs x {max(AUDIT_SEEDS)} seeds"


def _share_ir_runs(rows: list[dict]) -> None:
    """The IR datasets share their runs: each gets the largest design among them (runs, then seeds)."""
    ir = [r for r in rows if r["dataset"] in IR_SHARED and r["runs"]]
    if len(ir) < 2:
        return
    runs, seeds = max((r["runs"], r["seeds"]) for r in ir)
    for r in ir:
        if (r["runs"], r["seeds"]) != (runs, seeds):
            r["runs"], r["seeds"] = runs, seeds
            r["power"] = None  # at least the 80% of its own smaller design; not re-simulated
            r["note"] = "shares the IR runs (MS MARCO trains them): the largest IR design"


def audit_lines(plan: dict) -> list[str]:
    h = plan["gpu_hours"]
    head = f"audit of {plan['model']}: `reproduced` with >= 80% power per dataset (a faithful recipe, the audit's "
    sd = plan["assumptions"]["pretraining_sd"]
    sd_text = ", ".join(f"{t} {v:.2f}" for t, v in sd.items()) if isinstance(sd, dict) else f"{sd:.2f}"
    cost = (
        f"{plan['runs']} pretraining run(s): {h['total']:,.0f} GPU-h (pretraining {h['pretraining']:,.0f} + "
        f"fine-tuning {h['fine_tuning']:,.0f})"
        if plan["runs"]
        else f"no dataset reaches it within {max(RUN_CHOICES)} runs x {max(AUDIT_SEEDS)} seeds"
    )
    lines = [f"{head}default margins, pretraining SD {sd_text} points); {cost}"]
    for r in plan["datasets"]:
        if r["runs"]:
            power = f"power {r['power']:.2f}" if r["power"] is not None else "power >= 0.80 (shared IR runs)"
            lines.append(
                f"  {r['dataset']:<11} margin {r['margin']:<5g} SD {r['pretraining_sd']:.2f}: "
                f"{r['runs']} run(s) x {r['seeds']} seeds, {power}"
            )
        else:
            lines.append(f"  {r['dataset']:<11} margin {r['margin']:<5g} SD {r['pretraining_sd']:.2f}: {r['why_not']}")
    ir = plan.get("ir_training")
    if ir:
        lines.append(
            f"  + MS MARCO training for NQ/MLDR: {ir['runs']} run(s) x {ir['seeds']} seeds, "
            f"{ir['gpu_hours']:,.1f} GPU-h"
        )
    return lines
