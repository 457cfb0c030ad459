"""The job ledger of a study submitted to Slurm, and what Slurm says of its jobs (issue 53).

`OUT/slurm/ledger.jsonl` gets one line per sbatch call: written by the generated `submit.sh` (a bash
function, so the ids are recorded even if the submission stops half-way) and by `reproduce resubmit`.
A line names the job id, its kind (data, pretraining, finetune, analysis), what it runs (a pretraining
run, the model of a fine-tuning array and its group: finetune, ir_train or ir_eval) and, for an
array, the task ids it was submitted with. The latest line covering a task is that task's job.

Slurm is asked with `squeue` (queued and running jobs, arrays one task per line) and `sacct` (ended
jobs, where the site keeps accounting); both bounded in time. Without either, a job that left the
queue counts as ended and its outcome is read from the run folders (records, FINISHED.json).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import getpass
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

LEDGER_FILE = Path("slurm") / "ledger.jsonl"
# The fine-tuning arrays' throttle and lanes the study was written with (reproduce.slurm), for
# `resubmit`, which submits arrays the first submission never queued (no ledger entry).
ARRAYS_FILE = Path("slurm") / "arrays.json"
SCRIPTS_FILE = Path("slurm") / "scripts.json"  # the sha256 of each script the study wrote (resubmit checks them)
KINDS = ("data", "pretraining", "finetune", "analysis")
# afterok on a job that failed: cancel the dependant (the analysis, afterany, then runs), not leave it
# pending forever with DependencyNeverSatisfied
KILL_ON_INVALID_DEP = "--kill-on-invalid-dep=yes"
QUERY_TIMEOUT_S = 30  # a squeue or sacct that hangs (a slurmctld under load) is given up, not waited on
_FIELDS = ("job", "kind", "name", "script", "group", "tasks", "submitted")
_JOB_ID = re.compile(r"\d+")


# --- the ledger ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class LedgerEntry:
    job: str
    kind: str
    name: str  # the pretraining run, the fine-tuning model, or data / analysis
    script: str  # the sbatch script, relative to OUT/slurm
    group: str = ""  # a fine-tuning array's group (finetune, ir_train, ir_eval)
    tasks: str = ""  # an array's task ids as sbatch --array took them ("0-8", "3,5"); "" for a job
    submitted: str = ""

    def task_ids(self) -> list[int]:
        return parse_task_ids(self.tasks)


# More task ids than any array of ours can have (the paper's masking study has 4,950 array tasks in
# all): a ledger line with more (`0-2000000000`) is unreadable, counted before any id is made
MAX_ARRAY_TASKS = 100_000
# Task ids over all the ledger's lines (issue 78: many lines of 100,000 ids each exhausted memory): the
# paper's masking study is 4,950 tasks, so this allows it resubmitted in full 200 times; lines past the
# cap count as unreadable. And no field of a line is kept longer than MAX_FIELD_CHARS.
MAX_LEDGER_TASKS = 1_000_000
MAX_FIELD_CHARS = 4096


def parse_task_ids(text: str) -> list[int]:
    """`0-8`, `3,5,7-9` (sbatch --array, without the %throttle) -> the task ids. ValueError for a
    reversed range or more than MAX_ARRAY_TASKS ids, checked before they are made (issue 66)."""
    spans = []
    for part in filter(None, text.split("%", 1)[0].split(",")):
        first, _, last = part.partition("-")
        start, stop = int(first), int(last or first)
        if start < 0 or stop < start:
            raise ValueError(f"task range {part!r}")
        spans.append((start, stop))
    if sum(stop - start + 1 for start, stop in spans) > MAX_ARRAY_TASKS:
        raise ValueError(f"more than {MAX_ARRAY_TASKS:,} task ids in {text[:40]!r}")
    return [i for start, stop in spans for i in range(start, stop + 1)]


def format_task_ids(ids: list[int]) -> str:
    """The shortest sbatch --array list of `ids` (runs of consecutive ids as ranges)."""
    parts, ids = [], sorted(set(ids))
    start = prev = None
    for i in [*ids, None]:
        if start is not None and (i is None or i != prev + 1):
            parts.append(f"{start}-{prev}" if prev != start else str(start))
            start = None
        if i is not None and start is None:
            start = i
        prev = i
    return ",".join(parts)


def ledger_line(entry: LedgerEntry) -> str:
    return json.dumps({f: getattr(entry, f) for f in _FIELDS}) + "\n"


PENDING_DIR = Path("slurm") / "pending"  # resubmit's records of the jobs it queues, before the ledger's line
MAX_PENDING_FILES = 100  # more are not read (each is one resubmit that could not write the ledger)


def read_ledger(out: Path) -> tuple[list[LedgerEntry], int]:
    """The ledger's entries, in submission order, then those of the pending records (OUT/slurm/pending/:
    jobs a resubmit queued and the ledger lacks, issue 89), and how many lines were unreadable
    (skipped: a line decodes only as the columns written here, with a numeric job id and a known kind)."""
    from contracts.bounded import LARGE, read_text

    out = Path(out)
    texts = [read_text(out / LEDGER_FILE, LARGE)] if (out / LEDGER_FILE).exists() else []
    pending = out / PENDING_DIR
    if pending.is_dir() and not pending.is_symlink():
        records = sorted(p for p in pending.glob("*.jsonl") if p.is_file() and not p.is_symlink())
        texts += [read_text(p, LARGE) for p in records[:MAX_PENDING_FILES]]
    entries, bad, total, seen = [], 0, 0, set()
    for line in (line for text in texts for line in text.splitlines()):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            entry = LedgerEntry(**{f: str(row.get(f, ""))[:MAX_FIELD_CHARS] for f in _FIELDS})
            if not _JOB_ID.fullmatch(entry.job) or entry.kind not in KINDS:
                raise ValueError(entry.job)
            if entry.job in seen:  # in the ledger and in a pending record
                continue
            total += len(entry.task_ids())
            if total > MAX_LEDGER_TASKS:  # the cap is on the whole ledger, not per line (issue 78)
                raise ValueError(total)
        except (ValueError, TypeError, AttributeError, RecursionError):
            bad += 1
            continue
        seen.add(entry.job)
        entries.append(entry)
    return entries, bad


def append_ledger(out: Path, entry: LedgerEntry) -> None:
    """One line appended in one write (O_APPEND), as submit.sh's `ledger` function does."""
    path = Path(out) / LEDGER_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        os.write(fd, ledger_line(entry).encode())
    finally:
        os.close(fd)


