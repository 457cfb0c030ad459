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
  Test sets of POISSON_FROM instances or more (QQP, MNLI, SQuAD, ...) use Poisson(1) weights
  instead of counts (the Poisson bootstrap, Hanley & MacGibbon 2006; resampled mean = weighted
  mean): the same replicate distribution up to O(1/n), and much cheaper to draw.
- `percentile_bounds`: percentile interval of replicates, with the Monte-Carlo standard error of
  each bound from the binomial order-statistic approximation.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

Z_95 = 1.96  # the paper's multiplier, printed to 2 decimals (not norm.ppf(0.975) = 1.95996...)
_CHUNK_VALUES = 2**23  # multinomial counts held at once (replicates x instances), 32 MB of float32
_SUM_BLOCK = 4096  # instances summed in float32 before the float64 accumulation
_ROW_BINCOUNT = 256  # from this many items on, counts are made one replicate at a time
# Test sets of this many instances or more are resampled with Poisson(1) weights (docs/claims.md,
# "Bootstrap"): the same replicate distribution as multinomial counts up to O(1/n).
POISSON_FROM = 5000


# What each interval the package prints is, in the words every table, CSV, report and figure uses
# (issue 81): only intervals whose simulated coverage is 93-97% at 3, 5 and 10 seeds are called 95%
# (tests/analysis/test_table_coverage.py); the paper's rule is named as the paper's, with its coverage.
PAPER_RULE_SEEDS = (3, 5, 10)
SEEDS_CI_LABEL = "95% CI (t-calibrated bootstrap over seeds)"
DESIGN_CI_LABEL = "95% CI over seeds and test instances (t-calibrated bootstrap)"


# The metric's scale (contracts.run_record: every score is a percentage, metric x100) and the seed
# counts at which the coverage of every interval is simulated (analysis.coverage,
# tests/analysis/test_table_coverage.py). Issue 90: no printed interval leaves the scale, and no
# coverage is claimed for a cell whose seed count was not simulated (docs/analysis.md, "Bounds at
# the scale's ends and what is claimed at which seed counts").
SCALE = (0.0, 100.0)
SIMULATED_SEEDS = PAPER_RULE_SEEDS
CLIPPED_MARK = "†"  # a bootstrap bound clipped at 0 or 100
PASSES_MARK = "‡"  # mean ± the paper's half-width passes 0 or 100 (the paper's rule, kept as it is)
CLIPPED_NOTE = f"{CLIPPED_MARK} = a bound of the 95% CI clipped at the scale's end (the interval passed 0 or 100)"
PASSES_NOTE = (
    f"{PASSES_MARK} = mean ± the paper's half-width passes 0 or 100: the paper's rule kept as the paper computes it "
    "(a normal interval from few seeds, not clipped, so that published cells stay as printed)"
)


def clip_to_scale(low: float, high: float) -> tuple[float, float, bool]:
    """The interval [low, high] within SCALE, and whether a bound was moved. Clipping never loses
    coverage: the truth (a mean of scores in [0, 100]) inside [low, high] stays inside."""
    lo, hi = SCALE
    clipped_low, clipped_high = min(max(low, lo), hi), max(min(high, hi), lo)
    return clipped_low, clipped_high, bool(clipped_low != low or clipped_high != high)


def passes_scale(mean: float, halfwidth: float) -> bool:
    """Whether mean ± halfwidth reaches past the scale (NaN: no)."""
    return bool(mean - halfwidth < SCALE[0] or mean + halfwidth > SCALE[1])


def format_bounds(low: float, high: float, clipped: bool = False) -> str:
    """ "[low, high]" to 2 decimals, a bound at the scale's end marked when the interval was clipped."""

    def bound(value: float) -> str:
        return f"{value:.2f}" + (CLIPPED_MARK if clipped and value in SCALE else "")

    return f"[{bound(low)}, {bound(high)}]"


def coverage_checked(n_seeds: int) -> bool:
    """Whether the intervals' coverage was simulated at this seed count (SIMULATED_SEEDS)."""
    return int(n_seeds) in SIMULATED_SEEDS


def not_checked_note(n_seeds: int) -> str:
    return f"coverage not checked at {int(n_seeds)} seeds"


def seed_count_note(counts) -> str | None:
    """One line for the seed counts (of cells with an interval, 2 or more seeds) whose coverage was
    not simulated; None when every count was."""
    missing = sorted({int(n) for n in counts if int(n) >= 2 and not coverage_checked(n)})
    if not missing:
        return None
    simulated = ", ".join(str(n) for n in SIMULATED_SEEDS[:-1]) + f" and {SIMULATED_SEEDS[-1]}"
    return (
        f"coverage not checked at {' / '.join(str(n) for n in missing)} seeds: the intervals' coverage is simulated "
        f"at {simulated} seeds only (`python -m analysis coverage`), so no coverage is claimed for those cells"
    )


def readable_seeds(n_seeds: int) -> str:
    """A cell's seed count as printed beside its intervals: "5", or "2 (coverage not checked)"."""
    n = int(n_seeds)
    return str(n) if n < 2 or coverage_checked(n) else f"{n} (coverage not checked)"


def scale_legend(texts, counts) -> list[str]:
    """The legend lines for the marks among printed `texts` (cells, intervals): a paper's ± passing
    0 or 100, a bound clipped there, and the seed counts (`counts`, of the printed cells) whose
    coverage was not simulated (issue 90)."""
    texts = [str(t) for t in texts]
    notes = []
    if any(PASSES_MARK in t for t in texts):
        notes.append(PASSES_NOTE)
    if any(CLIPPED_MARK in t for t in texts):
        notes.append(CLIPPED_NOTE)
    note = seed_count_note(counts)
    if note:
        notes.append(note)
    return notes


