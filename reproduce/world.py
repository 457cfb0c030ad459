"""The toy world of `make reproduce` at toy scale (docs/reproduce.md, "Toy learning"): what its
toy models are pretrained on and fine-tuned on, written once per data folder by the data stage.

    <world>/world.jsonl      pretraining documents (benchmarks.datasets.make_toy.world_corpus)
    <world>/tokenizer/       a byte-level BPE trained on them (Llama-3 special tokens)
    <world>/tasks/           the 12 tasks (make_toy --world: words held out of their training rows)
    <world>/manifest.json    the settings and digests it was built with (written last)

Each part is written aside and renamed, so an interrupted build leaves no half part; a folder built
with other settings is refused with the fix. Same settings -> byte-identical files.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from contracts.bounded import SMALL, BoundedReadError, read_json_object
from contracts.provenance import atomic_write_json, atomic_write_text

MANIFEST = "manifest.json"
CORPUS_FILE = "world.jsonl"
TOKENIZER_DIR = "tokenizer"
TASKS_DIR = "tasks"


class WorldError(ValueError):
    """A toy-world folder that does not match the settings asked for."""


def _settings(documents: int, vocab_size: int, seed: int) -> dict:
    from benchmarks.datasets.make_toy import WORLD_VERSION

    # the generator's version: a world built by an older make_toy is refused, not reused
    return {"documents": documents, "vocab_size": vocab_size, "seed": seed, "version": WORLD_VERSION}


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _write_aside(folder: Path, name: str, write) -> None:
    """`write(path)` into `<name>.partial`, then renamed to `<name>`: no half-written part."""
    partial = folder / f"{name}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    write(partial)
    shutil.rmtree(folder / name, ignore_errors=True)
    partial.rename(folder / name)


def build_world(folder: str | Path, documents: int, vocab_size: int, seed: int = 0) -> dict:
    """Write (or reuse) the toy world under `folder`; returns its manifest."""
    from benchmarks.datasets import make_toy
    from pretraining.tokenizer.train_embedded import train_byte_level_bpe

    folder = Path(folder)
    settings = _settings(documents, vocab_size, seed)
    manifest_path = folder / MANIFEST
    if manifest_path.is_file():
        try:
            manifest = read_json_object(manifest_path, SMALL)
        except BoundedReadError as exc:
            raise WorldError(f"{exc}: remove {folder} (or give another data folder) to build the world again") from None
        if manifest["settings"] != settings:
            raise WorldError(
                f"{folder} holds a toy world built with {manifest['settings']}, not {settings}: "
                "remove it (or give another data folder) to build this one; models pretrained on the old "
                "world are in the same study folder, so a fresh --out is the simplest fix"
            )
        return manifest
    folder.mkdir(parents=True, exist_ok=True)
    corpus = folder / CORPUS_FILE
    rows = make_toy.world_corpus(documents, seed)
    atomic_write_text(corpus, "".join(json.dumps(row) + "\n" for row in rows))
    tokenizer = train_byte_level_bpe((row["text"] for row in rows), vocab_size)
    _write_aside(folder, TOKENIZER_DIR, tokenizer.save_pretrained)
    _write_aside(folder, TASKS_DIR, lambda path: make_toy.write(path, seed, world=True))
    manifest = {
        "settings": settings,
        "corpus_sha256": _sha256(corpus),
        "tokenizer_sha256": _sha256(folder / TOKENIZER_DIR / "tokenizer.json"),
        "tasks_digest": make_toy.tree_digest(folder / TASKS_DIR),
    }
    atomic_write_json(manifest_path, manifest)
    return manifest
