"""The pretraining-run variance component per task type, from repeated pretraining runs.

The paper pretrained each configuration once, so the claims report can only ask how large a
pretraining SD its verdicts survive (docs/claims.md, "One pretraining run per configuration").
With replicates (`<configuration>-rep<k>`, contracts.model_names) the SD is estimated: a
pretraining run's effect shifts every dataset of a task type alike (the model of
analysis.claims.hypothesis_tests), so per task type and configuration c with R_c runs, the task-type mean y_r
of run r (mean over its datasets of the cell means) has variance tau^2 + v_r, where v_r =
sum_d s_d^2 / n_d / D^2 is its fine-tuning seed part. Method of moments (ANOVA estimator of a
one-way random-effects layout, e.g. Searle, Casella & McCulloch 1992, ch. 3):
    MS = sum_c sum_r (y_cr - ybar_c)^2 / df,  df = sum_c (R_c - 1),
    V  = sum_c (R_c - 1) mean_r(v_cr) / df,
    tau^2 = max(0, MS - V),
(the SD printed; a test that needs the variance of a mean of runs uses MS itself, unclipped, with its
df: analysis.equivalence.replicate_se_df), with the 95% interval of tau^2 + V from
MS ~ (tau^2 + V) chi^2_df / df, V subtracted (its seeds
give it far more df than the runs give MS; ends clipped at 0). Pure numpy/scipy: no Composer,
no statsmodels fit needed for a balanced one-way layout.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from contracts.paper import TASK_TYPES


@dataclass(frozen=True)
class PretrainingSD:
    """The estimated SD of a pretraining run's effect on one task type's mean, with its interval."""

    task_type: str
    sd: float
    low: float
    high: float
    df: int  # between-run degrees of freedom, sum over configurations of (runs - 1)
    configurations: int
    runs: int
    seed_part: float  # V: the mean seed variance of a run's task-type mean
    one_seed: bool = False  # some cell has 1 fine-tuning seed: V unknown (taken as 0), sd an upper bound
    mean_square: float = math.nan  # MS: the between-run mean square of the run means (tau^2 + V), unclipped

    def describe(self) -> str:
        caveat = "; 1 fine-tuning seed per cell: includes the fine-tuning noise, an upper bound"
        caveat = caveat if self.one_seed else ""
        return (
            f"{self.task_type}: {self.sd:.2f} [{self.low:.2f}, {self.high:.2f}] "
            f"({self.runs} runs of {self.configurations} configuration(s), df {self.df}{caveat})"
        )


def run_means(cells: pd.DataFrame) -> pd.DataFrame:
    """Per (task type, configuration, replicate): the mean over datasets of the cell means and its
    seed variance, for configurations with 2 or more runs that share the same datasets."""
    needed = {"configuration", "replicate", "task_type", "dataset", "mean", "sd", "n_seeds"}
    missing = needed - set(cells.columns)
    if missing:
        raise ValueError(f"cells lack the columns {sorted(missing)} (analysis.claims.describe_cells)")
    rows = []
    for (task_type, configuration), group in cells.groupby(["task_type", "configuration"], sort=True):
        runs = group.groupby("replicate")
        datasets = {k: frozenset(g["dataset"]) for k, g in runs}
        if len(datasets) < 2 or len(set(datasets.values())) != 1:
            continue  # one run, or runs on different datasets: not comparable
        for k, g in runs:
            d = len(g)
            rows.append(
                {
                    "task_type": task_type,
                    "configuration": configuration,
                    "replicate": int(k),
                    "mean": float(g["mean"].mean()),
                    "seed_variance": float((g["sd"].fillna(0.0) ** 2 / g["n_seeds"]).sum() / d**2),
                    "one_seed": bool((g["n_seeds"] < 2).any()),
                }
            )
    return pd.DataFrame(rows, columns=["task_type", "configuration", "replicate", "mean", "seed_variance", "one_seed"])


def estimate_pretraining_sd(cells: pd.DataFrame, confidence: float = 0.95) -> dict[str, PretrainingSD]:
    """{task type: PretrainingSD} for every task type with replicated configurations ({} when none)."""
    means = run_means(cells)
    out = {}
    for task_type, group in means.groupby("task_type", sort=True):
        squares, seed, df, configurations = 0.0, 0.0, 0, 0
        for _, runs in group.groupby("configuration"):
            y = runs["mean"].to_numpy(float)
            squares += float(((y - y.mean()) ** 2).sum())
            seed += (len(y) - 1) * float(runs["seed_variance"].mean())
            df += len(y) - 1
            configurations += 1
        ms, v = squares / df, seed / df
        alpha = 1 - confidence
        low = max(0.0, df * ms / stats.chi2.ppf(1 - alpha / 2, df) - v)
        high = max(0.0, df * ms / stats.chi2.ppf(alpha / 2, df) - v)
        out[str(task_type)] = PretrainingSD(
            str(task_type),
            math.sqrt(max(0.0, ms - v)),
            math.sqrt(low),
            math.sqrt(high),
            df,
            configurations,
            len(group),
            v,
            bool(group["one_seed"].any()),
            ms,
        )
    return out


class PretrainingProfile(dict):
    """{task type: SD} with `dfs`, {task type: degrees of freedom} of each SD: the estimate's
    between-run df where replicates estimated it, infinite where it is assumed (--pretraining-sd).
    A contrast's Welch-Satterthwaite df then counts the estimated SD's own uncertainty (issue 52:
    with it taken as known, intervals it dominates covered 86-90%)."""

    def __init__(self, sds: dict[str, float], dfs: dict[str, float]):
        super().__init__(sds)
        self.dfs = dict(dfs)


def pretraining_sd_profile(estimates: dict[str, PretrainingSD], fallback: float) -> PretrainingProfile:
    """The SD used per task type: the estimate where replicates give one (with its df), else
    `fallback` (--pretraining-sd, taken as known)."""
    return PretrainingProfile(
        {t: (estimates[t].sd if t in estimates else float(fallback)) for t in TASK_TYPES},
        {t: (float(estimates[t].df) if t in estimates else math.inf) for t in TASK_TYPES},
    )


def simulate_run_means(rng: np.random.Generator, tau: float, seed_sd: float, configurations: int, runs: int):
    """Cells of `configurations` x `runs` pretraining runs on 3 datasets of one task type (5 seeds
    each), run effects N(0, tau^2) shared by the datasets: for the tests and the docs' check."""
    rows = []
    for c in range(configurations):
        base = rng.normal(80, 5, size=3)
        for k in range(1, runs + 1):
            effect = rng.normal(0, tau)
            for d in range(3):
                scores = base[d] + effect + rng.normal(0, seed_sd, size=5)
                rows.append((f"cfg{c}", k, "SC", f"d{d}", scores.mean(), scores.std(ddof=1), 5))
    return pd.DataFrame(rows, columns=["configuration", "replicate", "task_type", "dataset", "mean", "sd", "n_seeds"])
