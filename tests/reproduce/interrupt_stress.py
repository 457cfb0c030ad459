"""Signals at random moments of a small toy reproduction (issue 65, item 4; docs/reliability.md).

    python -m tests.reproduce.interrupt_stress [--signals 20] [--seed 0] [--max-delay 40] [--out DIR]

Starts a small toy `reproduce` (toy_s MLM-40 and CLM, 30 pretraining steps, SST-2 and SQuAD, one LR
and seed: every stage within a minute or two) and interrupts it again and again: each time it starts
the same command (which resumes what the last one left), waits until the process has installed its
signal handlers (its first statement; before, the interpreter is starting, where a Ctrl-C prints
Python's own KeyboardInterrupt), then a random delay, and sends SIGINT to
the process group (what a terminal's Ctrl-C does) or SIGTERM to the process (`kill PID`), in turn.
Every interrupted run must exit with 128 + the signal, print the one "interrupted" line last and no
traceback, leave no process of its group alive and its output lock free. A run that finishes before
its signal starts a new output folder. At the end the command runs to the finish (exit 0) on the
last folder. One line per signal, with the stage it hit; exit 1 at the first failure, with its stderr.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from reproduce.housekeeping import LOCK_FILE

ROOT = Path(__file__).resolve().parents[2]
FAILSAFE_S = 900  # a run that neither ends nor answers its signal within this is a failure
SMALL_TOY = [
    *("--sizes", "toy_s", "--ratios", "0.4", "--pretrain-steps", "30"),
    *("--tasks", "sst2,squad", "--lrs", "2e-3", "--seeds", "0", "--reps", "100"),
    *("--workers", "2", "--threads", "1"),
]
INTERRUPTED = re.compile(r"^reproduce: interrupted by (SIG[A-Z]+)(?: in the (\w[\w-]*) stage)? at ")


def command(out: Path) -> list[str]:
    return [sys.executable, "-m", "reproduce", "--out", str(out), *SMALL_TOY]


def proc_table() -> list[tuple[int, list[str]]]:
    """(pid, the fields of /proc/PID/stat after the command name: state, ppid, pgrp, ...) of each process."""
    table = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                table.append((int(entry.name), (entry / "stat").read_text().rsplit(")", 1)[1].split()))
            except OSError:
                continue
    return table


def group_members(group: int) -> list[int]:
    """The live processes of process group `group` (zombies are not alive)."""
    return [pid for pid, fields in proc_table() if fields[0] != "Z" and int(fields[2]) == group]


def lock_is_free(out: Path) -> bool:
    path = out / LOCK_FILE
    if not path.exists():
        return True
    with open(path, "a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
    return True


def problems(code: int, stderr: str, signum: int) -> list[str]:
    """What an interrupted run did wrong: its exit status, its last line, any traceback."""
    found = []
    if code != 128 + signum:
        found.append(f"exit status {code}, not {128 + signum}")
    lines = [line for line in stderr.splitlines() if line.strip()]
    last = INTERRUPTED.match(lines[-1]) if lines else None
    if not last or last.group(1) != signal.Signals(signum).name:
        found.append(f"last line is not 'reproduce: interrupted by {signal.Signals(signum).name} ...'")
    if "Traceback" in stderr or "Fatal Python error" in stderr:
        found.append("a traceback was printed")
    return found


def catches_sigterm(pid: int) -> bool:
    """Whether the process has a handler for SIGTERM (SigCgt of /proc/PID/status): `reproduce`
    installs its handlers first thing; before, the interpreter itself is starting."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = re.search(r"^SigCgt:\s*([0-9a-f]+)", status, re.MULTILINE)
    return bool(caught) and bool(int(caught.group(1), 16) >> (signal.SIGTERM - 1) & 1)


def interrupt_once(out: Path, signum: int, delay: float) -> tuple[str, str, list[str]]:
    """Start the command on `out`, signal it `delay` seconds after it has installed its signal
    handlers: (outcome, stage, problems)."""
    proc = subprocess.Popen(
        command(out), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        deadline = time.monotonic() + FAILSAFE_S
        while not catches_sigterm(proc.pid) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        try:
            _, stderr = proc.communicate(timeout=delay)
            return "finished", "", [] if proc.returncode == 0 else [f"exit status {proc.returncode}:\n{stderr}"]
        except subprocess.TimeoutExpired:
            pass
        if signum == signal.SIGINT:
            os.killpg(proc.pid, signum)
        else:
            os.kill(proc.pid, signum)
        _, stderr = proc.communicate(timeout=FAILSAFE_S)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    found = problems(proc.returncode, stderr, signum)
    deadline = time.monotonic() + FAILSAFE_S
    while group_members(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if group_members(proc.pid):
        found.append(f"processes of its group still alive: {group_members(proc.pid)}")
    if not lock_is_free(out):
        found.append("the output lock is still held")
    if found:
        found.append(f"stderr:\n{stderr[-4000:]}")
    lines = [line for line in stderr.splitlines() if line.strip()]
    hit = INTERRUPTED.match(lines[-1]) if lines else None
    return "interrupted", (hit.group(2) or "start-up") if hit else "?", found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.reproduce.interrupt_stress", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--signals", type=int, default=20, help="signals to send (default 20)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the delays (default 0)")
    parser.add_argument("--max-delay", type=float, default=40.0, help="delays are uniform in [0, this] seconds")
    parser.add_argument("--out", type=Path, help="folder for the output folders (default: a temporary one)")
    parser.add_argument("--no-finish", action="store_true", help="do not run the last folder to its end")
    args = parser.parse_args(argv)
    if args.signals < 1 or args.max_delay <= 0:
        parser.error("give --signals >= 1 and --max-delay > 0")
    root = args.out or Path(tempfile.mkdtemp(prefix="interrupt-stress-"))
    rng = random.Random(args.seed)
    folder, sent, stages = 0, 0, {}
    while sent < args.signals:
        signum = (signal.SIGINT, signal.SIGTERM)[sent % 2]
        delay = rng.uniform(0.0, args.max_delay)
        outcome, stage, found = interrupt_once(root / f"run-{folder}", signum, delay)
        if found:
            print(f"FAIL signal {sent + 1}: {signal.Signals(signum).name} after {delay:.1f} s: " + "; ".join(found))
            return 1
        if outcome == "finished":
            print(f"run-{folder} finished before a signal after {delay:.1f} s: a new folder")
            folder += 1
            continue
        sent += 1
        stages[stage] = stages.get(stage, 0) + 1
        print(f"signal {sent}: {signal.Signals(signum).name} after {delay:.1f} s in the {stage} stage: ok", flush=True)
    if not args.no_finish:
        done = subprocess.run(command(root / f"run-{folder}"), cwd=ROOT, capture_output=True, text=True)
        if done.returncode != 0:
            print(f"FAIL the resumed run did not finish: exit {done.returncode}\n{done.stderr[-4000:]}")
            return 1
    print(f"interrupt stress: {sent} signals, each ended cleanly; by stage {dict(sorted(stages.items()))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
