import signal
import sys

_pending: list[int] = []


def _say_interrupted(signum) -> None:
    from datetime import datetime, timezone

    when = datetime.now(timezone.utc).isoformat(timespec="seconds")
    name = signal.Signals(signum).name
    print(f"\nreproduce: interrupted by {name} at {when} (outside a local run's stages)", file=sys.stderr)


def _interrupted_outside_the_stages(signum, frame):
    # Outside reproduce.local.interruptible() (the options, a Slurm submission): one line instead of
    # a KeyboardInterrupt traceback
    _say_interrupted(signum)
    raise SystemExit(128 + signum)


# During the imports below (seconds on a loaded machine) a signal is only recorded: raised inside
# torch's import, an exception aborted the interpreter (SIGABRT, a C stack trace; issue 65's
# interrupt stress found it); it ends the run, with its line, once they are done.
for _each in (signal.SIGINT, signal.SIGTERM):
    signal.signal(_each, lambda signum, frame: _pending.append(signum))

import os  # noqa: E402

# Headless: figures are only written to files. The variable, not matplotlib.use(): matplotlib is
# imported only by the analysis stage (`--help` loads none of it, issue 77).
os.environ["MPLBACKEND"] = "Agg"

from reproduce.cli import main  # noqa: E402

if _pending:
    _say_interrupted(_pending[0])
    raise SystemExit(128 + _pending[0])
for _each in (signal.SIGINT, signal.SIGTERM):
    signal.signal(_each, _interrupted_outside_the_stages)

raise SystemExit(main())
