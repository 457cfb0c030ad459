"""Housekeeping of a reproduce output folder: one reproduce at a time per folder, and removing the
resume checkpoints of finished runs (docs/reproduce.md, "Disk, locks and cleaning")."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from contracts.layout import CHECKPOINTS_DIR, FINISHED_FILE
from contracts.locks import FolderInUse, folder_lock
from reproduce.plan.config import CONFIG_FILE, ReproduceError, out_dir, pretraining_dir
from reproduce.plan.inventory import FINISHED_STUDY_FILE, LOCK_FILE, PLANNED_BY, link_on_the_way


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


def other_studies_planning(plan, run: str, log=print) -> list[Path]:
    """The study folders other than `plan`'s that plan run `run` in the same runs folder (they may resume
    from, or continue, its checkpoints): each one's own plan is read and must list the run at this
    folder; a record of a study gone or changed since counts for nothing."""
    from contracts.bounded import BoundedReadError, read_json_object
    from reproduce.plan import study_plan_at

    runs = pretraining_dir(plan.config)
    folder = runs / PLANNED_BY
    own = out_dir(plan.config)
    planners = []
    if folder.is_symlink() or not folder.is_dir():
        return planners
    for record in sorted(folder.glob("*.json")):  # the package's own records; each checked below
        try:
            body = read_json_object(record)
            other = Path(body["out"])
            if not isinstance(body["out"], str) or not other.is_absolute() or other == own:
                continue
            if run not in body["runs"]:
                continue
            if not (other / CONFIG_FILE).is_file():
                continue  # that study's folder is gone: its record is stale
            theirs = study_plan_at(other, [])
            if run in theirs.run_names and pretraining_dir(theirs.config) == runs:
                planners.append(other)
        except (OSError, BoundedReadError, KeyError, TypeError, ValueError, ReproduceError) as exc:
            log(f"clean: {record}: not read ({type(exc).__name__}); counted for nothing")
    return planners


def finished_checkpoint_dirs(plan, log=print, cleaned: frozenset[Path] = frozenset()) -> Iterator[Path]:
    """`checkpoints/` of every finished pretraining run (FINISHED.json) the study of `plan` owns:
    its plan's runs only (never a folder walk), each under its runs folder through no link, made by
    this plan's run (its saved config computes what the plan's does), planned by no other study but
    those in `cleaned` (the finished studies the same clean acts on)."""
    import yaml

    from contracts.bounded import BoundedReadError, read_yaml
    from contracts.config import CONFIG_BYTES_LIMIT, ConfigError
    from contracts.layout import RUN_CONFIG_FILE
    from pretraining.config import computing_differences, describe_differences

    runs = pretraining_dir(plan.config)
    for run in plan.runs:
        folder = finished_run_checkpoints(run.run_dir)
        if folder is None:
            continue
        link = link_on_the_way(folder, runs)  # the runs folder itself the user gave
        if link is not None:
            raise ReproduceError(f"{link}: a link on the way to {folder}; --clean follows no link: nothing removed")
        try:
            saved = read_yaml(run.run_dir / RUN_CONFIG_FILE, CONFIG_BYTES_LIMIT)["config"]
            differences = computing_differences(saved, run.config)
        except (OSError, BoundedReadError, yaml.YAMLError, ConfigError, KeyError, TypeError, ValueError) as exc:
            log(f"clean: kept {folder}: its run's config cannot be read ({type(exc).__name__})")
            continue
        if differences:  # a run of the same name made by another config (another study, `runs_dir: ../..`)
            log(f"clean: kept {folder}: not this study's run ({describe_differences(differences)})")
            continue
        others = [other for other in other_studies_planning(plan, run.name, log) if other not in cleaned]
        if others:
            log(
                f"clean: kept {folder}: also planned by {', '.join(map(str, others))} (a clean of that study too, "
                "finished, removes it: --out-root their common folder)"
            )
            continue
        yield folder


def study_folders(target: Path, log=print) -> list[Path]:
    """The studies `--clean` acts on: `target` itself when it holds a study (its reproduce.yaml), else
    the studies one level below it (`make clean`'s outputs/), but no link and no study moved aside by
    `--force` (`replaced-*`)."""
    if (target / CONFIG_FILE).is_file():
        return [target]
    found = []
    for child in sorted(target.iterdir()) if target.is_dir() else ():
        if child.name.startswith("replaced-") or not (child / CONFIG_FILE).is_file():
            continue
        if child.is_symlink():
            log(f"clean: skipped {child}: a link (links are not followed)")
            continue
        found.append(child)
    return found


def clean_checkpoints(target: Path, dry_run: bool = False, log=print) -> int:
    """Remove the Composer resume checkpoints (weights + optimizer state) of the finished runs of the
    finished studies (timings.json) in `target` (a study folder or a folder of them); the Hugging Face
    exports (hf/step-N), records, tables and figures stay. Each study acts on its own plan's runs
    (reproduce.plan.inventory); every folder is checked before any is removed. Returns bytes freed."""
    from reproduce.plan import build_plan, load_study_config

    plans = []
    for study in study_folders(Path(target), log):
        if not (study / FINISHED_STUDY_FILE).is_file():
            log(f"clean: skipped {study}: the study is not finished ({FINISHED_STUDY_FILE})")
            continue
        cfg = load_study_config(study)
        if cfg.runs_dir and not Path(cfg.runs_dir).is_dir():
            log(f"clean: skipped {study}: its runs folder {cfg.runs_dir} does not exist")
            continue
        plans.append(build_plan(cfg))  # the study's plan, from its config
    cleaned = frozenset(out_dir(plan.config) for plan in plans)  # a run they all plan goes with them
    chosen = list(dict.fromkeys(folder for plan in plans for folder in finished_checkpoint_dirs(plan, log, cleaned)))
    freed = 0
    for folder in chosen:
        size = folder_size(folder)
        freed += size
        log(f"{'would remove' if dry_run else 'removing'} {folder} ({size / 1e6:.1f} MB)")
        if not dry_run:
            shutil.rmtree(folder)
    log(f"clean: {'would free' if dry_run else 'freed'} {freed / 1e6:.1f} MB under {target}")
    return freed
