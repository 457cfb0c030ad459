"""prepare-data: FineWeb-Edu-schema text -> packed token samples in MDS shards + manifest.json.

Documents are read in order (local files as given, a folder or glob in sorted order, or a hub
dataset), tokenized in batches without the tokenizer's own specials, given [bos] + ids + eos per
`bos`, concatenated and cut into `seq_len` samples (packing.SamplePacker); with `workers` > 1, each
process packs a contiguous group of the input files into its own part folder. Same inputs and config ->
byte-identical shards and index.json. The output appears only when complete: shards are written to
`<out>.partial` and renamed at the end, and a finished output is never overwritten.
"""

from __future__ import annotations

import glob
import gzip
import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from contracts.config import config_to_dict
from contracts.provenance import atomic_write_json, git_sha, package_versions, utc_now
from pretraining.assets import EMBEDDED_CORPUS
from pretraining.data.packing import SamplePacker, document_tokens

log = logging.getLogger(__name__)

EMBEDDED = "embedded"  # input alias: the shipped FineWeb-Edu-schema corpus
MDS_COLUMNS = {"input_ids": "ndarray:uint32", "doc_lengths": "ndarray:uint32"}
MANIFEST = "manifest.json"
FORMAT = "mlm-vs-clm/packed-mds"
FORMAT_VERSION = 1
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
        if self.workers > 1 and (self.hf_dataset or self.max_documents is not None):
            raise ValueError(
                "workers > 1 splits local input files: it cannot be combined with hf_dataset or max_documents"
            )


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


def _hub_texts(cfg: PrepareConfig) -> Iterator[list[str]]:
    import datasets

    dataset = datasets.load_dataset(
        cfg.hf_dataset, name=cfg.hf_config, split=cfg.hf_split, revision=cfg.hf_revision, streaming=cfg.hf_streaming
    )
    batch: list[str] = []
    for row in dataset:
        batch.append(row[cfg.text_column])
        if len(batch) == cfg.tokenize_batch_size:
            yield batch
            batch = []
    if batch:
        yield batch


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


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


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


def _check_output(out: Path) -> Path:
    if out.exists() and any(out.iterdir()):
        if (out / MANIFEST).exists():
            raise PrepareError(
                f"{out} already holds finished prepared data ({MANIFEST}); refusing to "
                "overwrite it: delete the folder or choose another --out"
            )
        raise PrepareError(f"{out} exists and is not empty; choose an empty or new --out")
    partial = out.with_name(out.name + ".partial")
    if partial.exists():
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
    from streaming.base.util import merge_index

    split = np.array_split(np.array(files, dtype=object), cfg.workers)
    groups = [[str(p) for p in group] for group in split if len(group)]
    parts = [partial / f"part-{i:05d}" for i in range(len(groups))]
    partial.mkdir(parents=True)
    # fork: workers inherit the imports (spawn re-imports torch & co. per worker). The parent has
    # not encoded anything yet, so the tokenizer's thread pool is not running at the fork.
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    context = multiprocessing.get_context(method)
    with ProcessPoolExecutor(max_workers=len(groups), mp_context=context) as pool:
        futures = [pool.submit(_prepare_part, g, cfg, str(p)) for g, p in zip(groups, parts)]
        bar = _progress_bar(len(futures), "part", progress)
        results = []
        for future in futures:  # in part order, so counts and errors are deterministic
            results.append(future.result())
            bar.update(1)
        bar.close()
    merge_index([str(p / "index.json") for p in parts], str(partial), keep_local=True)
    counts = {key: sum(r[key] for r in results) for key in results[0]}
    counts["parts"] = [{"part": p.name, "inputs": len(g), **r} for p, g, r in zip(parts, groups, results)]
    return counts


def prepare_data(cfg: PrepareConfig, progress: bool | None = None) -> dict:
    """Run prepare-data; returns the manifest (also written to `<out>/manifest.json`)."""
    from pretraining.tokenizer import load_tokenizer

    out = Path(cfg.out)
    partial = _check_output(out)
    tokenizer = load_tokenizer(cfg.tokenizer)  # fail early, before reading any input
    started = time.perf_counter()
    if cfg.inputs:
        files = resolve_inputs(cfg.inputs)
        inputs = [{"path": str(p), "bytes": p.stat().st_size, "sha256": sha256_file(p)} for p in files]
    else:
        files = []
        inputs = [
            {
                "hub": cfg.hf_dataset,
                "config": cfg.hf_config,
                "split": cfg.hf_split,
                "revision": cfg.hf_revision,
                "streaming": cfg.hf_streaming,
            }
        ]
    if cfg.workers > 1 and len(files) > 1:
        counts = _prepare_parallel(files, cfg, partial, progress)
    else:
        if files:
            total = _count_rows(files)
            batches = (b for p in files for b in _file_texts(p, cfg.text_column, cfg.tokenize_batch_size))
        else:
            total, batches = None, _hub_texts(cfg)
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

    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "columns": MDS_COLUMNS,
        "seq_len": cfg.seq_len,
        # tokens: document tokens including the bos/eos added here; leftover_tokens: the last,
        # incomplete sample (of each part when workers > 1), dropped.
        "counts": counts,
        "inputs": inputs,
        "tokenizer": tokenizer_record(tokenizer, cfg.tokenizer),
        "config": config_to_dict(cfg),
        "code": {"git_sha": git_sha(), "package_versions": package_versions()},
        "created": utc_now(),
        "seconds": round(time.perf_counter() - started, 3),
    }
    atomic_write_json(partial / MANIFEST, manifest)
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
