"""`python -m reproduce budget` (issue 91): designs of the masking study priced with the dry run's
cost model and scored by the claims report's decision power."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys

import pandas as pd
import pytest

from contracts.paper import FINETUNE_LRS
from reproduce import budget
from reproduce.plan import build_plan
from reproduce.slurm import cost

PAPER = budget.Design(budget.SIZES, 5, 1, FINETUNE_LRS)


def _printed_total(lines) -> float:
    total = next(line for line in lines if line.startswith("cost:   total"))
    return float(re.search(r"([\d,]+) GPU-h", total)[1].replace(",", ""))


@pytest.mark.parametrize(
    "design",
    [
        PAPER,
        budget.Design(("210m",), 2, 3, (5e-5,)),
        budget.Design(("610m", "1b"), 10, 2, FINETUNE_LRS),
        budget.Design(("1b",), 3, 1, (5e-5,)),
        budget.Design(("610m", "1b"), 3, 2, (5e-5,), *budget.MODEL_SETS["mlm40+clm"]),
        budget.Design(("210m",), 2, 1, FINETUNE_LRS, *budget.MODEL_SETS["mlm-ratios"]),
    ],
)
def test_a_design_costs_what_its_dry_run_prints(design, tmp_path):
    """The budget prices a design by the dry run's per-run FLOPs functions without building its plan;
    the plan of the design's reproduce.yaml, priced by reproduce.slurm.cost, agrees within 1% (the
    printed total is rounded to the GPU-hour), and exactly in FLOPs."""
    plan = build_plan(budget.reproduce_config(design, tmp_path))
    pre, fine, runs = budget.design_flops(design)
    assert sum(r["flops"] for r in cost.pretraining_costs(plan)) == pytest.approx(pre, rel=1e-9)
    planned = cost.finetune_costs(plan)
    assert planned["flops"] == pytest.approx(fine, rel=1e-9) and planned["runs"] == runs
    hours = budget.design_hours(design, 0.4, 989.0)["total"]
    assert _printed_total(cost.cost_report(plan)) == pytest.approx(hours, rel=0.01)
    if design.is_paper:
        assert round(hours) == 4226  # the Figure 3 study's estimate (docs/reproduce.md)


def test_the_papers_design_has_the_claims_reports_power_at_the_papers_effects():
    """At pretraining SD 0 and the paper's design (5 seeds, one run), each claim's power is the claims
    report's `decision_power` on the published cells of the masking study's models (Holm over the claims
    those cells test), draw for draw; claims of the other studies are undecidable (power 0)."""
    from analysis.claims import ClaimInputs, evaluate_claims

    cells = budget.published_cells()
    report = evaluate_claims(ClaimInputs("t", cells, pd.DataFrame(columns=["cell", "seed", "score"]), published=True))
    family = budget.claim_family(budget.SIZES)
    power = budget.family_power(family, 5, 1, 0.0)
    for claim, got, printed in zip(family.ids, power, report["decision_power"]):
        assert got == pytest.approx(printed if printed == printed else 0.0, abs=0.03), claim
    assert sum(family.complete) == 14 and not family.complete[family.ids.index("clm_leads_early")]


def test_the_frontier_is_monotone_and_the_whole_study_decides_what_the_paper_design_does():
    result = budget.search(20_000, sims=200)
    counts = [f["claims_at_80"] for f in result["frontier"]]
    hours = [f["gpu_hours"] for f in result["frontier"]]
    assert hours == sorted(hours) and counts == sorted(counts)
    paper = next(s for s in result["scored"] if s.design.is_paper)
    at_paper = next(f for f in result["frontier"] if f["gpu_hours"] == math.ceil(paper.hours["total"]))
    assert at_paper["claims_at_80"] >= paper.decided
    chosen = result["chosen"]
    assert chosen.hours["total"] <= 20_000 and chosen.decided == max(counts)
    # the paper's design is shown beside the choice whenever it fits
    assert result["paper_design"]["fits"] and result["paper_design"]["claims_at_80"] == paper.decided
    assert [c["power"] for c in result["paper_design"]["claims"]] == [round(p, 3) for p in paper.power]
    assert any(line.startswith("the paper's design") for line in budget.screen(result)) or chosen.design.is_paper
    assert not budget.search(1_000, sims=100)["paper_design"]["fits"]
    # ties are broken by fewer hours
    assert not any(s.decided == chosen.decided and s.hours["total"] < chosen.hours["total"] for s in result["scored"])
    with pytest.raises(budget.BudgetError, match="--gpu-hours"):
        budget.search(0)


def test_the_written_config_dry_runs_to_the_printed_cost(cli, tmp_path):
    out = tmp_path / "budget"
    done = cli("reproduce", "budget", "--gpu-hours", "5000", "--out", out, "--sims", "200")
    assert done.returncode == 0, done.stderr
    assert "design: 210m+610m+1b" in done.stdout and "frontier:" in done.stdout
    body = json.loads((out / "budget.json").read_text())
    assert {"gpu_hours_budget", "gpu_hours", "design", "claims", "frontier", "assumptions"} <= set(body)
    assert all(set(c) >= {"id", "power"} for c in body["claims"]) and body["gpu_hours"] <= 5000
    dry = cli("reproduce", "--config", out / "reproduce.yaml", "--scale", "paper", "--slurm", "--dry-run")
    assert dry.returncode == 0, dry.stderr[-2000:]
    assert _printed_total(dry.stdout.splitlines()) == pytest.approx(body["gpu_hours"], rel=0.01)
    bad = cli("reproduce", "budget", "--gpu-hours", "-1", "--out", out)
    assert bad.returncode == 2 and "--gpu-hours" in bad.stderr


def test_budget_help_imports_nothing_heavy():
    probe = (
        "import sys; from reproduce import cli\n"
        "try:\n    cli.main(['budget', '--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = sorted(m for m in ('numpy', 'scipy', 'pandas', 'torch', 'transformers', 'matplotlib') "
        "if m in sys.modules)\nprint('HEAVY', heavy)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert "HEAVY []" in done.stdout and "--gpu-hours" in done.stdout, (done.stdout[-800:], done.stderr[-800:])


def test_the_written_config_runs_at_toy_scale_as_the_same_design(cli, tmp_path):
    """`reproduce --config DIR/reproduce.yaml --scale toy` is the budget's design at toy scale: sizes
    mapped (210m -> toy_s), the toy's LR in place of the paper's one LR, the design's seeds, in
    `<out>-toy`; the plan is the toy study's (its random initialisation as Figure 3's reference).
    The toy run itself is tests/reproduce/test_budget_toy_run.py (e2e)."""
    from reproduce.cli import build_parser, config_from_args

    out = tmp_path / "budget"
    done = cli("reproduce", "budget", "--gpu-hours", "500", "--out", out, "--sims", "200")
    assert done.returncode == 0, done.stderr
    design = json.loads((out / "budget.json").read_text())["design"]
    cfg = config_from_args(build_parser().parse_args(["--config", str(out / "reproduce.yaml"), "--scale", "toy"]))
    assert cfg.scale == "toy" and cfg.out == f"{out.absolute()}/study-toy"
    assert cfg.sizes == tuple(f"toy_{'sml'[budget.SIZES.index(s)]}" for s in design["sizes"])
    assert cfg.lrs == (2e-3,) and list(cfg.seeds) == design["seeds"]
    plan = build_plan(cfg)
    models = [f"mlm{round(r * 100)}" for r in design["ratios"]] + ["clm"] * design["clm"]
    assert plan.model_names == [f"toy_s-{m}-250" for m in models]
    jobs = plan.finetune_jobs()
    assert len(jobs) == (len(models) + 1) * 12 * len(design["seeds"])  # + the random initialisation
    assert {j["config"]["lr"] for j in jobs} == {2e-3} and {j["config"]["seed"] for j in jobs} == set(design["seeds"])


def test_a_design_may_pretrain_only_the_models_a_claims_group_needs():
    """The MLM-vs-CLM claims compare MLM-40 with CLM; the masking claims the four MLM ratios. A design
    of MLM-40 and CLM at every size decides the three `mlm_beats_clm` claims for 2/5 of the full
    design's pretraining, and cannot test a masking claim; the MLM ratios alone test the masking
    claims and no objective claim. At 2,000 GPU-h (where no design of all five configurations
    decides a claim) the search picks such a design."""
    pair = budget.claim_family(budget.SIZES, *budget.MODEL_SETS["mlm40+clm"])
    ratios = budget.claim_family(budget.SIZES, *budget.MODEL_SETS["mlm-ratios"])
    objective = ["mlm_beats_clm_sc", "mlm_beats_clm_qa", "mlm_beats_clm_ir"]
    masking = ["u_shape_masking_610m_1b", "ir_prefers_high_masking", "no_universal_masking_ratio"]
    for claim in objective:
        assert pair.complete[pair.ids.index(claim)] and not ratios.complete[ratios.ids.index(claim)]
    for claim in masking:
        assert ratios.complete[ratios.ids.index(claim)] and not pair.complete[pair.ids.index(claim)]
    full = budget.Design(budget.SIZES, 3, 1, (5e-5,))
    two = budget.Design(budget.SIZES, 3, 1, (5e-5,), *budget.MODEL_SETS["mlm40+clm"])
    assert budget.design_flops(two)[0] == pytest.approx(0.4 * budget.design_flops(full)[0], rel=1e-9)
    result = budget.search(2_000, sims=200)
    chosen = result["chosen"]
    assert chosen.design.model_set == "mlm40+clm" and chosen.hours["total"] <= 2_000
    decided = {c["id"] for c in result["claims"] if c["power"] >= budget.TARGET}
    assert set(objective) <= decided
    assert not any(s.decided for s in result["scored"] if s.design.model_set == "all" and s.hours["total"] <= 2_000)
    assert result["design"]["ratios"] == [0.4] and result["design"]["clm"] is True
    assert "(MLM-40 and CLM)" in budget.screen(result)[1]
    other = budget.Design(("210m",), 3, 1, (5e-5,), (0.2, 0.4), False)  # outside the menu: named, not a crash
    assert other.model_set == "custom" and "210m (MLM 20%, 40%)," in other.describe()
