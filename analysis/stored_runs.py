"""The runs of run stores (contracts.run_store) as the frames of analysis.aggregate.scan_runs.

Column-wise, without a RunRecord per run: the run columns of every part are read, the scores
of the requested protocol taken (RunRecord.scores_under, column-wise), the best-validation LR
of each seed selected (the same rule and order as scan_runs), and only then the instance scores
of the selected runs read, part by part. The frames equal scan_runs' on the same records.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.aggregate import RUN_COLUMNS, RUN_KEY
from analysis.protocols import left_out_note
from contracts.run_store import INSTANCES, instance_arrays, read_part, store_parts

_READ = [
    "model",
    "task_type",
    "dataset",
    "train_set",
    "lr",
    "seed",
    "validation_score",
    "test_score",
    "protocol",
    "other_scores",
]


def _protocol_view(frame: pd.DataFrame, protocol: str) -> tuple[pd.DataFrame, list[tuple]]:
    """The rows that hold `protocol` scores, with those scores, and (protocol, dataset) of the
    others. Rows of another protocol take validation/test scores (and instance scores, kept in
    column `other_instances`) from other_scores."""
    own = frame["protocol"]
    serves = own.isna().to_numpy() | (own == protocol).to_numpy()
    validation, test = frame["validation_score"].to_numpy().copy(), frame["test_score"].to_numpy().copy()
    other_instances, left = [None] * len(frame), []
    for i in np.flatnonzero(~serves):
        text = frame["other_scores"].iat[i]
        other = json.loads(text).get(protocol) if isinstance(text, str) else None
        if other is None:
            left.append((own.iat[i], frame["dataset"].iat[i]))
            continue
        validation[i], test[i] = float(other["validation_score"]), float(other["test_score"])
        if other.get("test_instance_scores") is not None:
            other_instances[i] = np.asarray(other["test_instance_scores"], dtype=np.float32)
        serves[i] = True
    frame = frame.assign(
        validation_score=validation,
        test_score=test,
        other_instances=pd.Series(other_instances, index=frame.index, dtype=object),
    )
    return frame[serves], left


def scan_store(
    paths: list[str | Path], protocol: str, datasets: set[str] | None = None
) -> tuple[pd.DataFrame, pd.DataFrame, str | None]:
    """(selected, runs) as analysis.aggregate.scan_runs gives them for the stores' records viewed
    under `protocol` (restricted to `datasets` when given), and the note of records_under on
    the records left out (None when none is)."""
    frames, total = [], 0
    parts = [part for path in paths for part in store_parts(path)]
    for number, part in enumerate(parts):
        frame = read_part(part, _READ).to_pandas()
        frame["part"], frame["row"] = number, np.arange(len(frame))
        total += len(frame)
        frames.append(frame)
    frame = pd.concat(frames, ignore_index=True)
    frame, left = _protocol_view(frame, protocol)
    note = left_out_note(Counter(left), protocol, total) if left else None
    if datasets is not None:
        frame = frame[frame["dataset"].isin(datasets)]
    frame = frame.assign(
        train_set=frame["train_set"].fillna(""), lr=frame["lr"].astype(float), seed=frame["seed"].astype(np.int64)
    ).reset_index(drop=True)
    keys = [*RUN_KEY, "seed"]
    duplicated = frame.duplicated([*keys, "lr"])
    if duplicated.any():
        r = frame[duplicated].iloc[0]
        raise ValueError(
            f"duplicate run records for model={r.model} task_type={r.task_type} dataset={r.dataset} "
            f"train_set={r.train_set or None} lr={r.lr:g} seed={r.seed}; pass each run once"
        )
    runs = frame[RUN_COLUMNS].astype({"lr": float, "seed": np.int64})
    # Best validation score per seed, ties to the smallest LR (scan_runs' rule), ordered by key.
    ordered = frame.sort_values(
        [*keys, "validation_score", "lr"], ascending=[True] * 5 + [False, True], kind="mergesort"
    )
    best = ordered.drop_duplicates(keys, keep="first")
    n_lrs = frame.groupby(keys, sort=False).size().rename("n_lrs")
    best = best.join(n_lrs, on=keys)
    selected = best[RUN_COLUMNS].reset_index(drop=True)
    selected["test_instance_scores"] = _instances_of(best, parts)
    selected["n_lrs"] = best["n_lrs"].to_numpy()
    selected["at_chance"] = _at_chance_of(best, parts)
    return selected, runs.reset_index(drop=True), note


def _at_chance_of(best: pd.DataFrame, parts: list[Path]) -> list[bool]:
    """Whether each selected row's record is flagged at its chance level (provenance.chance, issue
    67), reading each part's provenance column once and parsing only the rows that mention it."""
    from benchmarks.chance import chance_flag

    out = [False] * len(best)
    part_of, row_of = best["part"].to_numpy(), best["row"].to_numpy()
    for number in np.unique(part_of):
        mine = np.flatnonzero(part_of == number)
        column = read_part(parts[number], ["provenance"]).column("provenance").take(row_of[mine]).to_pylist()
        for position, text in zip(mine, column):
            if isinstance(text, str) and '"at_chance": ["' in text:  # the flag's JSON (sort_keys dumps)
                out[position] = chance_flag(json.loads(text)) is not None
    return out


def _instances_of(best: pd.DataFrame, parts: list[Path]) -> list[np.ndarray | None]:
    """The instance scores of the selected rows (float32), reading each part's column once."""
    out: list = list(best["other_instances"])
    native = best["other_instances"].isna().to_numpy()
    positions = np.flatnonzero(native)
    part_of, row_of = best["part"].to_numpy(), best["row"].to_numpy()
    for number in np.unique(part_of[positions]):
        mine = positions[part_of[positions] == number]
        column = read_part(parts[number], [INSTANCES]).column(INSTANCES).take(row_of[mine])
        for position, scores in zip(mine, instance_arrays(column)):
            out[position] = scores
    return out
