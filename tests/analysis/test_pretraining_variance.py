"""The pretraining SD estimated from replicated pretraining runs (analysis.pretraining_variance)."""

import math

import numpy as np
import pytest
from scipy import stats

from analysis.pretraining_variance import estimate_pretraining_sd, pretraining_sd_profile, simulate_run_means


def test_two_runs_by_hand():
    """Two runs of one configuration, task-type means 80 and 81: MS = 0.5, df 1; the seed part is
    sum s^2 / n / D^2; the interval is MS's chi-square interval minus it."""
    cells = simulate_run_means(np.random.default_rng(0), 0.0, 1.0, 1, 2)
    cells["mean"] = np.where(cells["replicate"] == 1, 80.0, 81.0)
    cells["sd"] = 0.5
    got = estimate_pretraining_sd(cells)["SC"]
    seed = 3 * 0.25 / 5 / 9
    assert got.seed_part == pytest.approx(seed) and got.df == 1 and got.runs == 2
    assert got.sd == pytest.approx(math.sqrt(0.5 - seed))
    assert got.high == pytest.approx(math.sqrt(0.5 / stats.chi2.ppf(0.025, 1) - seed))
    assert got.low == pytest.approx(math.sqrt(max(0.0, 0.5 / stats.chi2.ppf(0.975, 1) - seed)))


def test_interval_covers_the_planted_sd():
    """4 configurations x 2 runs, planted SD 0.5 with seed SD 0.5: the 95% interval covers it
    within 3 binomial standard errors over 300 simulations; tau^2 is unbiased before clipping."""
    rng = np.random.default_rng(1)
    sims, tau = 300, 0.5
    fits = [estimate_pretraining_sd(simulate_run_means(rng, tau, 0.5, 4, 2))["SC"] for _ in range(sims)]
    coverage = np.mean([f.low <= tau <= f.high for f in fits])
    assert abs(coverage - 0.95) <= 3 * math.sqrt(0.95 * 0.05 / sims)
    assert np.mean([f.sd**2 for f in fits]) == pytest.approx(tau**2, rel=0.15)


def test_task_types_without_replicates_fall_back_to_the_option():
    cells = simulate_run_means(np.random.default_rng(2), 1.0, 0.5, 2, 2)
    estimates = estimate_pretraining_sd(cells)
    profile = pretraining_sd_profile(estimates, 0.3)
    assert profile["SC"] == estimates["SC"].sd and profile["TC"] == profile["QA"] == profile["IR"] == 0.3
    one_run = cells[cells.replicate == 1]
    assert estimate_pretraining_sd(one_run) == {}


def test_one_fine_tuning_seed_is_said():
    """With one seed per cell the seed part is unknown: the SD includes the fine-tuning noise."""
    cells = simulate_run_means(np.random.default_rng(3), 0.5, 0.5, 2, 2).assign(sd=np.nan, n_seeds=1)
    got = estimate_pretraining_sd(cells)["SC"]
    assert got.one_seed and got.seed_part == 0 and "an upper bound" in got.describe()
