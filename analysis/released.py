"""Import the paper's released raw fine-tuning results (EncodEval layout) as run records.

Layout (hgissbkh/EncodEval, branch MLM_vs_CLM; docs/release.md):
  results/<model>/<SC|TC|QA|IR>/<folder>/[<train_set>_]lr<LR>_sd<SEED>/results.json
  = {"validation": {"score": s, "scores_i": [...]}, "test": {"score": s, "scores_i": [...]}}
with scores in [0, 1]; `scores_i` (per-instance scores) may be absent. Records hold scores x100.
Every dataset folder maps to a dataset id (contracts.paper.RELEASED_FOLDERS: SC/mnli_m -> mnli,
TC/conll2003_en -> conll2003, ...); an unknown folder is an error, never skipped. The scores are
the paper protocol's: records get protocol "paper" and the metric of their task type
(contracts.paper.PAPER_PROTOCOL_METRICS). `import_released_to_store` streams a whole release into a
run store (contracts.run_store; docs/analysis.md, "import-released").
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import stat
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
from tqdm import tqdm

from contracts.locks import FolderInUse, folder_lock
from contracts.paper import DATASET_BY_ID, PAPER_PROTOCOL_METRICS, RELEASED_FOLDERS, TASK_TYPES
from contracts.run_record import RunRecord, RunRecordError
from contracts.run_store import (
    INSTANCES,
    PART_GLOB,
    part_manifest,
    part_path,
    read_part,
    read_store_manifest,
    records_table,
    write_part,
    write_store_manifest,
)

_LIST_START = re.compile(rb'"scores_i"\s*:\s*\[')
PART_VALUES = 2**24  # instance scores per store part: 64 MB of float32 (bounded memory)
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
        raise ReleasedImportError(
            f'{path}: missing object \'{split}\'; expected {{"validation": {{"score": ...}}, "test": {{"score": ...}}}}'
        )
    value = block.get(field)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise ReleasedImportError(f"{path}: '{split}.{field}' is {value!r}; expected a number in [0, 1]")
    if not 0.0 <= value <= 1.0:
        raise ReleasedImportError(f"{path}: '{split}.{field}' is {value}; released scores are in [0, 1]")
    return float(value)


def _check_instances(path: Path, values) -> np.ndarray | None:
    """test.scores_i as float64 x100 scores (None when absent or empty); an error otherwise."""
    if values is None:
        return None
    if isinstance(values, np.ndarray):
        array = values
    elif isinstance(values, list) and not any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in values):
        array = np.asarray(values, dtype=np.float64)
    else:
        array = None
    if array is None or not (np.all(array >= 0.0) and np.all(array <= 1.0)):
        raise ReleasedImportError(f"{path}: 'test.scores_i' must be a list of numbers in [0, 1]")
    return 100.0 * array if array.size else None


_CSV_READ = pa_csv.ReadOptions(column_names=["x"], use_threads=False)
_CSV_PARSE = pa_csv.ParseOptions(delimiter="\x01")
_CSV_CONVERT = pa_csv.ConvertOptions(column_types={"x": pa.float64()})
_WHITESPACE = b" \t\r\n"


def _parse_number_list(text: bytes) -> np.ndarray | None:
    """The numbers between a JSON list's brackets, parsed in C (Arrow's CSV reader); None when
    they are not all plain numbers (the caller then parses the file with json for its error)."""
    compact = text.translate(None, _WHITESPACE)
    if not compact:
        return np.empty(0)
    try:
        table = pa_csv.read_csv(
            io.BytesIO(compact.replace(b",", b"\n")),
            read_options=_CSV_READ,
            parse_options=_CSV_PARSE,
            convert_options=_CSV_CONVERT,
        )
    except pa.ArrowInvalid:
        return None
    values = table.column(0)
    if values.null_count or len(values) != compact.count(b",") + 1:
        return None
    return values.to_numpy()


def parse_results_json(raw: bytes) -> dict | None:
    """json.loads of a released results.json, fast for its large `scores_i` lists: the test
    split's list becomes a float64 array, the validation split's is never parsed (the analysis
    does not use it) and becomes None. None when the file is not of that simple shape."""
    pieces, lists, pos = [], [], 0
    while (key := raw.find(b'"scores_i"', pos)) >= 0:
        match = _LIST_START.match(raw, key)
        if match is None:
            return None
        end = raw.find(b"]", match.end())
        if end < 0:
            return None
        pieces += [raw[pos : match.end() - 1], b'"\\u0000%d"' % len(lists)]
        lists.append(raw[match.end() : end])
        pos = end + 1
    pieces.append(raw[pos:])
    try:
        data = json.loads(b"".join(pieces))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(data, dict):
        return None
    for split, block in data.items():
        placeholder = block.get("scores_i") if isinstance(block, dict) else None
        if isinstance(placeholder, str) and placeholder.startswith("\0"):
            block["scores_i"] = _parse_number_list(lists[int(placeholder[1:])]) if split == "test" else None
            if split == "test" and block["scores_i"] is None:
                return None
    return data


def dataset_of_folder(path: Path, task_type: str, folder: str) -> str:
    """The dataset id of a released dataset folder; an error listing the known folders otherwise."""
    if (task_type, folder) in RELEASED_FOLDERS:
        return RELEASED_FOLDERS[(task_type, folder)]
    elsewhere = [t for t, f in RELEASED_FOLDERS if f == folder]
    if elsewhere:
        raise ReleasedImportError(f"{path}: dataset folder '{folder}' belongs under {elsewhere[0]}/, not {task_type}/")
    known = ", ".join(f"{t}/{f}" for t, f in RELEASED_FOLDERS)
    raise ReleasedImportError(
        f"{path}: unknown released dataset folder '{task_type}/{folder}'; "
        f"the known folders are {known} (contracts/paper.py)"
    )


# A released results.json is at most a few hundred kB (its per-instance test scores: about 20 bytes
# for each of MNLI's 9,815 test examples); a file of gigabytes is no run (issue 66: read whole)
MAX_RESULTS_BYTES = 64 << 20


def read_file_inside(path: Path, root: Path) -> bytes:
    """The bytes of `path`, a regular file inside `root` (links inside the tree are followed):
    a link out of the tree, a device (/dev/zero would fill the memory), a FIFO (reading it waits
    for a writer) or a folder is refused in one line before it is read. The file is opened without
    blocking and its type checked on the open descriptor, so it cannot be swapped in between."""
    try:
        real = path.resolve()
    except (RuntimeError, OSError):  # Python 3.11 raises RuntimeError on a symlink loop, 3.13 OSError
        raise ReleasedImportError(f"{path}: a link that loops: refused; replace it with the file") from None
    if not real.is_relative_to(root.resolve()):
        raise ReleasedImportError(f"{path}: links to {real}, outside the tree {root}: refused; copy the file into it")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise ReleasedImportError(f"{path}: cannot be read ({exc})") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kinds = {
                stat.S_IFIFO: "a FIFO",
                stat.S_IFCHR: "a device",
                stat.S_IFBLK: "a device",
                stat.S_IFDIR: "a folder",
            }
            kind = kinds.get(stat.S_IFMT(mode), "not a file")
            raise ReleasedImportError(
                f"{path}: {kind}, not a regular file: refused; a release holds results.json files"
            )
        size = os.fstat(fd).st_size
        if size > MAX_RESULTS_BYTES:
            raise ReleasedImportError(
                f"{path}: {size:,} bytes, more than the {MAX_RESULTS_BYTES:,} a results.json may hold: refused unread"
            )
        with os.fdopen(os.dup(fd), "rb") as handle:
            data = handle.read(MAX_RESULTS_BYTES + 1)
        if len(data) > MAX_RESULTS_BYTES:  # grew while read
            raise ReleasedImportError(f"{path}: more than the {MAX_RESULTS_BYTES:,} bytes a results.json may hold")
        return data
    except OSError as exc:
        raise ReleasedImportError(f"{path}: cannot be read ({exc})") from None
    finally:
        os.close(fd)


def parse_released_run(path: Path, root: Path) -> tuple[RunRecord, np.ndarray | None]:
    """One results.json -> (its RunRecord without instance scores, its x100 test instance scores
    as float64, or None); errors name the file and the field."""
    parts = path.relative_to(root).parts
    if len(parts) != 5:
        raise ReleasedImportError(
            f"{path}: expected <model>/<task type>/<folder>/[<train_set>_]lr<LR>_sd<SEED>/results.json under {root}"
        )
    model, task_type, folder, run_dir, _ = parts
    if task_type not in TASK_TYPES:
        raise ReleasedImportError(f"{path}: task type folder '{task_type}' is not one of {TASK_TYPES}")
    dataset = dataset_of_folder(path, task_type, folder)
    match = _RUN_DIR.match(run_dir)
    if match is None:
        raise ReleasedImportError(f"{path}: run folder '{run_dir}' is not [<train_set>_]lr<LR>_sd<SEED>")
    raw = read_file_inside(path, root)
    data = parse_results_json(raw)
    if data is None:  # not the simple shape: the plain parser, for the precise error
        try:
            data = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ReleasedImportError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ReleasedImportError(f"{path}: the top level must be an object")
    provenance = {"source": "released", "path": "/".join(parts)}
    if dataset not in DATASET_BY_ID:
        provenance["reported_by_paper"] = False
    validation, test = _score(path, data, "validation"), _score(path, data, "test")
    try:
        record = RunRecord.create(
            model,
            task_type=task_type,
            dataset=dataset,
            train_set=match["train_set"],
            lr=float(match["lr"]),
            seed=int(match["seed"]),
            validation_score=100.0 * validation,
            test_score=100.0 * test,
            provenance=provenance,
            protocol="paper",
            metric=PAPER_PROTOCOL_METRICS[task_type],
        )
    except RunRecordError as exc:
        raise ReleasedImportError(f"{path}: {exc}") from None
    return record, _check_instances(path, data["test"].get("scores_i"))


def read_released_run(path: Path, root: Path) -> RunRecord:
    """One results.json -> a RunRecord (source "released"); errors name the file."""
    record, instances = parse_released_run(path, root)
    return record if instances is None else replace(record, test_instance_scores=tuple(instances.tolist()))


def released_files(directory: str | Path) -> tuple[Path, list[Path], list[tuple[str, str]]]:
    """The results root, its results.json files (sorted) and the folders of the tree not followed,
    (path, reason): a link to a folder out of the tree, a link that dangles or loops, an unreadable
    folder (issue 66: a tree whose model folder was a link out of it lost those runs without a word,
    "imported 630 runs" for 720). A link to a folder inside the tree is not followed either: its
    target is read where it is, once."""
    root = results_root(directory)
    real_root = root.resolve()
    files, bad = set(), []

    def unreadable(error: OSError) -> None:
        bad.append((Path(error.filename).relative_to(root).as_posix(), f"{error.filename}: cannot be read ({error})"))

    for folder, dirs, names in os.walk(root, onerror=unreadable):
        # a results.json that is a dangling or looping link is listed too, and then refused like any
        # other bad file (issue 56: rglob passed over it)
        if "results.json" in names:
            files.add(Path(folder) / "results.json")
        for name in [*dirs, *(n for n in names if n != "results.json")]:
            path = Path(folder) / name
            if not path.is_symlink():
                continue
            relative = path.relative_to(root).as_posix()
            try:
                real = path.resolve(strict=True)
            except (RuntimeError, OSError):
                bad.append((relative, f"{path}: a link that loops or dangles: not followed"))
                continue
            if real.is_dir() and not real.is_relative_to(real_root):
                bad.append((relative, f"{path}: links to {real}, outside the tree {root}: not followed"))
    files = sorted(files)
    if not files and not bad:
        raise ReleasedImportError(f"{root}: no results.json found (expected the released 'results' tree)")
    return root, files, sorted(bad)


def _refuse_unfollowed(bad: list[tuple[str, str]], skip_bad: bool) -> None:
    """A tree with folders not followed is refused, naming the first and the count, unless skip_bad."""
    if bad and not skip_bad:
        others = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        raise ReleasedImportError(
            f"{bad[0][1]}{others}: their runs would be left out; copy them into the tree, or pass --skip-bad "
            "to import the rest (they are listed as skipped)"
        )


def import_released(directory: str | Path) -> tuple[list[RunRecord], list[str]]:
    """All runs under a released `results` tree, and the datasets the paper does not report."""
    records, _ = read_released(directory)
    return records, unreported_datasets(r.dataset for r in records)


def read_released(directory: str | Path, skip_bad: bool = False) -> tuple[list[RunRecord], list[tuple[str, str]]]:
    """The runs of a released tree and the files skipped as bad, (path, reason): a bad file
    raises its ReleasedImportError unless `skip_bad`."""
    root, files, unfollowed = released_files(directory)
    _refuse_unfollowed(unfollowed, skip_bad)
    records, skipped = [], list(unfollowed)
    # disable=None: a progress bar on a terminal only (the release holds ~18,500 runs).
    for path in tqdm(files, desc="runs", unit="run", disable=None, leave=False):
        try:
            records.append(read_released_run(path, root))
        except ReleasedImportError as exc:
            if not skip_bad:
                raise
            skipped.append((path.relative_to(root).as_posix(), str(exc)))
    return records, skipped


def unreported_datasets(datasets) -> list[str]:
    return sorted(set(datasets) - set(DATASET_BY_ID))


@dataclass
class StoreImport:
    """What import_released_to_store did: runs in the store, files skipped as bad (path, reason),
    parts written now and parts kept from an earlier, interrupted import."""

    runs: int = 0
    with_instances: int = 0
    models: set = field(default_factory=set)
    datasets: Counter = field(default_factory=Counter)  # runs per dataset
    skipped: list = field(default_factory=list)
    parts_written: int = 0
    parts_kept: int = 0


def import_released_to_store(
    directory: str | Path, store: str | Path, skip_bad: bool = False, part_values: int = PART_VALUES
) -> StoreImport:
    """Stream a released tree into a run store (contracts.run_store), one part per batch of runs
    holding about `part_values` instance scores (bounded memory).

    Resumable: parts already in `store` (each written atomically, naming its source files) are
    kept and their files not read again; batches are cut at the same places, so an import that
    was interrupted and run again gives the same store as one that was not. A bad file stops the
    import with its error (ReleasedImportError), unless `skip_bad`: then it is listed in
    `skipped` (and in its part's manifest) and the import goes on.
    """
    root, files, unfollowed = released_files(directory)
    _refuse_unfollowed(unfollowed, skip_bad)
    store = Path(store)
    if store.is_file():
        raise ReleasedImportError(f"{store}: is a file; an import writes a store folder (or use -o X.jsonl)")
    try:
        with folder_lock(store, job="import-released", advice="wait for it to finish, or import into another -o"):
            summary = _import_locked(root, files, store, skip_bad, part_values)
    except (FolderInUse, RunRecordError) as exc:
        raise ReleasedImportError(str(exc)) from None
    summary.skipped = [*unfollowed, *summary.skipped]
    return summary


def _check_same_source(store: Path, root: Path, parts: list[Path]) -> str:
    """The store's source (the resolved tree); an error when it holds the import of another tree.
    A store from before store.json existed is another tree's when a file its parts name is not in
    this tree."""
    source = str(root.resolve())
    manifest = read_store_manifest(store)
    other = (manifest or {}).get("source")
    if manifest is None and parts:
        names = [name for part in parts for name in part_manifest(part).get("sources", [])]
        absent = next((name for name in names if not (root / name).is_file()), None)
        other = f"a tree holding {absent}" if absent else None
    if other is not None and other != source:
        raise ReleasedImportError(
            f"{store}: holds the import of {other}, not of {source}; import this tree into another -o "
            "(or remove that store first)"
        )
    return source


def _import_locked(root: Path, files: list[Path], store: Path, skip_bad: bool, part_values: int) -> StoreImport:
    for stale in store.glob(".part-*.tmp"):  # left by an interrupted write
        stale.unlink()
    summary, done = StoreImport(), set()
    parts = sorted(store.glob(PART_GLOB))
    tree = _check_same_source(store, root, parts)
    write_store_manifest(store, tree)  # not complete until the last part is written
    for part in parts:
        manifest = part_manifest(part)
        done.update(manifest.get("sources", []))
        done.update(path for path, _ in manifest.get("skipped", []))
        summary.skipped += [tuple(s) for s in manifest.get("skipped", [])]
        table = read_part(part, ["model", "dataset", INSTANCES])
        summary.runs += table.num_rows
        summary.with_instances += table.num_rows - table.column(INSTANCES).null_count
        summary.models.update(table.column("model").unique().to_pylist())
        summary.datasets.update(table.column("dataset").to_pylist())
    summary.parts_kept = len(parts)
    index = int(parts[-1].stem.split("-")[1]) + 1 if parts else 0
    todo = [f for f in files if f.relative_to(root).as_posix() not in done]
    records, instances, sources, skipped, values = [], [], [], [], 0

    def flush():
        nonlocal index, records, instances, sources, skipped, values
        write_part(part_path(store, index), records_table(records, instances), sources, skipped)
        summary.parts_written += 1
        index += 1
        records, instances, sources, skipped, values = [], [], [], [], 0

    for path in tqdm(todo, desc="import", unit="run", disable=None, initial=len(files) - len(todo), total=len(files)):
        source = path.relative_to(root).as_posix()
        try:
            record, scores = parse_released_run(path, root)
        except ReleasedImportError as exc:
            if not skip_bad:
                raise
            skipped.append((source, str(exc)))
            summary.skipped.append((source, str(exc)))
            continue
        records.append(record)
        instances.append(scores)
        sources.append(source)
        values += 0 if scores is None else len(scores)
        summary.runs += 1
        summary.with_instances += scores is not None
        summary.models.add(record.model)
        summary.datasets[record.dataset] += 1
        if values >= part_values:
            flush()
    if records or skipped:
        flush()
    if summary.runs == 0:
        raise ReleasedImportError(f"{root}: no run could be imported ({len(summary.skipped)} bad files)")
    write_store_manifest(store, tree, sorted(store.glob(PART_GLOB)))
    return summary
