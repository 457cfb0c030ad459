"""Test oracle: the loop-based seeds x instances bootstrap the aggregation used before the
vectorised one (analysis/intervals.py), kept only to check that both agree."""

from __future__ import annotations

import numpy as np

_CHUNK_VALUES = 2**22


def hierarchical_bootstrap_ci(
    instance_scores, reps: int = 10000, rng_seed=0, confidence: float = 0.95
) -> tuple[float, float]:
    """Percentile CI of the mean over seeds of the mean over datasets of per-instance scores.

    `instance_scores[d]` is a (seeds x instances) array for dataset d. Each replicate draws the
    seeds with replacement, then resamples each dataset's instances once, shared by all seeds.
    """
    matrices = [np.asarray(m, dtype=float) for m in instance_scores]
    n_seeds = matrices[0].shape[0]
    rng = np.random.default_rng(rng_seed)
    seed_draws = rng.integers(0, n_seeds, size=(reps, n_seeds))
    replicates = np.empty(reps)
    chunk = max(1, _CHUNK_VALUES // max(m.shape[1] for m in matrices))
    for start in range(0, reps, chunk):
        stop = min(start + chunk, reps)
        per_seed = np.zeros((stop - start, n_seeds))
        for matrix in matrices:
            drawn = rng.integers(0, matrix.shape[1], size=(stop - start, matrix.shape[1]))
            per_seed += np.stack([row[drawn].mean(axis=1) for row in matrix], axis=1)
        per_seed /= len(matrices)
        replicates[start:stop] = np.take_along_axis(per_seed, seed_draws[start:stop], axis=1).mean(axis=1)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(replicates, [alpha, 1.0 - alpha])
    return float(low), float(high)