def paper_rule_coverage(n: int) -> float:
    """Coverage of mean +- 1.96 SD/sqrt(n) for n normal seed scores: P(|t(n-1)| < 1.96)."""
    from scipy import stats

    return float(2 * stats.t.cdf(Z_95, n - 1) - 1)


def paper_rule_label(short: bool = False) -> str:
    """The paper's interval named as the paper's, with its coverage at 3, 5 and 10 seeds."""
    coverage = " / ".join(f"{100 * paper_rule_coverage(n):.0f}%" for n in PAPER_RULE_SEEDS)
    seeds = " / ".join(str(n) for n in PAPER_RULE_SEEDS)
    if short:
        return f"paper's rule 1.96 SD/sqrt(n) (~{100 * paper_rule_coverage(5):.0f}% at 5 seeds)"
    return (
        f"the paper's rule, 1.96 SD/sqrt(n) over seeds (covers about {coverage} at {seeds} seeds: not a 95% interval)"
    )


def paper_interval(scores) -> float:
    """Half-width 1.96 * sd(ddof=1) / sqrt(n) of the mean of per-seed scores; NaN for n < 2."""
    values = np.asarray(scores, dtype=float)
    if values.size < 2:
        return float("nan")
    return float(Z_95 * values.std(ddof=1) / np.sqrt(values.size))


def halfwidth_sd(halfwidth, n):
    """The seed SD behind a paper-rule half-width (the inverse of `paper_interval`); arrays welcome."""
    return halfwidth * np.sqrt(n) / Z_95


def keyed_rng(rng_seed: int, key) -> np.random.Generator:
    """A generator per key (a cell, a test set), so its draws do not depend on which others exist."""
    digest = hashlib.sha256(repr(key).encode()).digest()
    return np.random.default_rng(np.random.SeedSequence(rng_seed, spawn_key=(int.from_bytes(digest[:8], "little"),)))


def multinomial_counts(n: int, reps: int, rng: np.random.Generator, dtype=np.int64) -> np.ndarray:
    """(reps x n) counts: how often each of n items is drawn in a resample of size n, per replicate."""
    drawn = rng.integers(0, n, size=(reps, n), dtype=np.uint16 if n <= np.iinfo(np.uint16).max else np.int64)
    if n < _ROW_BINCOUNT:  # few items (seeds): one bincount over all replicates
        flat = drawn.astype(np.int64) + (np.arange(reps, dtype=np.int64) * n)[:, None]
        return np.bincount(flat.ravel(), minlength=reps * n).reshape(reps, n).astype(dtype, copy=False)
    counts = np.empty((reps, n), dtype=dtype)
    for row, items in zip(counts, drawn):  # a bincount per replicate: its counts stay in cache
        row[:] = np.bincount(items, minlength=n)
    return counts


def instance_mean_replicates(matrix: np.ndarray, reps: int, rng: np.random.Generator) -> np.ndarray:
    """(reps x runs) means of each run's instance scores under one shared resample per replicate.

    `matrix` is (runs x instances): the runs scored on one test set, instances in the same order.
    The counts @ scores product runs in float32 (scores are float32, the run store's precision;
    counts are small integers) over blocks of _SUM_BLOCK instances, summed in float64: the
    relative error of a mean stays near 1e-6, far below the bounds' Monte-Carlo error (~1e-2
    points). Kept in float32.
    """
    scores = np.ascontiguousarray(np.asarray(matrix, dtype=np.float32).T)
    n, runs = scores.shape
    out = np.empty((reps, runs), dtype=np.float32)
    chunk = max(1, _CHUNK_VALUES // n)
    for start in range(0, reps, chunk):
        stop = min(start + chunk, reps)
        if n < POISSON_FROM:
            weights = multinomial_counts(n, stop - start, rng, dtype=np.float32)
        else:
            weights = poisson_weights(n, stop - start, rng)
        sums = np.zeros((stop - start, runs))
        for block in range(0, n, _SUM_BLOCK):
            sums += weights[:, block : block + _SUM_BLOCK] @ scores[block : block + _SUM_BLOCK]
        out[start:stop] = sums / weights.sum(axis=1, dtype=np.float64)[:, None]
    return out


def _poisson_table(bits: int = 16) -> np.ndarray:
    """Poisson(1) variate of each of the 2**bits equally likely uniform integers (inverse CDF at
    the integer's midpoint): every probability is exact to within 2**-bits."""
    k = np.arange(20)
    cdf = np.cumsum(np.exp(-1.0) / np.cumprod(np.r_[1.0, k[1:]]))
    return np.searchsorted(cdf * 2**bits, np.arange(2**bits) + 0.5).astype(np.float32)


_POISSON_TABLE = _poisson_table()


def poisson_weights(n: int, reps: int, rng: np.random.Generator) -> np.ndarray:
    """(reps x n) float32 Poisson(1) weights (the Poisson bootstrap): a table lookup of 16-bit
    uniforms, three times faster than multinomial counts of large test sets."""
    return _POISSON_TABLE[rng.integers(0, 2**16, size=(reps, n), dtype=np.uint16)]


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
    return PercentileBounds(
        low=quantiles[1],
        high=quantiles[4],
        low_mcse=(quantiles[2] - quantiles[0]) / 2,
        high_mcse=(quantiles[5] - quantiles[3]) / 2,
        reps=reps,
    )
