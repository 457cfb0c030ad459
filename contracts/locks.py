"""One job per output folder: an flock on a lock file in the folder, held for the life of the job
(docs/reliability.md).

The kernel drops an flock when its holder's files close, so when the holder ends (even on kill -9)
the lock never goes stale. The lock file holds the holder's pid, host and start time, which a
second job prints. flock is per host: jobs on two nodes sharing a folder over NFS may not see each
other's locks, so give concurrent cluster jobs their own folders (as the Slurm scripts do).
"""

from __future__ import annotations

import fcntl
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from contracts.provenance import utc_now

LOCK_FILE = ".lock"


class FolderInUse(RuntimeError):
    """Another live job holds the folder's lock; the message names the folder and the holder."""


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
) -> Iterator[Path]:
    """Hold `<folder>/<name>` for the `with` block, or raise FolderInUse at once (nothing written).

    On release the lock file is removed (a job killed with -9 leaves it behind, unlocked: the next
    job takes it), and so is the folder if this job created it and wrote nothing else in it (it
    failed before writing anything), so a refused or failed job leaves no trace.
    """
    folder = Path(folder)
    created = not folder.exists()
    path = folder / name
    for _ in range(5):  # the holder may remove the lock file (and folder) between our open and our flock
        folder.mkdir(parents=True, exist_ok=True)
        try:
            handle = path.open("a+", encoding="utf-8")
        except FileNotFoundError:
            continue
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(handle)
            handle.close()
            raise FolderInUse(f"{folder} is in use by another {job} ({holder}): {advice}") from None
        try:
            if os.stat(path).st_ino == os.fstat(handle.fileno()).st_ino:
                break
        except FileNotFoundError:
            pass
        handle.close()
    else:
        raise FolderInUse(f"{folder}: its lock file {path} keeps being replaced; is another {job} starting?")
    try:
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()} on {socket.gethostname()} since {utc_now()}\n")
        handle.flush()
        yield path
    finally:
        try:
            path.unlink()  # while still held: a job that opened it meanwhile sees another inode and retries
            if created and not any(folder.iterdir()):
                folder.rmdir()
        except OSError:
            pass  # tidying is best effort; the lock is released below in any case
        handle.close()  # closing the file releases the lock
