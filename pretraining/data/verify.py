"""verify-data: check a prepare-data output against its index.json and manifest.json.

1. every shard named in index.json exists with the recorded size and hashes (all of them);
2. the sample count of the index equals the manifest's, and the manifest's token counts add up;
3. a few samples (first, last, evenly spaced) decode, have `seq_len` tokens, doc_lengths summing to
   `seq_len`, eos at every inner document end and ids inside the vocabulary; with the tokenizer
   available they are also decoded to text for a look.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from contracts.bounded import LARGE, BoundedReadError, read_text
from contracts.paths import UnsafeNameError, contained
from pretraining.data.format import FORMAT, MANIFEST, MdsIndexError, check_index, shard_file_name
from pretraining.data.format import check_columns as format_check_columns
from pretraining.data.packing import check_sample

CONTEXT_SAMPLES = 20_000  # samples the own-document share is measured over (the first ones)
WINDOW_SEED = 17  # DataConfig.shuffle_seed's default: the window splits a run makes by default


class DataVerificationError(ValueError):
    """Prepared data that does not match its own records; the message names the file."""


@dataclass
class VerifyReport:
    shards: int
    samples: int
    checked_samples: list[int]
    previews: list[str] = field(default_factory=list)
    context: dict = field(default_factory=dict)  # measure_context


def _read_json(path: Path, what: str) -> dict:
    if not path.is_file():
        raise DataVerificationError(f"{path} is missing: {what}")
    try:  # index.json and manifest.json list files (the shards, the inputs): at most 256 MiB (issue 56)
        return json.loads(read_text(path, LARGE))
    except BoundedReadError as exc:
        raise DataVerificationError(str(exc)) from None
    except json.JSONDecodeError as exc:
        raise DataVerificationError(f"{path} is not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise DataVerificationError(f"{path} is not valid JSON (nested too deeply)") from None


def _read_index(root: Path) -> dict:
    """root/index.json, its shard names and columns checked before any shard is read (issue 78)."""
    index = _read_json(root / "index.json", "not an MDS dataset (run prepare-data)")
    try:
        check_index(index, str(root / "index.json"))
    except MdsIndexError as exc:
        raise DataVerificationError(str(exc)) from None
    return index


def read_bytes_bounded(path: Path, size) -> bytes:
    """The bytes of a regular file that index.json says holds `size` bytes: a link to a device, a
    FIFO or a folder is refused before it is opened, and no more than `size` + 1 bytes are read."""
    import os
    import stat

    if not stat.S_ISREG(os.stat(path).st_mode):
        raise DataVerificationError(f"{path}: not a regular file; re-run prepare-data")
    with open(path, "rb") as handle:
        return handle.read(int(size) + 1)


def _shard_file(shard: dict) -> dict:
    """The index entry of the file on disk: the compressed one when there is one."""
    return shard["zip_data"] or shard["raw_data"]


def _check_shard_file(root: Path, shard: dict) -> bytes:
    """The shard file's bytes, after checking its size and every hash recorded in index.json."""
    from streaming.base.hashing import get_hash

    info = _shard_file(shard)
    try:
        path = contained(root, str(shard_file_name(info, str(root / "index.json"))), f"{root / 'index.json'}: shard")
    except (UnsafeNameError, MdsIndexError) as exc:
        raise DataVerificationError(str(exc)) from None
    if not path.is_file():
        raise DataVerificationError(f"shard {info['basename']} is missing from {root}")
    data = read_bytes_bounded(path, info["bytes"])
    if len(data) != info["bytes"]:
        raise DataVerificationError(
            f"shard {info['basename']} has {len(data)} bytes, index.json says "
            f"{info['bytes']}: the file is truncated or replaced; "
            "re-run prepare-data"
        )
    for algo, expected in sorted(info["hashes"].items()):
        got = get_hash(algo, data)
        if got != expected:
            raise DataVerificationError(
                f"shard {info['basename']}: {algo} is {got}, index.json says "
                f"{expected}: the file is corrupted; re-run prepare-data"
            )
    return data


def check_columns(shard: dict) -> None:
    """pretraining.data.format.check_columns, its refusal as a DataVerificationError."""
    try:
        format_check_columns(shard)
    except MdsIndexError as exc:
        raise DataVerificationError(str(exc)) from None


