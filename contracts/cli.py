"""One line, never a traceback, for bad input at every command-line entry point (docs/reliability.md).

Each CLI finds the faults it knows and names the file, field and fix itself; `run_command` is the
net under them: an exception of bad input that got past those checks still ends as one line
(`PROG: error: ...`, exit 2). What counts as bad input:
- our own error classes (every package of this project raises them where it finds bad input);
- OSError (a path that does not exist, is a folder, cannot be read or written, a full disk);
- malformed data: UnicodeError (a file that is not text), JSON and YAML syntax errors.
Anything else is a defect of ours and keeps its traceback. MLM_VS_CLM_TRACEBACK=1 shows the
traceback of every error (for a bug report).

An interrupt is one line too: Ctrl-C before Composer is imported (KeyboardInterrupt), or SIGINT /
SIGTERM after it (Composer's import installs handlers that call sys.exit(128 + signal)), ends as
`PROG: interrupted by SIGTERM (exit 143): ...` with the exit status a shell gives a signal.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Callable

OUR_PACKAGES = frozenset(
    {"analysis", "benchmarks", "container", "contracts", "paper_figures", "pretraining", "reproduce"}
)
TRACEBACK_VARIABLE = "MLM_VS_CLM_TRACEBACK"
MAX_MESSAGE_CHARS = 2_000  # a message that quotes a whole file is cut, the line stays readable


def is_input_error(exc: BaseException) -> bool:
    if not isinstance(exc, Exception):
        return False  # KeyboardInterrupt, SystemExit, deadlines: handled where they are raised
    if isinstance(exc, (OSError, UnicodeError, json.JSONDecodeError)):
        return True
    yaml = sys.modules.get("yaml")
    if yaml is not None and isinstance(exc, yaml.YAMLError):
        return True
    module = type(exc).__module__
    if module == "__main__":  # `python -m container.image_check`: its classes live in __main__
        spec = getattr(sys.modules.get("__main__"), "__spec__", None)
        module = spec.name if spec is not None else ""
    return module.split(".")[0] in OUR_PACKAGES


def one_line(exc: BaseException) -> str:
    # a KeyError's str() is the repr of its key: its message is the argument itself
    message = exc.args[0] if isinstance(exc, KeyError) and len(exc.args) == 1 else exc
    text = " ".join(str(message).split()) or type(exc).__name__
    if isinstance(exc, (json.JSONDecodeError, UnicodeError)) or type(exc).__module__.startswith("yaml"):
        text = f"{type(exc).__name__}: {text}"  # "Expecting value: line 1 column 1" alone names no cause
    return text if len(text) <= MAX_MESSAGE_CHARS else text[: MAX_MESSAGE_CHARS - 3] + "..."


INTERRUPTED_NOTE = "what finished is kept; run the same command again to continue"


def signal_exit(exc: SystemExit) -> int | None:
    """The signal behind `exc` when it is the sys.exit(128 + signal) of Composer's SIGINT/SIGTERM
    handler (composer.core.engine.sigterm_handler), else None."""
    code = exc.code
    if not isinstance(code, int) or code - 128 not in (signal.SIGINT, signal.SIGTERM):
        return None
    frame = exc.__traceback__
    while frame is not None and frame.tb_next is not None:
        frame = frame.tb_next
    if frame is None:
        return None
    code_object = frame.tb_frame.f_code
    module = frame.tb_frame.f_globals.get("__name__", "")
    return code - 128 if module.startswith("composer") and code_object.co_name == "sigterm_handler" else None


def run_command(prog: str | None, command: Callable[[], int]) -> int:
    """`command()`, with an exception of bad input turned into one line on stderr and exit 2:
    `PROG: error: ...` (`error: ...` where `prog` is None, the benchmarks and analysis form), and
    an interrupt into one line with 128 + the signal."""
    prefix = f"{prog}: " if prog else ""
    try:
        return command()
    except KeyboardInterrupt:
        print(f"{prefix}interrupted by SIGINT (exit 130): {INTERRUPTED_NOTE}", file=sys.stderr)
        return 128 + signal.SIGINT
    except SystemExit as exc:
        signum = signal_exit(exc)
        if signum is None:
            raise
        name = signal.Signals(signum).name
        print(f"{prefix}interrupted by {name} (exit {128 + signum}): {INTERRUPTED_NOTE}", file=sys.stderr)
        return 128 + signum
    except BrokenPipeError:
        # the reader went away (`reproduce status OUT | head`, issue 80: an error line and exit 2): end as
        # a Unix tool killed by SIGPIPE does, quietly, with stdout to /dev/null so the exit flush is quiet
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    except Exception as exc:
        if not is_input_error(exc) or os.environ.get(TRACEBACK_VARIABLE):
            raise
        print(f"{prefix}error: {one_line(exc)}", file=sys.stderr)
        return 2
