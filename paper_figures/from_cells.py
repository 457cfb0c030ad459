"""Figures 2, 3, 4, 6, 8, 9, 10 and 11: drawn from a cells table (published or aggregated runs).

Each `figure_N(cells, ...)` returns (matplotlib Figure, points DataFrame). The points table has one
row per plotted (or expected but missing) value, so a figure can be checked number by number; its
`attrs["caption"]` says what was drawn and which choices were made.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from analysis.intervals import paper_rule_label
from contracts.model_names import biphasic_name, cpt_name, objective_token, single_objective_name
from contracts.model_names import format_steps as _k
from contracts.paper import (
    AVERAGE,
    BIPHASIC_CLM_SHARES,
    BIPHASIC_SPLITS,
    CPT_STEPS,
    INTERMEDIATE_STEPS,
    MASKING_RATIOS,
    PAPER_SHAPES,
    PAPER_SIZES,
    PRETRAIN_STEPS,
    TASK_TYPES,
    TOKENS_PER_STEP_TABLE1,
    TOKENS_PER_STEP_TEXT,
)
from paper_figures.flops import DEFAULT_TOKENS_PER_STEP, count_parameters, training_flops
from paper_figures.lookup import POINT_COLUMNS, CellIndex, point, points_frame
from paper_figures.plotting import (
    SIZE_LABELS,
    add_caption,
    bar_panel,
    color,
    line_panel,
    note_missing,
    task_panels,
)

# The cells' ci_halfwidth is the paper's rule (the printed cells), named as such (issue 81).
ERROR_BARS = f"Error bars = half-width by {paper_rule_label()}."
ERROR_BARS_SLOT = "{error_bars}"  # where a caption says whether the figure has error bars
NO_ERROR_BARS = "No error bars: one fine-tuning seed per point (no interval)."
NO_INTERVAL = "No error bars: the source gives no interval for the drawn points."


def error_bar_sentence(points: pd.DataFrame, sentence: str = ERROR_BARS) -> str:
    """`sentence` when at least one drawn point (a finite mean, not a reference line) has a finite
    half-width (the paper's rule), hence an error bar; otherwise why there is none (one fine-tuning seed per
    point, or no interval in the source), in the case of `sentence`'s first letter."""
    drawn = points[points["mean"].notna()]
    if "reference" in drawn:  # reference levels (CLM, random init, chance) are lines without bars
        drawn = drawn[drawn["reference"] != True]  # noqa: E712
    if np.isfinite(drawn["ci_halfwidth"].to_numpy(dtype=float)).any():
        return sentence
    seeds = drawn["n_seeds"].dropna()
    text = NO_ERROR_BARS if len(seeds) and (seeds <= 1).all() else NO_INTERVAL
    return text[0].lower() + text[1:] if sentence[:1].islower() else text


def _finish(fig: Figure, rows: list[dict], caption: str, error_bars: str | None = None) -> tuple[Figure, pd.DataFrame]:
    """The points table of `rows` and the caption, drawn and kept in `points.attrs["caption"]`.
    `error_bars`: the sentence saying what the error bars are, put at the caption's ERROR_BARS_SLOT
    when some drawn point has an interval (else the sentence saying why there are no error bars)."""
    points = points_frame(rows)
    if error_bars is not None:
        if ERROR_BARS_SLOT not in caption:
            raise ValueError(f"caption {caption!r} has no {ERROR_BARS_SLOT} for its error-bar sentence")
        caption = caption.replace(ERROR_BARS_SLOT, error_bar_sentence(points, error_bars))
    if (points["mean"].isna()).any():
        caption += (
            f" {int(points['mean'].isna().sum())} expected value(s) missing from the source: "
            "not drawn (see the note column of the points CSV)."
        )
    add_caption(fig, caption)
    points.attrs["caption"] = caption
    return fig, points


def _legend(fig: Figure, panels: dict) -> None:
    labels = {}
    for ax in panels.values():
        for h, label in zip(*ax.get_legend_handles_labels()):
            labels.setdefault(label, h)
    fig.legend(
        list(labels.values()), list(labels.keys()), loc="outside right center", ncol=1, fontsize=9, frameon=False
    )