def read_sample(raw: bytes, shard: dict, index: int) -> dict:
    """Sample `index` of a shard from its decompressed bytes, decoded only as our columns."""
    from streaming.base.format.mds.reader import MDSReader

    check_columns(shard)
    # MDS layout: uint32 count, then count + 1 uint32 offsets, then the samples.
    begin, end = np.frombuffer(raw, np.uint32, count=2, offset=(1 + index) * 4)
    return MDSReader.from_json("", None, shard).decode_sample(raw[begin:end])


def measure_context(root: str | Path, max_samples: int = CONTEXT_SAMPLES, seed: int = WINDOW_SEED) -> dict:
    """The own-document share of attention keys (pretraining.data.context) over the first
    `max_samples` samples of prepared data, split into windows as pretraining splits them by
    default (random_split, data.shuffle_seed `seed`)."""
    from streaming.base.compression import decompress

    from pretraining.data.context import WindowContext
    from pretraining.data.windows import MIN_WINDOW

    root = Path(root)
    index = _read_index(root)
    context, start, mode = WindowContext(), 0, "random_split"
    for shard in index["shards"]:
        if start >= max_samples:
            break
        check_columns(shard)
        data = _check_shard_file(root, shard)
        raw = decompress(shard["compression"], data) if shard["zip_data"] else data
        for i in range(min(shard["samples"], max_samples - start)):
            doc_lengths = read_sample(raw, shard, i)["doc_lengths"]
            if int(doc_lengths.sum()) < 2 * MIN_WINDOW:  # too short to split: training refuses random_split
                mode = "fixed"
            context.add_sample(doc_lengths, start + i, mode, seed)
        start += shard["samples"]
    return {**context.summary(), "samples": min(start, max_samples), "windows_mode": mode, "seed": seed}


def verify_prepared(root: str | Path, num_samples: int = 8, decode_text: bool = True) -> VerifyReport:
    """Raise DataVerificationError on the first problem; return what was checked otherwise."""
    from streaming.base.compression import decompress

    root = Path(root)
    if not root.is_dir():
        raise DataVerificationError(f"{root} is not a folder of prepared data")
    index = _read_index(root)
    manifest = _read_json(root / MANIFEST, "prepare-data did not finish here")
    if manifest.get("format") != FORMAT:
        raise DataVerificationError(f"{root / MANIFEST}: format {manifest.get('format')!r}, expected {FORMAT!r}")
    seq_len, counts = manifest["seq_len"], manifest["counts"]
    special = manifest["tokenizer"]["special_tokens"]

    shards = index["shards"]
    for shard in shards:  # before decoding anything
        check_columns(shard)
    total = sum(s["samples"] for s in shards)
    if total != counts["samples"]:
        raise DataVerificationError(f"index.json holds {total} samples, {MANIFEST} says {counts['samples']}")
    if (
        counts["tokens_in_samples"] != counts["samples"] * seq_len
        or counts["tokens"] != counts["tokens_in_samples"] + counts["leftover_tokens"]
    ):
        raise DataVerificationError(f"{MANIFEST} counts do not add up: {counts}")

    wanted = sorted({int(round(x)) for x in np.linspace(0, total - 1, num=max(1, min(num_samples, total)))})
    tokenizer = None
    if decode_text:
        try:
            from pretraining.tokenizer import load_tokenizer

            tokenizer = load_tokenizer(manifest["tokenizer"]["name"])
        except Exception:  # noqa: BLE001 - the text preview is optional (e.g. a hub tokenizer offline)
            tokenizer = None
    report = VerifyReport(shards=len(shards), samples=total, checked_samples=wanted)
    start = 0
    for shard in shards:
        data = _check_shard_file(root, shard)
        here = [i for i in wanted if start <= i < start + shard["samples"]]
        raw = decompress(shard["compression"], data) if here and shard["zip_data"] else data
        for sample_index in here:
            sample = read_sample(raw, shard, sample_index - start)
            try:
                check_sample(sample["input_ids"], sample["doc_lengths"], seq_len, special["eos"], special["vocab_size"])
            except ValueError as exc:
                name = _shard_file(shard)["basename"]
                raise DataVerificationError(f"sample {sample_index} (shard {name}): {exc}") from None
            if tokenizer is not None:
                report.previews.append(tokenizer.decode(sample["input_ids"][:64].tolist()))
        start += shard["samples"]
    report.context = measure_context(root)
    return report
