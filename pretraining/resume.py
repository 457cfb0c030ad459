"""Autoresume from the newest complete checkpoint (docs/pretraining.md, "Faults and recovery").

Composer writes a resume checkpoint straight under its final name (`checkpoints/ba<N>-rank0.pt`),
then points `latest-rank0.pt` at it, and autoresumes from whatever that link names. A kill or a
full disk during the write leaves a truncated file; a node crash can leave the link on a file whose
end never reached the disk (Composer does not fsync); a kill between its removing and recreating
the link leaves no link. Before the Trainer is built, `newest_complete_checkpoint` puts the link
on the newest complete checkpoint, so Composer resumes from it (the losses then equal an
uninterrupted run's: training is a pure function of the step, tested).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from contracts.layout import CHECKPOINT_PATTERN, LATEST_CHECKPOINT_PATTERN
from pretraining.export import CheckpointError, check_complete_checkpoint

LATEST = LATEST_CHECKPOINT_PATTERN.format(rank=0)
_CHECKPOINT = re.compile(re.escape(CHECKPOINT_PATTERN.format(batch="@", rank=0)).replace("@", r"(\d+)"))


def newest_complete_checkpoint(folder: str | os.PathLike) -> Path | None:
    """Point `folder/latest-rank0.pt` at the newest complete `ba<N>-rank0.pt` and return that file
    (None: there is none, the run starts at step 0). An incomplete one is removed, and named in a
    printed line; a changed link is printed too."""
    folder = Path(folder)
    if not folder.is_dir():
        return None
    found = sorted((int(m.group(1)), path) for path in folder.iterdir() if (m := _CHECKPOINT.fullmatch(path.name)))
    latest = folder / LATEST
    for step, path in reversed(found):
        try:
            check_complete_checkpoint(path)
        except CheckpointError as exc:  # nothing can be read from it; Composer rewrites that step
            path.unlink()
            print(f"train: {exc}; removed it, resuming from an earlier checkpoint", flush=True)
            continue
        if not (latest.is_symlink() and os.readlink(latest) == path.name):
            _point(latest, path.name)
            print(f"train: resuming from {path} (step {step})", flush=True)
        return path
    if latest.is_symlink() or latest.exists():
        latest.unlink()
        print(f"train: no complete checkpoint in {folder}; starting from step 0", flush=True)
    return None


def _point(link: Path, target: str) -> None:
    """Replace `link` by a symlink to `target` atomically (a kill leaves the old or the new link)."""
    tmp = link.with_name(f".{link.name}.tmp")
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(target)
    os.replace(tmp, link)
