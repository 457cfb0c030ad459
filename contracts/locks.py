"""One job per output folder: an flock on a lock file in the folder, held for the life of the job
(docs/reliability.md).

The kernel drops an flock when its holder's files close, so when the holder ends (even on kill -9)
the lock never goes stale. The lock file holds the holder's pid, host and start time, which a
second job prints. flock is per host: jobs on two nodes sharing a folder over NFS may not see each
other's locks, so give concurrent cluster jobs their own folders (as the Slurm scripts do).
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from contracts.provenance import utc_now

LOCK_FILE = ".lock"


class FolderInUse(RuntimeError):
    """Another live job holds the folder's lock; the message names the folder and the holder."""


class BadLockFile(FolderInUse):
    """The lock path is not a plain lock file of ours (a link, folder, FIFO, device, another user's
    file), or the folder is not a folder: nothing is opened through it (issue 56)."""


def _open_lock(folder: Path, path: Path):
    """The lock file, opened without following a link and checked to be our regular file."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise BadLockFile(f"{folder} is not a folder: remove it or choose another output folder") from None
    try:
        # O_NOFOLLOW: a .lock that is a link fails here instead of truncating its target; O_NONBLOCK:
        # a FIFO does not block the open; nothing is truncated before the checks below
        # 0o666 under the umask: in a team's study (umask 0002) a teammate's job can take it too (issue 89)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o666)
    except FileNotFoundError:
        return None  # the folder went meanwhile (its holder tidied up): try again
    except OSError as exc:
        why = "a link" if exc.errno == errno.ELOOP else exc.strerror
        raise BadLockFile(f"{path}: not a lock file this job can use ({why}): {_remedy(path)}") from None
    info = os.fstat(fd)
    # a hard link (link count > 1) shares its inode with another file, which truncating would empty; a
    # teammate's lock file counts as ours when the group may write it and it is one of our groups (a
    # lock left by a killed job of one member is free: flock died with its holder)
    ours = info.st_uid == os.getuid() or (info.st_mode & stat.S_IWGRP and info.st_gid in {os.getgid(), *os.getgroups()})
    if not stat.S_ISREG(info.st_mode) or not ours or info.st_nlink > 1:
        os.close(fd)
        what = "not a regular file" if not stat.S_ISREG(info.st_mode) else "another user's file"
        if stat.S_ISREG(info.st_mode) and ours:
            what = f"a hard link: {info.st_nlink} names for one file"
        raise BadLockFile(f"{path}: not a lock file this job can use ({what}): {_remedy(path)}")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "r+", encoding="utf-8")


def _flock_within(handle, wait_s: float) -> None:
    """The exclusive flock of `handle`, waiting up to `wait_s` seconds for its holder to end
    (BlockingIOError when it still holds it then)."""
    import time

    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.2)  # a holder's end is no event this process can wait on: a poll, bounded


def _who() -> str:
    """` by USER[ (Slurm job J)]`: who holds a lock, for a teammate's message (issue 89)."""
    import getpass

    job = os.environ.get("SLURM_JOB_ID", "")
    return f" by {getpass.getuser()}" + (f" (Slurm job {job})" if job.isdigit() else "")


def _remedy(path: Path) -> str:
    """How to free a lock file this user cannot use: remove it, or, where only its owner may (another
    user's file in a folder this user cannot write), who should."""
    import pwd

    try:
        owner = os.lstat(path).st_uid
        if owner != os.getuid() and not os.access(path.parent, os.W_OK | os.X_OK):
            name = pwd.getpwuid(owner)[0] if owner in {p.pw_uid for p in pwd.getpwall()} else str(owner)
            return (
                f"its owner {name} can remove it (no job holds it once theirs ended); a team's study makes it "
                "group-writable (docs/cluster.md, 'A study shared by a team')"
            )
    except OSError:
        pass
    return "remove it and rerun"


def _holder(handle) -> str:
    handle.seek(0)
    return handle.read().strip() or "another process"


@contextmanager
def folder_lock(
    folder: str | os.PathLike,
    *,
    name: str = LOCK_FILE,
    job: str = "job",
    advice: str = "wait for it to finish (a rerun then reuses its results), or choose another output folder",
    wait_s: float = 0.0,
) -> Iterator[Path]:
    """Hold `<folder>/<name>` for the `with` block, or raise FolderInUse (nothing written): at once, or
    once `wait_s` seconds have passed with the lock still held by another.

    On release the lock file is removed (a job killed with -9 leaves it behind, unlocked: the next
    job takes it), and so is the folder if this job created it and wrote nothing else in it (it
    failed before writing anything), so a refused or failed job leaves no trace.
    """
    folder = Path(folder)
    created = not folder.exists()
    path = folder / name
    for _ in range(5):  # the holder may remove the lock file (and folder) between our open and our flock
        handle = _open_lock(folder, path)
        if handle is None:
            continue
        try:
            _flock_within(handle, wait_s)
        except BlockingIOError:
            holder = _holder(handle)
            handle.close()
            waited = f" (waited {wait_s:g} s)" if wait_s > 0 else ""
            raise FolderInUse(f"{folder} is in use by another {job} ({holder}){waited}: {advice}") from None
        try:
            if os.lstat(path).st_ino == os.fstat(handle.fileno()).st_ino:
                break
        except FileNotFoundError:
            pass
        handle.close()
    else:
        raise FolderInUse(f"{folder}: its lock file {path} keeps being replaced; is another {job} starting?")
    try:
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()} on {socket.gethostname()} since {utc_now()}{_who()}\n")
        handle.flush()
        yield path
    finally:
        try:
            if os.lstat(path).st_ino == os.fstat(handle.fileno()).st_ino:  # only our own file, never a link
                path.unlink()  # while still held: a job that opened it meanwhile sees another inode and retries
            if created and not any(folder.iterdir()):
                folder.rmdir()
        except OSError:
            pass  # tidying is best effort; the lock is released below in any case
        handle.close()  # closing the file releases the lock
