"""Figures 5 and 7: they need the raw run records (every LR and seed), not the printed tables.

Pure functions turn RunRecord lists into tidy tables; `figure_5` / `figure_7` draw them.
- Figure 5 (LR sensitivity): per (model, dataset), runs with an LR inside [1e-5, 1e-4] (inclusive)
  over all seeds; each score is centred on the mean of those runs; the spread is the standard
  deviation of those runs (centring does not change it). MLM-40 vs CLM 42k models.
- Figure 7 (masking-ratio variability): per model, each seed's test score at the LR with the best
  validation score (docs/analysis.md), category average = mean over the 3 datasets per seed, then the
  mean over seeds; the variability of a family (MLM-only vs 40k CLM + 2k MLM) is the standard
  deviation of its category averages across the masking ratios (also the max-min range).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from analysis.aggregate import select_best_lr_per_seed
from contracts.model_names import (
    biphasic_name,
    objective_token,
    parse_model_name,
    single_objective_name,
    strip_hub_prefix,
)
from contracts.paper import CLM_STEPS_BEFORE_MASKING, MASKING_RATIOS, PRETRAIN_STEPS, TASK_TYPES, datasets_of
from contracts.run_record import RunRecord
from paper_figures.errors import NeedsRunRecords
from paper_figures.plotting import SIZE_LABELS, add_caption, color, line_panel, note_missing, task_panels

LR_RANGE = (1e-5, 1e-4)
_LR_TOL = 1e-12


def records_frame(records: Iterable[RunRecord], score: str = "test_score") -> pd.DataFrame:
    """One row per run: model (hub prefix stripped), its description, task, dataset, lr, seed, scores."""
    rows = []
    for r in records:
        model = strip_hub_prefix(r.model)
        desc = r.pretraining or parse_model_name(model)
        rows.append(
            {
                "model": model,
                "size": desc.size if desc else None,
                "objective": desc.objective if desc else None,
                "masking_ratio": desc.masking_ratio if desc else None,
                "clm_steps": desc.clm_steps if desc else None,
                "mlm_steps": desc.mlm_steps if desc else None,
                "checkpoint_step": desc.checkpoint_step if desc else None,
                "schedule_steps": desc.schedule_steps if desc else None,
                "task_type": r.task_type,
                "dataset": r.dataset,
                "lr": float(r.lr),
                "seed": int(r.seed),
                "validation_score": float(r.validation_score),
                "test_score": float(r.test_score),
                "score": float(getattr(r, score)),
            }
        )
    columns = [
        "model",
        "size",
        "objective",
        "masking_ratio",
        "clm_steps",
        "mlm_steps",
        "checkpoint_step",
        "schedule_steps",
        "task_type",
        "dataset",
        "lr",
        "seed",
        "validation_score",
        "test_score",
        "score",
    ]
    return pd.DataFrame(rows, columns=columns)


def _is_final_42k(frame: pd.DataFrame) -> pd.Series:
    return (frame["checkpoint_step"] == PRETRAIN_STEPS) & (frame["schedule_steps"] == PRETRAIN_STEPS)


def _mlm40_or_clm(frame: pd.DataFrame) -> pd.Series:
    mlm40 = (frame["objective"] == "mlm") & np.isclose(frame["masking_ratio"].astype(float), 0.4)
    return _is_final_42k(frame) & (mlm40 | (frame["objective"] == "clm"))


def _series_of(objective: str) -> str:
    return "CLM" if objective == "clm" else "MLM-40"


# --- Figure 5 -------------------------------------------------------------------------------------
def centred_scores(
    records: Iterable[RunRecord], lr_range=LR_RANGE, models: list[str] | None = None, score: str = "test_score"
) -> pd.DataFrame:
    """Runs with lr in lr_range (inclusive), each with `centred` = score - mean of its (model, dataset).

    models: which checkpoints; default the 42k MLM-40 and CLM models of every size present.
    """
    frame = records_frame(records, score)
    keep = frame["model"].isin(models) if models is not None else _mlm40_or_clm(frame)
    low, high = lr_range
    frame = frame[keep & (frame["lr"] >= low * (1 - 1e-9)) & (frame["lr"] <= high * (1 + 1e-9))].copy()
    frame["range_mean"] = frame.groupby(["model", "task_type", "dataset"])["score"].transform("mean")
    frame["centred"] = frame["score"] - frame["range_mean"]
    return frame.reset_index(drop=True)


def lr_sensitivity(
    records: Iterable[RunRecord],
    lr_range=LR_RANGE,
    models: list[str] | None = None,
    score: str = "test_score",
    ddof: int = 1,
) -> pd.DataFrame:
    """Per (model, task, dataset): mean and std (ddof) of the runs with lr in lr_range, over LRs and seeds."""
    runs = centred_scores(records, lr_range, models, score)
    keys = ["model", "size", "objective", "task_type", "dataset"]
    if runs.empty:
        return pd.DataFrame(columns=[*keys, "n_runs", "n_lrs", "n_seeds", "range_mean", "std", "note"])
    summary = (
        runs.groupby(keys, dropna=False)
        .agg(
            n_runs=("score", "size"),
            n_lrs=("lr", "nunique"),
            n_seeds=("seed", "nunique"),
            range_mean=("score", "mean"),
            std=("centred", lambda s: s.std(ddof=ddof)),
            mean_abs_centred=("centred", lambda s: s.abs().mean()),
        )
        .reset_index()
    )
    summary["note"] = ""
    summary.loc[summary["n_runs"] <= ddof, "note"] = "too few runs for a standard deviation"
    return summary


def figure_5(
    records: Iterable[RunRecord],
    lr_range=LR_RANGE,
    models: list[str] | None = None,
    score: str = "test_score",
    ddof: int = 1,
) -> tuple[Figure, pd.DataFrame]:
    """LR sensitivity: per dataset, the spread of centred scores over seeds and LRs in lr_range."""
    if isinstance(records, pd.DataFrame):
        raise NeedsRunRecords(
            "Figure 5 needs raw run records (every LR and seed), not a cells table: use --source runs --runs RUNS.jsonl"
        )
    records = list(records)
    runs = centred_scores(records, lr_range, models, score)
    summary = lr_sensitivity(records, lr_range, models, score, ddof)
    present = set(summary["size"].dropna())
    sizes = [s for s in SIZE_LABELS if s in present] + sorted(present - set(SIZE_LABELS))
    rows = []
    for task in TASK_TYPES:
        for size in sizes or [None]:
            for series, objective in (("MLM-40", "mlm"), ("CLM", "clm")):
                for d in datasets_of(task):
                    hit = summary[
                        (summary["task_type"] == task)
                        & (summary["dataset"] == d.id)
                        & (summary["objective"] == objective)
                        & (summary["size"] == size)
                    ]
                    base = {
                        "figure": "5",
                        "panel": task,
                        "series": f"{series} {SIZE_LABELS.get(size, size)}",
                        "x": d.display,
                        "x_label": d.display,
                        "task_type": task,
                        "dataset": d.id,
                        "size": size,
                        "objective": objective,
                        "lr_low": lr_range[0],
                        "lr_high": lr_range[1],
                        "score": score,
                        "ddof": ddof,
                    }
                    if hit.empty:
                        rows.append(
                            {
                                **base,
                                "model": None,
                                "n_runs": 0,
                                "n_lrs": 0,
                                "n_seeds": 0,
                                "range_mean": math.nan,
                                "std": math.nan,
                                "note": f"missing: no {series} {size or ''} runs with lr in the range",
                            }
                        )
                    else:
                        rows.append(
                            {
                                **base,
                                **hit.iloc[0][
                                    ["model", "n_runs", "n_lrs", "n_seeds", "range_mean", "std", "note"]
                                ].to_dict(),
                            }
                        )
    points = pd.DataFrame(rows)
    fig = Figure(figsize=(12, 8), layout="constrained")
    panels = task_panels(fig)
    for task, ax in panels.items():
        datasets = datasets_of(task)
        groups = [(size, objective) for size in sizes for objective in ("mlm", "clm")]
        width = 0.8 / max(len(groups), 1)
        missing = []
        for gi, (size, objective) in enumerate(groups):
            label = f"{_series_of(objective)} {SIZE_LABELS.get(size, size)}"
            c = color(_series_of(objective), gi)
            alpha = 0.45 + 0.55 * (sizes.index(size) + 1) / len(sizes)
            for j, d in enumerate(datasets):
                x = j - 0.4 + width * (gi + 0.5)
                mine = runs[(runs["dataset"] == d.id) & (runs["objective"] == objective) & (runs["size"] == size)]
                std = points[(points["panel"] == task) & (points["series"] == label) & (points["dataset"] == d.id)][
                    "std"
                ].iloc[0]
                if mine.empty or not np.isfinite(std):
                    missing.append(f"{label} @ {d.display}")
                    continue
                jitter = (np.arange(len(mine)) % 7 - 3) * width * 0.08
                ax.scatter(x + jitter, mine["centred"], s=6, color=c, alpha=0.35 * alpha)
                ax.errorbar(
                    x,
                    0,
                    yerr=std,
                    fmt="_",
                    color=c,
                    alpha=alpha,
                    capsize=4,
                    lw=2.5,
                    label=label if label not in ax.get_legend_handles_labels()[1] else None,
                )
        ax.axhline(0, color="0.5", lw=0.8)
        ax.set_xticks(range(len(datasets)), [d.display for d in datasets])
        ax.set_xlim(-0.5, len(datasets) - 0.5)
        ax.set_ylabel("score - mean over LRs in range (points)")
        note_missing(ax, missing)
    labels = {}
    for ax in panels.values():
        for h, label in zip(*ax.get_legend_handles_labels()):
            labels.setdefault(label, h)
    fig.legend(list(labels.values()), list(labels.keys()), loc="outside right upper", fontsize=9, frameon=False)
    fig.suptitle(f"Figure 5: fine-tuning LR sensitivity (LR in [{lr_range[0]:g}, {lr_range[1]:g}])", fontsize=12)
    caption = (
        f"Dots: {score.replace('_', ' ')}s of every run with LR in [{lr_range[0]:g}, {lr_range[1]:g}] "
        f"and every seed, centred on their mean per model and dataset; bars: +-1 standard deviation "
        f"(ddof={ddof}) over those LRs and seeds. 42k MLM-40 vs CLM models."
    )
    add_caption(fig, caption)
    points.attrs["caption"] = caption
    return fig, points


# --- Figure 7 -------------------------------------------------------------------------------------
def masking_family_models(size: str = "610m", ratios=MASKING_RATIOS) -> dict[str, dict[float, str]]:
    """Family -> masking ratio -> checkpoint name (paper Section 3)."""
    after_clm = CLM_STEPS_BEFORE_MASKING
    return {
        "MLM": {r: single_objective_name(size, objective_token(r)) for r in ratios},
        "CLM+MLM": {r: biphasic_name(size, after_clm, PRETRAIN_STEPS, objective_token(r)) for r in ratios},
    }


def category_averages(records: Iterable[RunRecord], models: Iterable[str]) -> pd.DataFrame:
    """Per (model, task): mean over seeds of the per-seed category average (best-validation LR per seed).

    A seed counts only when it has all three datasets of the category; n_seeds says how many did.
    """
    wanted_models = set(models)
    best = select_best_lr_per_seed(r for r in records if r.model in wanted_models)
    rows = []
    for (model, task), group in best.groupby(["model", "task_type"]):
        wanted = {d.id for d in datasets_of(task)}
        per_seed = group[group["dataset"].isin(wanted)].pivot_table(
            index="seed", columns="dataset", values="test_score", aggfunc="first"
        )
        complete = per_seed.dropna() if set(per_seed.columns) == wanted else per_seed.iloc[0:0]
        averages = complete.mean(axis=1)
        rows.append(
            {
                "model": model,
                "task_type": task,
                "n_seeds": len(averages),
                "category_average": averages.mean() if len(averages) else math.nan,
                "seed_sd": averages.std(ddof=1) if len(averages) > 1 else math.nan,
            }
        )
    return pd.DataFrame(rows, columns=["model", "task_type", "n_seeds", "category_average", "seed_sd"])


def masking_ratio_variability(
    records: Iterable[RunRecord], size: str = "610m", ratios=MASKING_RATIOS, ddof: int = 1
) -> pd.DataFrame:
    """Rows per (family, task, ratio): category average, plus the family's spread across ratios."""
    families = masking_family_models(size, ratios)
    averages = category_averages(records, [m for fam in families.values() for m in fam.values()])
    index = {(row.model, row.task_type): row for row in averages.itertuples(index=False)}
    rows = []
    for task in TASK_TYPES:
        for family, models in families.items():
            family_rows = []
            for ratio, model in models.items():
                row = index.get((model, task))
                value = row.category_average if row is not None else math.nan
                family_rows.append(
                    {
                        "figure": "7",
                        "panel": task,
                        "series": family,
                        "x": round(ratio * 100),
                        "x_label": f"{round(ratio * 100)}%",
                        "model": model,
                        "task_type": task,
                        "dataset": "average",
                        "masking_ratio": ratio,
                        "mean": value,
                        "ci_halfwidth": math.nan,
                        "n_seeds": row.n_seeds if row is not None else 0,
                        "seed_sd": row.seed_sd if row is not None else math.nan,
                        "note": ""
                        if np.isfinite(value)
                        else f"missing: no complete seed (all 3 {task} datasets) for {model} in the run records",
                    }
                )
            values = np.array([r["mean"] for r in family_rows], dtype=float)
            known = values[np.isfinite(values)]
            spread = known.std(ddof=ddof) if len(known) > ddof else math.nan
            value_range = known.max() - known.min() if len(known) else math.nan
            for r in family_rows:
                r.update(spread_std=spread, spread_range=value_range, n_ratios=len(known), ddof=ddof)
                if 0 < len(known) < len(values):
                    r["note"] = "; ".join(
                        n for n in (r["note"], f"spread over {len(known)} of {len(values)} ratios only") if n
                    )
            rows += family_rows
    return pd.DataFrame(rows)


