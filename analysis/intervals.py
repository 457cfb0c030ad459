"""Confidence intervals of a mean over fine-tuning seeds: the paper's interval and two bootstraps.

- `paper_interval`: 1.96 * sd(ddof=1) / sqrt(n). This is what reproduces every published cell
  (SPEC section 5); a t quantile, ddof=0 or a bootstrap over test instances do not.
- `seed_bootstrap_ci`: percentile bootstrap that resamples seeds (scipy.stats.bootstrap).
- `hierarchical_bootstrap_ci`: percentile bootstrap that resamples seeds, then test instances.
"""
from __future__ import annotations

import warnings
from typing import Sequence

import numpy as np
from scipy import stats

Z_95 = 1.96  # the paper's multiplier, printed to 2 decimals (not norm.ppf(0.975) = 1.95996...)
_CHUNK_VALUES = 2**22  # instance draws held at once (chunk x instances), about 32 MB


def paper_interval(scores: Sequence[float]) -> float:
    """Half-width 1.96 * sd(ddof=1) / sqrt(n) of the mean of per-seed scores; NaN for n < 2."""
    values = np.asarray(scores, dtype=float)
    if values.size < 2:
        return float("nan")
    return float(Z_95 * stats.sem(values, ddof=1))


def seed_bootstrap_ci(scores: Sequence[float], reps: int = 10000, rng_seed=0,
                      confidence: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean, resampling seeds with replacement; NaNs for n < 2."""
    values = np.asarray(scores, dtype=float)
    if values.size < 2:
        return float("nan"), float("nan")
    with warnings.catch_warnings():  # identical values: a degenerate but valid interval
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        result = stats.bootstrap(
            (values,), np.mean, n_resamples=reps, method="percentile", vectorized=True,
            confidence_level=confidence, rng=np.random.default_rng(rng_seed),
        )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def hierarchical_bootstrap_ci(instance_scores: Sequence[np.ndarray], reps: int = 10000,
                              rng_seed=0, confidence: float = 0.95) -> tuple[float, float]:
    """Percentile CI of the mean over seeds of the mean over datasets of per-instance scores.

    `instance_scores[d]` is a (seeds x instances) array for dataset d: row s holds the test
    instance scores of seed s's selected run (rows of all datasets refer to the same seeds).
    With one dataset this is the CI of a dataset cell; with the 3 datasets of a task type, the
    CI of its category average.

    Each replicate draws the seeds with replacement, then resamples each dataset's test instances
    once and applies that resample to every drawn seed: all seeds are scored on the same test
    queries (a crossed design), so the test-set sampling error is common to them; drawing
    instances independently per seed would divide that error by the number of seeds.

    Written in numpy because scipy.stats.bootstrap resamples one level only (observations of one
    or more samples); it cannot nest a resample of instances inside a resample of seeds.
    """
    matrices = [np.asarray(m, dtype=float) for m in instance_scores]
    if not matrices or any(m.ndim != 2 for m in matrices):
        raise ValueError("instance_scores must be a non-empty list of (seeds x instances) arrays")
    n_seeds = matrices[0].shape[0]
    if any(m.shape[0] != n_seeds for m in matrices):
        raise ValueError("every dataset needs one row of instance scores per seed")
    if n_seeds < 2:
        return float("nan"), float("nan")
    rng = np.random.default_rng(rng_seed)
    seed_draws = rng.integers(0, n_seeds, size=(reps, n_seeds))
    replicates = np.empty(reps)
    chunk = max(1, _CHUNK_VALUES // max(m.shape[1] for m in matrices))
    for start in range(0, reps, chunk):
        stop = min(start + chunk, reps)
        per_seed = np.zeros((stop - start, n_seeds))
        for matrix in matrices:
            # One resample of this dataset's instances per replicate, shared by all seeds.
            drawn = rng.integers(0, matrix.shape[1], size=(stop - start, matrix.shape[1]))
            per_seed += np.stack([row[drawn].mean(axis=1) for row in matrix], axis=1)
        per_seed /= len(matrices)
        replicates[start:stop] = np.take_along_axis(per_seed, seed_draws[start:stop], axis=1).mean(axis=1)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(replicates, [alpha, 1.0 - alpha])
    return float(low), float(high)
