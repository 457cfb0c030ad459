"""Aggregate metrics that rliable (Agarwal et al., NeurIPS 2021) made standard for few-seed
comparisons, with its stratified bootstrap (runs resampled within each task).

A "task" is one matched group of a claim (e.g. a model size and a dataset); its runs are the
per-seed scores of the treatment and of the control there.
- Interquartile mean (IQM): the mean of the middle 50% of all runs of all tasks
  (scipy.stats.trim_mean, 25% cut each side, as rliable). Scores are first centred on the
  control's mean of their task, so tasks with different score levels (QA F1 around 40, TC F1
  around 92) are comparable; the reported statistic is IQM(treatment) - IQM(control), in points.
- Probability of improvement: the mean over tasks of P(treatment run > control run), ties 1/2
  (the Mann-Whitney U statistic / (n m)); 0.5 = no difference.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from analysis.intervals import percentile_bounds


@dataclass(frozen=True)
class RliableSummary:
    iqm_difference: float
    iqm_low: float
    iqm_high: float
    probability_of_improvement: float
    poi_low: float
    poi_high: float


def _resample(runs: np.ndarray, reps: int, rng: np.random.Generator) -> np.ndarray:
    """(reps x n): runs drawn with replacement within one task (a stratum)."""
    return runs[rng.integers(0, len(runs), size=(reps, len(runs)))]


def _iqm_difference(treatment: list[np.ndarray], control: list[np.ndarray]) -> np.ndarray:
    """IQM of the last axis of the concatenated tasks: treatment minus control."""
    return stats.trim_mean(np.concatenate(treatment, axis=-1), 0.25, axis=-1) - stats.trim_mean(
        np.concatenate(control, axis=-1), 0.25, axis=-1
    )


def _probability_of_improvement(treatment: list[np.ndarray], control: list[np.ndarray]) -> np.ndarray:
    # (1 + sign(t - c)) / 2 is 1 for a win, 1/2 for a tie, 0 for a loss.
    per_task = [np.sign(t[..., :, None] - c[..., None, :]).mean(axis=(-2, -1)) for t, c in zip(treatment, control)]
    return (1.0 + np.mean(per_task, axis=0)) / 2.0


def rliable_summary(
    treatment: list[np.ndarray],
    control: list[np.ndarray],
    reps: int,
    rng: np.random.Generator,
    confidence: float = 0.95,
) -> RliableSummary:
    """IQM difference and probability of improvement over tasks, with stratified bootstrap CIs.

    treatment[k] / control[k]: the run scores of task k (at least one each).
    """
    centre = [float(np.mean(c)) for c in control]
    t_runs = [np.asarray(t, dtype=float) - m for t, m in zip(treatment, centre)]
    c_runs = [np.asarray(c, dtype=float) - m for c, m in zip(control, centre)]
    iqm = float(_iqm_difference(t_runs, c_runs))
    poi = float(_probability_of_improvement(t_runs, c_runs))
    if reps < 1:
        return RliableSummary(iqm, np.nan, np.nan, poi, np.nan, np.nan)
    t_draws = [_resample(t, reps, rng) for t in t_runs]
    c_draws = [_resample(c, reps, rng) for c in c_runs]
    bounds = percentile_bounds(
        np.column_stack([_iqm_difference(t_draws, c_draws), _probability_of_improvement(t_draws, c_draws)]), confidence
    )
    return RliableSummary(
        iqm, float(bounds.low[0]), float(bounds.high[0]), poi, float(bounds.low[1]), float(bounds.high[1])
    )
