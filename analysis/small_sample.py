"""Small-sample corrections for the claims' intervals, and the variance components of the two
spread claims (docs/claims.md, "Intervals" and "Spread claims").

With 5 seeds per cell a bootstrap percentile interval is too narrow twice over: resampling n
values shrinks their variance by (n - 1) / n, and a percentile interval uses normal quantiles
where the variance itself is estimated from few seeds (t with Welch-Satterthwaite df). Measured
on the published design, seed-bootstrap and IQM intervals labelled 95% covered 83-92%.
`stretch` widens a bootstrap interval about its estimate by sqrt(V / V_boot) * t_df / z: the
first factor puts the unbiased variance back, the second the t quantile (a t-calibrated
percentile interval; its coverage is measured by `python -m analysis claims-coverage`).

Spread claims compare how much the score moves with the fine-tuning LR (Figure 5) or the masking
ratio (Figure 7). The SD of noisy scores or means mixes in seed noise, so each is estimated as a
variance component by the method of moments (unbiased):
- `lr_variance`: seeds x LRs of one cell, a two-way layout (seed = data order, shared by the LRs):
  (MS_LR - MS_residual) / seeds is the variance of the LRs' true means;
- `level_variance`: cell means over the levels (masking ratios) of one model family:
  var(means) - mean(s^2 / n) is the variance of the true means.
The claim is the ratio of the treatment's to the control's summed components over matched
groups, with a Fieller interval (`fieller_ratio`) from the paired group values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats
from scipy.optimize import brentq

Z_975 = float(stats.norm.ppf(0.975))


def t_quantile(df: float, confidence: float = 0.95) -> float:
    return float(stats.t.ppf(0.5 + confidence / 2, df))


def welch_df(variances, dfs) -> float:
    """Welch-Satterthwaite df of a sum of independent variance estimates (df inf: known)."""
    variances, dfs = np.asarray(variances, dtype=float), np.asarray(dfs, dtype=float)
    finite = np.isfinite(dfs) & (variances > 0)
    denominator = float(np.sum(variances[finite] ** 2 / dfs[finite]))
    return float(variances.sum() ** 2 / denominator) if denominator > 0 else math.inf


def stretch(estimate: float, low: float, high: float, factor: float) -> tuple[float, float]:
    """The interval [low, high] widened about `estimate` by `factor` (its asymmetry kept)."""
    return estimate + (low - estimate) * factor, estimate + (high - estimate) * factor


@dataclass(frozen=True)
class Calibration:
    """How a bootstrap interval of a linear contrast is widened: factor = sqrt(variance /
    bootstrap variance) * t_df / z."""

    factor: float
    df: float


def seed_bootstrap_calibration(weights, sds, ns, confidence: float = 0.95) -> Calibration:
    """For the seed bootstrap of sum_k w_k mean_k (seeds resampled within each cell): V =
    sum w^2 s^2 / n, V_boot = sum w^2 s^2 (n - 1) / n^2, df Welch-Satterthwaite."""
    w2s2 = np.asarray(weights, dtype=float) ** 2 * np.asarray(sds, dtype=float) ** 2
    ns = np.asarray(ns, dtype=float)
    variance, boot = float(np.sum(w2s2 / ns)), float(np.sum(w2s2 * (ns - 1) / ns**2))
    df = welch_df(w2s2 / ns, ns - 1)
    if boot <= 0:
        return Calibration(1.0, df)
    return Calibration(math.sqrt(variance / boot) * t_quantile(df, confidence) / _z(confidence), df)


def design_bootstrap_calibration(
    seed_calibration: Calibration,
    seed_variance: float,
    seed_boot_variance: float,
    design_boot_variance: float,
    df_seed_upper: float | None = None,
) -> Calibration:
    """For the seeds x instances bootstrap: its variance is the seeds' (shrunk by the resampling)
    plus the test instances' (design - seed replicate variance, from hundreds of instances: no
    correction needed). The seed part is put back to `seed_variance` and the df counts only it.

    `df_seed_upper` (a probability, e.g. 0.75): the Welch-Satterthwaite df is computed with the
    seed variance at that one-sided upper confidence bound (chi-square, the seed part's df)
    instead of its estimate. With 3 seeds the plug-in df is liberal where the seeds dominate (a
    small estimated seed variance gives a large df exactly when the interval is already too short):
    about 92% coverage at 3 seeds, 94.5-95.6% with the 75% bound (docs/analysis.md, "Bootstrap intervals").
    The variance itself (the interval's width before the t quantile) keeps the estimate."""
    instance = max(design_boot_variance - seed_boot_variance, 0.0)
    variance = seed_variance + instance
    seed_df = seed_calibration.df
    df_variance = seed_variance
    if df_seed_upper is not None and math.isfinite(seed_df) and seed_df > 0:
        df_variance = seed_variance * seed_df / float(stats.chi2.ppf(1.0 - df_seed_upper, seed_df))
    df = welch_df([df_variance, instance], [seed_df, math.inf])
    if design_boot_variance <= 0:
        return Calibration(1.0, df)
    return Calibration(math.sqrt(variance / design_boot_variance) * t_quantile(df) / Z_975, df)


def group_bootstrap_calibration(runs_per_group, df: float, confidence: float = 0.95) -> Calibration:
    """For a bootstrap stratified by group (rliable's IQM and probability of improvement): every
    group's runs are resampled among themselves, which shrinks variance by (n - 1) / n with n the
    runs of a group (harmonic mean over groups and arms)."""
    n = len(runs_per_group) / float(np.sum(1.0 / np.asarray(runs_per_group, dtype=float)))
    return Calibration(math.sqrt(n / (n - 1)) * t_quantile(df, confidence) / _z(confidence), df)


def _z(confidence: float) -> float:
    return float(stats.norm.ppf(0.5 + confidence / 2))


# --- variance components --------------------------------------------------------------------------
def lr_variance(matrix: np.ndarray) -> float:
    """Variance of the LRs' true means in a (seeds x LRs) table of one cell (method of moments of
    the two-way layout without replication; unbiased, may be negative)."""
    matrix = np.asarray(matrix, dtype=float)
    seeds, lrs = matrix.shape
    if seeds < 2 or lrs < 2:
        raise ValueError(f"a seeds x LRs table needs 2 or more of each, got {seeds} x {lrs}")
    lr_means, seed_means, grand = matrix.mean(axis=0), matrix.mean(axis=1), matrix.mean()
    ms_lr = seeds * float(np.sum((lr_means - grand) ** 2)) / (lrs - 1)
    residual = matrix - lr_means[None, :] - seed_means[:, None] + grand
    ms_residual = float(np.sum(residual**2)) / ((seeds - 1) * (lrs - 1))
    return (ms_lr - ms_residual) / seeds


def level_variance(means, sds, ns) -> float:
    """Variance of the true means over levels from cell means with seed sds and counts
    (method of moments: the means' variance minus their mean sampling variance; may be negative)."""
    means, sds, ns = (np.asarray(a, dtype=float) for a in (means, sds, ns))
    if len(means) < 2:
        raise ValueError("a spread over levels needs 2 or more levels")
    return float(np.var(means, ddof=1) - np.mean(sds**2 / ns))


@dataclass(frozen=True)
class RatioFit:
    """ratio = sum of treatment components / sum of control components over the groups, with a
    Fieller interval; the test of ratio = 1 is the paired t of (treatment - control) over groups."""

    ratio: float
    low: float
    high: float
    difference: float  # mean over groups of treatment - control
    se: float  # its standard error
    df: float  # groups - 1


def fieller_ratio(treatment, control, confidence: float = 0.95, extra_variance=(0.0, 0.0)) -> RatioFit:
    """Ratio of the means of paired values over groups with Fieller's interval: the ratios rho for
    which mean(t) - rho mean(c) is within the t quantile of its paired standard error. Unbounded
    ends are +-inf (the control mean is not clearly above 0). `extra_variance`: variance of the
    treatment and control means that the spread over groups cannot see (a part shared by every
    group, e.g. the pretraining runs behind them), added to their variances (independent)."""
    t_values, c_values = np.asarray(treatment, dtype=float), np.asarray(control, dtype=float)
    groups = len(t_values)
    if groups < 2:
        raise ValueError("a ratio over groups needs 2 or more groups")
    a, b = t_values.mean(), c_values.mean()
    cov = np.cov(t_values, c_values, ddof=1) / groups  # covariance of the two means
    cov[0, 0] += extra_variance[0]
    cov[1, 1] += extra_variance[1]
    q2 = t_quantile(groups - 1, confidence) ** 2
    lead, half, last = b * b - q2 * cov[1, 1], a * b - q2 * cov[0, 1], a * a - q2 * cov[0, 0]
    discriminant = half * half - lead * last
    if lead > 0 and discriminant >= 0:
        low, high = (half - math.sqrt(discriminant)) / lead, (half + math.sqrt(discriminant)) / lead
    else:
        low, high = -math.inf, math.inf
    differences = t_values - c_values
    se = float(math.sqrt(differences.var(ddof=1) / groups + extra_variance[0] + extra_variance[1]))
    ratio = a / b if b != 0 else math.copysign(math.inf, a)
    return RatioFit(float(ratio), float(low), float(high), float(differences.mean()), se, float(groups - 1))


def shared_level_variance(means: np.ndarray, taus: np.ndarray) -> float:
    """Variance, over the runs behind them, of the sum over groups of `level_variance`: (groups x
    k levels) cell means whose level r is one pretraining run, with an effect tau_g z_r shared by
    the groups (z_r ~ N(0, 1) per run). With centred means d_gr and c_r = sum_g tau_g d_gr, the sum
    gains (2 / (k - 1)) sum_r c_r z_r + (sum_g tau_g^2) S_z (S_z: the sample variance of the z_r),
    of variance (2 / (k - 1))^2 sum_r c_r^2 + (sum_g tau_g^2)^2 2 / (k - 1); its mean, sum_g
    tau_g^2, is what level_variance must also subtract. The observed means stand in for the true."""
    means, taus = np.asarray(means, dtype=float), np.asarray(taus, dtype=float)
    k = means.shape[1]
    if k < 2:
        raise ValueError("a spread over levels needs 2 or more levels")
    c = taus @ (means - means.mean(axis=1, keepdims=True))
    return float((2 / (k - 1)) ** 2 * np.sum(c**2) + np.sum(taus**2) ** 2 * 2 / (k - 1))


def sd_ratio(value: float) -> float:
    """A ratio of variances as a ratio of standard deviations (negative estimates -> 0)."""
    return math.sqrt(value) if value > 0 else (math.inf if value == math.inf else 0.0)


# --- floors: a cell whose seeds all scored the same (issue 52) --------------------------------------
EQUAL_SEEDS_ALPHA = 0.05


def score_resolution(scores) -> float:
    """The smallest positive gap between distinct scores (the metric's step on its test set, e.g.
    1 / N for an accuracy over N instances); nan when there are not two distinct scores."""
    values = np.unique(np.asarray(scores, dtype=float)[np.isfinite(scores)])
    gaps = np.diff(values)
    gaps = gaps[gaps > 0]
    return float(gaps.min()) if gaps.size else float("nan")


def p_all_equal(sd: float, resolution: float, n: int, offsets: int = 64) -> float:
    """P(n scores drawn N(mu, sd) all land on one value of a grid with this step), averaged over
    where mu falls within a step."""
    if sd <= 0:
        return 1.0
    step = resolution / sd
    reach = int(math.ceil(10.0 / step)) + 1
    edges = (np.arange(-reach, reach + 2)[None, :] - (np.arange(offsets)[:, None] + 0.5) / offsets) * step
    bins = np.diff(stats.norm.cdf(edges), axis=1)
    return float(np.mean(np.sum(bins**n, axis=1)))


def equal_seeds_sd(resolution: float, n: int, alpha: float = EQUAL_SEEDS_ALPHA) -> float:
    """The seed SD a cell whose n seeds all scored the same gets: the largest SD at which n seeds
    land on one value of the metric's grid with probability `alpha` (a one-sided 95% upper bound:
    smaller SDs are what "all equal" allows). It shrinks as seeds agree: 5.6 steps for 2 seeds,
    0.6 for 5 (docs/claims.md, "Floors")."""
    if n < 2 or not resolution > 0:
        raise ValueError(f"equal_seeds_sd needs n >= 2 and a positive resolution, got n={n}, {resolution}")
    return float(brentq(lambda sd: p_all_equal(sd, resolution, n) - alpha, 1e-6 * resolution, 1e3 * resolution))
