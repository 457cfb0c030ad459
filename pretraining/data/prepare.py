"""prepare-data: FineWeb-Edu-schema text -> packed token samples in MDS shards + manifest.json.

Documents are read in order (local files as given, a folder or glob in sorted order, or a hub
dataset), tokenized in batches without the tokenizer's own specials, given [bos] + ids + eos per
`bos`, concatenated and cut into `seq_len` samples (packing.SamplePacker); with `workers` > 1, each
process packs a contiguous group of the input files into its own part folder. Same inputs and config ->
byte-identical shards and index.json. The output appears only when complete: shards are written to
`<out>.partial` and renamed at the end, and a finished output is never overwritten.

A hub dataset is streamed (`datasets.load_dataset(..., streaming=True)`) at the commit its revision
resolves to, one part folder per data file of the split (`IterableDataset.shard`), and is
restartable: a part is renamed into `<out>.partial` when it is complete, so a rerun of the same
command after an interruption (a lost connection, a killed job) keeps the finished parts and
streams the others; a rerun with another source or config starts over.
"""

from __future__ import annotations

import glob
import gzip
import hashlib
import itertools
import json
import logging
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from contracts.bounded import SMALL, BoundedReadError, read_text
from contracts.config import config_to_dict
from contracts.hub import sha256_file
from contracts.processes import die_with_parent
from contracts.provenance import (
    DiskFullError,
    atomic_write_json,
    disk_full_cause,
    git_sha,
    package_versions,
    stable_hash,
    utc_now,
)
from pretraining.assets import EMBEDDED_CORPUS
from pretraining.data.format import FORMAT, FORMAT_VERSION, MANIFEST, MDS_COLUMNS
from pretraining.data.packing import SamplePacker, document_tokens

log = logging.getLogger(__name__)

EMBEDDED = "embedded"  # input alias: the shipped FineWeb-Edu-schema corpus
_SUFFIXES = (".parquet", ".jsonl", ".jsonl.gz")


class PrepareError(ValueError):
    """Bad inputs or output location; the message names the path and the fix."""


@dataclass(frozen=True)
class PrepareConfig:
    """What prepare-data reads, how it tokenizes and packs, and how it writes shards."""

    out: str
    # Either local files (parquet / jsonl[.gz], FineWeb-Edu schema; folders and globs expand in
    # sorted order; "embedded" = the shipped corpus) ...
    inputs: tuple[str, ...] = ()
    # ... or a hub dataset, e.g. HuggingFaceFW/fineweb-edu + sample-100BT (streamed by default).
    hf_dataset: str | None = None
    hf_config: str | None = None
    hf_split: str = "train"
    hf_revision: str | None = None
    hf_streaming: bool = True
    text_column: str = "text"
    max_documents: int | None = None  # stop after this many documents (None: all)
    tokenizer: str = "embedded"  # local folder, hub id or "embedded"
    seq_len: int = 2048
    bos: Literal["none", "document"] = "none"  # "document": prepend bos to every document
    tokenize_batch_size: int = 1000
    compression: str | None = "zstd"
    hashes: tuple[str, ...] = ("sha1", "xxh64")
    size_limit: str | int = "64mb"  # shard size before compression: "64mb" or bytes
    # Processes, each packing a contiguous group of the input files into its own part folder (one
    # index.json over all). Output depends on `workers`; same inputs + same workers -> same bytes.
    # A hub source is packed one part per data file whatever `workers` is (parts run side by side).
    workers: int = 1

    def __post_init__(self) -> None:
        if bool(self.inputs) == bool(self.hf_dataset):
            raise ValueError("give exactly one source: `inputs` (local files) or `hf_dataset`")
        if self.seq_len < 2:
            raise ValueError(f"seq_len must be >= 2, got {self.seq_len}")
        if self.tokenize_batch_size < 1:
            raise ValueError("tokenize_batch_size must be >= 1")
        if self.max_documents is not None and self.max_documents < 1:
            raise ValueError("max_documents must be >= 1 or null")
        if self.workers < 1:
            raise ValueError("workers must be >= 1")
        if self.workers > 1 and self.max_documents is not None:
            raise ValueError("workers > 1 packs the input files apart: it cannot be combined with max_documents")


