import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from analysis import intervals
from analysis.aggregate import aggregate_runs, iter_cell_replicates, select_best_lr_per_seed
from analysis.intervals import (
    instance_mean_replicates,
    keyed_rng,
    multinomial_counts,
    paper_interval,
    percentile_bounds,
    poisson_weights,
    seed_weights,
)
from tests.analysis.analysis_testlib import make_record
from tests.analysis.bootstrap_oracle import hierarchical_bootstrap_ci


def test_paper_interval_hand_value():
    # sd(ddof=1) of 1..5 = sqrt(2.5); 1.96 * sqrt(2.5) / sqrt(5) = 1.96 * sqrt(0.5)
    assert paper_interval([1, 2, 3, 4, 5]) == pytest.approx(1.96 * math.sqrt(0.5), abs=1e-12)
    assert paper_interval([2.0, 4.0]) == pytest.approx(1.96 * math.sqrt(2.0) / math.sqrt(2.0))
    assert math.isnan(paper_interval([3.0]))


def test_paper_interval_is_not_t_or_ddof0():
    values = [59.66, 60.14, 61.73, 59.59, 60.13]  # the MLDR per-seed test scores (610M MLM-40, Table 5: 60.25 ± 0.76)
    assert round(paper_interval(values), 2) == 0.76
    t_based = 2.776 * np.std(values, ddof=1) / math.sqrt(5)
    ddof0 = 1.96 * np.std(values, ddof=0) / math.sqrt(5)
    assert round(t_based, 2) != 0.76 and round(ddof0, 2) != 0.76


def test_multinomial_counts_are_resamples_of_size_n():
    counts = multinomial_counts(7, 5000, np.random.default_rng(0))
    assert counts.shape == (5000, 7) and (counts.sum(axis=1) == 7).all()
    assert counts.mean() == pytest.approx(1.0, abs=0.02)  # each item is drawn once on average
    assert counts.var() == pytest.approx(1 - 1 / 7, rel=0.05)  # binomial(7, 1/7) variance
    weights = seed_weights(5, 100, np.random.default_rng(1))
    assert np.allclose(weights.sum(axis=1), 1.0)


def test_seed_bootstrap_two_values_hand_value():
    # Resampled means of {a, b}: a (1/4), (a+b)/2 (1/2), b (1/4) -> 2.5%/97.5% percentiles a, b.
    replicates = seed_weights(2, 5000, np.random.default_rng(1)) @ np.array([10.0, 20.0])
    bounds = percentile_bounds(replicates)
    assert (bounds.low[0], bounds.high[0]) == (10.0, 20.0) and bounds.reps == 5000


def test_seed_bootstrap_matches_exact_enumeration_within_mc_error():
    values = np.array([0.0, 1.0, 3.0, 10.0])
    exact = [np.mean(c) for c in itertools.product(values, repeat=4)]  # all 256 resamples
    low, high = np.quantile(exact, [0.025, 0.975])
    bounds = percentile_bounds(seed_weights(4, 20000, np.random.default_rng(0)) @ values)
    assert abs(bounds.low[0] - low) <= 3 * bounds.low_mcse[0] + 1e-9
    assert abs(bounds.high[0] - high) <= 3 * bounds.high_mcse[0] + 1e-9


def test_identical_seeds_give_the_instance_bootstrap():
    # Only the instance level varies; for 400 scores of 0/100 with mean 50 the CI is about
    # 50 +- 1.96 * 50 / sqrt(400) = 50 +- 4.9.
    row = np.array([0.0, 100.0] * 200)
    replicates = instance_mean_replicates(np.vstack([row] * 5), 10000, np.random.default_rng(0))
    assert np.allclose(replicates, replicates[:, :1])  # one resample per replicate, shared by all runs
    bounds = percentile_bounds(replicates[:, 0])
    assert (bounds.high[0] - bounds.low[0]) / 2 == pytest.approx(4.9, rel=0.05)
    assert (bounds.low[0] + bounds.high[0]) / 2 == pytest.approx(50.0, abs=0.3)


