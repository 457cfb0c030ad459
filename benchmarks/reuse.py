"""Reuse inside one process: a task's loaded data and its training features.

A local matrix (`python -m benchmarks matrix --local`) or a reproduce worker fine-tunes many
models, learning rates and seeds on the same tasks one run after another. Each run read its task's
files and tokenised its training set anew; the toy Figure 3 did so 18 times per task. Here a
process keeps, least recently used first out:

- a task's loaded data (`task_data`), for a local mirror only (`data_root`; the Hub path has the
  `datasets` cache), keyed by the task and the load's arguments, and reused only while every
  mirror file the load read is unchanged (path, size, modification time; a preferred format added
  beside it counts as a change);
- a task's training features (`training_features`), keyed by that loaded data, the task kind, the
  kind's settings and the tokenizer's content (its serialised fast tokenizer, special tokens and
  sides), so that checkpoints of one pretraining run, which share a tokenizer, tokenise once.

A task whose training split has over `MAX_TRAIN_ROWS` rows is neither kept nor tokenised once
(paper-scale MNLI's 393k rows would hold hundreds of MB per process).

Reused inputs are the same objects a fresh load or tokenisation gives (tested: the records of runs
with and without reuse are equal). Nothing reads or writes files here; nothing outlives the
process. docs/benchmarks.md, "Reuse within a process".
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import itertools
import json
from collections import OrderedDict
from pathlib import Path

MAX_ENTRIES = 32  # loaded tasks, and feature sets, kept per process (the toy world has 12 tasks)
MAX_TRAIN_ROWS = 50_000  # tasks with larger training splits are loaded and tokenised each run

_DATA: OrderedDict[tuple, tuple] = OrderedDict()  # key -> (TaskData, mirror files read, their signature)
_FEATURES: OrderedDict[tuple, tuple] = OrderedDict()  # key -> (features, collate)
_TOKENS = itertools.count(1)
STATS = {"data_reused": 0, "data_loaded": 0, "features_reused": 0, "features_built": 0}


def clear() -> None:
    """Forget everything kept (tests; a process that wants fresh loads)."""
    _DATA.clear()
    _FEATURES.clear()
    for key in STATS:
        STATS[key] = 0


def _put(store: OrderedDict, key, value) -> None:
    store[key] = value
    store.move_to_end(key)
    while len(store) > MAX_ENTRIES:
        store.popitem(last=False)


def mirror_signature(paths) -> tuple:
    """What a reuse depends on: for each mirror file read, the stat of every file of its split in
    the mirror's formats (benchmarks.datasets.loading.MIRROR_SUFFIXES, in preference order)."""
    from benchmarks.datasets.loading import MIRROR_SUFFIXES

    signature = []
    for path in paths:
        path = Path(path)
        stem = next((path.name[: -len(s)] for s in MIRROR_SUFFIXES if path.name.endswith(s)), path.name)
        for suffix in MIRROR_SUFFIXES:
            candidate = path.parent / f"{stem}{suffix}"
            try:
                st = candidate.stat()
            except FileNotFoundError:
                continue
            signature.append((str(candidate), st.st_size, st.st_mtime_ns))
    return tuple(signature)


def _copy_data(data):
    """A TaskData whose mutable parts are the caller's own: the split record (runs add to it) and
    the IR splits' dicts; `datasets` Datasets are immutable and shared."""
    from benchmarks.datasets.loading import IRSplit

    def own(split):
        if not isinstance(split, IRSplit):
            return split
        return dataclasses.replace(
            split,
            queries=dict(split.queries),
            corpus=dict(split.corpus),
            qrels={query: dict(grades) for query, grades in split.qrels.items()},
        )

    return dataclasses.replace(
        data,
        validation=own(data.validation),
        test=own(data.test),
        split_record=copy.deepcopy(data.split_record),
    )


def task_data(spec, data_root: Path | None, **kwargs):
    """`benchmarks.datasets.load_task_data(spec, data_root, **kwargs)`, reused within the process
    for a local mirror whose files are unchanged. Returns the TaskData; its `reuse_token` names
    the load (features built from it are reused under that name)."""
    from benchmarks.datasets.loading import load_task_data, recording_mirror_reads

    if data_root is None:
        return load_task_data(spec, data_root, **kwargs)
    key = (repr(spec), str(Path(data_root).resolve()), tuple(sorted(kwargs.items())))
    kept = _DATA.get(key)
    if kept is not None and mirror_signature(kept[1]) == kept[2]:
        _DATA.move_to_end(key)
        STATS["data_reused"] += 1
        return _copy_data(kept[0])
    with recording_mirror_reads() as reads:
        data = load_task_data(spec, data_root, **kwargs)
    if data.train is not None and len(data.train) > MAX_TRAIN_ROWS:
        return data
    data.reuse_token = next(_TOKENS)
    _put(_DATA, key, (data, tuple(reads), mirror_signature(reads)))
    STATS["data_loaded"] += 1
    return _copy_data(data)


def tokenizer_fingerprint(tokenizer) -> str | None:
    """A digest of what a tokenizer does when called: its fast tokenizer's serialised model,
    normaliser, pre-tokeniser and post-processor (without the truncation and padding that each
    call sets), its class, special tokens, sides and length limit. None for a slow tokenizer
    (no serialisable state): its features are not reused."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return None
    state = json.loads(backend.to_str())
    state.pop("truncation", None)
    state.pop("padding", None)
    described = {
        "class": type(tokenizer).__name__,
        "backend": state,
        "special_tokens": tokenizer.special_tokens_map,
        "padding_side": tokenizer.padding_side,
        "truncation_side": tokenizer.truncation_side,
        "model_max_length": tokenizer.model_max_length,
    }
    return hashlib.sha256(json.dumps(described, sort_keys=True, default=str).encode()).hexdigest()


def training_features(kind, data, tokenizer, settings):
    """`kind.training_features(data, tokenizer, settings)` -> (features, collate), reused within
    the process for data from `task_data` and a fast tokenizer of the same content. The features
    list is the caller's own; the feature dicts are shared and only read (collate copies them into
    tensors)."""
    token = getattr(data, "reuse_token", None)  # None unless task_data kept the data (row cap included)
    if token is None:
        return kind.training_features(data, tokenizer, settings)
    fingerprint = tokenizer_fingerprint(tokenizer)
    if fingerprint is None:
        return kind.training_features(data, tokenizer, settings)
    # Where a retriever is saved is not an input of its features.
    key = (token, kind.__name__, fingerprint, dataclasses.replace(settings, ir_model_dir=None))
    kept = _FEATURES.get(key)
    if kept is not None:
        _FEATURES.move_to_end(key)
        STATS["features_reused"] += 1
        return list(kept[0]), kept[1]
    features, collate = kind.training_features(data, tokenizer, settings)
    _put(_FEATURES, key, (features, collate))
    STATS["features_built"] += 1
    return list(features), collate
