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
            first["selected_lrs"] = " | ".join(str(x) for x in group["selected_lrs"])
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

    @property
    def assumed(self) -> bool:
        """No replicate measured it: the verdict rests on an assumed pretraining SD."""
        return self.spread is None


def estimated_pretraining_sds(ours: pd.DataFrame, margin_key) -> dict[str, PretrainingNoise]:
    """{margin key: PretrainingNoise} estimated from replicated configurations: per dataset, and per
    task type's mean for the '<task type> average' keys."""
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

    out = {}
    for key, estimate in estimate_pretraining_sd(cells).items():
        out[key] = PretrainingNoise(
            estimate.sd,
            float(estimate.df),
            f"estimated from {estimate.runs} runs of {estimate.configurations} configuration(s) "
            f"({estimate.sd:.2f} [{estimate.low:.2f}, {estimate.high:.2f}], df {estimate.df})",
            RunSpread(estimate.mean_square, float(estimate.df), estimate.seed_part),
        )
    return out


def pretraining_noise_for(
    key: str, published_halfwidth: float, n_pub: int, estimates: dict[str, PretrainingNoise], priors: dict[str, dict]
) -> PretrainingNoise:
    """The tau of one cell: the replicates' estimate, else --pretraining-sd, else the default."""
    if key in estimates:
        return estimates[key]
    prior = priors.get(key, {})
    if math.isfinite(prior.get("margin", math.nan)):
        return PretrainingNoise(float(prior["margin"]), math.inf, prior["source"])
    seed_sd = float(halfwidth_sd(published_halfwidth, n_pub))
    return PretrainingNoise(seed_sd, math.inf, DEFAULT_PRIOR)
