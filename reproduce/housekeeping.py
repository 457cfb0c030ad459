"""Housekeeping of a reproduce output folder: one reproduce at a time per folder, and removing the
resume checkpoints of finished runs (docs/reproduce.md, "Disk, locks and cleaning")."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from contracts.config import load_config
from contracts.layout import CHECKPOINTS_DIR, FINISHED_FILE
from contracts.locks import FolderInUse, folder_lock
from reproduce.plan.config import (  # noqa: F401 - CONFIG_FILE and study_config_at, as status imports them
    CONFIG_FILE,
    ReproduceConfig,
    ReproduceError,
    pretraining_dir,
    study_config_at,
)

LOCK_FILE = ".reproduce.lock"
FINISHED_STUDY_FILE = "timings.json"  # written by a reproduce that ran every stage to the end


@contextmanager
def output_lock(out: Path) -> Iterator[None]:
    """Hold `<out>/.reproduce.lock` (contracts.locks: an flock, released by the kernel when the
    process ends, even on kill -9, so it never goes stale); a second reproduce on the same folder
    refuses at once, before writing anything. flock is per host: on a cluster, give each concurrent
    study its own folder."""
    try:
        with folder_lock(
            out,
            name=LOCK_FILE,
            job="reproduce",
            advice="wait for it to finish (a rerun then reuses its results), or give another output folder "
            "(--out, make ... OUT=)",
        ):
            yield
    except FolderInUse as exc:
        raise ReproduceError(str(exc)) from None


def folder_size(path: Path) -> int:
    """Bytes of the files under `path` (links not followed: latest-rank0.pt names a checkpoint)."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def finished_run_checkpoints(run_dir: Path) -> Path | None:
    """`run_dir/checkpoints/` when the run has finished (FINISHED.json): it is never resumed again."""
    folder = run_dir / CHECKPOINTS_DIR
    return folder if (run_dir / FINISHED_FILE).is_file() and folder.is_dir() else None


def finished_checkpoint_dirs(out_root: Path) -> Iterator[Path]:
    """`checkpoints/` of every finished pretraining run (FINISHED.json) of every finished study
    (timings.json) under `out_root` (a study folder or a folder of them)."""
    for config_file in sorted(out_root.glob(CONFIG_FILE)) + sorted(out_root.glob(f"*/{CONFIG_FILE}")):
        study_out = config_file.parent
        if not (study_out / FINISHED_STUDY_FILE).is_file():
            continue
        cfg = study_config_at(study_out, load_config(ReproduceConfig, config_file))
        for run in sorted(pretraining_dir(cfg).iterdir()) if pretraining_dir(cfg).is_dir() else ():
            if folder := finished_run_checkpoints(run):
                yield folder


def clean_checkpoints(out_root: Path, dry_run: bool = False, log=print) -> int:
    """Remove the Composer resume checkpoints (weights + optimizer state) of finished runs of finished
    studies; the Hugging Face exports (hf/step-N), records, tables and figures stay. Returns bytes freed."""
    freed = 0
    for folder in finished_checkpoint_dirs(out_root):
        size = folder_size(folder)
        freed += size
        log(f"{'would remove' if dry_run else 'removing'} {folder} ({size / 1e6:.1f} MB)")
        if not dry_run:
            shutil.rmtree(folder)
    log(f"clean: {'would free' if dry_run else 'freed'} {freed / 1e6:.1f} MB under {out_root}")
    return freed
