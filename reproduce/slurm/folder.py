"""One study per folder (issue 80, item 3): a submission into a folder that already holds a submitted
or finished study is refused in one line, before anything is written: the same study is resubmitted
(`python -m reproduce resubmit OUT`), another goes to another `--out`. `--force` replaces a study
none of whose jobs is queued or running any more: its Slurm folder (scripts, ledger, logs), its
reproduce.yaml, plan.json and finished marker are moved into `OUT/replaced-<time>/`, so two studies'
ledgers never mix and nothing is deleted."""

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
    from reproduce.plan import PLAN_FILE
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
    held = [out / "slurm", out / CONFIG_FILE, out / PLAN_FILE, out / FINISHED_STUDY_FILE]
    return [path for path in held if path.exists()]


def move_aside(out: Path, paths: list[Path]) -> Path:
    """`paths` (the old study's, in `out`) moved into `out/replaced-<UTC time>/`; that folder."""
    from reproduce.slurm.ledger import utc_now

    target = out / f"replaced-{utc_now().replace(':', '')}"
    target.mkdir()
    for path in paths:
        path.rename(target / path.name)
    return target