# --- Figure 2 -------------------------------------------------------------------------------------
def figure_2(cells: pd.DataFrame, sizes=PAPER_SIZES) -> tuple[Figure, pd.DataFrame]:
    """MLM-40 vs CLM category averages per size (Tables 2-5 averages), one panel per task type."""
    index = CellIndex(cells)
    rows = []
    for task in TASK_TYPES:
        for size in sizes:
            for series, obj in (("MLM-40", "mlm40"), ("CLM", "clm")):
                rows.append(
                    point(
                        "2",
                        task,
                        series,
                        SIZE_LABELS.get(size, size),
                        SIZE_LABELS.get(size, size),
                        single_objective_name(size, obj),
                        task,
                        index,
                        size=size,
                    )
                )
    fig = Figure(figsize=(11, 7.5), layout="constrained")
    panels = task_panels(fig)
    points = pd.DataFrame(rows)
    for task, ax in panels.items():
        missing = bar_panel(
            ax, points[points["panel"] == task], [SIZE_LABELS.get(s, s) for s in sizes], ["MLM-40", "CLM"]
        )
        note_missing(ax, missing)
        ax.set_ylabel("category average")
    _legend(fig, panels)
    fig.suptitle("Figure 2: MLM (40%) vs CLM after 42k steps", fontsize=12)
    return _finish(
        fig,
        rows,
        "Category averages of the 42k-step MLM-40 and CLM models per size (Tables 2-5); " + ERROR_BARS_SLOT,
        error_bars=f"error bars = half-width by {paper_rule_label()}.",
    )


# --- Figure 3 -------------------------------------------------------------------------------------
RANDOM_INIT = "random init"  # x_label of the random-initialisation rows of Figure 3's points


