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
import math
import os
import socket
import stat
from collections import Counter
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path

from contracts.bounded import LARGE, SMALL, BoundedReadError, read_json_object, read_text
from contracts.layout import ERROR_FILE, FINISHED_FILE, LOSS_LOG_FILE, RECORD_FILE, RUN_CONFIG_FILE
from contracts.locks import LOCK_FILE as RUN_LOCK_FILE
from contracts.provenance import atomic_write_bytes
from reproduce.housekeeping import CONFIG_FILE, FINISHED_STUDY_FILE, LOCK_FILE
from reproduce.plan import ReproduceError, StudyPlan, load_study_config, study_plan_at
from reproduce.slurm.view import SLURM_JOBS_HEADER, SlurmView, slurm_headline, slurm_jobs, slurm_run_state

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


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# A step, token count or clock beyond these is no run's (a paper run: 42,000 steps, 99.1B tokens,
# days of seconds): an infinite or 400-digit value in a loss.jsonl was an OverflowError in `status`
MAX_LOGGED_STEP, MAX_LOGGED_COUNT = 10**9, 10**15


def _counter(value, limit: int = MAX_LOGGED_COUNT) -> bool:
    """A finite, non-negative number no larger than `limit` (a step, token count or seconds)."""
    # compared first: math.isfinite of a 400-digit int is itself an OverflowError
    return _number(value) and 0 <= value <= limit and math.isfinite(value)


def read_loss_rows(text: str) -> list[dict]:
    """The complete lines of a loss.jsonl with a numeric step, loss and seconds (a line being written,
    or one with other values, is skipped: issue 56, a string loss crashed the table)."""
    rows = []
    for line in text.splitlines():
        try:
            row = json.loads(line)
        except (json.JSONDecodeError, RecursionError):
            continue
        if isinstance(row, dict) and isinstance(row.get("step"), int) and _counter(row["step"], MAX_LOGGED_STEP):
            # the loss may be NaN or infinite (a diverged run shows it); the counters must be plausible
            if _number(row.get("loss")) and _counter(row.get("seconds", 0)) and _counter(row.get("tokens", 0)):
                rows.append(row)
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


def error_first_line(path: Path) -> str:
    """The first line of an error.txt, read from its first 4 kB only (a traceback can be long)."""
    return first_line(_head(path))


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
    at_chance: str = ""  # a record flagged at its chance level: why (benchmarks.chance, issue 67)


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
    try:  # bounded: a lock linked to /dev/zero, a FIFO or a 3 GB file has no holder line to read (issue 66)
        text = read_text(lock, SMALL)
    except (OSError, BoundedReadError):
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
        timings = read_json_object(out / FINISHED_STUDY_FILE)
        finished = _dt.datetime.fromisoformat(timings["finished"])
        return finished - _dt.timedelta(seconds=sum(timings["seconds"].values()))
    except (OSError, ValueError, KeyError, TypeError, AttributeError, OverflowError):
        return None


def _parses(path: Path) -> bool:
    """A marker or record that is a regular, bounded file holding a JSON object."""
    return _parsed(path) is not None


def _parsed(path: Path) -> dict | None:
    try:
        return read_json_object(path)
    except (OSError, BoundedReadError):
        return None


def _at_chance(record: dict) -> str:
    """Why a record is flagged at its chance level ('' when it is not, or predates the flag)."""
    from benchmarks.chance import chance_flag

    chance = chance_flag(record.get("provenance"))
    if chance is None:
        return ""
    return " ".join(str(chance.get("why") or "at chance").split())[:200]


def _read_or_empty(path: Path, limit: int) -> str:
    try:
        return read_text(path, limit)
    except (OSError, BoundedReadError):
        return ""


