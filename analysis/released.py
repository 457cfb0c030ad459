"""Import the paper's released raw fine-tuning results (EncodEval layout) as run records.

Layout (hgissbkh/EncodEval, branch MLM_vs_CLM; docs/release.md):
  results/<model>/<SC|TC|QA|IR>/<folder>/[<train_set>_]lr<LR>_sd<SEED>/results.json
  = {"validation": {"score": s, "scores_i": [...]}, "test": {"score": s, "scores_i": [...]}}
with scores in [0, 1]; `scores_i` (per-instance scores) may be absent. Records hold scores x100.
Every dataset folder maps to a dataset id (contracts.paper.RELEASED_FOLDERS: SC/mnli_m -> mnli,
TC/conll2003_en -> conll2003, ...); an unknown folder is an error, never skipped. The scores are
the paper protocol's: records get protocol "paper" and the metric of their task type
(contracts.paper.PAPER_PROTOCOL_METRICS).
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

from tqdm import tqdm

from contracts.paper import DATASET_BY_ID, PAPER_PROTOCOL_METRICS, RELEASED_FOLDERS, TASK_TYPES
from contracts.run_record import RunRecord, RunRecordError

_RUN_DIR = re.compile(r"^(?:(?P<train_set>.+)_)?lr(?P<lr>\d[\d.]*(?:e[+-]?\d+)?)_sd(?P<seed>\d+)$")


class ReleasedImportError(ValueError):
    """A released results file that cannot become a run record; the message names the file."""


def results_root(directory: str | Path) -> Path:
    """`directory` itself, or its `results` child when given the folder above it."""
    directory = Path(directory)
    if not directory.is_dir():
        raise ReleasedImportError(f"{directory}: not a directory of released results")
    child = directory / "results"
    return child if child.is_dir() and directory.name != "results" else directory


def _score(path: Path, data: dict, split: str, field: str = "score") -> float:
    block = data.get(split)
    if not isinstance(block, dict):
        raise ReleasedImportError(f"{path}: missing object '{split}'; expected "
                                  '{"validation": {"score": ...}, "test": {"score": ...}}')
    value = block.get(field)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise ReleasedImportError(f"{path}: '{split}.{field}' is {value!r}; expected a number in [0, 1]")
    if not 0.0 <= value <= 1.0:
        raise ReleasedImportError(f"{path}: '{split}.{field}' is {value}; released scores are in [0, 1]")
    return float(value)


def _instances(path: Path, data: dict) -> tuple[float, ...] | None:
    values = data["test"].get("scores_i")
    if values is None or values == []:
        return None
    if not isinstance(values, list) or any(
            isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= v <= 1.0 for v in values):
        raise ReleasedImportError(f"{path}: 'test.scores_i' must be a list of numbers in [0, 1]")
    return tuple(100.0 * v for v in values)


def dataset_of_folder(path: Path, task_type: str, folder: str) -> str:
    """The dataset id of a released dataset folder; an error listing the known folders otherwise."""
    if (task_type, folder) in RELEASED_FOLDERS:
        return RELEASED_FOLDERS[(task_type, folder)]
    elsewhere = [t for t, f in RELEASED_FOLDERS if f == folder]
    if elsewhere:
        raise ReleasedImportError(f"{path}: dataset folder '{folder}' belongs under {elsewhere[0]}/, "
                                  f"not {task_type}/")
    known = ", ".join(f"{t}/{f}" for t, f in RELEASED_FOLDERS)
    raise ReleasedImportError(f"{path}: unknown released dataset folder '{task_type}/{folder}'; "
                              f"the known folders are {known} (contracts/paper.py)")


def read_released_run(path: Path, root: Path) -> RunRecord:
    """One results.json -> a RunRecord (source "released"); errors name the file."""
    parts = path.relative_to(root).parts
    if len(parts) != 5:
        raise ReleasedImportError(
            f"{path}: expected <model>/<task type>/<folder>/[<train_set>_]lr<LR>_sd<SEED>/results.json "
            f"under {root}")
    model, task_type, folder, run_dir, _ = parts
    if task_type not in TASK_TYPES:
        raise ReleasedImportError(f"{path}: task type folder '{task_type}' is not one of {TASK_TYPES}")
    dataset = dataset_of_folder(path, task_type, folder)
    match = _RUN_DIR.match(run_dir)
    if match is None:
        raise ReleasedImportError(f"{path}: run folder '{run_dir}' is not [<train_set>_]lr<LR>_sd<SEED>")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReleasedImportError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ReleasedImportError(f"{path}: the top level must be an object")
    provenance = {"source": "released", "path": "/".join(parts)}
    if dataset not in DATASET_BY_ID:
        provenance["reported_by_paper"] = False
    try:
        return RunRecord.create(
            model, task_type=task_type, dataset=dataset, train_set=match["train_set"],
            lr=float(match["lr"]), seed=int(match["seed"]),
            validation_score=100.0 * _score(path, data, "validation"),
            test_score=100.0 * _score(path, data, "test"),
            test_instance_scores=_instances(path, data), provenance=provenance,
            protocol="paper", metric=PAPER_PROTOCOL_METRICS[task_type],
        )
    except RunRecordError as exc:
        raise ReleasedImportError(f"{path}: {exc}") from None


def import_released(directory: str | Path) -> tuple[list[RunRecord], list[str]]:
    """All runs under a released `results` tree, and the datasets the paper does not report."""
    root = results_root(directory)
    files = sorted(root.rglob("results.json"))
    if not files:
        raise ReleasedImportError(f"{root}: no results.json found (expected the released 'results' tree)")
    # disable=None: a progress bar on a terminal only (the release holds ~18,500 runs).
    records = [read_released_run(path, root)
               for path in tqdm(files, desc="runs", unit="run", disable=None, leave=False)]
    unreported = sorted({r.dataset for r in records if r.dataset not in DATASET_BY_ID})
    return records, unreported