def figure_3(
    cells: pd.DataFrame,
    sizes=PAPER_SIZES,
    ratios=MASKING_RATIOS,
    steps: int = PRETRAIN_STEPS,
    chance: dict[str, float] | None = None,
    random_init: dict[str, str] | None = None,
) -> tuple[Figure, pd.DataFrame]:
    """Category average vs masking ratio, one line per size, CLM of each size as dashed reference.

    `sizes` may be toy sizes (`toy_s`...) and `steps` their step count: the models looked up are
    `<size>-mlm<p>-<steps>` and `<size>-clm-<steps>` (e.g. `toy_s-mlm40-150`). `chance`: task type ->
    chance level (benchmarks.chance, averaged over the type's datasets), drawn dotted and kept as
    `series == "chance"` rows of the points table. `random_init`: size -> the model name of that
    size's untrained model (not in the paper; toy reproductions), drawn dash-dotted as the level
    pretraining must beat (`x_label == "random init"` rows).
    """
    index = CellIndex(cells)
    rows = []
    for task in TASK_TYPES:
        for size in sizes:
            label = SIZE_LABELS.get(size, size)
            for ratio in ratios:
                pct = round(ratio * 100)
                rows.append(
                    point(
                        "3",
                        task,
                        label,
                        pct,
                        f"{pct}%",
                        single_objective_name(size, objective_token(ratio), steps),
                        task,
                        index,
                        size=size,
                        masking_ratio=ratio,
                        reference=False,
                    )
                )
            references = [("CLM", single_objective_name(size, "clm", steps), "CLM reference (dashed horizontal line)")]
            if random_init and size in random_init:
                references.append(
                    (
                        RANDOM_INIT,
                        random_init[size],
                        "the same architecture fine-tuned from random initialisation (dash-dotted line)",
                    )
                )
            for x_label, model, note in references:
                rows.append(
                    point(
                        "3",
                        task,
                        label,
                        math.nan,
                        x_label,
                        model,
                        task,
                        index,
                        size=size,
                        masking_ratio=math.nan,
                        reference=True,
                        note=note,
                    )
                )
        if chance and task in chance:
            rows.append(_chance_row("3", task, chance[task]))
    points = pd.DataFrame(rows)
    fig = Figure(figsize=(11, 7.5), layout="constrained")
    panels = task_panels(fig)
    series = [SIZE_LABELS.get(s, s) for s in sizes]
    for task, ax in panels.items():
        mine = points[points["panel"] == task]
        missing = line_panel(ax, mine[~mine["reference"]], series)
        for i, label in enumerate(series):
            ref = mine[mine["reference"] & (mine["series"] == label) & (mine["x_label"] == "CLM")]["mean"].iloc[0]
            if pd.notna(ref):
                ax.axhline(ref, linestyle="--", lw=1.2, color=color(label, i))
            else:
                missing.append(f"CLM {label}")
            untrained = mine[(mine["series"] == label) & (mine["x_label"] == RANDOM_INIT)]["mean"]
            if len(untrained) and pd.notna(untrained.iloc[0]):
                ax.axhline(untrained.iloc[0], linestyle="-.", lw=1.0, color=color(label, i), alpha=0.8)
            elif len(untrained):
                missing.append(f"random init {label}")
        ax.plot([], [], linestyle="--", color="0.4", label="CLM of the same size (dashed)")
        if random_init:
            ax.plot([], [], linestyle="-.", color="0.4", label="same size, random initialisation (dash-dot)")
        if chance and task in chance:
            ax.axhline(chance[task], linestyle=":", lw=1.5, color="0.5", label="chance (input-ignoring predictor)")
        note_missing(ax, missing)
        ax.set_xticks([round(r * 100) for r in ratios], [f"{round(r * 100)}%" for r in ratios])
        ax.set_xlabel("masking ratio")
        ax.set_ylabel("category average")
    _legend(fig, panels)
    fig.suptitle(f"Figure 3: category average vs masking ratio ({_k(steps)} steps)", fontsize=12)
    return _finish(
        fig,
        rows,
        "Lines: MLM models at 20-50% masking per size; dashed: the CLM model "
        f"of the same size (Tables 2-5). {ERROR_BARS_SLOT}"
        + (" Dotted: chance level (a predictor that ignores its input, docs/benchmarks.md)." if chance else "")
        + (" Dash-dotted: the same size fine-tuned from random initialisation." if random_init else ""),
        error_bars=ERROR_BARS,
    )


def _chance_row(figure: str, task_type: str, level: float) -> dict:
    """A points row for a chance level (no model, no interval)."""
    row = dict.fromkeys(POINT_COLUMNS, math.nan)
    note = "chance level (dotted horizontal line)"
    row.update(figure=figure, panel=task_type, series="chance", x_label="chance", model="", task_type=task_type)
    row.update(dataset=AVERAGE, mean=level, note=note, reference=True)
    return row


# --- Figures 4 and 10 -----------------------------------------------------------------------------
def _training_dynamics_rows(index: CellIndex, figure: str, size: str) -> list[dict]:
    rows = []
    for task in TASK_TYPES:
        for series, obj in (("MLM-40", "mlm40"), ("CLM", "clm")):
            for step in (*INTERMEDIATE_STEPS, PRETRAIN_STEPS):
                final = step == PRETRAIN_STEPS
                rows.append(
                    point(
                        figure,
                        task,
                        series,
                        step,
                        _k(step) + (" (decayed)" if final else ""),
                        single_objective_name(size, obj, PRETRAIN_STEPS, step),
                        task,
                        index,
                        note="final decayed checkpoint (Tables 2-5)" if final else "",
                        size=size,
                        step=step,
                    )
                )
    return rows


def _mark_final(ax, points: pd.DataFrame, x_column: str = "x") -> None:
    """A star on the final decayed 42k point, which sits next to the 40k one (before decay)."""
    for i, series in enumerate(["MLM-40", "CLM"]):
        final = points[(points["series"] == series) & (points["step"] == PRETRAIN_STEPS)]
        ax.scatter(final[x_column], final["mean"], marker="*", s=90, color=color(series, i), zorder=3)
    ax.scatter([], [], marker="*", s=90, color="0.4", label="42k: final model after the decay")