def resolve_inputs(inputs: tuple[str, ...]) -> list[Path]:
    """Local input files in reading order: entries as given, folders and globs sorted."""
    files: list[Path] = []
    for entry in inputs:
        if entry == EMBEDDED:
            files.append(EMBEDDED_CORPUS)
        elif any(ch in entry for ch in "*?["):
            matched = sorted(Path(p) for p in glob.glob(entry, recursive=True))
            if not matched:
                raise PrepareError(f"input pattern {entry!r} matches no file")
            files.extend(matched)
        elif Path(entry).is_dir():
            matched = sorted(p for p in Path(entry).rglob("*") if p.is_file() and p.name.endswith(_SUFFIXES))
            if not matched:
                raise PrepareError(f"input folder {entry} holds no {'/'.join(_SUFFIXES)} file")
            files.extend(matched)
        elif Path(entry).is_file():
            files.append(Path(entry))
        else:
            raise PrepareError(f"input {entry} does not exist")
    for path in files:
        if not path.name.endswith(_SUFFIXES):
            raise PrepareError(f"input {path}: unsupported file type; use {', '.join(_SUFFIXES)}")
    return files


def _file_texts(path: Path, column: str, batch_size: int) -> Iterator[list[str]]:
    if path.name.endswith(".parquet"):
        import pyarrow.parquet as pq

        parquet = pq.ParquetFile(path)
        if column not in parquet.schema_arrow.names:
            raise PrepareError(f"{path}: no column {column!r} (columns: {parquet.schema_arrow.names}); set text_column")
        for batch in parquet.iter_batches(batch_size=batch_size, columns=[column]):
            yield batch.column(0).to_pylist()
        return
    opener = gzip.open if path.name.endswith(".gz") else open
    batch: list[str] = []
    with opener(path, "rt", encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                text = json.loads(line)[column]
            except (json.JSONDecodeError, KeyError, TypeError):
                raise PrepareError(f"{path}:{number}: expected a JSON object with a {column!r} string") from None
            batch.append(text)
            if len(batch) == batch_size:
                yield batch
                batch = []
    if batch:
        yield batch


def _row_texts(rows, cfg: PrepareConfig) -> Iterator[list[str]]:
    batch: list[str] = []
    for row in rows:
        batch.append(row[cfg.text_column])
        if len(batch) == cfg.tokenize_batch_size:
            yield batch
            batch = []
    if batch:
        yield batch


def _hub_dataset(cfg: PrepareConfig, sha: str | None = None):
    """The hub source as an IterableDataset at the commit its revision resolves to (or `sha`), and that commit."""
    import datasets

    from contracts.hub import resolve

    sha = sha or resolve(cfg.hf_dataset, "dataset", cfg.hf_revision).sha
    try:
        dataset = datasets.load_dataset(
            cfg.hf_dataset, name=cfg.hf_config, split=cfg.hf_split, revision=sha, streaming=cfg.hf_streaming
        )
    except Exception as exc:  # noqa: BLE001 - one line naming the source
        raise PrepareError(
            f"{cfg.hf_dataset} ({cfg.hf_config}, {cfg.hf_split}) at {sha[:12]}: {_first_line(exc)}"
        ) from exc
    if not isinstance(dataset, datasets.IterableDataset):
        dataset = dataset.to_iterable_dataset()
    return dataset, sha


def _hub_part(cfg: PrepareConfig, sha: str, index: int, out: str) -> dict:
    """One data file of the hub source -> its own shards in `out` (in a worker process)."""
    from pretraining.tokenizer import load_tokenizer

    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # one process per worker is the parallelism
    dataset, _ = _hub_dataset(cfg, sha)
    rows = dataset.shard(num_shards=dataset.num_shards, index=index)
    return _pack_and_write(_row_texts(rows, cfg), cfg, load_tokenizer(cfg.tokenizer), Path(out), bar=None)


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def _limited(batches: Iterator[list[str]], limit: int) -> Iterator[list[str]]:
    seen = 0
    for batch in batches:
        if seen + len(batch) >= limit:
            yield batch[: limit - seen]
            return
        seen += len(batch)
        yield batch


def _progress_bar(total: int | None, unit: str, progress: bool | None):
    from tqdm import tqdm

    # progress None: tqdm decides (on for a terminal, off otherwise)
    disable = None if progress is None else not progress
    return tqdm(total=total, unit=unit, desc="prepare-data", disable=disable)


def tokenizer_record(tokenizer, name: str) -> dict:
    """Name, files with sha256 (when on disk), and the sha256 of the exact tokenization rules."""
    from pretraining.tokenizer import resolve_tokenizer_path, special_token_ids

    files = {}
    source = Path(resolve_tokenizer_path(name))
    for filename in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        path = source / filename if source.is_dir() else None
        if path is None:
            try:
                from huggingface_hub import try_to_load_from_cache

                cached = try_to_load_from_cache(name, filename)
                path = Path(cached) if isinstance(cached, str) else None
            except Exception:  # noqa: BLE001 - a hub id that is not cached has no local file to hash
                path = None
        if path is not None and path.is_file():
            files[filename] = sha256_file(path)
    backend = tokenizer.backend_tokenizer.to_str().encode()
    return {
        "name": name,
        "files_sha256": files,
        "backend_sha256": hashlib.sha256(backend).hexdigest(),
        "special_tokens": special_token_ids(tokenizer).to_dict(),
    }


def _check_output(out: Path, keep_partial: bool = False) -> Path:
    if out.exists() and any(out.iterdir()):
        if (out / MANIFEST).exists():
            raise PrepareError(
                f"{out} already holds finished prepared data ({MANIFEST}); refusing to "
                "overwrite it: delete the folder or choose another --out"
            )
        raise PrepareError(f"{out} exists and is not empty; choose an empty or new --out")
    partial = out.with_name(out.name + ".partial")
    if partial.exists() and not keep_partial:  # a hub source resumes from it (_prepare_hub)
        log.warning("removing %s left by an interrupted prepare-data run", partial)
        shutil.rmtree(partial)
    return partial


def _pack_and_write(batches: Iterator[list[str]], cfg: PrepareConfig, tokenizer, out: Path, bar) -> dict:
    """Tokenize, pack and write one stream of documents as MDS shards in `out`; return its counts."""
    from streaming import MDSWriter

    from pretraining.tokenizer import special_token_ids

    special = special_token_ids(tokenizer)
    backend = tokenizer.backend_tokenizer
    bos_id = special.bos if cfg.bos == "document" else None
    packer = SamplePacker(cfg.seq_len)
    empty = 0
    with MDSWriter(
        out=str(out),
        columns=MDS_COLUMNS,
        compression=cfg.compression,
        hashes=list(cfg.hashes),
        size_limit=cfg.size_limit,
        progress_bar=False,
    ) as writer:
        for texts in batches:
            kept = [t for t in texts if t and t.strip()]
            empty += len(texts) - len(kept)
            for encoding in backend.encode_batch(kept, add_special_tokens=False):
                for sample in packer.add(document_tokens(encoding.ids, special.eos, bos_id)):
                    writer.write({"input_ids": sample.input_ids, "doc_lengths": sample.doc_lengths})
            if bar is not None:
                bar.update(len(texts))
                bar.set_postfix(samples=packer.samples, refresh=False)
    return {
        "documents": packer.documents,
        "empty_documents_skipped": empty,
        "tokens": packer.tokens,
        "samples": packer.samples,
        "tokens_in_samples": packer.samples * cfg.seq_len,
        "leftover_tokens": packer.leftover_tokens,
    }


def _prepare_part(files: list[str], cfg: PrepareConfig, out: str) -> dict:
    """One worker's contiguous group of input files -> its own shards in `out` (a part folder)."""
    from pretraining.tokenizer import load_tokenizer

    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # one process per worker is the parallelism
    batches = (b for p in files for b in _file_texts(Path(p), cfg.text_column, cfg.tokenize_batch_size))
    return _pack_and_write(batches, cfg, load_tokenizer(cfg.tokenizer), Path(out), bar=None)


def _prepare_parallel(files: list[Path], cfg: PrepareConfig, partial: Path, progress: bool | None) -> dict:
    """Contiguous file groups packed by `cfg.workers` processes into part-NNNNN/, then one index."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    import numpy as np

    split = np.array_split(np.array(files, dtype=object), cfg.workers)
    groups = [[str(p) for p in group] for group in split if len(group)]
    parts = [partial / f"part-{i:05d}" for i in range(len(groups))]
    partial.mkdir(parents=True)
    # fork: workers inherit the imports (spawn re-imports torch & co. per worker). The parent has
    # not encoded anything yet, so the tokenizer's thread pool is not running at the fork.
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    context = multiprocessing.get_context(method)
    with ProcessPoolExecutor(
        max_workers=len(groups), mp_context=context, initializer=die_with_parent, initargs=(os.getpid(),)
    ) as pool:
        futures = [pool.submit(_prepare_part, g, cfg, str(p)) for g, p in zip(groups, parts)]
        bar = _progress_bar(len(futures), "part", progress)
        results = []
        for future in futures:  # in part order, so counts and errors are deterministic
            results.append(future.result())
            bar.update(1)
        bar.close()
    counts = _merge_parts(parts, results, partial)
    counts["parts"] = [{"part": p.name, "inputs": len(g), **r} for p, g, r in zip(parts, groups, results)]
    return counts


def _merge_parts(parts: list[Path], results: list[dict], partial: Path) -> dict:
    """One index.json over the part folders (in order) and the summed counts."""
    from streaming.base.util import merge_index

    merge_index([str(p / "index.json") for p in parts], str(partial), keep_local=True)
    return {key: sum(r[key] for r in results) for key in results[0]}


PROGRESS_FILE = "progress.json"  # in <out>.partial of a hub source: what the finished parts belong to
PART_COUNTS = "counts.json"  # in each finished part of a hub source


def _read_own_json(path: Path):
    """A restart record prepare-data wrote (progress.json, a part's counts.json): a regular file of at
    most 1 MiB, or a PrepareError in one line naming it (issue 56)."""
    try:
        return json.loads(read_text(path, SMALL))
    except BoundedReadError as exc:
        raise PrepareError(f"{exc} (left by prepare-data in {path.parent})") from None


def _prepare_hub(cfg: PrepareConfig, tokenizer, partial: Path, progress: bool | None) -> tuple[dict, dict]:
    """The hub source, one part per data file, restartable (module docstring); (counts, input record)."""
    dataset, sha = _hub_dataset(cfg)
    n = dataset.num_shards
    body = {k: v for k, v in config_to_dict(cfg).items() if k not in ("out", "workers")}  # no effect on the output
    state = {"hub": cfg.hf_dataset, "commit": sha, "shards": n, "config_hash": stable_hash(body)}
    if partial.exists():
        previous = partial / PROGRESS_FILE
        if not previous.is_file() or _read_own_json(previous) != state:
            log.warning("removing %s: left by prepare-data with another source or config", partial)
            shutil.rmtree(partial)
    partial.mkdir(parents=True, exist_ok=True)
    atomic_write_json(partial / PROGRESS_FILE, state)
    for leftover in partial.glob("part-*.tmp"):
        shutil.rmtree(leftover)
    names = [f"part-{i:05d}" for i in range(n)]
    done = {name: _read_own_json(partial / name / PART_COUNTS) for name in names if (partial / name).is_dir()}
    if done:
        log.warning("prepare-data: resuming %s: %d of %d parts are finished", partial, len(done), n)
    todo = [i for i, name in enumerate(names) if name not in done]

    def finish(index: int, counts: dict) -> None:  # a part is complete: it moves into place
        tmp = partial / f"{names[index]}.tmp"
        atomic_write_json(tmp / PART_COUNTS, counts)
        os.replace(tmp, partial / names[index])
        done[names[index]] = counts

    if cfg.workers > 1 and len(todo) > 1:
        failure = _hub_parallel(cfg, sha, todo, partial, names, finish, progress)
    else:
        failure = _hub_serial(cfg, dataset, tokenizer, todo, done, partial, names, finish, progress)
    if failure is not None:
        index, exc = failure
        shutil.rmtree(partial / f"{names[index]}.tmp", ignore_errors=True)
        full = disk_full_cause(exc)
        if full is not None:
            raise DiskFullError(
                full.errno,
                f"{full.filename or partial}: no space left on the device; free space and rerun (it resumes)",
            ) from exc
        if isinstance(exc, PrepareError):
            raise exc
        raise PrepareError(
            f"streaming {cfg.hf_dataset}@{sha[:12]} failed in part {index + 1} of {n} ({_first_line(exc)}); "
            f"rerun the same command: the {len(done)} finished parts in {partial} are kept"
        ) from exc
    finished = list(itertools.takewhile(lambda name: name in done, names))  # max_documents may stop early
    counts = _merge_parts([partial / name for name in finished], [done[name] for name in finished], partial)
    counts["parts"] = [{"part": name, **done[name]} for name in finished]
    source = {
        "hub": cfg.hf_dataset,
        "config": cfg.hf_config,
        "split": cfg.hf_split,
        "revision": cfg.hf_revision,
        "commit": sha,
        "streaming": cfg.hf_streaming,
        "data_files": n,
    }
    return counts, source


def _hub_serial(cfg, dataset, tokenizer, todo, done, partial, names, finish, progress):
    """The parts `todo` one after the other in this process (max_documents stops early); returns
    (part index, exception) of a part that failed, None when all finished."""
    seen = sum(c["documents"] + c["empty_documents_skipped"] for c in done.values())
    bar = _progress_bar(None, "doc", progress)
    try:
        for index in todo:
            if cfg.max_documents is not None and seen >= cfg.max_documents:
                break
            bar.set_postfix_str(f"part {index + 1}/{len(names)}", refresh=False)
            batches = _row_texts(dataset.shard(num_shards=len(names), index=index), cfg)
            if cfg.max_documents is not None:
                batches = _limited(batches, cfg.max_documents - seen)
            try:
                counts = _pack_and_write(batches, cfg, tokenizer, partial / f"{names[index]}.tmp", bar)
            except Exception as exc:  # noqa: BLE001 - the stream broke (network, server): restartable
                return index, exc
            finish(index, counts)
            seen += counts["documents"] + counts["empty_documents_skipped"]
    finally:
        bar.close()
    return None


def _hub_parallel(cfg, sha, todo, partial, names, finish, progress):
    """The parts `todo` in `cfg.workers` processes (each streams its data file); a finished part is
    kept even when another fails. Returns (part index, exception) of the first failure, or None."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    failure = None
    with ProcessPoolExecutor(
        max_workers=min(cfg.workers, len(todo)),
        mp_context=multiprocessing.get_context(method),
        initializer=die_with_parent,
        initargs=(os.getpid(),),
    ) as pool:
        futures = {pool.submit(_hub_part, cfg, sha, i, str(partial / f"{names[i]}.tmp")): i for i in todo}
        bar = _progress_bar(len(todo), "part", progress)
        for future in as_completed(futures):
            index = futures[future]
            try:
                counts = future.result()
            except Exception as exc:  # noqa: BLE001 - reported once the running parts are done
                failure = failure or (index, exc)
                for other in futures:
                    other.cancel()
                continue
            finish(index, counts)
            bar.update(1)
        bar.close()
    return failure


def prepare_data(cfg: PrepareConfig, progress: bool | None = None) -> dict:
    """Run prepare-data; returns the manifest (also written to `<out>/manifest.json`)."""
    from pretraining.tokenizer import load_tokenizer

    out = Path(cfg.out)
    partial = _check_output(out, keep_partial=bool(cfg.hf_dataset))
    tokenizer = load_tokenizer(cfg.tokenizer)  # fail early, before reading any input
    started = time.perf_counter()
    if cfg.hf_dataset:
        counts, source = _prepare_hub(cfg, tokenizer, partial, progress)
        inputs = [source]
    else:
        files = resolve_inputs(cfg.inputs)
        inputs = [{"path": str(p), "bytes": p.stat().st_size, "sha256": sha256_file(p)} for p in files]
        if cfg.workers > 1 and len(files) > 1:
            counts = _prepare_parallel(files, cfg, partial, progress)
        else:
            total = _count_rows(files)
            batches = (b for p in files for b in _file_texts(p, cfg.text_column, cfg.tokenize_batch_size))
            if cfg.max_documents is not None:
                total = min(total, cfg.max_documents) if total is not None else cfg.max_documents
                batches = _limited(batches, cfg.max_documents)
            bar = _progress_bar(total, "doc", progress)
            counts = _pack_and_write(batches, cfg, tokenizer, partial, bar)
            bar.close()
    if counts["samples"] == 0:
        shutil.rmtree(partial)
        raise PrepareError(
            f"the inputs hold {counts['tokens']} tokens, fewer than one sample of {cfg.seq_len}: nothing written"
        )

    from pretraining.data.verify import measure_context

    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "columns": MDS_COLUMNS,
        "seq_len": cfg.seq_len,
        # tokens: document tokens including the bos/eos added here; tokens_in_samples: the tokens
        # written; leftover_tokens: the last, incomplete sample (of each part when workers > 1 or
        # the source is a hub dataset), dropped.
        "counts": counts,
        # how much of a token's attention lies in its own document (docs/data.md, "Context inside a window")
        "context": measure_context(partial),
        "inputs": inputs,
        "tokenizer": tokenizer_record(tokenizer, cfg.tokenizer),
        "config": config_to_dict(cfg),
        "code": {"git_sha": git_sha(), "package_versions": package_versions()},
        "created": utc_now(),
        "seconds": round(time.perf_counter() - started, 3),
    }
    atomic_write_json(partial / MANIFEST, manifest)
    (partial / PROGRESS_FILE).unlink(missing_ok=True)  # restart state of a hub source
    if out.exists():
        out.rmdir()  # empty (checked above)
    os.replace(partial, out)
    return manifest


def _count_rows(files: list[Path]) -> int | None:
    """Documents to read, for the progress bar (parquet metadata only; None if unknown)."""
    import pyarrow.parquet as pq

    if not all(p.name.endswith(".parquet") for p in files):
        return None
    return sum(pq.ParquetFile(p).metadata.num_rows for p in files)
