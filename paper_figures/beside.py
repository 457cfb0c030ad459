"""The figure of `analysis compare` (issue 90): your models among the paper's, per paper table.

One panel per compared table, its category average: the paper's published models as lines over
model size, one per objective (Tables 2-5; other tables: one point per row), with the paper's
half-width as bars; each model of yours as a dashed horizontal line (its band: its half-width),
labelled `not comparable` when its data or fine-tuning differ from the paper's (compare.csv).
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from contracts.bounded import SMALL
from paper_figures.plotting import SIZE_LABELS, add_caption, color

SIZES = list(SIZE_LABELS.values())  # 210M, 610M, 1B: the x positions of Tables 2-5
# one colour per masking ratio (the shared palette gives MLM-40 and CLM theirs)
RATIO_COLORS = {"MLM-20": "#2ca02c", "MLM-30": "#9467bd", "MLM-50": "#d62728"}
COMPARE_COLUMNS = ("table", "task_type", "source", "row", "model", "dataset", "mean", "halfwidth", "comparable")


class ComparisonFileError(ValueError):
    """A compare.csv that is not the one `analysis compare` writes."""


def read_comparison(folder: str | Path) -> pd.DataFrame:
    """`folder`/compare.csv, bounded, only the columns `analysis compare` writes."""
    path = Path(folder) / "compare.csv"
    if not path.is_file():
        raise ComparisonFileError(f"{path}: no such file; run `python -m analysis compare RUNS --out {folder}` first")
    if path.stat().st_size > 16 * SMALL:
        raise ComparisonFileError(f"{path}: {path.stat().st_size:,} bytes, more than a comparison holds")
    frame = pd.read_csv(path, dtype={"row": str, "model": str, "source": str, "dataset": str})
    missing = [c for c in COMPARE_COLUMNS if c not in frame.columns]
    if missing:
        raise ComparisonFileError(f"{path}: no column(s) {', '.join(missing)}; write it again with analysis compare")
    if not set(frame["source"]) <= {"published", "yours"}:
        raise ComparisonFileError(f"{path}: column source holds {sorted(set(frame['source']))}, not published/yours")
    frame["comparable"] = frame["comparable"].astype(str).str.lower() == "true"
    return frame[list(COMPARE_COLUMNS)]


def _size_and_series(label: str) -> tuple[str, str] | None:
    size, _, series = label.partition(" ")
    return (size, series) if size in SIZES and series else None


def figure_compare(comparison: pd.DataFrame) -> tuple[Figure, pd.DataFrame]:
    averages = comparison[comparison["dataset"] == "average"]
    tables = sorted(set(averages["table"]))
    columns = min(2, len(tables)) or 1
    rows = max(1, math.ceil(len(tables) / columns))
    fig = Figure(figsize=(6 * columns, 4 * rows), layout="constrained")
    axes = fig.subplots(rows, columns, squeeze=False).ravel()
    points = []
    for ax, number in zip(axes, tables):
        table = averages[averages["table"] == number]
        ax.set_title(f"Table {number}: {table['task_type'].iloc[0]} average", fontsize=10)
        ax.grid(alpha=0.3)
        paper = table[table["source"] == "published"]
        parsed = [_size_and_series(label) for label in paper["row"]]
        if parsed and all(parsed):  # the model-size tables: one line per objective over size
            series = list(dict.fromkeys(s for _, s in parsed))
            for i, name in enumerate(series):
                chosen = [(SIZES.index(size), r) for (size, s), r in zip(parsed, paper.itertuples()) if s == name]
                chosen.sort()
                x = [p for p, _ in chosen]
                y = [r.mean for _, r in chosen]
                err = [0 if pd.isna(r.halfwidth) else r.halfwidth for _, r in chosen]
                ax.errorbar(x, y, yerr=err, marker="o", ms=4, capsize=2, color=color(name, i, RATIO_COLORS), label=name)
                points += [
                    {"table": number, "source": "published", "series": name, "x": SIZES[p], "mean": r.mean,
                     "halfwidth": r.halfwidth, "note": ""}
                    for p, r in chosen
                ]  # fmt: skip
            ax.set_xticks(range(len(SIZES)), SIZES)
            ax.set_xlabel("model size (the paper's models)")
        else:  # any other table: one point per row
            labels = list(paper["row"])
            ax.errorbar(
                range(len(labels)),
                paper["mean"],
                yerr=paper["halfwidth"].fillna(0),
                fmt="o",
                ms=4,
                capsize=2,
                color="0.3",
                label="the paper's rows",
            )
            ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize=7)
            points += [
                {"table": number, "source": "published", "series": r.row, "x": r.row, "mean": r.mean,
                 "halfwidth": r.halfwidth, "note": ""}
                for r in paper.itertuples()
            ]  # fmt: skip
        for i, r in enumerate(table[table["source"] == "yours"].itertuples()):
            if pd.isna(r.mean):
                continue
            note = "" if r.comparable else "not comparable: other data or fine-tuning"
            tint = f"C{(i + 5) % 10}"
            ax.axhline(r.mean, linestyle="--", color=tint, label=f"{r.model} (yours{'; ' + note if note else ''})")
            if not pd.isna(r.halfwidth):
                # the band drawn inside the scale (compare.md marks a cell whose rule passes it)
                ax.axhspan(max(0.0, r.mean - r.halfwidth), min(100.0, r.mean + r.halfwidth), color=tint, alpha=0.12)
            points.append(
                {"table": number, "source": "yours", "series": r.model, "x": "", "mean": r.mean,
                 "halfwidth": r.halfwidth, "note": note}
            )  # fmt: skip
        ax.set_ylabel("average score")
        ax.legend(fontsize=6, loc="best")
    for ax in axes[len(tables) :]:
        ax.set_visible(False)
    frame = pd.DataFrame(points, columns=["table", "source", "series", "x", "mean", "halfwidth", "note"])
    caption = (
        "Your models (dashed lines, band: the paper's rule over your seeds) among the paper's published models "
        "(bars: the paper's rule, 1.96 SD/sqrt(n) over 5 seeds), category averages. 'not comparable': tested on "
        "toy or partial data or fine-tuned otherwise (compare.md lists what differs): it shows where a model "
        "sits, not whether it is better."
    )
    add_caption(fig, caption)
    frame.attrs["caption"] = caption
    return fig, frame
