"""The run store: run records in Parquet, per-instance test scores as float32 arrays.

JSON Lines (contracts.run_record) stay the interface for small data; the store holds the same
records for the whole release (docs/analysis.md, "Run store"). A store is a folder of part files
`part-00000.parquet`, `part-00001.parquet`, ... (or a single `.parquet` file), every part one
row group of STORE_SCHEMA:

  model, task_type, dataset, train_set, lr, seed, validation_score, test_score, protocol, metric
      as in a run record (train_set, protocol, metric nullable)
  test_instance_scores  list<float32> | null   per-instance test metric, x100, in float32
  pretraining, provenance, other_scores  JSON text of those record fields (null when null)

A part is written atomically (temporary file + rename), so a store never holds half a part; its
key-value metadata `run_store` (JSON) names the source files it holds (`sources`) and those
skipped as bad (`skipped`: [path, reason]), which lets an interrupted import resume.
A store folder's `store.json` says what it holds: `source` (the tree imported into it, null for
records written by write_run_store), `complete` (false while an import runs: set once the last part
is written) and `parts` (the part files of the complete store). Readers refuse a folder whose
store.json is missing or not complete, or whose parts differ from it: an interrupted import is
never read as the whole release (docs/reliability.md).
Instance scores are float32 (7 significant digits; metrics are printed to 2 decimals); a record
read back from a store has float(np.float32(x)) instance scores.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from contracts.bounded import SMALL, BoundedReadError, read_text
from contracts.layout import RECORD_FILE
from contracts.paper import TASK_TYPES
from contracts.provenance import atomic_write_bytes
from contracts.run_record import SCHEMA_VERSION, RunRecord, RunRecordError, iter_run_records, read_record_file

STORE_SUFFIX = ".parquet"
PART_GLOB = "part-*.parquet"
STORE_MANIFEST = "store.json"
METADATA_KEY = b"run_store"
INSTANCES = "test_instance_scores"
JSON_FIELDS = ("pretraining", "provenance", "other_scores")
STORE_SCHEMA = pa.schema(
    [
        ("model", pa.string()),
        ("task_type", pa.string()),
        ("dataset", pa.string()),
        ("train_set", pa.string()),
        ("lr", pa.float64()),
        ("seed", pa.int64()),
        ("validation_score", pa.float64()),
        ("test_score", pa.float64()),
        ("protocol", pa.string()),
        ("metric", pa.string()),
        (INSTANCES, pa.list_(pa.float32())),
        *((name, pa.string()) for name in JSON_FIELDS),
    ]
)
SCALAR_COLUMNS = tuple(n for n in STORE_SCHEMA.names if n != INSTANCES and n not in JSON_FIELDS)
_REQUIRED = ("model", "task_type", "dataset", "lr", "seed", "validation_score", "test_score")


def is_run_store(path: str | os.PathLike) -> bool:
    """A `.parquet` file or folder, or a folder holding part files."""
    path = Path(path)
    return path.suffix == STORE_SUFFIX or (path.is_dir() and any(path.glob(PART_GLOB)))


def store_parts(path: str | os.PathLike) -> list[Path]:
    """The part files of a complete store, in order; an error naming the path when there are
    none, or when the folder's store.json does not say the store is complete with these parts."""
    path = Path(path)
    if path.is_file():
        return [path]
    parts = sorted(path.glob(PART_GLOB)) if path.is_dir() else []
    if not parts:
        raise RunRecordError(
            f"{path}: no run store here (expected a .parquet file or a folder of "
            f"{PART_GLOB}); write one with `python -m analysis import-released DIR -o OUT.parquet`"
        )
    check_complete(path, parts)
    return parts


def read_store_manifest(store: str | os.PathLike) -> dict | None:
    """The folder's store.json, None when it has none."""
    path = Path(store) / STORE_MANIFEST
    if not path.is_file():
        return None
    try:
        manifest = json.loads(read_text(path, SMALL))
    except (OSError, BoundedReadError, json.JSONDecodeError, RecursionError) as exc:
        raise RunRecordError(f"{path}: not readable JSON ({exc}); import into a new store") from None
    if not isinstance(manifest, dict):
        raise RunRecordError(f"{path}: not a store manifest (expected an object); import into a new store")
    return manifest


def write_store_manifest(store: str | os.PathLike, source: str | None, parts: list[Path] | None = None) -> Path:
    """store.json: `parts` None while an import runs (complete false), the store's parts once done."""
    body = {"source": source, "complete": parts is not None, "parts": [p.name for p in parts or ()]}
    return atomic_write_bytes(Path(store) / STORE_MANIFEST, (json.dumps(body, indent=2) + "\n").encode())