def _dynamics_figure(points: pd.DataFrame, xlabel: str, step_ticks: bool) -> Figure:
    """MLM-40 vs CLM lines on a log x axis, one panel per task type (Figures 4 and 10)."""
    fig = Figure(figsize=(11, 7.5), layout="constrained")
    panels = task_panels(fig)
    for task, ax in panels.items():
        note_missing(ax, line_panel(ax, points[points["panel"] == task], ["MLM-40", "CLM"]))
        _mark_final(ax, points[points["panel"] == task])
        ax.set_xscale("log")
        x = points["x"].astype(float)  # known even where a value is missing: a panel without data still draws
        ax.set_xlim(x.min() / 1.5, x.max() * 1.5)
        if step_ticks:
            ax.set_xticks(INTERMEDIATE_STEPS, [_k(s) for s in INTERMEDIATE_STEPS])
            ax.minorticks_off()
        ax.set_xlabel(xlabel)
        ax.set_ylabel("category average")
    _legend(fig, panels)
    return fig


def figure_4(cells: pd.DataFrame, size: str = "610m") -> tuple[Figure, pd.DataFrame]:
    """610M category average vs pretraining step, MLM-40 vs CLM (Tables 6-9 + the 42k models)."""
    rows = _training_dynamics_rows(CellIndex(cells), "4", size)
    fig = _dynamics_figure(pd.DataFrame(rows), "pretraining steps (log scale)", step_ticks=True)
    fig.suptitle(f"Figure 4: {SIZE_LABELS.get(size, size)} category average vs pretraining steps", fontsize=12)
    return _finish(
        fig,
        rows,
        "Intermediate checkpoints at 1k-40k steps are taken before the decay "
        "(Tables 6-9); the 42k point is the final decayed model (Tables 2-5). " + ERROR_BARS_SLOT,
        error_bars=ERROR_BARS,
    )


def figure_10(
    cells: pd.DataFrame, size: str = "610m", tokens_per_step: int = DEFAULT_TOKENS_PER_STEP, n_params: int | None = None
) -> tuple[Figure, pd.DataFrame]:
    """Figure 4 against training FLOPs = 6 * N * steps * tokens_per_step."""
    counts = count_parameters(PAPER_SHAPES[size])
    n = counts["matmul"] if n_params is None else int(n_params)
    rows = _training_dynamics_rows(CellIndex(cells), "10", size)
    for row in rows:
        row["x"] = training_flops(row["step"], n, tokens_per_step)
        row.update(n_params=n, tokens_per_step=tokens_per_step, flops=row["x"])
    fig = _dynamics_figure(pd.DataFrame(rows), "training FLOPs (6 N D, log scale)", step_ticks=False)
    fig.suptitle(f"Figure 10: {SIZE_LABELS.get(size, size)} category average vs training FLOPs", fontsize=12)
    source = (
        "the paper's Table 1"
        if tokens_per_step == TOKENS_PER_STEP_TABLE1
        else ("the paper's text" if tokens_per_step == TOKENS_PER_STEP_TEXT else "a user-given value")
    )
    n_source = (
        "parameters in matmuls computed from the Table 1 shapes: all weights except the input "
        "embedding, untied LM head included"
        if n_params is None
        else "user-given"
    )
    return _finish(
        fig,
        rows,
        f"FLOPs = 6 x N x steps x tokens/step with N = {n:,} ({n_source}) and "
        f"{tokens_per_step:,} tokens/step ({source}; the paper prints both "
        "2,359,296 and 2,373,120). Same points as Figure 4.",
    )