def figure_7(
    records: Iterable[RunRecord], size: str = "610m", ratios=MASKING_RATIOS, ddof: int = 1
) -> tuple[Figure, pd.DataFrame]:
    """Category average vs masking ratio for MLM-only and CLM(40k)+MLM(2k) models, with the spread."""
    if isinstance(records, pd.DataFrame):
        raise NeedsRunRecords(
            "Figure 7 needs raw run records (the 40k CLM + 2k MLM models are not in "
            "the published tables): use --source runs --runs RUNS.jsonl"
        )
    points = masking_ratio_variability(list(records), size, ratios, ddof)
    fig = Figure(figsize=(11, 7.5), layout="constrained")
    panels = task_panels(fig)
    for task, ax in panels.items():
        mine = points[points["panel"] == task].copy()
        for family in ("MLM", "CLM+MLM"):
            spread = mine[mine["series"] == family]["spread_std"].iloc[0]
            mine.loc[mine["series"] == family, "series"] = (
                f"{family} (sd across ratios {spread:.2f})" if np.isfinite(spread) else f"{family} (sd n/a)"
            )
        palette = {s: color(s.split(" ")[0]) for s in mine["series"].unique()}
        note_missing(ax, line_panel(ax, mine, list(mine["series"].unique()), palette=palette))
        ax.set_xticks([round(r * 100) for r in ratios], [f"{round(r * 100)}%" for r in ratios])
        ax.set_xlim(round(min(ratios) * 100) - 5, round(max(ratios) * 100) + 5)
        ax.set_xlabel("masking ratio (of the MLM phase)")
        ax.set_ylabel("category average")
        ax.legend(fontsize=8)
    fig.suptitle(
        f"Figure 7: masking-ratio variability, MLM only vs 40k CLM + 2k MLM ({SIZE_LABELS.get(size, size)})",
        fontsize=12,
    )
    caption = (
        "Per model: each seed's test score at its best-validation LR (docs/analysis.md), averaged "
        "over the 3 datasets and then over seeds. Legend: standard deviation (ddof="
        f"{ddof}) of the category averages across masking ratios; the points CSV also gives the range."
    )
    add_caption(fig, caption)
    points.attrs["caption"] = caption
    return fig, points