def ledger_shell_function(ledger: Path) -> list[str]:
    """The `ledger JOB KIND NAME SCRIPT GROUP TASKS` function of submit.sh (names are plain: model and
    run names, checked by the plan)."""
    fmt = (
        '{"job": "%s", "kind": "%s", "name": "%s", "script": "%s", "group": "%s", "tasks": "%s", "submitted": "%s"}\\n'
    )
    return [
        f"LEDGER={_q(ledger)}",
        "ledger() { printf '" + fmt + '\' "$1" "$2" "$3" "$4" "$5" "$6" '
        '"$(date -u +%Y-%m-%dT%H:%M:%SZ)" >> "$LEDGER"; }',
    ]


def _q(text) -> str:
    import shlex

    return shlex.quote(str(text))


def current_jobs(entries: list[LedgerEntry]) -> dict[tuple[str, str, str], LedgerEntry]:
    """(kind, name, group) -> the latest entry of a job that is not an array (data, pretraining, analysis)."""
    return {(e.kind, e.name, e.group): e for e in entries if not e.tasks}


def current_tasks(entries: list[LedgerEntry]) -> dict[tuple[str, str, int], str]:
    """(model, group, task id) -> the job id of the latest array submission that ran that task."""
    tasks = {}
    for e in entries:
        for i in e.task_ids():
            tasks[(e.name, e.group, i)] = e.job
    return tasks


# --- what Slurm says -----------------------------------------------------------------------------
@dataclass(frozen=True)
class SlurmState:
    state: str  # PENDING, RUNNING, COMPLETED, FAILED, ... (Slurm's words); ENDED when only gone from the queue
    reason: str = ""
    user: str = ""  # who submitted it, where squeue says (a teammate's job of the study: issue 80)


