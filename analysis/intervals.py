"""Confidence intervals of a mean over fine-tuning seeds: the paper's interval and the bootstrap.

- `paper_interval`: 1.96 * sd(ddof=1) / sqrt(n). This is what reproduces every published cell
  (docs/analysis.md); a t quantile, ddof=0 or a bootstrap over test instances do not.
- The bootstrap (docs/claims.md, "Bootstrap"): each replicate draws the seeds of a cell with
  replacement and, where per-instance test scores exist, ONE multinomial resample of each test
  set's instances that every drawn seed (and every model scored on that test set) shares: all
  runs are scored on the same test queries (a crossed design), so the test-set sampling error is
  common to them; drawing instances independently per seed would divide that error by the number
  of seeds. Vectorised: a resample is a row of multinomial counts, and the resampled means of
  all runs on a test set are one matrix product (replicates x instances) @ (instances x runs),
  computed once per test set and reused by every cell and category average that contains them.
- `percentile_bounds`: percentile interval of replicates, with the Monte-Carlo standard error of
  each bound from the binomial order-statistic approximation.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

Z_95 = 1.96  # the paper's multiplier, printed to 2 decimals (not norm.ppf(0.975) = 1.95996...)
_CHUNK_VALUES = 2**20  # multinomial counts held at once (replicates x instances), 8 MB


def paper_interval(scores) -> float:
    """Half-width 1.96 * sd(ddof=1) / sqrt(n) of the mean of per-seed scores; NaN for n < 2."""
    values = np.asarray(scores, dtype=float)
    if values.size < 2:
        return float("nan")
    return float(Z_95 * values.std(ddof=1) / np.sqrt(values.size))


def keyed_rng(rng_seed: int, key) -> np.random.Generator:
    """A generator per key (a cell, a test set), so its draws do not depend on which others exist."""
    digest = hashlib.sha256(repr(key).encode()).digest()
    return np.random.default_rng(np.random.SeedSequence(
        rng_seed, spawn_key=(int.from_bytes(digest[:8], "little"),)))


def multinomial_counts(n: int, reps: int, rng: np.random.Generator) -> np.ndarray:
    """(reps x n) counts: how often each of n items is drawn in a resample of size n, per replicate."""
    dtype = np.uint16 if n <= np.iinfo(np.uint16).max else np.int64
    drawn = rng.integers(0, n, size=(reps, n), dtype=dtype).astype(np.int64)
    drawn += (np.arange(reps, dtype=np.int64) * n)[:, None]
    return np.bincount(drawn.ravel(), minlength=reps * n).reshape(reps, n)


def instance_mean_replicates(matrix: np.ndarray, reps: int, rng: np.random.Generator) -> np.ndarray:
    """(reps x runs) means of each run's instance scores under one shared resample per replicate.

    `matrix` is (runs x instances): the runs scored on one test set, instances in the same order.
    Sums in float64, kept in float32 (7 significant digits; the bounds' Monte-Carlo error is
    about 1e-2 points).
    """
    matrix = np.asarray(matrix, dtype=np.float64)
    runs, n = matrix.shape
    out = np.empty((reps, runs), dtype=np.float32)
    chunk = max(1, _CHUNK_VALUES // n)
    transposed = np.ascontiguousarray(matrix.T) / n
    for start in range(0, reps, chunk):
        stop = min(start + chunk, reps)
        out[start:stop] = multinomial_counts(n, stop - start, rng).astype(np.float64) @ transposed
    return out


def seed_weights(n_seeds: int, reps: int, rng: np.random.Generator) -> np.ndarray:
    """(reps x n_seeds) weights of a seed resample: draws of each seed / n_seeds (rows sum to 1)."""
    return multinomial_counts(n_seeds, reps, rng) / n_seeds


@dataclass(frozen=True)
class PercentileBounds:
    """Percentile interval bounds per column of a replicate matrix, with their Monte-Carlo errors."""
    low: np.ndarray
    high: np.ndarray
    low_mcse: np.ndarray
    high_mcse: np.ndarray
    reps: int


def percentile_bounds(replicates: np.ndarray, confidence: float = 0.95) -> PercentileBounds:
    """Percentile interval of each column of (reps x k) replicates (NaN columns give NaN).

    Monte-Carlo error of a bound at probability q: the q-quantile of R replicates is an order
    statistic whose rank has binomial sd sqrt(R q (1-q)), so its standard error is about half the
    distance between the quantiles at q -/+ sqrt(q (1-q) / R) (binomial order-statistic
    approximation; no density estimate needed).
    """
    replicates = np.asarray(replicates, dtype=np.float64)
    if replicates.ndim == 1:
        replicates = replicates[:, None]
    reps = replicates.shape[0]
    alpha = (1.0 - confidence) / 2.0
    probs = []
    for q in (alpha, 1.0 - alpha):
        step = np.sqrt(q * (1.0 - q) / reps)
        probs += [max(q - step, 0.0), q, min(q + step, 1.0)]
    quantiles = np.quantile(replicates, probs, axis=0)
    return PercentileBounds(low=quantiles[1], high=quantiles[4],
                            low_mcse=(quantiles[2] - quantiles[0]) / 2,
                            high_mcse=(quantiles[5] - quantiles[3]) / 2, reps=reps)
