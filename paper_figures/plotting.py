"""Small drawing helpers shared by the figures: headless Figures, line and bar panels, captions.

Figures are built with matplotlib.figure.Figure directly (no pyplot, no global state), so they
render with the Agg canvas on a machine without a display. Missing values (NaN means) break lines
and leave empty bar slots, each listed in the panel: nothing is interpolated.
"""

from __future__ import annotations

import math
import textwrap

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from contracts.paper import TASK_TYPES, average_display

SIZE_LABELS = {"210m": "210M", "610m": "610M", "1b": "1B"}
COLORS = {
    "MLM-40": "#1f77b4",
    "CLM": "#ff7f0e",
    "MLM": "#1f77b4",
    "CLM+MLM": "#2ca02c",
    "210M": "#1f77b4",
    "610M": "#d62728",
    "1B": "#2ca02c",
    "12k": "#9467bd",
    "22k": "#8c564b",
    "42k": "#17becf",
    "CPT from CLM": "#ff7f0e",
    "CPT from MLM": "#1f77b4",
}


def color(series: str, fallback_index: int = 0, palette: dict | None = None) -> str:
    return {**COLORS, **(palette or {})}.get(series, f"C{fallback_index % 10}")


def task_panels(fig: Figure) -> dict[str, object]:
    """2 x 2 axes, one per task type, titled with its datasets."""
    axes = fig.subplots(2, 2, squeeze=False).ravel()
    panels = {}
    for ax, task in zip(axes, TASK_TYPES):
        ax.set_title(f"{task}: {average_display(task)}", fontsize=10)
        ax.grid(alpha=0.3)
        panels[task] = ax
    return panels


CAPTION_GID = "caption"  # the gid of the caption's Text artist (one per figure)
_CAPTION_FONTSIZE = 7


def add_caption(fig: Figure, text: str, width: int = 150) -> None:
    """The caption under the figure, wrapped at `width` characters, with room kept for its lines
    below the layout (at least 5% of the height). Called again, it replaces the caption."""
    lines = textwrap.wrap(text, width)
    for old in [t for t in fig.texts if t.get_gid() == CAPTION_GID]:
        old.remove()
    line_height = 1.2 * _CAPTION_FONTSIZE / 72  # inches
    bottom = max(0.05, (len(lines) * line_height + 0.06) / fig.get_figheight())
    fig.get_layout_engine().set(rect=(0, bottom, 1, 1 - bottom))
    fig.text(
        0.01,
        0.005,
        "\n".join(lines),
        fontsize=_CAPTION_FONTSIZE,
        va="bottom",
        ha="left",
        color="0.25",
        gid=CAPTION_GID,
    )


def extend_caption(fig: Figure, points: pd.DataFrame, text: str) -> str:
    """Append `text` to the caption of a built figure, as drawn and as stored in its points table
    (`points.attrs["caption"]`, which the meta json repeats); returns the new caption."""
    caption = " ".join(part.strip() for part in (points.attrs.get("caption", ""), text) if part.strip())
    add_caption(fig, caption)
    points.attrs["caption"] = caption
    return caption


def note_missing(ax, labels: list[str], shown: int = 4) -> None:
    """List what a panel lacks (the first few; the points CSV has them all), outside the layout."""
    if labels:
        text = ", ".join(labels[:shown]) + (f" and {len(labels) - shown} more" if len(labels) > shown else "")
        ax.text(
            0.01,
            0.01,
            "\n".join(textwrap.wrap("missing (not plotted): " + text, 70)),
            transform=ax.transAxes,
            fontsize=7,
            color="firebrick",
            va="bottom",
            ha="left",
            in_layout=False,
        )


def _finite(value) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value)) and pd.notna(value)


def line_panel(
    ax,
    points: pd.DataFrame,
    series_order: list[str],
    x_column: str = "x",
    linestyle: str = "-",
    palette: dict | None = None,
) -> list[str]:
    """One line per series over x (NaN breaks the line), CI bars where known; returns missing labels."""
    missing = []
    for i, series in enumerate(series_order):
        rows = points[points["series"] == series].sort_values(x_column)
        if rows.empty:
            continue
        x = rows[x_column].to_numpy(dtype=float)
        y = rows["mean"].to_numpy(dtype=float)
        ci = rows["ci_halfwidth"].to_numpy(dtype=float)
        c = color(series, i, palette)
        ax.plot(x, y, linestyle=linestyle, marker="o", markersize=4, color=c, label=series)
        known = np.isfinite(y) & np.isfinite(ci)
        if known.any():
            ax.errorbar(x[known], y[known], yerr=ci[known], fmt="none", ecolor=c, capsize=3, lw=1)
        missing += [f"{series} @ {label}" for label, v in zip(rows["x_label"], y) if not np.isfinite(v)]
    return missing


def bar_panel(
    ax,
    points: pd.DataFrame,
    categories: list[str],
    series_order: list[str],
    category_column: str = "x_label",
    palette: dict | None = None,
    color_by_category: bool = False,
) -> list[str]:
    """Grouped bars: one group per category, one bar per series; empty slot + 'n/a' when missing.

    color_by_category: one bar per category (a single series), coloured by its category.
    """
    width = 0.8 / max(len(series_order), 1)
    missing, tops, bottoms = [], [], []
    for i, series in enumerate(series_order):
        for j, category in enumerate(categories):
            rows = points[(points["series"] == series) & (points[category_column] == category)]
            x = j - 0.4 + width * (i + 0.5)
            mean = rows["mean"].iloc[0] if len(rows) else math.nan
            ci = rows["ci_halfwidth"].iloc[0] if len(rows) else math.nan
            if not _finite(mean):
                missing.append(f"{series} @ {category}")
                ax.text(
                    x,
                    0.02,
                    "n/a",
                    transform=ax.get_xaxis_transform(),
                    ha="center",
                    fontsize=7,
                    color="firebrick",
                    rotation=90,
                    va="bottom",
                )
                continue
            name = category if color_by_category else series
            ax.bar(
                x,
                mean,
                width=width * 0.95,
                color=color(name, j if color_by_category else i, palette),
                label=name if name not in ax.get_legend_handles_labels()[1] else None,
            )
            half = ci if _finite(ci) else 0.0
            if _finite(ci):
                ax.errorbar(x, mean, yerr=ci, fmt="none", ecolor="black", capsize=3, lw=1)
            ax.text(x, mean + half, f"{mean:.1f}", ha="center", va="bottom", fontsize=7)
            tops.append(mean + half)
            bottoms.append(mean - half)
    ax.set_xticks(range(len(categories)), categories)
    if tops:  # zoom on the values (as the paper's bar charts do); bars start below the axis
        span = max(max(tops) - min(bottoms), 1.0)
        ax.set_ylim(min(bottoms) - 0.6 * span, max(tops) + 0.25 * span)
    return missing
