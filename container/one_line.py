"""One line for bad input in the container tools (docs/reliability.md): the tools stand alone
(they run in the image at build time and import no stage of the pipeline), so they carry their own
small version of contracts.cli.run_command. An OSError (a path missing, a folder, unreadable),
a UnicodeError (a binary file) or a ValueError (a lock line that is no pin, a refusal) ends as
`PROG: error: ...`, exit 2."""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Callable
from pathlib import Path

MAX_TEXT_BYTES = 1 << 20  # a lock or a list of pins: a few kB


def read_small_text(path: Path) -> str:
    """A regular file of at most MAX_TEXT_BYTES (a FIFO or /dev/zero refused before it is opened)."""
    info = os.stat(path)
    if not stat.S_ISREG(info.st_mode):
        raise ValueError(f"{path}: not a regular file (a device, FIFO or folder)")
    if info.st_size > MAX_TEXT_BYTES:
        raise ValueError(f"{path}: {info.st_size:,} bytes, more than the {MAX_TEXT_BYTES:,} a lock may hold")
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:  # the codec's message names no file
        raise ValueError(
            f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}); pass a text file of name==version lines"
        ) from None


def run_command(prog: str, command: Callable[[], int]) -> int:
    try:
        return command()
    except (OSError, UnicodeError, ValueError) as exc:
        if os.environ.get("MLM_VS_CLM_TRACEBACK"):
            raise
        print(f"{prog}: error: {' '.join(str(exc).split())[:2000]}", file=sys.stderr)
        return 2
