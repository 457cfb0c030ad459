"""What an audit row reproduces, the checkpoint or the recipe, and the pretraining SD the recipe
question needs (issue 63, item 2; docs/analysis.md, "Audit: the checkpoint or the recipe").

- The checkpoint: the user fine-tuned the paper's released weights. Both means carry fine-tuning
  seed noise only (analysis.equivalence.compare_means as before).
- The recipe: the user pretrained the configuration again. The paper's value is ONE pretraining
  run of it and ours the mean of `runs` runs, so the difference also carries tau^2 / runs + tau^2
  (tau: the SD of a pretraining run's effect on the cell; MultiBERTs, Sellam et al., ICLR 2022,
  treat the pretraining seed as a source of variance beside the fine-tuning seed and the test set
  in the same way). The paper's own run never averages out: no number of runs of ours brings the
  difference's SD below sqrt(tau^2 + se_pub^2).

tau per cell: estimated from the user's replicates (`<configuration>-rep<k>`, 2 or more runs of a
configuration on that dataset, pooled over the configurations: the one-way random-effects
estimator of analysis.claims.pretraining_variance, applied per dataset and, for category
averages, to the task type's mean), else `--pretraining-sd` (a number, or KEY=VALUE per dataset,
task type or '<task type> average', taken as known), else the stated default assumption: tau
equal to the published cell's fine-tuning seed SD (no estimate of it exists for these models;
the claims report's planning value makes the same assumption).

Which question a configuration gets (`--reproduces auto`, the default): the recipe when it has 2
or more runs (replicates) or when its fine-tuning records say the model was exported by this
package's pretraining (`provenance.model_origin == "pretrained"`: pretraining.json beside the
weights); the checkpoint when the records are the paper's released runs or name a fetched
checkpoint, or say nothing (with that said in the row).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.equivalence import RunSpread
from analysis.intervals import Z_95, halfwidth_sd
from analysis.options import QUESTIONS
from contracts.model_names import split_replicate
from contracts.paper import AVERAGE

CHECKPOINT, RECIPE = "checkpoint", "recipe"
# provenance.model_origin of a fine-tuning record (benchmarks.run.model_origin)
ORIGIN_PRETRAINED, ORIGIN_FETCHED, ORIGIN_OTHER = "pretrained", "fetched", "other"
# Joins the pooled runs' chosen LRs (not "|": audit.md's tables would gain cells; issue 92)
RUN_SEPARATOR = " ‖ "
DEFAULT_PRIOR = (
    "assumed equal to the published cell's fine-tuning seed SD (no estimate exists; --pretraining-sd to set)"
)


@dataclass(frozen=True)
class Question:
    configuration: str
    question: str  # CHECKPOINT or RECIPE
    runs: int  # pretraining runs of ours (replicates)
    why: str


def record_origin(provenance: dict) -> str:
    """What a run record says about its model: 'released' (the paper's runs), or the
    model_origin benchmarks.run recorded ('pretrained', 'fetched', 'other'), or 'unknown'."""
    if provenance.get("source") == "released":
        return "released"
    origin = provenance.get("model_origin")
    return origin if origin in (ORIGIN_PRETRAINED, ORIGIN_FETCHED, ORIGIN_OTHER) else "unknown"


def add_origin(origins: dict[str, set[str]], record) -> None:
    """Note what a run record says about its model (record_origin) under its model name."""
    origins.setdefault(record.model, set()).add(record_origin(record.provenance or {}))


def decide_questions(
    models: Iterable[str], origins: dict[str, set[str]], requested: str = "auto"
) -> dict[str, Question]:
    """{configuration: Question} for the models of the audited cells."""
    if requested not in QUESTIONS:
        raise ValueError(f"--reproduces must be one of {', '.join(QUESTIONS)}, got {requested!r}")
    members: dict[str, set[str]] = {}
    for model in models:
        members.setdefault(split_replicate(model)[0], set()).add(model)
    out = {}
    for configuration, names in sorted(members.items()):
        runs = len(names)
        seen = set().union(*(origins.get(m, set()) for m in names))
        if requested != "auto":
            question, why = requested, f"--reproduces {requested}"
        elif runs > 1:
            question, why = RECIPE, f"{runs} pretraining runs (-rep<k> replicates)"
        elif ORIGIN_PRETRAINED in seen:
            question, why = RECIPE, "pretrained by this package (pretraining.json beside the weights)"
        elif "released" in seen:
            question, why = CHECKPOINT, "the paper's released runs"
        elif ORIGIN_FETCHED in seen:
            question, why = CHECKPOINT, "a fetched checkpoint (fetch_manifest.json)"
        else:
            question, why = (
                CHECKPOINT,
                "origin not recorded: taken as the released checkpoint (--reproduces recipe if you pretrained it)",
            )
        out[configuration] = Question(configuration, question, runs if question == RECIPE else 1, why)
    return out


def pool_replicates(ours: pd.DataFrame, questions: dict[str, Question]) -> pd.DataFrame:
    """`ours` with the runs of each recipe configuration pooled into one row per cell, named by the
    configuration: mean of the run means, the pooled per-run seed SD as `ci_halfwidth` (1.96 x SD /
    sqrt(n), n the fewest seeds of a run), `pretraining_runs` the runs behind it. Checkpoint
    configurations keep their own rows (replicates of them are not the published model)."""
    ours = ours.copy()
    ours["configuration"] = [split_replicate(m)[0] for m in ours["model"]]
    recipe = ours["configuration"].map(lambda c: c in questions and questions[c].question == RECIPE)
    kept = ours[~recipe].assign(pretraining_runs=1)
    rows = []
    for (configuration, _, _), group in ours[recipe].groupby(["configuration", "task_type", "dataset"], sort=True):
        n = int(group["n_seeds"].min())
        sds = halfwidth_sd(group["ci_halfwidth"].to_numpy(float), group["n_seeds"].to_numpy(float))
        pooled = math.sqrt(float(np.mean(sds**2))) if n > 1 else math.nan
        first = group.iloc[0].to_dict()
        first.update(
            model=configuration,
            mean=float(group["mean"].mean()),
            n_seeds=n,
            ci_halfwidth=Z_95 * pooled / math.sqrt(n) if n > 1 else math.nan,
            boot_low=math.nan,
            boot_high=math.nan,
            pretraining_runs=len(group),
        )
        if "selected_lrs" in group:
            first["selected_lrs"] = RUN_SEPARATOR.join(str(x) for x in group["selected_lrs"])
        if "bootstrap" in group:
            first["bootstrap"] = "none (runs pooled)"
        rows.append(first)
    pooled_rows = pd.DataFrame(rows, columns=kept.columns) if rows else kept.iloc[0:0]
    return pd.concat([kept, pooled_rows], ignore_index=True).drop(columns="configuration")


@dataclass(frozen=True)
class PretrainingNoise:
    sd: float
    df: float  # inf: assumed (known)
    source: str
    spread: RunSpread | None = None  # replicates: the between-run mean square the test uses (issue 81)
    # A spread measured on other configurations (a one-run configuration beside replicated ones,
    # issue 92): their names. The row's spread is then an assumption, whatever its df.
    borrowed_from: str = ""
    # --pool-pretraining-sd: the spread pooled over the replicated configurations (equal SDs assumed)
    pooled: bool = False

    @property
    def assumed(self) -> bool:
        """No replicate of this configuration measured it: the verdict rests on an assumed pretraining SD
        (--pretraining-sd, the default, or another configuration's spread)."""
        return self.spread is None or bool(self.borrowed_from)

    @property
    def marker(self) -> str:
        """How a verdict resting on it is marked ('' when measured on the configuration itself)."""
        if self.borrowed_from:
            return f"(assumed pretraining SD: from {self.borrowed_from})"
        return ASSUMED if self.assumed else ""


# A recipe verdict resting on a pretraining SD no replicate of the configuration measured is marked so.
ASSUMED = "(assumed pretraining SD)"


def pool_spreads(mean_squares, dfs, seed_parts):
    """The pooled (mean square, df, seed part) of several configurations' spreads along the last
    axis: df-weighted, as the one-way random-effects estimator pools (analysis.claims.pretraining_variance).
    Right only if the configurations share one pretraining SD (--pool-pretraining-sd; issue 92:
    with one configuration's SD 2-4x the others', false `differs` reached 9-23%). Arrays broadcast."""
    dfs = np.asarray(dfs, dtype=float)
    total = dfs.sum(axis=-1)
    mean_square = (dfs * np.asarray(mean_squares, dtype=float)).sum(axis=-1) / total
    seed_part = (dfs * np.asarray(seed_parts, dtype=float)).sum(axis=-1) / total
    return mean_square, total, seed_part


@dataclass(frozen=True)
class SpreadEstimate:
    """One replicated configuration's measured spread on one margin key (a dataset or a task type's mean)."""

    configuration: str
    runs: int
    mean_square: float  # MS of its run means (tau^2 + V), unclipped
    df: float  # runs - 1
    seed_part: float  # V
    sd: float  # the printed estimate sqrt(max(0, MS - V))
    low: float
    high: float

    def describe(self) -> str:
        return f"{self.sd:.2f} [{self.low:.2f}, {self.high:.2f}], df {self.df:g}"


def estimated_pretraining_sds(ours: pd.DataFrame, margin_key) -> dict[str, dict[str, SpreadEstimate]]:
    """{margin key: {configuration: SpreadEstimate}}: each replicated configuration's own spread, per
    dataset and, for the '<task type> average' keys, per task type's mean (issue 92: not pooled)."""
    rows = []
    for r in ours[ours["dataset"] != AVERAGE].itertuples():
        configuration, replicate = split_replicate(r.model)
        sd = float(halfwidth_sd(r.ci_halfwidth, r.n_seeds)) if r.n_seeds > 1 else math.nan
        base = (configuration, replicate, r.dataset, r.mean, sd, r.n_seeds)
        rows.append((margin_key(r.task_type, r.dataset), *base))
        rows.append((margin_key(r.task_type, AVERAGE), *base))
    cells = pd.DataFrame(rows, columns=["task_type", "configuration", "replicate", "dataset", "mean", "sd", "n_seeds"])
    if cells.empty or not (cells["replicate"] > 1).any():
        return {}
    # Imported here: the claims package loads statsmodels, which an audit without replicates never needs.
    from analysis.claims.pretraining_variance import estimate_pretraining_sd

    out: dict[str, dict[str, SpreadEstimate]] = {}
    for configuration, group in cells.groupby("configuration", sort=True):
        for key, e in estimate_pretraining_sd(group).items():
            out.setdefault(key, {})[configuration] = SpreadEstimate(
                configuration, e.runs, e.mean_square, float(e.df), e.seed_part, e.sd, e.low, e.high
            )
    return out


def _pooled(estimates: dict[str, SpreadEstimate]) -> tuple[RunSpread, float, float, float]:
    """The pooled spread of several configurations and its printed SD with 95% interval."""
    from scipy import stats

    values = list(estimates.values())
    ms, df, v = (
        float(x)
        for x in pool_spreads([e.mean_square for e in values], [e.df for e in values], [e.seed_part for e in values])
    )
    low = math.sqrt(max(0.0, df * ms / stats.chi2.ppf(0.975, df) - v))
    high = math.sqrt(max(0.0, df * ms / stats.chi2.ppf(0.025, df) - v))
    return RunSpread(ms, df, v), math.sqrt(max(0.0, ms - v)), low, high


def pretraining_noise_for(
    key: str,
    published_halfwidth: float,
    n_pub: int,
    estimates: dict[str, dict[str, SpreadEstimate]],
    priors: dict[str, dict],
    configuration: str = "",
    runs: int = 1,
    pool: bool = False,
) -> PretrainingNoise:
    """The tau of one cell of `configuration` (issue 92): its own replicates' spread (df runs - 1;
    pooled over the replicated configurations only with `pool`, --pool-pretraining-sd), else
    --pretraining-sd, else the spread of the replicated configurations measured on the same key
    (an assumption: one run measures no spread), else the default assumption."""
    measured = estimates.get(key, {})
    own = measured.get(configuration)
    if own is not None and not (pool and len(measured) > 1):
        basis = f"{own.runs} run(s) of ours estimate the pretraining SD with {own.df:g} df (this configuration's own)"
        return PretrainingNoise(
            own.sd,
            own.df,
            f"estimated from {own.runs} runs of this configuration ({own.describe()}; its own spread)",
            RunSpread(own.mean_square, own.df, own.seed_part, basis),
        )
    if own is not None:  # --pool-pretraining-sd
        spread, sd, low, high = _pooled(measured)
        others = "; ".join(f"{c} {e.describe()}" for c, e in sorted(measured.items()))
        source = (
            f"pooled over {len(measured)} configurations ({sd:.2f} [{low:.2f}, {high:.2f}], df {spread.df:g}; "
            f"--pool-pretraining-sd assumes equal pretraining SDs across them; each one's own: {others})"
        )
        basis = (
            f"{runs} run(s) of ours and those of {len(measured) - 1} other configuration(s) estimate the pretraining "
            f"SD with {spread.df:g} df, pooled (assumes equal pretraining SDs; this configuration's own: "
            f"{own.describe()})"
        )
        return PretrainingNoise(
            sd, spread.df, source, RunSpread(spread.mean_square, spread.df, spread.seed_part, basis), pooled=True
        )
    prior = priors.get(key, {})
    if math.isfinite(prior.get("margin", math.nan)):
        return PretrainingNoise(float(prior["margin"]), math.inf, prior["source"])
    if measured:  # borrowed: a spread not measured on this configuration is an assumption
        spread, sd, low, high = _pooled(measured)
        lenders = ", ".join(sorted(measured))
        source = (
            f"assumed: measured on {lenders} ({sd:.2f} [{low:.2f}, {high:.2f}], df {spread.df:g}); "
            f"{runs} run(s) of this configuration measure no spread of its own"
        )
        basis = (
            f"the pretraining SD is assumed from {lenders} ({spread.df:g} df there); {runs} run(s) of this "
            "configuration measure none"
        )
        return PretrainingNoise(
            sd, spread.df, source, RunSpread(spread.mean_square, spread.df, spread.seed_part, basis), lenders
        )
    seed_sd = float(halfwidth_sd(published_halfwidth, n_pub))
    return PretrainingNoise(seed_sd, math.inf, DEFAULT_PRIOR)
