"""The statsmodels fits behind the claims (docs/claims.md, "Models").

- `contrast_fit`: OLS with one mean per cell (`score ~ 0 + C(cell)`) on per-seed scores, HC2
  covariance (per cell exactly sd(ddof=1)^2 / n, the variance behind the paper's interval), and
  the claim as a linear contrast of the cell means (`t_test`; t with Welch-Satterthwaite df).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats
from statsmodels.regression.linear_model import OLS


@dataclass(frozen=True)
class Fit:
    estimate: float
    ci_low: float
    ci_high: float
    p_value: float  # two-sided for directional claims; the TOST p-value for equivalence claims
    df: float
    model: str  # what was fitted, in words, for the report


def contrast_fit(scores: np.ndarray, cells: np.ndarray, weights: np.ndarray, confidence: float = 0.95) -> Fit:
    """sum_k weights[k] * mean of cell k, from per-seed `scores` labelled by cell index 0..K-1.

    The t distribution uses the Welch-Satterthwaite degrees of freedom of the contrast: cells
    differ in variance (the paper's half-widths range over 40x), so the residual df would
    overstate how well a contrast dominated by a few cells knows its variance. Every cell needs
    at least 2 seeds (HC2 divides by 1 - 1/n).
    """
    scores, weights = np.asarray(scores, dtype=float), np.asarray(weights, dtype=float)
    n_cells = len(weights)
    design = np.zeros((len(scores), n_cells))
    design[np.arange(len(scores)), cells] = 1.0
    result = OLS(scores, design).fit(cov_type="HC2")
    test = result.t_test(weights[None, :])
    estimate, se = float(np.squeeze(test.effect)), float(np.squeeze(test.sd))
    n = np.bincount(cells, minlength=n_cells)
    # Per cell: weight^2 * s^2 / n, its share of the contrast's variance (s^2 with ddof=1).
    parts = weights**2 * np.bincount(cells, weights=result.resid**2, minlength=n_cells) / (n - 1) / n
    df = float(parts.sum() ** 2 / np.sum(parts**2 / (n - 1))) if parts.sum() > 0 else float(len(scores) - n_cells)
    model = (
        f"OLS score ~ 0 + C(cell), HC2 covariance, linear contrast of {n_cells} cell means "
        f"(t, Welch-Satterthwaite df {df:.0f})"
    )
    if se == 0.0:  # every cell constant over its seeds: the contrast is known exactly
        return Fit(estimate, estimate, estimate, 1.0 if estimate == 0 else 0.0, df, model)
    quantile = stats.t.ppf(0.5 + confidence / 2, df)
    p_value = float(2 * stats.t.sf(abs(estimate / se), df))
    return Fit(estimate, estimate - quantile * se, estimate + quantile * se, p_value, df, model)


def pseudo_seeds(mean: float, sd: float, n: int = 5) -> np.ndarray:
    """n values with exactly this mean and sd(ddof=1): the sufficient statistics of a printed cell.

    `contrast_fit` depends on a cell's seeds only through their mean and sd, so fitting these
    gives exactly what the unseen seeds would give (published numbers: docs/claims.md).
    """
    z = np.arange(n, dtype=float) - (n - 1) / 2
    z /= z.std(ddof=1)
    return mean + (0.0 if math.isnan(sd) else sd) * z
