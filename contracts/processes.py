"""Worker processes that never outlive the process that started them (docs/reliability.md).

A pool worker calls `die_with_parent(parent_pid)` first (as its pool's initializer): on Linux the
kernel then sends it SIGKILL when its parent dies, however the parent dies (kill -9 included), so no
orphan keeps training, tokenising or holding a lock. Elsewhere it does nothing (no such call).
"""

from __future__ import annotations

import os
import signal
import sys


def die_with_parent(parent: int) -> None:
    """Ask for SIGKILL at the death of the parent `parent`; a parent already gone before the request
    took effect ends this process here."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1  # <linux/prctl.h>
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0) != 0:
        return  # not granted: the parent's own signal handling is all that is left
    if os.getppid() != parent:
        os._exit(1)


def dies_with_this_process():
    """A `subprocess.Popen(preexec_fn=...)` that makes the child die with this process (however it
    dies: the same rule as the pool workers; issue 78: kill -9 of gpu-check left its step running)."""
    import functools

    return functools.partial(die_with_parent, os.getpid())
