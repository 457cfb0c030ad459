"""Task data: Hub schemas, loading from the Hub or a local mirror, the split protocol, toy data.

`TOY_DATA_ROOT` is a committed local mirror of all datasets in their Hub schemas with synthetic,
learnable text (written by `python -m benchmarks.datasets.make_toy`); pass it as `data_root`.
"""

from pathlib import Path

from benchmarks.datasets.loading import (
    CANDIDATE_POOLS,
    DatasetError,
    IRSplit,
    TaskData,
    load_hub_split,
    load_task_data,
    pooled_doc_ids,
    relevant_queries,
)

TOY_DATA_ROOT = Path(__file__).resolve().parent / "toy"

__all__ = [
    "CANDIDATE_POOLS",
    "DatasetError",
    "IRSplit",
    "TaskData",
    "TOY_DATA_ROOT",
    "load_hub_split",
    "load_task_data",
    "pooled_doc_ids",
    "relevant_queries",
]
