import signal
import sys


def _interrupted_outside_the_stages(signum, frame):
    # Outside reproduce.local.interruptible() (the imports, which take seconds on a loaded machine,
    # the options, a Slurm submission): one line instead of a KeyboardInterrupt traceback
    from datetime import datetime, timezone

    when = datetime.now(timezone.utc).isoformat(timespec="seconds")
    name = signal.Signals(signum).name
    print(f"\nreproduce: interrupted by {name} at {when} (outside a local run's stages)", file=sys.stderr)
    raise SystemExit(128 + signum)


for _each in (signal.SIGINT, signal.SIGTERM):
    signal.signal(_each, _interrupted_outside_the_stages)

import matplotlib  # noqa: E402

matplotlib.use("Agg")  # headless: figures are only written to files

from reproduce.cli import main  # noqa: E402

raise SystemExit(main())
