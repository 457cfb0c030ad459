"""What a study owns (issue 88): every path it may write, move or delete, from its plan and nothing
else. `--clean`, `--force`, resubmit, the analysis and status's files act on these paths only, never
on a folder walk or a glob; plan.json carries them (`inventory`), and a plan.json whose inventory is
not the one its own plan gives is not obeyed (reproduce.plan.study_plan.read_plan).

Inside the study folder OUT: its fixed files and sub-folders (STUDY_FILES, STUDY_FOLDERS), its
pretraining run folders and untrained models when the runs folder is OUT/pretraining, its prepared
data when under OUT. Outside OUT (a runs or data folder shared between studies, `--runs-dir`): the
study's own run folders there, marked `shared`: never moved by `--force`, cleaned only when no other
study plans them, or with every finished study that does (reproduce.housekeeping)."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from reproduce.plan.config import (
    CONFIG_FILE,
    ReproduceError,
    data_dir,
    out_dir,
    pretraining_dir,
    shard_cache_root,
    world_dir,
)

PLAN_FILE = "plan.json"
FINISHED_STUDY_FILE = "timings.json"  # written by a reproduce that ran every stage to the end
LOCK_FILE = ".reproduce.lock"  # one reproduce at a time per study folder (reproduce.housekeeping)
ANALYSIS_STAMP = "analysis_inputs.json"
MISSING_FILE = "missing.csv"
# The files of a study in OUT (the lock is not among them: it stays with the folder)
STUDY_FILES = (
    CONFIG_FILE,
    PLAN_FILE,
    FINISHED_STUDY_FILE,
    ANALYSIS_STAMP,
    "runs.jsonl",
    "cells.csv",
    MISSING_FILE,
    "chance.csv",
    "learning.csv",
)
# Its fixed sub-folders: Slurm scripts and ledger, status's PNG, fine-tuning jobs and runs, the
# pretraining configs, and the analysis's reports
STUDY_FOLDERS = ("slurm", "status", "finetune", "configs", "tables", "audit", "figure", "claims")
LEDGER = Path("slurm") / "ledger.jsonl"
PLANNED_BY = ".planned-by"  # in a runs folder: one file per study that plans runs there (issue 88)


def _study_key(out: Path) -> str:
    import hashlib

    return hashlib.sha256(str(absolute(out)).encode()).hexdigest()[:20] + ".json"


def absolute(path) -> Path:
    """`path` absolute, `..` resolved, links not (os.path.abspath)."""
    return Path(os.path.abspath(path))


def record_planned_runs(plan) -> None:
    """`<runs folder>/.planned-by/<key>.json`: which study plans which runs there ({"out", "runs"}),
    one file per study (no two studies write one file), so `--clean` of one study can keep the
    checkpoints another still plans (the documented shared runs folder, `--runs-dir`)."""
    import json

    from reproduce.plan.config import write_if_changed

    record = planned_runs_record(plan.config)
    check_no_links(plan, [record])
    record.parent.mkdir(parents=True, exist_ok=True)
    write_if_changed(record, json.dumps({"out": str(out_dir(plan.config)), "runs": plan.run_names}) + "\n")


def planned_runs_record(cfg) -> Path:
    """This study's record in its runs folder (record_planned_runs)."""
    return pretraining_dir(cfg) / PLANNED_BY / _study_key(out_dir(cfg))


@dataclass(frozen=True)
class Owned:
    """One path of a study: a file or folder of OUT, a pretraining run's folder, an untrained model,
    prepared data. `shared`: outside OUT (a runs or data folder other studies may use too)."""

    path: Path
    what: str  # file, folder, pretraining run, untrained model, data
    shared: bool

    def to_json(self) -> dict:
        return {"path": str(self.path), "what": self.what, "shared": self.shared}


def inventory(plan) -> tuple[Owned, ...]:
    """Every path the study of `plan` (a StudyPlan) may write, move or delete, in a fixed order."""
    cfg = plan.config
    out = out_dir(cfg)

    def owned(path: Path, what: str) -> Owned:
        return Owned(path, what, not path.is_relative_to(out))

    items = [owned(out / name, "file") for name in STUDY_FILES]
    items += [owned(out / name, "folder") for name in STUDY_FOLDERS]
    items += [owned(run.run_dir, "pretraining run") for run in plan.runs]
    items += [owned(pretraining_dir(cfg) / ref.name, "untrained model") for ref in plan.random_init]
    data = [data_dir(cfg)] + ([world_dir(cfg), shard_cache_root(cfg)] if cfg.scale == "toy" else [])
    items += [owned(path, "data") for path in data]
    return tuple(items)


def inventory_json(plan) -> list[dict]:
    return [item.to_json() for item in inventory(plan)]


def link_on_the_way(path: Path, top: Path) -> Path | None:
    """The first link among `path` and its parents below `top` (`top` itself may be a link: the user
    gave it), or None."""
    path, top = Path(path), Path(top)
    try:
        parts = path.relative_to(top).parts
    except ValueError:
        return path if path.is_symlink() else None
    here = top
    for part in parts:
        here = here / part
        try:
            if stat.S_ISLNK(os.lstat(here).st_mode):
                return here
        except (FileNotFoundError, NotADirectoryError):
            return None  # nothing further down exists: no link (a write there fails on its own)
        except OSError:
            return here
    return None


def check_no_links(plan, paths: list[Path] | None = None) -> None:
    """Refuse in one line, before anything is written, when a path of the study (its inventory, or
    `paths` of it) or a folder on the way to one is a link the package did not create (issue 88: a
    same-study dry run wrote a teammate's scripts through OUT/slurm, status its PNG through OUT/status).
    A shared run folder is checked below its runs folder, which the user gave."""
    out = out_dir(plan.config)
    runs = pretraining_dir(plan.config)
    if paths is None:  # the inventory, and the ledger inside its Slurm folder (appended to by submit.sh)
        items = [*inventory(plan), Owned(out / LEDGER, "file", False)]
    else:
        items = [Owned(Path(p), "", False) for p in paths]
    for item in items:
        top = out if item.path.is_relative_to(out) else runs if item.path.is_relative_to(runs) else item.path.parent
        link = link_on_the_way(item.path, top)
        if link is not None:
            raise ReproduceError(
                f"{link}: a link (to {os.readlink(link) if link.is_symlink() else '?'}) inside the study; the package "
                "writes, moves and deletes only what it made, not through links: replace it with a folder of its own "
                "(or give another --out); nothing written"
            )
