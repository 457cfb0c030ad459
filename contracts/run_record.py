"""Run records: one JSON object per fine-tuning run, the only interface benchmarks -> analysis.

Schema version 2 (documented in docs/analysis.md, section "Run records"; version 1 files, which
lack the three protocol fields, are still read):

  schema_version  2
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
  protocol        "paper" | "standard" | null   evaluation protocol of the scores above: "paper" =
                  the released harness's heads and metrics (EncodEval), "standard" = community
                  metrics (seqeval, official SQuAD, pytrec_eval); null = unknown (used as is)
  metric          str | null   name of the metric of the scores above (benchmarks.metrics)
  other_scores    object | null   protocol -> {metric, validation_score, test_score,
                  test_instance_scores}: the same run scored under the other protocol, where one
                  prediction serves both (TC, IR; SC, whose metric is accuracy under both)
  provenance      object: source ("released" | "benchmarks" | ...), config_hash, git_sha,
                  package_versions, started, finished (ISO 8601); extra keys allowed
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from contracts.bounded import BoundedReadError, read_text
from contracts.model_names import PretrainingDescription, parse_model_name
from contracts.paper import TASK_TYPES
from contracts.provenance import atomic_write_text

SCHEMA_VERSION = 2
READABLE_SCHEMA_VERSIONS = (1, 2)
PROTOCOLS = ("paper", "standard")


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
    protocol: str | None = None
    metric: str | None = None
    other_scores: dict | None = None
    schema_version: int = SCHEMA_VERSION

    @classmethod
    def create(cls, model: str, **fields) -> RunRecord:
        """A record whose pretraining description is parsed from the model name."""
        fields.setdefault("pretraining", parse_model_name(model))
        if fields.get("test_instance_scores") is not None:
            fields["test_instance_scores"] = tuple(fields["test_instance_scores"])
        if fields.get("other_scores") is not None:
            fields["other_scores"] = _plain_other_scores(fields["other_scores"])
        record = cls(model=model, **fields)
        validate_record_dict(record.to_dict(), where="<new record>")
        return record

    def to_dict(self) -> dict:
        data = asdict(self)
        if self.test_instance_scores is not None:
            data["test_instance_scores"] = list(self.test_instance_scores)
        return data

    @classmethod
    def from_dict(cls, data: dict, where: str = "<dict>") -> RunRecord:
        validate_record_dict(data, where)
        data = dict(data)
        if data.get("pretraining") is not None:
            data["pretraining"] = PretrainingDescription.from_dict(data["pretraining"])
        if data.get("test_instance_scores") is not None:
            data["test_instance_scores"] = tuple(map(float, data["test_instance_scores"]))
        if data["schema_version"] == 1:  # v1 had no protocol: released runs are the paper's
            source = (data.get("provenance") or {}).get("source")
            data["protocol"] = {"released": "paper", "benchmarks": "standard"}.get(source)
            data["schema_version"] = SCHEMA_VERSION
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})

    def scores_under(self, protocol: str) -> RunRecord | None:
        """This run with the scores of `protocol` as its scores, None when it has none.

        A record of unknown protocol (null) serves any protocol unchanged.
        """
        if protocol not in PROTOCOLS:
            raise ValueError(f"unknown protocol {protocol!r}; use one of {PROTOCOLS}")
        if self.protocol is None or self.protocol == protocol:
            return self
        other = (self.other_scores or {}).get(protocol)
        if other is None:
            return None
        instances = other.get("test_instance_scores")
        return replace(
            self,
            protocol=protocol,
            metric=other.get("metric"),
            validation_score=float(other["validation_score"]),
            test_score=float(other["test_score"]),
            test_instance_scores=tuple(instances) if instances is not None else None,
            other_scores={
                self.protocol: {
                    "metric": self.metric,
                    "validation_score": self.validation_score,
                    "test_score": self.test_score,
                    "test_instance_scores": list(self.test_instance_scores)
                    if self.test_instance_scores is not None
                    else None,
                }
            },
        )

    @property
    def key(self) -> tuple:
        """Identity of a run: two records with the same key describe the same run."""
        return (self.model, self.task_type, self.dataset, self.train_set, self.lr, self.seed)


_REQUIRED = {
    "schema_version": int,
    "model": str,
    "task_type": str,
    "dataset": str,
    "lr": (int, float),
    "seed": int,
    "validation_score": (int, float),
    "test_score": (int, float),
}
_PRETRAINING_FIELDS = set(PretrainingDescription.__dataclass_fields__)


def _plain_other_scores(other: dict) -> dict:
    return {
        protocol: {
            **scores,
            "test_instance_scores": list(scores["test_instance_scores"])
            if scores.get("test_instance_scores") is not None
            else None,
        }
        for protocol, scores in other.items()
    }


def _fail(where: str, fld: str, problem: str, fix: str) -> None:
    raise RunRecordError(f"{where}: field '{fld}' {problem}; {fix}")


def _check_score(where: str, fld: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        _fail(where, fld, f"is {value!r}", "expected a number in [0, 100]")
    if not 0.0 <= value <= 100.0:
        _fail(where, fld, f"is {value}, outside [0, 100]", "scores are percentages (metric x100)")


def _check_scores(where: str, fld: str, values: list) -> None:
    """_check_score of every element; C-level passes for the usual valid list (runs hold thousands
    of instance scores), the element-wise check only to name the first bad one."""
    if (
        set(map(type, values)) <= {float, int}
        and math.isfinite(sum(values))
        and min(values) >= 0.0
        and max(values) <= 100.0
    ):
        return
    for i, value in enumerate(values):
        _check_score(where, f"{fld}[{i}]", value)


def validate_record_dict(data, where: str) -> None:
    """Raise RunRecordError naming `where` (file:line) and the field for any schema violation."""
    if not isinstance(data, dict):
        raise RunRecordError(f"{where}: a run record must be a JSON object, got {type(data).__name__}")
    for name, types in _REQUIRED.items():
        if name not in data:
            _fail(where, name, "is missing", "every run record needs it (see README, 'Run records')")
        if isinstance(data[name], bool) or not isinstance(data[name], types):
            _fail(where, name, f"has type {type(data[name]).__name__}", f"expected {types}")
    if data["schema_version"] not in READABLE_SCHEMA_VERSIONS:
        _fail(
            where,
            "schema_version",
            f"is {data['schema_version']}",
            f"this version reads schemas {READABLE_SCHEMA_VERSIONS}",
        )
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
        _check_scores(where, "test_instance_scores", scores)
    pre = data.get("pretraining")
    if pre is not None:
        if not isinstance(pre, dict) or set(pre) != _PRETRAINING_FIELDS:
            _fail(
                where,
                "pretraining",
                "does not have the PretrainingDescription fields",
                f"expected keys {sorted(_PRETRAINING_FIELDS)} or null",
            )
    if not isinstance(data.get("provenance", {}), dict):
        _fail(where, "provenance", "is not an object", "use {} when unknown")
    allowed = set(RunRecord.__dataclass_fields__)
    if data["schema_version"] == 1:
        allowed -= {"protocol", "metric", "other_scores"}
    unknown = set(data) - allowed
    if unknown:
        _fail(
            where,
            sorted(unknown)[0],
            f"is not part of schema {data['schema_version']}",
            "remove it or move it into provenance",
        )
    _check_protocol_fields(data, where)


def _check_protocol_fields(data: dict, where: str) -> None:
    protocol = data.get("protocol")
    if protocol is not None and protocol not in PROTOCOLS:
        _fail(where, "protocol", f"is {protocol!r}", f"use one of {PROTOCOLS} or null")
    if data.get("metric") is not None and not isinstance(data["metric"], str):
        _fail(where, "metric", f"is {data['metric']!r}", "a metric name (string) or null")
    other = data.get("other_scores")
    if other is None:
        return
    if not isinstance(other, dict):
        _fail(where, "other_scores", "is not an object", "protocol -> scores, or null")
    for name, scores in other.items():
        fld = f"other_scores.{name}"
        if name not in PROTOCOLS or name == protocol:
            _fail(
                where, fld, "is not another protocol", f"keys are protocols in {PROTOCOLS} other than the record's own"
            )
        if not isinstance(scores, dict) or not {"validation_score", "test_score"} <= set(scores):
            _fail(
                where,
                fld,
                "lacks validation_score / test_score",
                "give {metric, validation_score, test_score, test_instance_scores}",
            )
        _check_score(where, f"{fld}.validation_score", scores["validation_score"])
        _check_score(where, f"{fld}.test_score", scores["test_score"])
        if scores.get("test_instance_scores"):
            _check_scores(where, f"{fld}.test_instance_scores", scores["test_instance_scores"])


MAX_RECORD_CHARS = 64 << 20  # one record (a test split's instance scores included); the importer's cap too


def _text_lines(handle, path: Path) -> Iterator[str]:
    """The lines of a text file, each read up to MAX_RECORD_CHARS + 1 characters; a file that is
    not UTF-8 is an error naming it (the codec's own message names no file)."""
    number = 0
    while True:
        try:
            line = handle.readline(MAX_RECORD_CHARS + 1)
        except UnicodeDecodeError as exc:
            raise RunRecordError(
                f"{path}:{number + 1}: not UTF-8 text ({exc.reason}); pass a .jsonl of run records"
            ) from None
        if not line:
            return
        number += 1
        yield line


def iter_run_records(path: str | os.PathLike) -> Iterator[RunRecord]:
    """The records of a JSON Lines file, one at a time; errors name the file, line and field."""
    path = Path(path)
    if not path.exists():
        raise RunRecordError(
            f"{path}: no such run-record file; pass a .jsonl written by "
            "`python -m benchmarks` or `python -m analysis import-released`"
        )
    if not path.is_file():  # a folder, a FIFO (reading would wait forever) or a device (/dev/zero)
        raise RunRecordError(f"{path}: not a regular file; pass a .jsonl of run records")
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(_text_lines(handle, path), start=1):
            where = f"{path}:{number}"
            if len(line) > MAX_RECORD_CHARS:
                raise RunRecordError(f"{where}: a line of more than {MAX_RECORD_CHARS:,} characters is no run record")
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except json.JSONDecodeError as exc:
                raise RunRecordError(
                    f"{where}: not valid JSON ({exc.msg}); each line must be one JSON object"
                ) from None
            yield RunRecord.from_dict(data, where)


def read_run_records(path: str | os.PathLike) -> list[RunRecord]:
    """Read a JSON Lines file of run records; errors name the file, line and field."""
    return list(iter_run_records(path))


def read_record_file(path: str | os.PathLike) -> RunRecord:
    """One run's `record.json`; a truncated or broken one is an error naming the file."""
    try:
        data = json.loads(read_text(path, MAX_RECORD_CHARS))
    except BoundedReadError as exc:
        raise RunRecordError(str(exc)) from None
    except json.JSONDecodeError as exc:
        raise RunRecordError(
            f"{path}: not valid JSON ({exc.msg} at character {exc.pos}; truncated?); remove it to redo the run"
        ) from None
    return RunRecord.from_dict(data, str(path))


def write_run_records(path: str | os.PathLike, records: Iterable[RunRecord]) -> Path:
    """Write records atomically as JSON Lines (one record per line)."""
    text = "".join(json.dumps(r.to_dict(), sort_keys=True) + "\n" for r in records)
    return atomic_write_text(path, text)
