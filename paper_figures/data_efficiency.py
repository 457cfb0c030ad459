"""Figure 4 at several sizes with references: the toy data-efficiency study's figure.

The paper's Figure 4 (`from_cells.figure_4`) draws 610M MLM-40 vs CLM along pretraining. The toy
study trains two sizes, twice each, and needs the untrained model and the chance level beside the
curves to be read at all; this draws them: one line per objective and size (solid 610M, dashed
210M, i.e. toy_m and toy_s under the paper names they stand in for), each size's random-init model
dash-dotted, the chance level dotted, bars as the caller says (the toy: half the range of the
pretraining runs, from `analysis.claims.arc.replicate_mean_cells`).
"""

from __future__ import annotations

import math

import pandas as pd
from matplotlib.figure import Figure

from contracts.model_names import format_steps as _k
from contracts.model_names import single_objective_name
from contracts.paper import PRETRAIN_STEPS, TASK_TYPES
from paper_figures.from_cells import ERROR_BARS, ERROR_BARS_SLOT, RANDOM_INIT, _chance_row, _finish, _legend
from paper_figures.lookup import CellIndex, point
from paper_figures.plotting import SIZE_LABELS, line_panel, note_missing, task_panels

OBJECTIVES = (("MLM-40", "mlm40", "tab:blue"), ("CLM", "clm", "tab:red"))
SIZE_STYLES = ("-", "--", ":")  # the last size given solid, earlier ones dashed


def figure_4_sizes(
    cells: pd.DataFrame,
    sizes: tuple[str, ...],
    steps: tuple[int, ...],
    step_labels: dict[int, str] | None = None,
    random_init: dict[str, str] | None = None,
    chance: dict[str, float] | None = None,
    bars: str = ERROR_BARS,
    note: str = "",
    bars_column: str = "ci_halfwidth",
) -> tuple[Figure, pd.DataFrame]:
    """Category average vs pretraining step for MLM-40 and CLM at each of `sizes` (paper sizes),
    at the paper steps `steps` (the last the final decayed model); `step_labels` the tick labels
    (e.g. '5k\\n(119)'); `random_init` {size: model}, `chance` {task type: level}; `bars` what the
    error bars are (drawn from the cells' `ci_halfwidth`), `bars_column` their column's name in the
    points table (e.g. `half_range` when they are no interval); `note` appended to the caption."""
    index = CellIndex(cells)
    labels = step_labels or {s: _k(s) for s in steps}
    rows = []
    for task in TASK_TYPES:
        for size in sizes:
            size_label = SIZE_LABELS.get(size, size)
            for series, objective, _ in OBJECTIVES:
                for step in steps:
                    final = step == max(steps)
                    model = single_objective_name(size, objective, PRETRAIN_STEPS, step)
                    rows.append(
                        point(
                            "4",
                            task,
                            f"{series} {size_label}",
                            step,
                            labels[step] + (" (decayed)" if final else ""),
                            model,
                            task,
                            index,
                            note="final decayed model" if final else "",
                            size=size,
                            step=step,
                            reference=False,
                        )
                    )
            if random_init and size in random_init:
                rows.append(
                    point(
                        "4",
                        task,
                        f"{RANDOM_INIT} {size_label}",
                        math.nan,
                        RANDOM_INIT,
                        random_init[size],
                        task,
                        index,
                        note="the same architecture fine-tuned from random initialisation (dash-dotted line)",
                        size=size,
                        step=0,
                        reference=True,
                    )
                )
        if chance and task in chance:
            rows.append({**_chance_row("4", task, chance[task]), "reference": True})
    points = pd.DataFrame(rows)
    fig = Figure(figsize=(11, 7.5), layout="constrained")
    panels = task_panels(fig)
    styles = {size: SIZE_STYLES[(len(sizes) - 1 - i) % len(SIZE_STYLES)] for i, size in enumerate(sizes)}
    for task, ax in panels.items():
        mine = points[points["panel"] == task]
        missing = []
        for size in sizes:
            size_label = SIZE_LABELS.get(size, size)
            series = [f"{name} {size_label}" for name, _, _ in OBJECTIVES]
            palette = {f"{name} {size_label}": c for name, _, c in OBJECTIVES}
            curves = mine[~mine["reference"].astype(bool)]
            missing += line_panel(ax, curves, series, linestyle=styles[size], palette=palette)
            untrained = mine[mine["series"] == f"{RANDOM_INIT} {size_label}"]["mean"]
            if len(untrained) and pd.notna(untrained.iloc[0]):
                ax.axhline(
                    untrained.iloc[0], linestyle="-.", lw=1.0, color="0.35", alpha=0.5 + 0.5 * (styles[size] == "-")
                )
                ax.plot([], [], linestyle="-.", color="0.35", label=f"random init {size_label} (dash-dot)")
            elif len(untrained):
                missing.append(f"random init {size_label}")
        level = mine[mine["series"] == "chance"]["mean"]
        if len(level):
            ax.axhline(level.iloc[0], linestyle=":", lw=1.5, color="0.5", label="chance (input-ignoring predictor)")
        note_missing(ax, missing)
        ax.set_xscale("log")
        ax.set_xlim(min(steps) / 1.5, max(steps) * 1.5)
        ax.set_xticks(list(steps), [labels[s] for s in steps])
        ax.minorticks_off()
        ax.set_xlabel("pretraining steps (log scale)")
        ax.set_ylabel("category average")
    _legend(fig, panels)
    fig.suptitle(
        f"Figure 4: category average vs pretraining steps, {', '.join(SIZE_LABELS.get(s, s) for s in sizes)}",
        fontsize=12,
    )
    caption = (
        f"Solid/dashed lines: MLM-40 (blue) and CLM (red) at {' and '.join(SIZE_LABELS.get(s, s) for s in sizes)}; "
        f"the last point is the final decayed model, the others are taken before the decay. {ERROR_BARS_SLOT}"
        + (" Dash-dotted: the same size fine-tuned from random initialisation." if random_init else "")
        + (" Dotted: chance level (a predictor that ignores its input)." if chance else "")
        + (f" {note}" if note else "")
    )
    fig, points = _finish(fig, rows, caption, error_bars=bars)
    return fig, points.rename(columns={"ci_halfwidth": bars_column})  # keeps attrs (the caption)