def _head(path: Path, size: int = 4096) -> str:
    """The first bytes of a regular file (an error.txt's first line), without reading the rest."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return f"({path.name} is not a regular file)"
        with open(path, "rb") as handle:
            return handle.read(size).decode("utf-8", errors="replace")
    except OSError as exc:
        return f"({path.name} unreadable: {exc.strerror})"


def pretraining_status(plan: StudyPlan, slurm: SlurmView | None = None) -> list[PretrainingRun]:
    runs = []
    for name, run_dir, max_steps in ((r.name, r.run_dir, r.max_steps) for r in plan.runs):
        log = run_dir / LOSS_LOG_FILE
        rows = read_loss_rows(_read_or_empty(log, LARGE))
        if (run_dir / FINISHED_FILE).exists():
            # a marker must parse to count (issue 56: a garbage FINISHED.json showed the run finished)
            state = "finished" if _parses(run_dir / FINISHED_FILE) else "broken FINISHED.json"
        elif rows or (run_dir / RUN_CONFIG_FILE).is_file():
            state = started_state(run_dir)
        else:
            state = "pending"
        if slurm is not None and slurm.entries and state != "finished":
            _, job_state = slurm.job_state("pretraining", name)
            state = slurm_run_state(job_state, False) or state
        pace = seconds_per_step(rows) if state == "running" else None
        eta = pace * (max_steps - rows[-1]["step"]) if pace is not None and rows else None
        runs.append(PretrainingRun(name, run_dir, max_steps, state, rows, eta))
    return runs


def finetune_status(plan: StudyPlan, since: _dt.datetime | None, slurm: SlurmView | None = None) -> list[FinetuneRun]:
    runs = []
    for job_id, name, run_dir, group, index in ((j.id, j.model, j.run_dir, j.group, j.index) for j in plan.jobs):
        record, error = run_dir / RECORD_FILE, run_dir / ERROR_FILE
        body = _parsed(record) if record.exists() else None
        if record.exists() and body is None:  # truncated or not a file: not done (issue 56)
            runs.append(FinetuneRun(job_id, name, "failed", f"{RECORD_FILE} unreadable: remove it to redo the run"))
        elif record.exists():
            mtime = _dt.datetime.fromtimestamp(record.stat().st_mtime, _dt.timezone.utc)
            state = "reused" if since is not None and mtime < since else "done"
            runs.append(FinetuneRun(job_id, name, state, at_chance=_at_chance(body)))
        elif error.is_file():
            runs.append(FinetuneRun(job_id, name, "failed", error_first_line(error)))
        elif slurm is not None and slurm.entries and group is not None:
            # on Slurm: the array task's state; one that ended without a record or an error is missing
            # (killed, timed out, cancelled because the job it waited for failed)
            task_job, task_state = slurm.task_state(name, group, index)
            state = slurm_run_state(task_state, False)
            if state == "failed":
                tail = slurm.log_tail(task_job, index)
                detail = f"job {task_job}_{index} {task_state.state}" + (f": {tail}" if tail else "")
                runs.append(FinetuneRun(job_id, name, "missing", detail))
            else:
                runs.append(FinetuneRun(job_id, name, state or "pending"))
        elif run_dir.is_dir():
            runs.append(FinetuneRun(job_id, name, started_state(run_dir)))
        else:
            runs.append(FinetuneRun(job_id, name, "pending"))
    return runs


FINETUNE_STATES = ("done", "reused", "running", "failed", "missing", "interrupted", "pending")


LISTED_RUNS = 20  # failed or missing runs listed one by one; more are summarised per model


def run_lines(runs: list[FinetuneRun], every_run: bool, out: Path) -> list[str]:
    """One line per run (`id: detail`), or, past LISTED_RUNS runs, one per model: its count, its
    first three ids and the first run's detail (a study whose every run is missing has thousands)."""
    if every_run or len(runs) <= LISTED_RUNS:
        return [f"  {r.id}: {r.detail}" for r in runs]
    by_model: dict[str, list[FinetuneRun]] = {}
    for run in runs:
        by_model.setdefault(run.model, []).append(run)
    lines = []
    for model, of_model in by_model.items():
        ids = ", ".join(r.id for r in of_model[:3]) + (", ..." if len(of_model) > 3 else "")
        lines.append(f"  {model}: {len(of_model)} runs ({ids}); the first: {of_model[0].detail}")
    lines.append(f"  ({len(runs)} runs of {len(by_model)} models; each one: python -m reproduce status {out} --all)")
    return lines


def recorded_folder_notes(out: Path) -> list[str]:
    """Lines for an older study's relative runs or data folder that is not where the one rule reads it
    (reproduce.plan.config.relative_folder_notes): said, never replaced by another folder (issue 88)."""
    from contracts.config import ConfigError, load_config
    from reproduce.plan.config import ReproduceConfig, relative_folder_notes

    try:
        return relative_folder_notes(out, load_config(ReproduceConfig, out / CONFIG_FILE))
    except (ConfigError, OSError):
        return []  # the plan's own one-line error says why


