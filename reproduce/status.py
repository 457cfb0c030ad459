"""`python -m reproduce status OUT`: where a study stands, read from its folder while it runs
(docs/watching.md). Reads only: reproduce.yaml, the lock's holder line, each pretraining run's
loss.jsonl and FINISHED.json, each fine-tuning run's record.json and error.txt; writes only the
loss-curve PNG (--png). Works the same for a local reproduce and for the Slurm jobs of one.

Pretraining run states: finished, running, interrupted (started, not finished, and no live job holds
its folder: a rerun resumes it), pending. Fine-tuning run states: done (record written by the current
or last reproduce), reused (record older than it: kept from an earlier one), failed (error.txt; its
first line shown), running, interrupted, pending. A run is running while a job holds its folder's
lock (contracts.locks: `<run dir>/.lock`, removed when the job ends, left unlocked by kill -9): a
holder on this host is checked by its pid; one on another host (a Slurm node) cannot be seen from
here and counts as running, squeue tells whether its job still is.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import os
import socket
from collections import Counter
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path

from contracts.layout import ERROR_FILE, FINISHED_FILE, LOSS_LOG_FILE, RECORD_FILE, RUN_CONFIG_FILE, finetune_run_dir
from contracts.locks import LOCK_FILE as RUN_LOCK_FILE
from contracts.provenance import atomic_write_bytes
from reproduce.housekeeping import CONFIG_FILE, FINISHED_STUDY_FILE, LOCK_FILE
from reproduce.plan import ReproduceError

ETA_WINDOW = 50  # steps whose pace gives the ETA (of the latest stretch of training, after any resume)


# --- pure ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Holder:
    """The lock file's line: which reproduce last held the folder, and whether it still runs."""

    pid: int | None
    host: str | None
    since: _dt.datetime | None
    alive: bool


def parse_holder(text: str, this_host: str, pid_alive) -> Holder:
    """`pid N on HOST since ISO-TIME` (reproduce.housekeeping.output_lock); alive only when that
    pid still runs on this host (`pid_alive(pid)`: a lock held elsewhere cannot be seen from here)."""
    words = text.split()
    try:
        pid, host = int(words[1]), words[3]
        since = _dt.datetime.fromisoformat(words[5])
    except (IndexError, ValueError):
        return Holder(None, None, None, False)
    return Holder(pid, host, since, host == this_host and pid_alive(pid))


def read_loss_rows(text: str) -> list[dict]:
    """The complete lines of a loss.jsonl (a line being written is skipped)."""
    rows = []
    for line in text.splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def seconds_per_step(rows: list[dict], window: int = ETA_WINDOW) -> float | None:
    """The pace of the latest stretch of training: `seconds` restarts at 0 when a run resumes, so only
    rows after the last restart count, and of those the last `window` steps."""
    stretch: list[dict] = []
    for row in rows:
        if stretch and row["seconds"] < stretch[-1]["seconds"]:
            stretch = []  # resumed: a new process, a new clock
        stretch.append(row)
    stretch = stretch[-(window + 1) :]
    if len(stretch) < 2 or stretch[-1]["step"] <= stretch[0]["step"]:
        return None
    return (stretch[-1]["seconds"] - stretch[0]["seconds"]) / (stretch[-1]["step"] - stretch[0]["step"])


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = round(seconds)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes:02d}m"
    return f"{minutes}m {seconds:02d}s" if minutes else f"{seconds}s"


def first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    """A plain-text table, columns padded to their widest cell."""
    widths = [max(len(str(c)) for c in column) for column in zip(header, *rows)]
    line = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    return [line(header), line(["-" * w for w in widths]), *map(line, rows)]


# --- the study folder --------------------------------------------------------------------------------
@dataclass(frozen=True)
class PretrainingRun:
    name: str
    run_dir: Path
    max_steps: int
    state: str
    rows: list[dict]
    eta_s: float | None


@dataclass(frozen=True)
class FinetuneRun:
    id: str
    model: str
    state: str
    detail: str = ""


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_holder(lock: Path) -> Holder:
    """The holder line of a lock file (a study's `.reproduce.lock`, a run's `.lock`); empty if none."""
    try:
        text = lock.read_text()
    except OSError:
        text = ""
    return parse_holder(text, socket.gethostname(), _pid_alive)


