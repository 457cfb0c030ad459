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
