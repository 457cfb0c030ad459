"""The tidy "cells" table: one row per (model, task type, dataset or category average).

It is what the aggregation produces from run records, what the published tables are parsed into,
and what tables, the audit and paper_figures consume, so both sources are interchangeable.
"""

from __future__ import annotations

import pandas as pd

from contracts.model_names import parse_model_name

DESCRIPTION_COLUMNS = [
    "size",
    "objective",
    "masking_ratio",
    "clm_steps",
    "mlm_steps",
    "cpt_steps",
    "cpt_base_objective",
    "checkpoint_step",
    "schedule_steps",
]
CELL_COLUMNS = [
    "model",
    *DESCRIPTION_COLUMNS,
    "task_type",
    "dataset",
    "n_seeds",
    "mean",
    "ci_halfwidth",
    "boot_low",
    "boot_high",
]


def describe_models(models: pd.Series) -> pd.DataFrame:
    """The pretraining-description columns for each model name (NaN/None for external models)."""
    rows = []
    for model in models:
        desc = parse_model_name(model)
        rows.append({c: getattr(desc, c) if desc else None for c in DESCRIPTION_COLUMNS})
    return pd.DataFrame(rows, index=models.index, columns=DESCRIPTION_COLUMNS)