def started_state(run_dir: Path) -> str:
    """A started run without its end marker: running while a job holds its folder's lock (a holder on
    another host counts as running: it cannot be checked from here), else interrupted."""
    lock = run_dir / RUN_LOCK_FILE
    if not lock.is_file():
        return "interrupted"
    holder = read_holder(lock)
    if holder.host is not None and holder.host != socket.gethostname():
        return "running"
    return "running" if holder.alive else "interrupted"


def last_start(out: Path, holder: Holder) -> _dt.datetime | None:
    """When the current or last reproduce of `out` started: its lock line (a running or killed one),
    else its timings.json (a finished one removes its lock: finished minus the seconds of its stages)."""
    if holder.since is not None:
        return holder.since
    try:
        timings = json.loads((out / FINISHED_STUDY_FILE).read_text())
        finished = _dt.datetime.fromisoformat(timings["finished"])
        return finished - _dt.timedelta(seconds=sum(timings["seconds"].values()))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def pretraining_status(cfg) -> list[PretrainingRun]:
    from reproduce.plan import pretraining_config, pretraining_dir, pretraining_runs

    runs = []
    for name in pretraining_runs(cfg):
        run_dir = pretraining_dir(cfg) / name
        max_steps = int(pretraining_config(cfg, name)["train"]["max_steps"])
        log = run_dir / LOSS_LOG_FILE
        rows = read_loss_rows(log.read_text()) if log.is_file() else []
        if (run_dir / FINISHED_FILE).is_file():
            state = "finished"
        elif rows or (run_dir / RUN_CONFIG_FILE).is_file():
            state = started_state(run_dir)
        else:
            state = "pending"
        pace = seconds_per_step(rows) if state == "running" else None
        eta = pace * (max_steps - rows[-1]["step"]) if pace is not None and rows else None
        runs.append(PretrainingRun(name, run_dir, max_steps, state, rows, eta))
    return runs


class _JobView:
    """The name and run folder of a planned fine-tuning job, as benchmarks.run.RunConfig derives
    them, without building 5,400 typed configs (most of `status`'s time on a paper-scale study)."""

    def __init__(self, config: dict):
        from benchmarks.run import run_model_name

        self.name = run_model_name(config["model"], config.get("model_name"))
        self.run_dir = finetune_run_dir(
            config["out"], self.name, config["task"], float(config["lr"]), int(config["seed"])
        )


def finetune_status(cfg, since: _dt.datetime | None) -> list[FinetuneRun]:
    from benchmarks.run import RunConfig
    from contracts.config import config_from_dict
    from reproduce.plan import finetune_jobs

    runs = []
    jobs = finetune_jobs(cfg, check_models=False)
    if jobs:  # one typed config checks the plan's shape; the rest are read as the plan wrote them
        config_from_dict(RunConfig, jobs[0]["config"], jobs[0]["id"])
    for job in jobs:
        run_cfg = _JobView(job["config"])
        run_dir = run_cfg.run_dir
        record, error = run_dir / RECORD_FILE, run_dir / ERROR_FILE
        if record.is_file():
            mtime = _dt.datetime.fromtimestamp(record.stat().st_mtime, _dt.timezone.utc)
            state = "reused" if since is not None and mtime < since else "done"
            runs.append(FinetuneRun(job["id"], run_cfg.name, state))
        elif error.is_file():
            runs.append(FinetuneRun(job["id"], run_cfg.name, "failed", first_line(error.read_text())))
        elif run_dir.is_dir():
            runs.append(FinetuneRun(job["id"], run_cfg.name, started_state(run_dir)))
        else:
            runs.append(FinetuneRun(job["id"], run_cfg.name, "pending"))
    return runs


FINETUNE_STATES = ("done", "reused", "running", "failed", "interrupted", "pending")


