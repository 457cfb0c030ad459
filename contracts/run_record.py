"""Run records: one JSON object per fine-tuning run, the only interface benchmarks -> analysis.

Schema version 1 (documented in README.md, section "Run records"):

  schema_version  1
  model           str    checkpoint name, release-style when it has one ("610m-mlm40-42k")
  pretraining     object | null   PretrainingDescription of the model (null: external model)
  task_type       "SC" | "TC" | "QA" | "IR"
  dataset         str    dataset id ("sst2", "mldr_en", ...; contracts.paper.DATASETS)
  train_set       str | null   what the model was fine-tuned on when it differs ("msmarco_pairs")
  lr              float > 0
  seed            int >= 0
  validation_score float in [0, 100]   metric on the validation split, x100
  test_score      float in [0, 100]    metric on the reported test split, x100
  test_instance_scores  list[float in [0,100]] | null   per-instance test metric, x100
  provenance      object: source ("released" | "benchmarks" | ...), config_hash, git_sha,
                  package_versions, started, finished (ISO 8601); extra keys allowed
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from contracts.model_names import PretrainingDescription, parse_model_name
from contracts.paper import TASK_TYPES
from contracts.provenance import atomic_write_text

SCHEMA_VERSION = 1


class RunRecordError(ValueError):
    """A record that breaks the schema; the message names file, line and field."""


@dataclass(frozen=True)
class RunRecord:
    model: str
    task_type: str
    dataset: str
    lr: float
    seed: int
    validation_score: float
    test_score: float
    pretraining: PretrainingDescription | None = None
    train_set: str | None = None
    test_instance_scores: tuple[float, ...] | None = None
    provenance: dict = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION

    @classmethod
    def create(cls, model: str, **fields) -> "RunRecord":
        """A record whose pretraining description is parsed from the model name."""
        fields.setdefault("pretraining", parse_model_name(model))
        if fields.get("test_instance_scores") is not None:
            fields["test_instance_scores"] = tuple(fields["test_instance_scores"])
        record = cls(model=model, **fields)
        validate_record_dict(record.to_dict(), where="<new record>")
        return record

    def to_dict(self) -> dict:
        data = asdict(self)
        if self.test_instance_scores is not None:
            data["test_instance_scores"] = list(self.test_instance_scores)
        return data

    @classmethod
    def from_dict(cls, data: dict, where: str = "<dict>") -> "RunRecord":
        validate_record_dict(data, where)
        data = dict(data)
        if data.get("pretraining") is not None:
            data["pretraining"] = PretrainingDescription.from_dict(data["pretraining"])
        if data.get("test_instance_scores") is not None:
            data["test_instance_scores"] = tuple(float(x) for x in data["test_instance_scores"])
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})

    @property
    def key(self) -> tuple:
        """Identity of a run: two records with the same key describe the same run."""
        return (self.model, self.task_type, self.dataset, self.train_set, self.lr, self.seed)


_REQUIRED = {
    "schema_version": int, "model": str, "task_type": str, "dataset": str,
    "lr": (int, float), "seed": int, "validation_score": (int, float), "test_score": (int, float),
}
_PRETRAINING_FIELDS = set(PretrainingDescription.__dataclass_fields__)


def _fail(where: str, fld: str, problem: str, fix: str) -> None:
    raise RunRecordError(f"{where}: field '{fld}' {problem}; {fix}")


def _check_score(where: str, fld: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        _fail(where, fld, f"is {value!r}", "expected a number in [0, 100]")
    if not 0.0 <= value <= 100.0:
        _fail(where, fld, f"is {value}, outside [0, 100]", "scores are percentages (metric x100)")


def validate_record_dict(data, where: str) -> None:
    """Raise RunRecordError naming `where` (file:line) and the field for any schema violation."""
    if not isinstance(data, dict):
        raise RunRecordError(f"{where}: a run record must be a JSON object, got {type(data).__name__}")
    for name, types in _REQUIRED.items():
        if name not in data:
            _fail(where, name, "is missing", "every run record needs it (see README, 'Run records')")
        if isinstance(data[name], bool) or not isinstance(data[name], types):
            _fail(where, name, f"has type {type(data[name]).__name__}", f"expected {types}")
    if data["schema_version"] != SCHEMA_VERSION:
        _fail(where, "schema_version", f"is {data['schema_version']}",
              f"this version reads schema {SCHEMA_VERSION}")
    if data["task_type"] not in TASK_TYPES:
        _fail(where, "task_type", f"is {data['task_type']!r}", f"use one of {TASK_TYPES}")
    if not data["lr"] > 0:
        _fail(where, "lr", f"is {data['lr']}", "a learning rate must be > 0")
    if data["seed"] < 0:
        _fail(where, "seed", f"is {data['seed']}", "seeds are >= 0")
    _check_score(where, "validation_score", data["validation_score"])
    _check_score(where, "test_score", data["test_score"])
    scores = data.get("test_instance_scores")
    if scores is not None:
        if not isinstance(scores, list) or not scores:
            _fail(where, "test_instance_scores", "is not a non-empty list", "use null when absent")
        for i, value in enumerate(scores):
            _check_score(where, f"test_instance_scores[{i}]", value)
    pre = data.get("pretraining")
    if pre is not None:
        if not isinstance(pre, dict) or set(pre) != _PRETRAINING_FIELDS:
            _fail(where, "pretraining", "does not have the PretrainingDescription fields",
                  f"expected keys {sorted(_PRETRAINING_FIELDS)} or null")
    if not isinstance(data.get("provenance", {}), dict):
        _fail(where, "provenance", "is not an object", "use {} when unknown")
    unknown = set(data) - set(RunRecord.__dataclass_fields__)
    if unknown:
        _fail(where, sorted(unknown)[0], "is not part of schema 1", "remove it or move it into provenance")


def read_run_records(path: str | os.PathLike) -> list[RunRecord]:
    """Read a JSON Lines file of run records; errors name the file, line and field."""
    path = Path(path)
    if not path.exists():
        raise RunRecordError(f"{path}: no such run-record file; pass a .jsonl written by "
                             "`python -m benchmarks` or `python -m analysis import-released`")
    records = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                data = json.loads(line)
            except json.JSONDecodeError as exc:
                raise RunRecordError(f"{where}: not valid JSON ({exc.msg}); "
                                     "each line must be one JSON object") from None
            records.append(RunRecord.from_dict(data, where))
    return records


def iter_records_in(paths: Iterable[str | os.PathLike]) -> Iterator[RunRecord]:
    """Records from .jsonl files and from directories of per-run `record.json` files."""
    for path in map(Path, paths):
        if path.is_dir():
            for file in sorted(path.rglob("record.json")):
                yield RunRecord.from_dict(json.loads(file.read_text()), str(file))
        else:
            yield from read_run_records(path)


def write_run_records(path: str | os.PathLike, records: Iterable[RunRecord]) -> Path:
    """Write records atomically as JSON Lines (one record per line)."""
    text = "".join(json.dumps(r.to_dict(), sort_keys=True) + "\n" for r in records)
    return atomic_write_text(path, text)
