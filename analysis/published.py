"""The paper's printed Tables 2-17 (analysis/data/published_results.csv) as cells."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import pandas as pd

from analysis.cells import CELL_COLUMNS, describe_models
from contracts.paper import AVERAGE, DATASET_BY_DISPLAY

PUBLISHED_CSV = Path(__file__).parent / "data" / "published_results.csv"


@lru_cache(maxsize=1)
def _read_raw() -> pd.DataFrame:
    return pd.read_csv(PUBLISHED_CSV)


def load_published_raw() -> pd.DataFrame:
    """The CSV as printed (800 rows), plus `table` (int) parsed from its `source` column."""
    raw = _read_raw().copy()
    raw["table"] = raw["source"].str.extract(r"^Table (\d+)")[0].astype(int)
    return raw


def load_published_cells() -> pd.DataFrame:
    """One row per printed cell: CELL_COLUMNS plus `table`; rows repeated across tables are kept."""
    raw = load_published_raw()
    cells = pd.DataFrame({"model": raw["hf_model_id_inferred"]})
    cells = pd.concat([cells, describe_models(cells["model"])], axis=1)
    cells["task_type"] = raw["task_type"]
    cells["dataset"] = [
        AVERAGE if name.startswith("Average") else DATASET_BY_DISPLAY[name].id for name in raw["dataset"]
    ]
    cells["n_seeds"] = 5  # every printed cell is a mean over 5 fine-tuning seeds (docs/protocol.md)
    cells["mean"] = raw["value"].astype(float)
    cells["ci_halfwidth"] = raw["ci_halfwidth"].astype(float)
    cells["boot_low"] = float("nan")  # the paper prints no bootstrap interval
    cells["boot_high"] = float("nan")
    cells["table"] = raw["table"]
    return cells[[*CELL_COLUMNS, "table"]]