def check_complete(store: Path, parts: list[Path]) -> None:
    """A store folder is read only when its store.json says complete, with exactly these parts."""
    manifest = read_store_manifest(store)
    rerun = f"run `python -m analysis import-released {(manifest or {}).get('source') or 'DIR'} -o {store}` again"
    if manifest is None:
        raise RunRecordError(
            f"{store}: no {STORE_MANIFEST}: an import that did not finish (or one from before {STORE_MANIFEST} "
            f"existed); {rerun}: it resumes and marks the store complete"
        )
    if not manifest.get("complete"):
        raise RunRecordError(
            f"{store}: the import into it did not finish ({len(parts)} parts so far); {rerun}: it resumes"
        )
    listed, found = set(manifest.get("parts") or ()), {p.name for p in parts}
    if listed != found:
        missing, extra = sorted(listed - found), sorted(found - listed)
        raise RunRecordError(
            f"{store}: its parts differ from {STORE_MANIFEST} (missing: {missing or 'none'}; not listed: "
            f"{extra or 'none'}); import into a new store"
        )


def instances_array(scores: Iterable[np.ndarray | None]) -> pa.ListArray:
    """list<float32> column of per-run instance score arrays (None: a run without them)."""
    scores = list(scores)
    lengths = np.array([0 if s is None else len(s) for s in scores], dtype=np.int64)
    offsets = np.zeros(len(scores) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    present = [np.asarray(s, dtype=np.float32) for s in scores if s is not None]
    values = np.concatenate(present) if present else np.empty(0, dtype=np.float32)
    mask = np.array([s is None for s in scores], dtype=bool)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values), mask=pa.array(mask))


def _json_or_null(value) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True)


def records_table(records: list[RunRecord], instances: list[np.ndarray | None] | None = None) -> pa.Table:
    """STORE_SCHEMA rows of `records`; `instances` (x100 scores) replaces their instance scores
    (so that the import need not hold them as Python floats)."""
    if instances is None:
        instances = [None if r.test_instance_scores is None else np.asarray(r.test_instance_scores) for r in records]
    columns = {name: [getattr(r, name) for r in records] for name in SCALAR_COLUMNS}
    columns["pretraining"] = [_json_or_null(r.pretraining.to_dict() if r.pretraining else None) for r in records]
    columns["provenance"] = [json.dumps(r.provenance or {}, sort_keys=True) for r in records]
    columns["other_scores"] = [_json_or_null(r.other_scores) for r in records]
    arrays = [
        instances_array(instances) if name == INSTANCES else pa.array(columns[name], type)
        for name, type in zip(STORE_SCHEMA.names, STORE_SCHEMA.types)
    ]
    return pa.Table.from_arrays(arrays, schema=STORE_SCHEMA)


def write_part(
    path: str | os.PathLike, table: pa.Table, sources: list[str] = (), skipped: list[tuple[str, str]] = ()
) -> Path:
    """One part file, atomically: `table` as one zstd-compressed row group, with its manifest."""
    manifest = json.dumps(
        {"schema_version": SCHEMA_VERSION, "sources": list(sources), "skipped": [list(s) for s in skipped]}
    )
    table = table.replace_schema_metadata({METADATA_KEY: manifest.encode()})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd", row_group_size=max(1, table.num_rows))
    return atomic_write_bytes(path, sink.getvalue().to_pybytes())


def part_path(store: str | os.PathLike, index: int) -> Path:
    return Path(store) / f"part-{index:05d}{STORE_SUFFIX}"


def write_run_store(path: str | os.PathLike, records: Iterable[RunRecord], rows_per_part: int = 5000) -> Path:
    """Records -> a store folder at `path` (a new folder; parts of rows_per_part records)."""
    path = Path(path)
    if path.exists():
        raise RunRecordError(f"{path}: already exists; a store is written once (remove it first)")
    batch, index = [], 0
    for record in records:
        batch.append(record)
        if len(batch) == rows_per_part:
            write_part(part_path(path, index), records_table(batch))
            batch, index = [], index + 1
    if batch or index == 0:
        write_part(part_path(path, index), records_table(batch))
    write_store_manifest(path, None, sorted(path.glob(PART_GLOB)))
    return path


def part_manifest(part: Path) -> dict:
    """The part's `run_store` metadata: sources and skipped files ({} for a foreign Parquet file)."""
    metadata = pq.read_schema(part).metadata or {}
    return json.loads(metadata[METADATA_KEY]) if METADATA_KEY in metadata else {}


