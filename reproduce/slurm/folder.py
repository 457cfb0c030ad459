"""One study per folder (issue 80, item 3): a submission into a folder that already holds a submitted
or finished study is refused in one line, before anything is written: the same study is resubmitted
(`python -m reproduce resubmit OUT`), another goes to another `--out`. `--force` replaces a study
none of whose jobs is queued or running any more: every path of its inventory inside OUT
(reproduce.plan.inventory: Slurm folder, reproduce.yaml, plan.json, job lists, run folders, tables,
figures, audit, status, data) is moved into one new `OUT/replaced-<time>/`, or nothing is (issue 88:
tables, figures and job lists were overwritten in place), so two studies never mix and nothing is
deleted. Folders outside OUT (a shared runs or data folder) are never moved."""

from __future__ import annotations

from pathlib import Path

from reproduce.plan.config import CONFIG_FILE, ReproduceConfig, ReproduceError, out_dir


def _recorded_settings(path: Path) -> dict | None:
    """The settings of the study recorded in `path` (its reproduce.yaml), None when unreadable."""
    import yaml

    from contracts.bounded import SMALL, BoundedReadError, load_yaml, read_text

    try:
        body = load_yaml(read_text(path, SMALL))
    except (OSError, BoundedReadError, yaml.YAMLError, ValueError, RecursionError):
        return None
    return body if isinstance(body, dict) else None


def same_study(cfg: ReproduceConfig) -> bool | None:
    """Whether OUT/reproduce.yaml records exactly `cfg`'s settings (None: there is none to compare)."""
    import yaml

    from contracts.config import config_to_dict

    path = out_dir(cfg) / CONFIG_FILE
    if not path.is_file():
        return None
    recorded = _recorded_settings(path)
    return recorded is not None and yaml.safe_dump(recorded) == yaml.safe_dump(config_to_dict(cfg))


def check_study_folder(cfg: ReproduceConfig, dry_run: bool, force: bool) -> list[Path]:
    """One line (a ReproduceError) when OUT holds another submitted or finished study, or this study
    already submitted (unless `dry_run`, which writes the same scripts again); with `force`, and none
    of the old study's jobs still queued or running, what of the old study to move aside (else [])."""
    from reproduce.housekeeping import FINISHED_STUDY_FILE
    from reproduce.slurm.ledger import is_active, query_slurm, read_ledger

    out = out_dir(cfg)
    entries, _ = read_ledger(out)
    finished = (out / FINISHED_STUDY_FILE).is_file()
    if not entries and not finished:
        return []  # a new folder, or only a dry run so far: nothing runs from it
    same = same_study(cfg)
    what = "submitted to Slurm" if entries else "finished here"
    if same:
        if dry_run or not entries:
            return []  # the same scripts again (after a fix), or a Slurm run of a study finished here
        raise ReproduceError(
            f"{out} holds this study, already {what} ({len(entries)} jobs in its ledger): python -m reproduce "
            f"resubmit {out} submits what is missing (python -m reproduce status {out} shows what runs)"
        )
    if not force:
        raise ReproduceError(
            f"{out} holds another study, {what} ({out / CONFIG_FILE} records other settings): choose another "
            "--out (or, once none of its jobs is queued or running, --force to replace it)"
        )
    if entries:
        states, asked = query_slurm([e.job for e in entries])
        if "squeue" not in asked:
            raise ReproduceError(
                f"{out}: --force needs to know that none of the old study's jobs still runs, and Slurm does not "
                f"answer ({'; '.join(getattr(asked, 'problems', ())) or 'no squeue here'}): nothing written"
            )
        live = sorted({e.job for e in entries for t in (e.task_ids() or [None]) if is_active(e.job, t, states, asked)})
        if live:
            raise ReproduceError(
                f"{out}: the old study's jobs {' '.join(live)} are still queued or running: scancel them first, "
                "then --force; nothing written"
            )
    held = old_study_paths(out)
    if dry_run:  # the new study's scripts would be written over the old study's: neither happens
        raise ReproduceError(
            f"{out}: --force would move the {len(held)} files and folders of the study it holds to "
            f"{out}/replaced-<time>/ and write this one; a dry run moves and writes nothing: run without --dry-run, "
            "or dry-run into another --out"
        )
    return held


def old_study_paths(out: Path) -> list[Path]:
    """What of the study in `out` --force moves: its inventory's paths inside OUT that exist (planned
    from its own reproduce.yaml); one line, nothing moved, when it cannot be planned, a path is or
    lies behind a link, or another study still plans one of its runs."""
    import os

    from reproduce.housekeeping import other_studies_planning
    from reproduce.plan import acting_plan
    from reproduce.plan.inventory import check_no_links, inventory

    try:
        old = acting_plan(out)
    except ReproduceError as exc:
        raise ReproduceError(
            f"{out}: --force cannot tell what the study there owns ({exc}); move it aside by hand; nothing moved"
        ) from None
    check_no_links(old)
    held = [item for item in inventory(old) if not item.shared and os.path.lexists(item.path)]
    for item in held:
        if item.what == "pretraining run":
            others = other_studies_planning(old, item.path.name, log=lambda line: None)
            if others:
                raise ReproduceError(
                    f"{item.path}: --force would move this run, which {others[0]} still plans; nothing moved"
                )
    return [item.path for item in held]


def move_aside(out: Path, paths: list[Path]) -> Path:
    """`paths` (the old study's, in `out`) moved into a new folder `out/replaced-<UTC time>[-k]/`
    (whatever is planted under those names: mkdir never reuses one), each at its place relative to
    `out`; that folder."""
    from reproduce.slurm.ledger import utc_now

    stem = out / f"replaced-{utc_now().replace(':', '')}"
    for k in range(1, 1000):
        target = stem if k == 1 else stem.with_name(f"{stem.name}-{k}")
        try:
            target.mkdir()  # a planted file, folder or link of that name: FileExistsError, the next name
            break
        except FileExistsError:
            continue
    else:
        raise ReproduceError(f"{out}: no free replaced-<time> name after 999 tries; nothing moved")
    for path in paths:
        place = target / path.relative_to(out)
        place.parent.mkdir(parents=True, exist_ok=True)
        path.rename(place)
    return target
