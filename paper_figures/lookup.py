"""Finding one value in a cells table (analysis.cells schema), saying why when it is missing.

Both sources give the same schema: the published tables (analysis.published.load_published_cells)
and the aggregation of our run records (analysis.aggregate.aggregate_runs). Figures ask for cells
by checkpoint name, so a cell the source lacks becomes a NaN point with a note, never a guess.
"""

from __future__ import annotations

import math

import pandas as pd

from analysis.cells import CELL_COLUMNS
from contracts.model_names import strip_hub_prefix
from contracts.paper import AVERAGE, datasets_of

# Columns of every figure's points table; figures add their own (x values, shares, FLOPs...).
POINT_COLUMNS = [
    "figure",
    "panel",
    "series",
    "x",
    "x_label",
    "model",
    "task_type",
    "dataset",
    "mean",
    "ci_halfwidth",
    "boot_low",
    "boot_high",
    "n_seeds",
    "note",
]
_VALUE_COLUMNS = ["mean", "ci_halfwidth", "boot_low", "boot_high", "n_seeds"]


class CellIndex:
    """Cells keyed by (model, task_type, dataset); a repeated key keeps its first row."""

    def __init__(self, cells: pd.DataFrame):
        missing = [c for c in ("model", "task_type", "dataset", "mean") if c not in cells.columns]
        if missing:
            raise ValueError(f"cells table lacks columns {missing}; expected {CELL_COLUMNS}")
        frame = cells.copy()
        for column in _VALUE_COLUMNS:
            if column not in frame.columns:
                frame[column] = math.nan
        frame["model"] = frame["model"].map(strip_hub_prefix)
        frame = frame.drop_duplicates(["model", "task_type", "dataset"], keep="first")
        self._rows = {
            (row.model, row.task_type, row.dataset): {c: getattr(row, c) for c in _VALUE_COLUMNS}
            for row in frame.itertuples(index=False)
        }

    def __contains__(self, key) -> bool:
        return key in self._rows

    def get(self, model: str, task_type: str, dataset: str = AVERAGE) -> dict:
        """mean, ci_halfwidth, boot_low, boot_high, n_seeds and a note ('' when found as is).

        A missing category average is the mean of its three dataset cells when all three exist
        (docs/analysis.md: averages are means of the three datasets); its interval is then unknown.
        """
        row = self._rows.get((model, task_type, dataset))
        if row is not None:
            return {**row, "note": ""}
        if dataset == AVERAGE:
            parts = [self._rows.get((model, task_type, d.id)) for d in datasets_of(task_type)]
            if parts and all(p is not None and pd.notna(p["mean"]) for p in parts):
                return {
                    "mean": sum(p["mean"] for p in parts) / len(parts),
                    "ci_halfwidth": math.nan,
                    "boot_low": math.nan,
                    "boot_high": math.nan,
                    "n_seeds": min(p["n_seeds"] for p in parts),
                    "note": "category average computed here as the mean of its 3 dataset cells "
                    "(no average cell in the source); interval unknown",
                }
        return {
            "mean": math.nan,
            "ci_halfwidth": math.nan,
            "boot_low": math.nan,
            "boot_high": math.nan,
            "n_seeds": math.nan,
            "note": f"missing: the source has no cell for {model} / {task_type} / {dataset}",
        }


def point(
    figure: str,
    panel: str,
    series: str,
    x,
    x_label: str,
    model: str,
    task_type: str,
    index: CellIndex,
    dataset: str = AVERAGE,
    note: str = "",
    **extra,
) -> dict:
    """One row of a points table, with the cell's values (NaN and a note when missing)."""
    value = index.get(model, task_type, dataset)
    notes = "; ".join(n for n in (value.pop("note"), note) if n)
    return {
        "figure": figure,
        "panel": panel,
        "series": series,
        "x": x,
        "x_label": x_label,
        "model": model,
        "task_type": task_type,
        "dataset": dataset,
        **value,
        "note": notes,
        **extra,
    }


def points_frame(rows: list[dict]) -> pd.DataFrame:
    frame = pd.DataFrame(rows)
    extra = [c for c in frame.columns if c not in POINT_COLUMNS]
    return frame[[*POINT_COLUMNS, *extra]]