def _records(matrices, model="m", task_type="SC"):
    """Selected runs (one LR) of `model`: matrices[dataset] is (seeds x instances)."""
    return [
        make_record(
            model=model,
            task_type=task_type,
            dataset=d,
            seed=s,
            lr=1e-5,
            val=50,
            test=float(np.mean(row)),
            instances=list(row),
        )
        for d, matrix in matrices.items()
        for s, row in enumerate(matrix)
    ]


def test_constant_instances_reduce_to_the_seed_bootstrap():
    records = _records({"sst2": np.array([[50.0] * 50, [52.0] * 50])})
    cell = aggregate_runs(records, reps=4000, rng_seed=3).iloc[0]
    assert cell.bootstrap == "seeds+instances"
    # The percentile bounds are [50, 52] (sums of counts / n); the printed ones are widened about
    # the mean 51 by sqrt(n / (n - 1)) x t(1) / z for 2 seeds (analysis.aggregate.calibrated_bounds),
    # and stay inside the scale here (no clipping: tests/analysis/test_interval_scale.py).
    factor = math.sqrt(2) * stats.t.ppf(0.975, 1) / stats.norm.ppf(0.975)
    assert cell.seed_boot_factor == pytest.approx(factor, abs=1e-4)
    assert (cell.seed_boot_low, cell.seed_boot_high) == pytest.approx((51 - factor, 51 + factor), abs=1e-3)
    assert not cell.interval_clipped
    # No instance variance: the seeds x instances interval is the seeds interval, up to the
    # Monte-Carlo error of the replicates' variance (4,000 replicates: about 1% on its square root).
    assert cell.boot_factor == pytest.approx(factor, rel=0.04)
    assert (cell.boot_low, cell.boot_high) == pytest.approx((cell.seed_boot_low, cell.seed_boot_high), rel=0.04)


def test_models_on_one_test_set_share_its_instance_resample():
    # B = A + 5 on every instance and every seed is identical: the seeds x instances replicates of
    # B - A are exactly 5 (test-set error cancels in a difference), though each cell varies.
    row = np.random.default_rng(0).uniform(0, 90, size=300)
    records = _records({"mnli": np.vstack([row] * 3)}, model="a") + _records(
        {"mnli": np.vstack([row + 5] * 3)}, model="b"
    )
    (group,) = iter_cell_replicates(select_best_lr_per_seed(records), reps=2000, averages=False)
    assert [c.key[0] for c in group.cells] == ["a", "b"]
    assert np.allclose(group.design[:, 1] - group.design[:, 0], 5.0)
    assert group.design[:, 0].std() > 1.0


def test_hierarchical_wider_than_seed_only(mldr_records):
    runs = [r for r in mldr_records if r.lr == 1e-4]
    cell = aggregate_runs(runs, reps=10000, rng_seed=0).iloc[0]
    assert cell.bootstrap == "seeds+instances" and cell.boot_reps == 10000
    assert cell.boot_high - cell.boot_low > 2 * (cell.seed_boot_high - cell.seed_boot_low)
    assert 2.0 < (cell.boot_high - cell.boot_low) / 2 < 4.0  # "about +-3 NDCG points on MLDR" (docs/analysis.md)
    assert 0 < cell.boot_low_mcse < 0.1 and 0 < cell.boot_high_mcse < 0.1
    again = aggregate_runs(runs, reps=10000, rng_seed=0).iloc[0]
    assert (again.boot_low, again.boot_high) == (cell.boot_low, cell.boot_high)
    assert aggregate_runs(runs, reps=10000, rng_seed=1).iloc[0].boot_low != cell.boot_low


@pytest.fixture(params=["multinomial", "poisson"])
def instance_weights(request, monkeypatch):
    """Both ways of resampling a test set: multinomial counts, and the Poisson(1) weights used
    from POISSON_FROM instances on (here lowered so that the small test sets use them)."""
    if request.param == "poisson":
        monkeypatch.setattr(intervals, "POISSON_FROM", 10)
    return request.param


