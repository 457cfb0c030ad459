"""`python -m reproduce budget --audit MODEL` (issue 91, item 4): the runs x seeds that make the
audit's verdict `reproduced` with 80% power per dataset, simulated with the audit's own rule."""

from __future__ import annotations

import json

import numpy as np
import pytest

from analysis.equivalence import DESIGN_FACTOR, PAPER_SEEDS, VERDICTS, RunSpread, compare_means
from analysis.intervals import Z_95
from reproduce.budget.audit import reproduced_power, simulated_audit


@pytest.mark.parametrize("runs, seeds, tau", [(1, 3, 0.0), (1, 5, 0.4), (2, 5, 0.4), (3, 2, 0.2)])
def test_the_simulated_audit_is_analysis_audits_own_verdict_draw_for_draw(runs, seeds, tau):
    """Each simulated reproduction, handed to equivalence.compare_means (what `analysis audit` calls
    per cell), gets the verdict the budget's vectorised simulation gave it."""
    seed_sd, halfwidth, margin, pub = 0.6, 0.5, 1.2, 80.0
    codes, draws = simulated_audit(seed_sd, halfwidth, margin, runs, seeds, tau, 300, np.random.default_rng(3))
    for k in range(300):
        ours = pub + draws["diff"][k]
        if runs == 1:
            s = float(np.sqrt(draws["seed_var"][k, 0]))
            got = compare_means(ours, Z_95 * s / np.sqrt(seeds), seeds, pub, halfwidth, PAPER_SEEDS, margin, 1, tau)
        else:
            spread = RunSpread(
                float(draws["run_means"][k].var(ddof=1)), runs - 1, float(draws["seed_var"][k].mean() / seeds)
            )
            got = compare_means(ours, np.nan, seeds, pub, halfwidth, PAPER_SEEDS, margin, runs, spread=spread)
        assert got.verdict == VERDICTS[codes[k]], k
    assert 0 < (codes == 0).mean() < 1  # the draws cross the verdict's boundary


def _exact_power(sd: float, halfwidth: float, margin: float, seeds: int) -> float:
    """P(reproduced) of one run of a faithful recipe without pretraining noise, by integration over
    our seed variance (chi-square), independently of the simulation: reproduced when
    |d| + t_0.95(df) se < margin, d ~ N(0, sd^2 / n + se_pub^2), se and Welch df from our s^2 and the
    printed half-width."""
    from scipy import integrate, stats

    se_pub2 = (halfwidth / Z_95) ** 2
    sigma = np.sqrt(sd**2 / seeds + se_pub2)

    def given(x):
        s2 = sd**2 * x / (seeds - 1)
        se2 = s2 / seeds + se_pub2
        df = se2**2 / ((s2 / seeds) ** 2 / (seeds - 1) + se_pub2**2 / (PAPER_SEEDS - 1))
        room = margin - stats.t.ppf(0.95, df) * np.sqrt(se2)
        return (2 * stats.norm.cdf(room / sigma) - 1 if room > 0 else 0.0) * stats.chi2.pdf(x, seeds - 1)

    return integrate.quad(given, 0, np.inf, limit=200)[0]


@pytest.mark.parametrize("seeds", [2, 5, 10])
def test_the_power_is_the_exact_one_without_pretraining_noise(seeds):
    """Known truth: with no pretraining SD the audit's power has an integral form (_exact_power); the
    simulation (40,000 draws, binomial SE <= 0.0025) matches it within 0.01 at the default margin
    (equivalence.DESIGN_FACTOR x the half-width), and falls once runs vary by a pretraining SD."""
    sd = 1.0
    halfwidth = Z_95 * sd / np.sqrt(PAPER_SEEDS)
    margin = DESIGN_FACTOR * halfwidth
    power = reproduced_power(sd, halfwidth, margin, 1, seeds, 0.0, 40_000, np.random.default_rng(0))
    assert power == pytest.approx(_exact_power(sd, halfwidth, margin, seeds), abs=0.01)
    assert reproduced_power(sd, halfwidth, margin, 1, seeds, sd, 40_000, np.random.default_rng(0)) < power - 0.2


def test_audit_writes_its_plan_and_refuses_a_model_outside_the_study(cli, tmp_path):
    out = tmp_path / "audit"
    done = cli("reproduce", "budget", "--audit", "610m-mlm40-42k", "--pretraining-sd", "0", "--out", out)
    assert done.returncode == 0, done.stderr
    plan = json.loads((out / "audit_budget.json").read_text())
    assert plan["model"] == "610m-mlm40-42k" and len(plan["datasets"]) == 12
    for row in plan["datasets"]:
        assert (row["runs"] and row["seeds"]) or row["why_not"], row
    decided = [r for r in plan["datasets"] if r["runs"]]
    assert decided and plan["runs"] == max(r["runs"] for r in decided)
    assert all(r["power"] is None or r["power"] >= 0.8 for r in decided)
    assert plan["gpu_hours"]["total"] > plan["gpu_hours"]["pretraining"] > 0
    assert "audit of 610m-mlm40-42k" in done.stdout
    bad = cli("reproduce", "budget", "--audit", "610m-biphasic", "--out", tmp_path / "bad")
    assert bad.returncode == 2 and "--audit 610m-biphasic" in bad.stderr and not (tmp_path / "bad").exists()
    both = cli("reproduce", "budget", "--audit", "610m-mlm40-42k", "--gpu-hours", "10", "--out", tmp_path / "b")
    assert both.returncode == 2 and "drop --gpu-hours" in both.stderr


def test_nq_and_mldr_without_an_ms_marco_design_still_buy_its_training():
    """NQ and MLDR evaluate the model the MS MARCO runs train: when they are decided and MS MARCO is
    not, the cost holds MS MARCO's training at the IR group's largest design; when MS MARCO has its
    own design, its row prices it and nothing is added."""
    from contracts.paper import FINETUNE_LRS
    from reproduce.budget.audit import audit_lines, fine_tuning_flops
    from reproduce.slurm.cost import finetune_flops

    rows = [
        {"dataset": "sst2", "runs": 1, "seeds": 3},
        {"dataset": "msmarco", "runs": None, "seeds": None},
        {"dataset": "nq", "runs": 2, "seeds": 3},
        {"dataset": "mldr_en", "runs": 1, "seeds": 5},
    ]
    per_dataset, ir_training = fine_tuning_flops(rows, "610m")
    assert set(per_dataset) == {"sst2", "nq", "mldr_en"}
    assert per_dataset["nq"] == 2 * 3 * len(FINETUNE_LRS) * finetune_flops("610m", "nq")
    msmarco = 2 * 3 * len(FINETUNE_LRS) * finetune_flops("610m", "msmarco")
    assert ir_training == {"runs": 2, "seeds": 3, "flops": msmarco}
    # NQ's own row counts evaluation only: the MS MARCO training is most of the IR cost
    assert ir_training["flops"] > 10 * per_dataset["nq"]
    rows[1].update(runs=2, seeds=3)
    assert fine_tuning_flops(rows, "610m")[1] is None
    assert fine_tuning_flops([rows[0]], "610m")[1] is None

    plan = {
        "model": "610m-mlm40-42k",
        "runs": 2,
        "gpu_hours": {"total": 10.0, "pretraining": 8.0, "fine_tuning": 2.0},
        "assumptions": {"pretraining_sd": 0.0},
        "datasets": [],
        "ir_training": {"runs": 2, "seeds": 3, "gpu_hours": 1.5},
    }
    assert "MS MARCO training for NQ/MLDR: 2 run(s) x 3 seeds, 1.5 GPU-h" in audit_lines(plan)[-1]