# --- Figure 6 -------------------------------------------------------------------------------------
def figure_6(cells: pd.DataFrame, size: str = "610m", splits=None) -> tuple[Figure, pd.DataFrame]:
    """Category average vs % of CLM steps in a CLM-then-MLM(40%) run, one line per budget."""
    splits = BIPHASIC_SPLITS if splits is None else splits
    index = CellIndex(cells)
    rows = []
    for task in TASK_TYPES:
        for budget, clm_steps in splits.items():
            for nominal, clm in zip(BIPHASIC_CLM_SHARES, clm_steps):
                share = 100 * clm / budget
                rows.append(
                    point(
                        "6",
                        task,
                        _k(budget),
                        nominal,
                        f"{nominal}%",
                        biphasic_name(size, clm, budget),
                        task,
                        index,
                        note=""
                        if abs(share - nominal) < 1e-9
                        else f"plotted at the nominal {nominal}% (actual {share:.1f}% CLM steps)",
                        budget_steps=budget,
                        clm_steps=clm,
                        mlm_steps=budget - clm,
                        clm_share_pct=share,
                    )
                )
    points = pd.DataFrame(rows)
    fig = Figure(figsize=(11, 7.5), layout="constrained")
    panels = task_panels(fig)
    for task, ax in panels.items():
        note_missing(ax, line_panel(ax, points[points["panel"] == task], [_k(b) for b in splits]))
        ax.set_xticks(BIPHASIC_CLM_SHARES, [f"{s}%" for s in BIPHASIC_CLM_SHARES])
        ax.set_xlabel("share of CLM steps (CLM first, then MLM 40%)")
        ax.set_ylabel("category average")
    _legend(fig, panels)
    fig.suptitle(
        f"Figure 6: biphasic CLM->MLM pretraining ({SIZE_LABELS.get(size, size)}), per step budget", fontsize=12
    )
    return _finish(
        fig,
        rows,
        "One line per total budget (12k/22k/42k steps; Tables 10-13); 0% = MLM only, "
        "100% = CLM only. " + ERROR_BARS_SLOT,
        error_bars=ERROR_BARS,
    )


# --- Figures 8 and 9 ------------------------------------------------------------------------------
def figure_8(cells: pd.DataFrame, cpt_steps: int = CPT_STEPS[-1]) -> tuple[Figure, pd.DataFrame]:
    """Decayed 42k bases vs the same bases after MLM-40 continued pretraining (Tables 14-17)."""
    index = CellIndex(cells)
    rows = []
    groups = [("CLM base", "clm"), ("MLM base", "mlm40")]
    for task in TASK_TYPES:
        for group, base in groups:
            for series, steps in (("base (42k)", 0), (f"+{_k(cpt_steps)} MLM CPT", cpt_steps)):
                rows.append(
                    point(
                        "8",
                        task,
                        series,
                        group,
                        group,
                        cpt_name(base, steps),
                        task,
                        index,
                        cpt_steps=steps,
                        cpt_base_objective="clm" if base == "clm" else "mlm",
                    )
                )
    points = pd.DataFrame(rows)
    fig = Figure(figsize=(11, 7.5), layout="constrained")
    panels = task_panels(fig)
    series = ["base (42k)", f"+{_k(cpt_steps)} MLM CPT"]
    palette = {series[0]: "#7f7f7f", series[1]: "#2ca02c"}
    for task, ax in panels.items():
        note_missing(
            ax, bar_panel(ax, points[points["panel"] == task], [g for g, _ in groups], series, palette=palette)
        )
        ax.set_ylabel("category average")
    _legend(fig, panels)
    fig.suptitle(
        f"Figure 8: continued MLM pretraining ({_k(cpt_steps)} steps) from CLM and MLM bases (610M)", fontsize=12
    )
    return _finish(
        fig,
        rows,
        "Bases: decayed 42k-step 610M CLM and MLM-40 models; CPT = MLM at 40% (Tables 14-17). " + ERROR_BARS_SLOT,
        error_bars=ERROR_BARS,
    )