def status_report(out: Path, every_run: bool = False) -> tuple[list[str], list[PretrainingRun], list[FinetuneRun]]:
    """The lines `reproduce status` prints, and the pretraining and fine-tuning runs (for the PNG).
    `every_run`: list each failed or missing run, however many."""
    if not (out / CONFIG_FILE).is_file():
        load_study_config(out)  # the one-line error naming the missing reproduce.yaml
    notes: list[str] = recorded_folder_notes(out)
    plan = study_plan_at(out, notes)  # OUT/plan.json: no torch, no planning
    holder = read_holder(out / LOCK_FILE)
    slurm = SlurmView.read(out) if (out / "slurm").is_dir() and not holder.alive else None
    on_slurm = slurm is not None and bool(slurm.entries)
    pretraining = pretraining_status(plan, slurm)
    finetune = finetune_status(plan, last_start(out, holder), slurm)
    if holder.alive:
        who = f"running: pid {holder.pid} on {holder.host} since {holder.since.isoformat()}"
    elif on_slurm:
        who = slurm_headline(out, slurm, finetune, plan)
    elif (out / FINISHED_STUDY_FILE).is_file():
        who = "finished (timings.json)"
    elif slurm is not None:
        who = "jobs written for Slurm (OUT/slurm), no job ledger: squeue tells which still run"
    elif holder.since is not None:
        who = f"not running: the last reproduce (pid {holder.pid} on {holder.host}) started {holder.since.isoformat()}"
    else:
        who = "not running"
    lines = [f"study {plan.study} ({plan.scale} scale) in {out}: {who}", *notes, ""]
    if on_slurm:
        heading, rows = slurm_jobs(slurm)
        lines += [heading, *table(SLURM_JOBS_HEADER, rows), ""]
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
    by_model: dict[str, Counter] = {}
    for run in finetune:
        by_model.setdefault(run.model, Counter())[run.state] += 1
        by_model[run.model]["at chance"] += bool(run.at_chance)
    columns = (*FINETUNE_STATES, "at chance")
    rows = [[model, *(str(c[s]) for s in columns)] for model, c in by_model.items()]
    total = Counter(run.state for run in finetune)
    total["at chance"] = sum(bool(run.at_chance) for run in finetune)
    rows.append(["all", *(str(total[s]) for s in columns)])
    lines += [f"fine-tuning ({len(finetune)} runs):", *table(["model", *columns], rows)]
    flagged = [dataclasses.replace(run, detail=run.at_chance) for run in finetune if run.at_chance]
    if flagged:
        lines += ["", "at their chance level (done, but collapsed: check the LR; docs/benchmarks.md):"]
        lines += run_lines(flagged, every_run, out)
    failed = [run for run in finetune if run.state == "failed"]
    if failed:
        lines += ["", "failed (first line of each error.txt):", *run_lines(failed, every_run, out)]
    missing = [run for run in finetune if run.state == "missing"]
    if missing:
        lines += ["", "missing (the job ended without a record; last line of its Slurm log):"]
        lines += run_lines(missing, every_run, out)
    if on_slurm and (failed or missing):
        lines += ["", f"rerun only these: python -m reproduce resubmit {out} (--dry-run shows the sbatch lines)"]
    return lines, pretraining, finetune


def objective_of(name: str) -> str:
    """The panel a pretraining run is drawn in: its objectives in order (`210m-mlm40-42k` -> MLM,
    `610m-clm-dec42k-mlm40-44k` -> CLM -> MLM)."""
    steps = [part[:3].upper() for part in name.split("-") if part[:3] in ("mlm", "clm")]
    return " -> ".join(dict.fromkeys(steps)) if len(set(steps)) > 1 else (steps[0] if steps else "other")


def loss_panels(runs: list[PretrainingRun]) -> dict[str, list[PretrainingRun]]:
    """The runs with losses, one panel per objective (MLM first, then CLM, then the rest)."""
    panels: dict[str, list[PretrainingRun]] = {}
    for run in runs:
        if run.rows:
            panels.setdefault(objective_of(run.name), []).append(run)
    order = {"MLM": 0, "CLM": 1}
    return dict(sorted(panels.items(), key=lambda item: (order.get(item[0], 2), item[0])))