def read_part(part: Path, columns: list[str] | None = None) -> pa.Table:
    """Columns of one part, checked against STORE_SCHEMA; errors name the file and the column."""
    try:
        schema = pq.read_schema(part)
    except (OSError, pa.ArrowInvalid) as exc:
        raise RunRecordError(f"{part}: not a readable Parquet file ({exc})") from None
    for name in columns or STORE_SCHEMA.names:
        expected = STORE_SCHEMA.field(name).type
        if name not in schema.names:
            raise RunRecordError(
                f"{part}: column '{name}' is missing; a run store has the columns "
                f"{STORE_SCHEMA.names} (contracts/run_store.py)"
            )
        if schema.field(name).type != expected:
            raise RunRecordError(f"{part}: column '{name}' has type {schema.field(name).type}, expected {expected}")
    table = pq.read_table(part, columns=columns or STORE_SCHEMA.names)
    check_table(table, str(part))
    return table


def _first_bad(where: str, table: pa.Table, name: str, bad: pa.Array, problem: str) -> None:
    bad = np.asarray(bad.fill_null(True))
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise RunRecordError(
            f"{where}: row {row}: field '{name}' {problem} (value {table.column(name)[row].as_py()!r})"
        )


def check_table(table: pa.Table, where: str) -> None:
    """The schema rules of a run record, column-wise, on the columns present in `table`."""
    names = set(table.column_names)
    for name in set(_REQUIRED) & names:
        _first_bad(where, table, name, pc.is_null(table.column(name)), "is missing; every run record needs it")
    if "task_type" in names:
        _first_bad(
            where,
            table,
            "task_type",
            pc.invert(pc.is_in(table.column("task_type"), pa.array(TASK_TYPES))),
            f"is not one of {TASK_TYPES}",
        )
    if "lr" in names:
        _first_bad(where, table, "lr", pc.invert(pc.greater(table.column("lr"), 0)), "must be > 0")
    if "seed" in names:
        _first_bad(where, table, "seed", pc.less(table.column("seed"), 0), "must be >= 0")
    for name in ("validation_score", "test_score"):
        if name in names:
            column = table.column(name)
            inside = pc.and_(pc.greater_equal(column, 0), pc.less_equal(column, 100))
            _first_bad(where, table, name, pc.invert(inside), "is outside [0, 100] (scores are x100)")
    if INSTANCES in names:
        values = pc.list_flatten(table.column(INSTANCES))
        if len(values) and not (
            pc.min(values).as_py() >= 0 and pc.max(values).as_py() <= 100 and pc.sum(pc.is_nan(values)).as_py() == 0
        ):
            inside = pc.and_(pc.greater_equal(values, 0), pc.less_equal(values, 100))
            lists = table.column(INSTANCES).combine_chunks()
            parent = pc.list_parent_indices(lists).to_numpy()
            row = int(parent[np.flatnonzero(~np.asarray(inside.fill_null(False)))[0]])
            raise RunRecordError(f"{where}: row {row}: field '{INSTANCES}' holds a value outside [0, 100]")


def instance_arrays(column: pa.ChunkedArray | pa.ListArray) -> list[np.ndarray | None]:
    """A list<float32> column as one float32 array per row (views of one buffer), None for null."""
    lists = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    values = lists.flatten().to_numpy(zero_copy_only=False)
    offsets = (lists.offsets.to_numpy() - lists.offsets[0].as_py()).astype(np.int64)
    valid = np.asarray(lists.is_valid())
    return [values[offsets[i] : offsets[i + 1]] if valid[i] else None for i in range(len(lists))]


def iter_store_records(path: str | os.PathLike, instance_scores: bool = True) -> Iterator[RunRecord]:
    """The records of a store, part by part; `instance_scores=False` leaves them out (fast)."""
    columns = list(STORE_SCHEMA.names) if instance_scores else [n for n in STORE_SCHEMA.names if n != INSTANCES]
    for part in store_parts(path):
        table = read_part(part, columns)
        rows = {name: table.column(name).to_pylist() for name in columns if name != INSTANCES}
        arrays = instance_arrays(table.column(INSTANCES)) if instance_scores else [None] * table.num_rows
        for i, scores in enumerate(arrays):
            data = {name: rows[name][i] for name in rows}
            for name in JSON_FIELDS:
                data[name] = json.loads(data[name]) if data[name] is not None else None
            data["provenance"] = data["provenance"] or {}
            data["schema_version"] = SCHEMA_VERSION
            record = RunRecord.from_dict(data, f"{part}: row {i}")
            if scores is not None:
                record = replace(record, test_instance_scores=tuple(scores.astype(np.float64).tolist()))
            yield record


def iter_records_in(paths: Iterable[str | os.PathLike]) -> Iterator[RunRecord]:
    """Records from .jsonl files, run stores and directories of per-run `record.json` files."""
    for path in map(Path, paths):
        if is_run_store(path):
            yield from iter_store_records(path)
        elif path.is_dir():
            for file in sorted(path.rglob(RECORD_FILE)):
                yield read_record_file(file)
        else:
            yield from iter_run_records(path)