def figure_9(cells: pd.DataFrame, steps=(0, *CPT_STEPS)) -> tuple[Figure, pd.DataFrame]:
    """Category average vs continued-pretraining steps, from the CLM and from the MLM base."""
    index = CellIndex(cells)
    rows = []
    for task in TASK_TYPES:
        for series, base in (("CPT from CLM", "clm"), ("CPT from MLM", "mlm40")):
            for s in steps:
                rows.append(
                    point(
                        "9",
                        task,
                        series,
                        s / 1000,
                        _k(s) if s else "0 (base)",
                        cpt_name(base, s),
                        task,
                        index,
                        cpt_steps=s,
                        cpt_base_objective="clm" if base == "clm" else "mlm",
                    )
                )
    points = pd.DataFrame(rows)
    fig = Figure(figsize=(11, 7.5), layout="constrained")
    panels = task_panels(fig)
    for task, ax in panels.items():
        note_missing(ax, line_panel(ax, points[points["panel"] == task], ["CPT from CLM", "CPT from MLM"]))
        ax.set_xticks([s / 1000 for s in steps], [_k(s) if s else "0" for s in steps])
        ax.set_xlabel("MLM-40 continued-pretraining steps")
        ax.set_ylabel("category average")
    _legend(fig, panels)
    fig.suptitle("Figure 9: category average vs continued MLM pretraining (610M)", fontsize=12)
    return _finish(
        fig,
        rows,
        "0 = the decayed 42k base (Tables 2-5 / 14-17); CPT with MLM at 40% (Tables 14-17). " + ERROR_BARS_SLOT,
        error_bars=ERROR_BARS,
    )


# --- Figure 11 ------------------------------------------------------------------------------------
def figure_11(
    cells: pd.DataFrame,
    size: str = "1b",
    budget: int = PRETRAIN_STEPS,
    clm_steps: int = BIPHASIC_SPLITS[PRETRAIN_STEPS][1],
) -> tuple[Figure, pd.DataFrame]:
    """1B: MLM-40, biphasic 25/75 (CLM then MLM) and CLM. The paper prints no table for 25/75."""
    index = CellIndex(cells)
    nominal = round(100 * clm_steps / budget / 25) * 25
    middle = f"CLM->MLM {nominal}/{100 - nominal}"
    entries = [
        ("MLM-40", single_objective_name(size, "mlm40", budget), 0),
        (middle, biphasic_name(size, clm_steps, budget), clm_steps),
        ("CLM", single_objective_name(size, "clm", budget), budget),
    ]
    series = f"{SIZE_LABELS.get(size, size)} average"
    rows = []
    for task in TASK_TYPES:
        for label, model, clm in entries:
            row = point(
                "11", task, series, label, label, model, task, index, clm_steps=clm, clm_share_pct=100 * clm / budget
            )
            if clm not in (0, budget) and pd.isna(row["mean"]):
                row["note"] += (
                    "; the paper shows this point only in a plot (no table value): it can come only from run records"
                )
            rows.append(row)
    points = pd.DataFrame(rows)
    fig = Figure(figsize=(11, 7.5), layout="constrained")
    panels = task_panels(fig)
    for task, ax in panels.items():
        missing = bar_panel(
            ax,
            points[points["panel"] == task],
            [e[0] for e in entries],
            [series],
            palette={middle: "#2ca02c"},
            color_by_category=True,
        )
        for label in (m.replace(f"{series} @ ", "") for m in missing):
            position = [e[0] for e in entries].index(label)
            why = "the paper shows it\nonly as a plot" if label == middle else "missing in the source"
            ax.text(
                position,
                0.5,
                f"not available\n({why})",
                transform=ax.get_xaxis_transform(),
                ha="center",
                va="center",
                fontsize=8,
                color="firebrick",
            )
        ax.set_ylabel("category average")
    _legend(fig, panels)
    fig.suptitle(f"Figure 11: {SIZE_LABELS.get(size, size)} biphasic pretraining ({_k(budget)} steps)", fontsize=12)
    return _finish(
        fig,
        rows,
        f"Endpoints from Tables 2-5. The {middle} point ({_k(clm_steps)} CLM + "
        f"{_k(budget - clm_steps)} MLM-40 steps) exists in the paper only as a plot: "
        "it is drawn only when the source has it (run records).",
    )
