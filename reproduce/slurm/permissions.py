"""Whether this Unix user can write what a submission writes (issue 89): checked before the first
sbatch, so that no job is queued that its ledger cannot record, and no job of the study fails on a
permission another user's umask left."""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import stat
from pathlib import Path

from reproduce.plan import ReproduceError

TEAM_UMASK = 0o002  # in a team study: files rw for the group, whatever a member's own umask


def team_study(out: Path, declared: bool = False) -> bool:
    """Whether the study folder is a team's: declared (`team: true` in the cluster config), or the folder
    (or, before it exists, its parent) is setgid or group-writable, as docs/cluster.md's recipe makes it."""
    if declared:
        return True
    here = Path(out)
    while not here.exists() and here.parent != here:
        here = here.parent
    try:
        mode = os.stat(here).st_mode
    except OSError:
        return False
    return bool(mode & (stat.S_ISGID | stat.S_IWGRP))


@contextlib.contextmanager
def team_umask(out: Path, declared: bool = False):
    """In a team study, this process's umask lets the group write what it creates while the block runs
    (issue 89: a teammate's umask 022 left 88 files the owner could not write); restored after it."""
    previous = os.umask(0)
    os.umask(previous & ~0o020 if team_study(out, declared) else previous)
    try:
        yield
    finally:
        os.umask(previous)


def _name(table, number: int) -> str:
    try:
        return table(number)[0]
    except KeyError:
        return str(number)


def describe_owner(path: Path) -> str:
    """`owner alice, group team, mode rw-r--r--` of `path` (not following a link)."""
    info = os.lstat(path)
    return (
        f"owner {_name(pwd.getpwuid, info.st_uid)}, group {_name(grp.getgrgid, info.st_gid)}, "
        f"mode {stat.filemode(info.st_mode)}"
    )


def write_problem(path: Path) -> str | None:
    """Why this user cannot write `path` (a file it appends to, or a folder it creates files in; one
    that does not exist yet is made in its nearest existing folder), or None."""
    here = Path(path)
    while not os.path.lexists(here):
        if here.parent == here:
            return None
        here = here.parent
    if here.is_symlink():
        return f"{here} is a link ({describe_owner(here)})"
    need = os.W_OK | (os.X_OK if here.is_dir() else 0)
    if os.access(here, need, effective_ids=True):
        return None
    return f"{here}: {_name(pwd.getpwuid, os.geteuid())} cannot write it ({describe_owner(here)})"


def check_writable(out: Path, paths: list[Path]) -> None:
    """One line, before any sbatch, when this user cannot write one of `paths`, naming it, its owner
    and mode, and the fix."""
    for path in dict.fromkeys(paths):
        problem = write_problem(path)
        if problem:
            raise ReproduceError(
                f"{problem}; nothing submitted: the study's owner makes it writable for the team (chmod -R g+w "
                f"{out}, and a setgid group folder: docs/cluster.md, 'A study shared by a team'), or resubmit as "
                "that owner"
            )