def status_report(out: Path) -> tuple[list[str], list[PretrainingRun]]:
    """The lines `reproduce status` prints, and the pretraining runs (for the loss curves)."""
    from contracts.config import ConfigError, load_config
    from reproduce.plan import ReproduceConfig

    config = out / CONFIG_FILE
    if not config.is_file():
        raise ReproduceError(
            f"{config}: no reproduce.yaml, so {out} is not a study folder (python -m reproduce writes "
            "it first); give the study's --out folder, e.g. outputs/masking"
        )
    try:
        cfg = load_config(ReproduceConfig, config)
    except ConfigError as exc:
        raise ReproduceError(str(exc)) from None
    # Everything is read relative to OUT, not to the `out` recorded in reproduce.yaml: that may be
    # relative to another folder, or the study moved or copied since (issue 53: every run "pending").
    cfg = dataclasses.replace(cfg, out=str(out.absolute()))
    holder = read_holder(out / LOCK_FILE)
    slurm = (out / "slurm").is_dir() and not holder.alive
    if holder.alive:
        who = f"running: pid {holder.pid} on {holder.host} since {holder.since.isoformat()}"
    elif (out / FINISHED_STUDY_FILE).is_file():
        who = "finished (timings.json)"
    elif slurm:
        who = "jobs written for Slurm (OUT/slurm): squeue tells which still run"
    elif holder.since is not None:
        who = f"not running: the last reproduce (pid {holder.pid} on {holder.host}) started {holder.since.isoformat()}"
    else:
        who = "not running"
    lines = [f"study {cfg.study} ({cfg.scale} scale) in {out}: {who}", ""]
    pretraining = pretraining_status(cfg)
    rows = []
    for run in pretraining:
        last = run.rows[-1] if run.rows else {}
        loss = last.get("loss")
        rows.append(
            [
                run.name,
                run.state,
                f"{last.get('step', 0)}/{run.max_steps}",
                f"{last.get('tokens', 0):,}",
                "-" if loss is None else f"{loss:.4f}",
                format_duration(run.eta_s) if run.state == "running" else "-",
            ]
        )
    lines += ["pretraining:", *table(["run", "state", "step", "tokens", "loss", "ETA"], rows), ""]
    finetune = finetune_status(cfg, last_start(out, holder))
    by_model: dict[str, Counter] = {}
    for run in finetune:
        by_model.setdefault(run.model, Counter())[run.state] += 1
    rows = [[model, *(str(c[s]) for s in FINETUNE_STATES)] for model, c in by_model.items()]
    total = Counter(run.state for run in finetune)
    rows.append(["all", *(str(total[s]) for s in FINETUNE_STATES)])
    lines += [f"fine-tuning ({len(finetune)} runs):", *table(["model", *FINETUNE_STATES], rows)]
    failed = [run for run in finetune if run.state == "failed"]
    if failed:
        lines += ["", "failed (first line of each error.txt):", *(f"  {r.id}: {r.detail}" for r in failed)]
    return lines, pretraining


def draw_losses(runs: list[PretrainingRun], path: Path) -> Path:
    """The loss curves so far, one line per pretraining run, as a PNG (written atomically)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    drawn = 0
    for run in runs:
        if run.rows:
            ax.plot([r["step"] for r in run.rows], [r["loss"] for r in run.rows], label=f"{run.name} ({run.state})")
            drawn += 1
    ax.set_xlabel("step")
    ax.set_ylabel("training loss")
    ax.set_title("pretraining loss so far (loss.jsonl)" if drawn else "no pretraining loss written yet")
    if drawn:
        ax.legend(fontsize=7)
    buffer = BytesIO()
    fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    return atomic_write_bytes(path, buffer.getvalue())


def add_arguments(parser) -> None:
    parser.add_argument("out", help="the study's output folder (the --out of python -m reproduce)")
    parser.add_argument("--png", help="where the loss-curve PNG goes (default OUT/status/loss.png)")


def main(argv: list[str]) -> int:
    import argparse
    import sys

    parser = argparse.ArgumentParser(
        prog="python -m reproduce status",
        description="Where a study stands: pretraining runs (step, tokens, loss, ETA), fine-tuning runs "
        "(done, reused, running, failed with the first line of the error, interrupted, pending) and a PNG "
        "of the loss curves so far. Reads the folder only; running jobs are not touched (docs/watching.md).",
    )
    add_arguments(parser)
    args = parser.parse_args(argv)
    out = Path(args.out).absolute()
    try:
        lines, pretraining = status_report(out)
    except ReproduceError as exc:
        print(f"reproduce status: error: {exc}", file=sys.stderr)
        return 2
    png = draw_losses(pretraining, Path(args.png) if args.png else out / "status" / "loss.png")
    print("\n".join([*lines, "", f"loss curves: {png}"]))
    return 0
