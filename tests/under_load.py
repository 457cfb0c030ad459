"""Run a command while every core is kept busy by other processes, as on a loaded CI machine
(`make test-stress`; docs/installation.md, "Tests under load").

    python -m tests.under_load [--repeat N] [--burners K] -- make test

Starts K busy-looping processes (default: one per core), runs the command N times in a row while
they spin, stops them, and prints each run's wall time; exits with the first failing run's code.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import subprocess
import sys
import time


def _spin() -> None:
    while True:
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.under_load", description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="runs of the command in a row (default 1)")
    parser.add_argument("--burners", type=int, default=os.cpu_count() or 2, help="busy processes (default: cores)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command or args.repeat < 1:
        parser.error("give a command after -- and --repeat >= 1")
    burners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(args.burners)]
    for burner in burners:
        burner.start()
    os.environ["UNDER_LOAD_PIDS"] = " ".join(str(b.pid) for b in burners)  # for the command to see
    times = []
    try:
        for run in range(1, args.repeat + 1):
            start = time.monotonic()
            code = subprocess.call(command)
            times.append(time.monotonic() - start)
            print(
                f"under_load: run {run}/{args.repeat} with {args.burners} busy processes: rc {code}, "
                f"{times[-1] / 60:.1f} min",
                flush=True,
            )
            if code != 0:
                return code
    finally:
        for burner in burners:
            burner.terminate()
        for burner in burners:
            burner.join()
    minutes = ", ".join(f"{t / 60:.1f}" for t in times)
    print(f"under_load: {args.repeat} of {args.repeat} runs passed; minutes: {minutes}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
