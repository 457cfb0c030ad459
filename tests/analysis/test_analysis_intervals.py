import itertools
import math

import numpy as np
import pytest

from analysis.intervals import hierarchical_bootstrap_ci, paper_interval, seed_bootstrap_ci


def test_paper_interval_hand_value():
    # sd(ddof=1) of 1..5 = sqrt(2.5); 1.96 * sqrt(2.5) / sqrt(5) = 1.96 * sqrt(0.5)
    assert paper_interval([1, 2, 3, 4, 5]) == pytest.approx(1.96 * math.sqrt(0.5), abs=1e-12)
    assert paper_interval([2.0, 4.0]) == pytest.approx(1.96 * math.sqrt(2.0) / math.sqrt(2.0))
    assert math.isnan(paper_interval([3.0]))


def test_paper_interval_is_not_t_or_ddof0():
    values = [59.66, 60.14, 61.73, 59.59, 60.13]  # the MLDR per-seed test scores (SPEC section 5)
    assert round(paper_interval(values), 2) == 0.76
    t_based = 2.776 * np.std(values, ddof=1) / math.sqrt(5)
    ddof0 = 1.96 * np.std(values, ddof=0) / math.sqrt(5)
    assert round(t_based, 2) != 0.76 and round(ddof0, 2) != 0.76


def test_seed_bootstrap_two_values_hand_value():
    # Resampled means of {a, b}: a (1/4), (a+b)/2 (1/2), b (1/4) -> 2.5%/97.5% percentiles a, b.
    assert seed_bootstrap_ci([10.0, 20.0], reps=5000, rng_seed=1) == (10.0, 20.0)


def test_seed_bootstrap_matches_exact_enumeration():
    values = np.array([0.0, 1.0, 3.0, 10.0])
    exact = [np.mean(c) for c in itertools.product(values, repeat=4)]  # all 256 resamples
    low, high = np.quantile(exact, [0.025, 0.975])
    assert (low, high) == (0.5, 7.75)
    assert seed_bootstrap_ci(values, reps=10000, rng_seed=0) == (low, high)


def test_seed_bootstrap_degenerate_and_deterministic():
    assert seed_bootstrap_ci([5.0, 5.0, 5.0], reps=200) == (5.0, 5.0)
    assert all(math.isnan(x) for x in seed_bootstrap_ci([5.0]))
    values = [59.66, 60.14, 61.73, 59.59, 60.13]
    assert seed_bootstrap_ci(values, reps=3000, rng_seed=7) == seed_bootstrap_ci(values, reps=3000, rng_seed=7)


def test_hierarchical_constant_instances_reduce_to_seed_bootstrap():
    # Instance resampling cannot move a seed whose instances are all equal: the hand value of
    # the two-value seed bootstrap above applies.
    matrix = np.array([[10.0] * 50, [20.0] * 50])
    assert hierarchical_bootstrap_ci([matrix], reps=4000, rng_seed=3) == (10.0, 20.0)


def test_hierarchical_identical_seeds_is_instance_bootstrap():
    # Identical seeds: only the instance level varies; for 400 scores of 0/100 with mean 50 the
    # CI is about 50 +- 1.96 * 50 / sqrt(400) = 50 +- 4.9.
    row = np.array([0.0, 100.0] * 200)
    low, high = hierarchical_bootstrap_ci([np.vstack([row] * 5)], reps=10000, rng_seed=0)
    assert (high - low) / 2 == pytest.approx(4.9, rel=0.05)
    assert (low + high) / 2 == pytest.approx(50.0, abs=0.3)


def test_hierarchical_several_datasets_average_their_means():
    a = np.array([[10.0] * 20, [10.0] * 20])
    b = np.array([[30.0] * 20, [30.0] * 20])
    assert hierarchical_bootstrap_ci([a, b], reps=500, rng_seed=0) == (20.0, 20.0)
    with pytest.raises(ValueError):
        hierarchical_bootstrap_ci([a, b[:1]])


def test_hierarchical_wider_than_seed_only_and_deterministic(mldr_records):
    runs = sorted((r for r in mldr_records if r.lr == 1e-4), key=lambda r: r.seed)
    assert len(runs) == 5 and all(r.test_instance_scores for r in runs)
    matrix = np.array([r.test_instance_scores for r in runs])
    seed_low, seed_high = seed_bootstrap_ci([r.test_score for r in runs], reps=10000, rng_seed=0)
    low, high = hierarchical_bootstrap_ci([matrix], reps=10000, rng_seed=0)
    assert high - low > 2 * (seed_high - seed_low)
    assert 2.0 < (high - low) / 2 < 4.0  # "about +-3 NDCG points on MLDR" (SPEC section 5)
    assert hierarchical_bootstrap_ci([matrix], reps=10000, rng_seed=0) == (low, high)
    assert hierarchical_bootstrap_ci([matrix], reps=10000, rng_seed=1) != (low, high)
