"""The data-efficiency arc on replicated runs: CLM ahead early, MLM ahead late (docs/reproduce.md,
"Toy data efficiency").

The paper's Figure 4 reading (Sec. 3): CLM leads MLM-40 at the early checkpoints and MLM catches up
and passes it later, on the token-level tasks first. With R >= 2 pretraining runs per
(objective, checkpoint) configuration of one size, each comparison is read on the means of the
runs, with a t interval whose variance is the run-to-run variance of a run's score, pooled over
every configuration of that size and scope:

    y_cr  = the run's mean over the scope's datasets (12 datasets, or the 3 of a task type),
    s^2   = sum_c sum_r (y_cr - ybar_c)^2 / df,   df = sum_c (R_c - 1),
    d     = ybar_A - ybar_B,   SE = s sqrt(1/R_A + 1/R_B),   interval d -/+ t_{df, 0.975} SE.

A run's score carries both its pretraining run's effect and its fine-tuning noise, so s^2 holds the
pretraining SD (and the fine-tuning seed SD): the interval is that of a new pair of runs' means,
not of the fine-tuning seeds alone. Assumes one variance for every configuration of a size (checked
in tests/analysis/test_arc.py: coverage at the boundary d = 0, power at d = 3 s). Pure pandas/scipy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from contracts.model_names import objective_token, parse_model_name, split_replicate
from contracts.paper import TASK_TYPES

ALL_TASKS = "12-task"  # the scope of the mean over every dataset

# The arc's three readings: (name, scope, ahead, behind, which checkpoint)
ARC_READINGS = (
    ("clm_ahead_early", ALL_TASKS, "clm", "mlm40", "earliest"),
    ("mlm_ahead_late_tc", "TC", "mlm40", "clm", "last"),
    ("mlm_ahead_late_qa", "QA", "mlm40", "clm", "last"),
)


@dataclass(frozen=True)
class ArcReading:
    name: str
    size: str
    scope: str
    step: int
    ahead: str  # the objective the reading says is ahead
    behind: str
    difference: float  # mean of `ahead`'s runs - mean of `behind`'s, in points
    low: float
    high: float
    runs: int  # runs per objective at this checkpoint (the smaller)
    df: int
    run_sd: float  # pooled run-to-run SD of a run's score in this scope

    @property
    def verdict(self) -> str:
        if not math.isfinite(self.low):
            return "ahead on the means (no interval: one run)" if self.difference > 0 else "not ahead"
        if self.low > 0:
            return "ahead (interval above 0)"
        if self.difference > 0:
            return "ahead on the means; interval includes 0"
        return "not ahead"

    def line(self, label: str = "") -> str:
        interval = f"[{self.low:+.1f}, {self.high:+.1f}]" if math.isfinite(self.low) else "[no interval]"
        return (
            f"{label}{self.size} step {self.step}, {self.scope}: {self.ahead} - {self.behind} "
            f"{self.difference:+.1f} points, 95% {interval} (means of {self.runs} runs each; run SD "
            f"{self.run_sd:.1f}, df {self.df}): {self.verdict}"
        )


def run_scores(cells: pd.DataFrame) -> pd.DataFrame:
    """One row per (size, objective, step, replicate, scope): the run's mean over the scope's datasets.
    Reads the cells' `model`, `task_type`, `dataset` and `mean` columns; models whose names do not
    parse as single-objective checkpoints (random init) are left out."""
    rows = []
    for model, group in cells.groupby("model", sort=True):
        base, replicate = split_replicate(str(model))
        desc = parse_model_name(base)
        if desc is None or desc.objective not in ("mlm", "clm") or desc.cpt_steps:
            continue
        objective = "clm" if desc.objective == "clm" else objective_token(desc.masking_ratio)
        key = {"size": desc.size, "objective": objective, "step": desc.checkpoint_step, "replicate": replicate}
        rows.append({**key, "scope": ALL_TASKS, "score": float(group["mean"].mean()), "datasets": len(group)})
        for task_type, of_type in group.groupby("task_type"):
            rows.append(
                {**key, "scope": str(task_type), "score": float(of_type["mean"].mean()), "datasets": len(of_type)}
            )
    return pd.DataFrame(rows, columns=["size", "objective", "step", "replicate", "scope", "score", "datasets"])


def pooled_run_sd(scores: pd.DataFrame) -> tuple[float, int]:
    """(s, df) of the runs' scores around their configuration's mean (one size and scope)."""
    squares, df = 0.0, 0
    for _, runs in scores.groupby(["objective", "step"]):
        y = runs["score"].to_numpy(float)
        squares += float(((y - y.mean()) ** 2).sum())
        df += len(y) - 1
    return (math.sqrt(squares / df), df) if df else (math.nan, 0)


def compare(scores: pd.DataFrame, name: str, size: str, scope: str, step: int, ahead: str, behind: str) -> ArcReading:
    """`ahead` - `behind` at `step` in `scope` for `size`, with the pooled-t interval."""
    mine = scores[(scores["size"] == size) & (scores["scope"] == scope)]
    s, df = pooled_run_sd(mine)
    a = mine[(mine["objective"] == ahead) & (mine["step"] == step)]["score"].to_numpy(float)
    b = mine[(mine["objective"] == behind) & (mine["step"] == step)]["score"].to_numpy(float)
    if not len(a) or not len(b):
        raise ValueError(f"{size} step {step} {scope}: no runs of {ahead if not len(a) else behind}")
    d = float(a.mean() - b.mean())
    if df and math.isfinite(s):
        half = float(stats.t.ppf(0.975, df)) * s * math.sqrt(1 / len(a) + 1 / len(b))
        low, high = d - half, d + half
    else:
        low = high = math.nan
    return ArcReading(name, size, scope, int(step), ahead, behind, d, low, high, min(len(a), len(b)), df, s)


def arc_readings(cells: pd.DataFrame) -> list[ArcReading]:
    """The arc's readings per size: CLM - MLM-40 (12-task mean) at the earliest checkpoint both
    objectives have, MLM-40 - CLM (TC, QA) at the last (the decayed final model)."""
    scores = run_scores(cells)
    out = []
    for size, of_size in scores.groupby("size", sort=True):
        steps = sorted(
            set(of_size[of_size["objective"] == "clm"]["step"]) & set(of_size[of_size["objective"] == "mlm40"]["step"])
        )
        if len(steps) < 2:
            continue
        chosen = {"earliest": steps[0], "last": steps[-1]}
        for name, scope, ahead, behind, which in ARC_READINGS:
            out.append(compare(scores, name, str(size), scope, chosen[which], ahead, behind))
    return out


def arc_frame(readings: list[ArcReading]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "reading": r.name,
                "size": r.size,
                "scope": r.scope,
                "step": r.step,
                "ahead": r.ahead,
                "behind": r.behind,
                "difference": r.difference,
                "low": r.low,
                "high": r.high,
                "runs": r.runs,
                "df": r.df,
                "run_sd": r.run_sd,
                "verdict": r.verdict,
            }
            for r in readings
        ]
    )


def simulate_cells(
    rng: np.random.Generator, difference: float, run_sd: float, runs: int = 2, steps=(1, 2, 3, 4, 5)
) -> pd.DataFrame:
    """Cells of one toy size: MLM-40 and CLM at `steps`, `runs` runs each, 12 datasets (3 per task
    type); every run's effect N(0, run_sd^2) shared by its datasets; CLM ahead of MLM-40 by
    `difference` on every dataset at every step. For the tests of the readings."""
    rows = []
    for objective in ("mlm40", "clm"):
        for step in steps:
            for k in range(1, runs + 1):
                effect = rng.normal(0.0, run_sd)
                name = f"toy_s-{objective}-1k-{step}" + (f"-rep{k}" if k > 1 else "")
                for i in range(12):
                    base = 50.0 + (difference if objective == "clm" else 0.0)
                    rows.append(
                        {"model": name, "task_type": TASK_TYPES[i // 3], "dataset": f"d{i}", "mean": base + effect}
                    )
    return pd.DataFrame(rows)


def simulate_scores(
    rng: np.random.Generator, difference: float, run_sd: float, runs: int = 2, steps=(1, 2, 3, 4, 5)
) -> pd.DataFrame:
    """`run_scores` of `simulate_cells` drawn directly (one scope, 12-task): thousands of draws a
    second, for the interval's coverage and power checks."""
    n = 2 * len(steps) * runs
    objective = np.repeat(["mlm40", "clm"], len(steps) * runs)
    step = np.tile(np.repeat(list(steps), runs), 2)
    score = 50.0 + np.where(objective == "clm", difference, 0.0) + rng.normal(0.0, run_sd, n)
    return pd.DataFrame(
        {
            "size": "toy_s",
            "objective": objective,
            "step": step,
            "replicate": np.tile(np.arange(1, runs + 1), 2 * len(steps)),
            "scope": ALL_TASKS,
            "score": score,
            "datasets": 12,
        }
    )


def replicate_mean_cells(cells: pd.DataFrame) -> pd.DataFrame:
    """Cells of the configurations: each `<model>-rep<k>` folded into `<model>`, `mean` the mean over
    the runs, `ci_halfwidth` half the range of the runs' values (NaN for one run): the spread that
    the toy Figure 4 draws as bars (its caption says so; not a confidence interval), `runs` how many."""
    frame = cells[["model", "task_type", "dataset", "mean"]].copy()
    frame["model"] = frame["model"].map(lambda m: split_replicate(str(m))[0])
    grouped = frame.groupby(["model", "task_type", "dataset"], sort=False)["mean"]
    out = grouped.agg(["mean", "min", "max", "count"]).reset_index()
    out["ci_halfwidth"] = ((out["max"] - out["min"]) / 2).where(out["count"] > 1)
    return out.drop(columns=["min", "max"]).rename(columns={"count": "runs"})