def draw_losses(runs: list[PretrainingRun], path: Path, finetune: list[FinetuneRun] = ()) -> Path:
    """The loss curves so far, one panel per objective with its legend outside it (15 runs and more
    stay readable), and the fine-tuning progress per model as stacked bars; a PNG, written atomically."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = loss_panels(runs)
    by_model: dict[str, Counter] = {}
    for run in finetune:
        by_model.setdefault(run.model, Counter())[run.state] += 1
    heights = [3.0] * max(1, len(panels)) + ([0.8 + 0.28 * len(by_model)] if by_model else [])
    fig, axes = plt.subplots(len(heights), 1, figsize=(10, sum(heights)), gridspec_kw={"height_ratios": heights})
    axes = list(axes) if len(heights) > 1 else [axes]
    if not panels:
        axes[0].set_title("no pretraining loss written yet")
        axes[0].set_axis_off()
    for ax, (objective, members) in zip(axes, panels.items()):
        ax.set_prop_cycle(color=plt.cm.tab20.colors[: max(1, len(members))])  # 20 distinct colours, not 10 repeated
        for run in members:
            ax.plot([r["step"] for r in run.rows], [r["loss"] for r in run.rows], label=f"{run.name} ({run.state})")
        ax.set_title(f"{objective} pretraining loss so far (loss.jsonl)", fontsize=10)
        ax.set_xlabel("step")
        ax.set_ylabel("training loss")
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    if by_model:
        ax = axes[-1]
        colors = {"done": "tab:green", "reused": "tab:olive", "running": "tab:blue", "failed": "tab:red",
                  "missing": "tab:purple", "interrupted": "tab:orange", "pending": "lightgrey"}  # fmt: skip
        models = list(by_model)
        left = [0] * len(models)
        for state in FINETUNE_STATES:
            counts = [by_model[m][state] for m in models]
            if any(counts):
                ax.barh(models, counts, left=left, color=colors[state], label=state)
                left = [a + b for a, b in zip(left, counts)]
        ax.invert_yaxis()
        ax.tick_params(axis="y", labelsize=7)
        ax.set_xlabel("fine-tuning runs")
        ax.set_title(f"fine-tuning progress ({len(finetune)} runs)", fontsize=10)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    fig.tight_layout()
    buffer = BytesIO()
    fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    return atomic_write_bytes(path, buffer.getvalue())


def add_arguments(parser) -> None:
    parser.add_argument("out", help="the study's output folder (the --out of python -m reproduce)")
    parser.add_argument("--png", help="where the loss-curve PNG goes (default OUT/status/loss.png)")
    parser.add_argument(
        "--all", action="store_true", help=f"list every failed or missing run (default: past {LISTED_RUNS}, per model)"
    )


def build_parser():
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m reproduce status",
        description="Where a study stands: pretraining runs (step, tokens, loss, ETA), fine-tuning runs "
        "(done, reused, running, failed with the first line of the error, interrupted, pending) and a PNG "
        "of the loss curves so far. Reads the folder only; running jobs are not touched (docs/watching.md).",
    )
    add_arguments(parser)
    return parser


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    from reproduce.plan.study_plan import study_folder
    from reproduce.slurm.permissions import team_umask

    out = study_folder(args.out)  # a link to the study is the study (issue 89)
    with team_umask(out):  # a team's study: the PNG and a plan.json written back stay the group's
        return _status(out, args)


def _status(out: Path, args) -> int:
    import sys

    try:
        lines, pretraining, finetune = status_report(out, every_run=args.all)
    except (ReproduceError, BoundedReadError) as exc:
        print(f"reproduce status: error: {exc}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    target = Path(args.png) if args.png else out / "status" / "loss.png"
    if not any(run.rows for run in pretraining) and all(run.state == "pending" for run in finetune):
        # nothing has started: no curve and no progress to draw (and no matplotlib import: issue 80, status
        # of the 5,400-run paper study within 2 s of CPU)
        print(f"\nloss curves: none yet (no run has started; {target} is drawn once one has)")
        return 0
    from reproduce.plan.inventory import link_on_the_way

    link = None if args.png else link_on_the_way(target, out)
    if link is not None:  # issue 88: the PNG went through a linked OUT/status
        print(
            f"reproduce status: error: {link} is a link: the PNG is not written through it: pass --png PATH",
            file=sys.stderr,
        )
        return 2
    try:
        png = draw_losses(pretraining, target, finetune)
    except PermissionError:  # a teammate who may only read the study (issue 89): the table is what they asked
        print(f"\nloss curves: not drawn ({target.parent} is not writable by you; --png PATH draws them elsewhere)")
        return 0
    except OSError as exc:  # e.g. OUT/status is a file (issue 56): the table is printed, the PNG not
        why = exc.strerror or type(exc).__name__
        print(f"reproduce status: error: cannot write the PNG {target} ({why}): pass --png PATH", file=sys.stderr)
        return 2
    print(f"\nloss curves: {png}")
    return 0