def test_poisson_weights_have_poisson_moments():
    weights = poisson_weights(1000, 200, np.random.default_rng(0))
    assert weights.dtype == np.float32 and weights.shape == (200, 1000)
    assert weights.mean() == pytest.approx(1.0, abs=0.01) and weights.var() == pytest.approx(1.0, abs=0.02)
    assert (weights == 0).mean() == pytest.approx(np.exp(-1), abs=0.01)


@pytest.mark.parametrize("n_datasets", [1, 3])
def test_agrees_with_the_loop_implementation_within_mc_error(n_datasets, instance_weights):
    """Over 12 draws of each (different generator seeds), the mean bounds of the vectorised and
    the loop bootstrap differ by less than 4 standard errors of that difference, and the
    reported Monte-Carlo error matches the spread of the bounds across draws."""
    rng = np.random.default_rng(42)
    datasets = ["sst2", "qqp", "mnli"][:n_datasets]
    matrices = {
        d: np.clip(rng.normal(60 + 5 * i, 20, size=(5, 80)) + rng.normal(0, 2, size=(5, 1)), 0, 100)
        for i, d in enumerate(datasets)
    }
    records = _records(matrices)
    draws, reps = 12, 2000
    ours = [aggregate_runs(records, reps=reps, rng_seed=k).iloc[-1] for k in range(draws)]
    assert all(c.bootstrap == "seeds+instances" for c in ours)
    oracle = np.array(
        [hierarchical_bootstrap_ci(list(matrices.values()), reps=reps, rng_seed=100 + k) for k in range(draws)]
    )
    for j, (bound, mcse) in enumerate((("boot_low", "boot_low_mcse"), ("boot_high", "boot_high_mcse"))):
        # the percentile bound before the t-calibration (analysis.aggregate.calibrated_bounds)
        mine = np.array([c["mean"] + (c[bound] - c["mean"]) / c["boot_factor"] for c in ours])
        se = math.sqrt(mine.var(ddof=1) / draws + oracle[:, j].var(ddof=1) / draws)
        assert abs(mine.mean() - oracle[:, j].mean()) < 4 * se
        reported = np.mean([c[mcse] / c["boot_factor"] for c in ours])
        assert 0.5 < reported / mine.std(ddof=1) < 2.0


def test_coverage_on_simulated_seeds_and_instances(instance_weights):
    """400 simulated cells (5 seeds x 200 instances; seed sd 0.8, instance sd 20, noise 5): the
    seeds x instances 95% interval covers the true mean in 93-97% of them."""
    rng = np.random.default_rng(7)
    sims, seeds, n, truth = 400, 5, 200, 60.0
    scores = (
        truth
        + rng.normal(0, 0.8, size=(sims, seeds, 1))
        + rng.normal(0, 20, size=(sims, 1, n))
        + rng.normal(0, 5, size=(sims, seeds, n))
    )
    selected = pd.DataFrame(
        {
            "model": np.repeat([f"sim{i}" for i in range(sims)], seeds),
            "task_type": "IR",
            "dataset": np.repeat([f"test{i}" for i in range(sims)], seeds),
            "train_set": "",
            "seed": np.tile(np.arange(seeds), sims),
            "lr": 1e-5,
            "validation_score": 50.0,
            "test_score": scores.mean(axis=2).ravel(),
            "test_instance_scores": list(scores.reshape(-1, n)),
        }
    )
    (group,) = iter_cell_replicates(selected, reps=1000, averages=False)
    bounds = percentile_bounds(group.design)
    covered = (bounds.low <= truth) & (truth <= bounds.high)
    assert 0.93 <= covered.mean() <= 0.97, covered.mean()


def test_cell_draws_are_keyed_by_the_cell():
    a, b = keyed_rng(0, ("m", "SC", "sst2", "")), keyed_rng(0, ("m", "SC", "sst2", ""))
    assert a.integers(0, 1000) == b.integers(0, 1000)
    other = keyed_rng(0, ("n", "SC", "sst2", "")).integers(0, 10**9)
    assert other != keyed_rng(0, ("m", "SC", "sst2", "")).integers(0, 10**9)