ACTIVE_STATES = frozenset({"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "RESIZING", "SUSPENDED"})
# Slurm's words for a job that ended without success
FAILED_JOB_STATES = frozenset(
    {"FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "BOOT_FAIL", "DEADLINE", "PREEMPTED"}
)


def _expand(job_id: str) -> list[str]:
    """`123`, `123_4`, `123_[5-9%2]` (a pending array's tasks in one squeue line) -> keys."""
    match = re.fullmatch(r"(\d+)_\[([\d,\-]+)(?:%\d+)?\]", job_id)
    if match:
        try:
            return [f"{match.group(1)}_{i}" for i in parse_task_ids(match.group(2))]
        except ValueError:  # not an array of ours: kept as Slurm printed it
            return [job_id]
    return [job_id]


def parse_states(text: str) -> dict[str, SlurmState]:
    """Lines `JOBID|STATE|REASON[|USER]` (squeue -h -r -o '%i|%T|%r|%u', sacct -n -P -X -o
    JobID,State,ExitCode) -> {"123": ..., "123_4": ...}. sacct's `CANCELLED by 0` is CANCELLED."""
    states = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) < 2 or not re.fullmatch(r"\d+(_\d+|_\[[\d,\-%]+\])?", parts[0]):
            continue
        state = SlurmState(
            parts[1].split()[0] if parts[1].strip() else "UNKNOWN",
            parts[2] if len(parts) > 2 else "",
            parts[3].strip() if len(parts) > 3 else "",
        )
        for key in _expand(parts[0]):
            states[key] = state
    return states


class Asked(list):
    """The tools that answered (`"squeue"`, `"sacct"`), and in `problems` why one that is installed did
    not (issue 80: an unreachable controller was reported as "no squeue here")."""

    def __init__(self, *args):
        super().__init__(*args)
        self.problems: list[str] = []


def _run(command: list[str], problems: list[str]) -> str | None:
    """What `command` printed; None when it is not installed, or failed (then one line in `problems`)."""
    if shutil.which(command[0]) is None:
        return None
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=QUERY_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        problems.append(f"{command[0]} gave no answer in {QUERY_TIMEOUT_S} s")
        return None
    except OSError as exc:
        problems.append(f"{command[0]} could not start ({exc.strerror or type(exc).__name__})")
        return None
    if result.returncode != 0:
        said = next((line.strip() for line in result.stderr.splitlines() if line.strip()), "")
        problems.append(f"{command[0]} failed (exit {result.returncode}{': ' + said[:200] if said else ''})")
        return None
    return result.stdout


def query_slurm(job_ids: list[str]) -> tuple[dict[str, SlurmState], list[str]]:
    """The states of `job_ids` (and of their array tasks): squeue for the queued ones, then sacct for
    the rest where accounting is on. Returns the states and which tools answered."""
    ids = sorted(set(job_ids), key=int)
    asked = Asked()
    if not ids:
        return {}, asked
    states: dict[str, SlurmState] = {}
    # sacct fails where accounting is off, as on many clusters: not a problem worth a line
    sacct = _run(["sacct", "-n", "-P", "-X", "-j", ",".join(ids), "-o", "JobID,State,ExitCode"], [])
    if sacct is not None:
        states.update(parse_states(sacct))
        asked.append("sacct")
    # every state (-t all: also the jobs that ended within MinJobAge) of every user's jobs, filtered
    # here by the ledger's ids: `squeue -j` fails outright when one id has left slurmctld's memory, and
    # the study owns its jobs, not the user asking (issue 80: `-u $USER` made a teammate's resubmit
    # take every queued job of the study for gone and plan the whole DAG again)
    squeue = _run(["squeue", "-h", "-r", "-t", "all", "-o", "%i|%T|%r|%u"], asked.problems)
    if squeue is not None:  # squeue last: the live view wins over accounting's lag
        wanted = set(ids)
        states.update({k: v for k, v in parse_states(squeue).items() if k.split("_")[0] in wanted})
        asked.append("squeue")
    return states, asked


def state_of(job: str, task: int | None, states: dict[str, SlurmState], asked: list[str]) -> SlurmState | None:
    """A job's (or array task's) state; ENDED when squeue answered and no longer lists it and sacct
    said nothing; None when Slurm could not be asked."""
    key = job if task is None else f"{job}_{task}"
    if key in states:
        return states[key]
    if task is not None and job in states:
        return states[job]
    return SlurmState("ENDED") if "squeue" in asked else None


def is_active(job: str | None, task: int | None, states: dict[str, SlurmState], asked: list[str]) -> bool:
    """Whether Slurm holds the job (or array task) queued or running."""
    state = state_of(job, task, states, asked) if job else None
    return state is not None and state.state in ACTIVE_STATES


def owner_note(state: SlurmState | None) -> str:
    """' (submitted by bob)' for a job of the study that another user submitted; '' otherwise: such a
    job is the study's as much as one's own, left alone while it runs, never resubmitted over."""
    if state is None or not state.user or state.user == getpass.getuser():
        return ""
    return f" (submitted by {state.user})"


SUBMIT_LOCK = ".submit.lock"  # in OUT/slurm: one submission or resubmission of a study at a time
SUBMIT_WAIT_S = 60.0  # how long a second one waits for it before refusing, naming the holder


@contextlib.contextmanager
def submission_lock(out: Path, wait_s: float | None = None):
    """Hold OUT/slurm/.submit.lock from planning to the last ledger line (issue 89: two resubmits at
    the same moment both submitted): a second waits up to `wait_s` (SUBMIT_WAIT_S), then refuses in one line."""
    from contracts.locks import FolderInUse, folder_lock
    from reproduce.plan import ReproduceError

    try:
        with folder_lock(
            out / "slurm",
            name=SUBMIT_LOCK,
            job="submission of this study",
            wait_s=SUBMIT_WAIT_S if wait_s is None else wait_s,  # read when called: a test sets it
            advice="wait for it to end, then resubmit (it plans again from what it finds)",
        ):
            yield
    except FolderInUse as exc:
        raise ReproduceError(str(exc)) from None


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
