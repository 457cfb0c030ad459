"""The Slurm view of `reproduce status` (reproduce/status.py): the study's job ledger and what
Slurm says of its jobs, the states of runs the run folders do not settle, the jobs table and the
headline of a study submitted to Slurm."""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from contracts.bounded import BoundedReadError, read_tail


@dataclass(frozen=True)
class SlurmView:
    """The study's job ledger and what Slurm said of its jobs (reproduce.slurm.ledger); empty off Slurm."""

    out: Path
    entries: tuple = ()
    states: dict = dataclasses.field(default_factory=dict)
    asked: tuple = ()
    bad_lines: int = 0
    problems: tuple = ()  # why squeue, installed here, did not answer (ledger.Asked.problems)
    # the ledger's latest job of each thing and of each array task, built once from `entries` (issue 80:
    # rebuilt for each of 5,400 runs, they took 10 s of status's CPU)
    jobs: dict = dataclasses.field(default_factory=dict, init=False, compare=False)
    tasks: dict = dataclasses.field(default_factory=dict, init=False, compare=False)

    def __post_init__(self):
        from reproduce.slurm.ledger import current_jobs, current_tasks

        object.__setattr__(self, "jobs", current_jobs(list(self.entries)))
        object.__setattr__(self, "tasks", current_tasks(list(self.entries)))

    @classmethod
    def read(cls, out: Path) -> SlurmView:
        from reproduce.slurm.ledger import query_slurm, read_ledger

        entries, bad = read_ledger(out)
        states, asked = query_slurm([e.job for e in entries]) if entries else ({}, [])
        return cls(out, tuple(entries), states, tuple(asked), bad, tuple(getattr(asked, "problems", ())))

    def job_state(self, kind: str, name: str):
        from reproduce.slurm.ledger import state_of

        entry = self.jobs.get((kind, name, ""))
        return (entry.job, state_of(entry.job, None, self.states, list(self.asked))) if entry else (None, None)

    def task_state(self, model: str, group: str, index: int):
        from reproduce.slurm.ledger import state_of

        job = self.tasks.get((model, group, index))
        return (job, state_of(job, index, self.states, list(self.asked))) if job else (None, None)

    def log_tail(self, job: str, task: int | None = None, name: str = "") -> str:
        """The last non-empty line of a job's Slurm log (OUT/slurm/slurm_logs), read from its end only."""
        pattern = f"*_{job}_{task}.out" if task is not None else f"*_{job}.out"
        for path in sorted((self.out / "slurm" / "slurm_logs").glob(pattern)):
            try:  # a log that is a FIFO or a device is not opened (issue 66: a hang, a read of zeros)
                tail = read_tail(path)
            except (OSError, BoundedReadError) as exc:
                return f"(log unreadable: {str(exc)[:160]})"
            lines = [x.replace("\x00", "").strip() for x in tail.splitlines()]
            lines = [x for x in lines if x]
            return lines[-1][:200] if lines else ""
        return ""


def slurm_run_state(state, finished: bool) -> str | None:
    """A run's state from its job's Slurm state when the folder does not settle it: queued and running
    jobs are pending and running; a job that ended without leaving the run finished is failed."""
    from reproduce.slurm.ledger import ACTIVE_STATES

    if finished or state is None:
        return None
    if state.state == "PENDING":
        return "pending"
    if state.state in ACTIVE_STATES:
        return "running"
    return "failed"


SLURM_JOBS_HEADER = ["job", "kind", "runs", "tasks", "state"]


def slurm_jobs(slurm: SlurmView) -> tuple[str, list[list[str]]]:
    """(the heading, one row per job of the ledger's latest submissions: its id, what it runs, its
    tasks' states), for status to draw as a table under SLURM_JOBS_HEADER."""
    from reproduce.slurm.ledger import state_of

    asked = list(slurm.asked)
    rows = []
    for (kind, name, _), entry in slurm.jobs.items():
        state = state_of(entry.job, None, slurm.states, asked)
        rows.append([entry.job, kind, name, "-", state.state if state else "?"])
    latest = slurm.tasks
    arrays: dict[tuple[str, str, str], Counter] = {}
    for (model, group, index), job in latest.items():
        state = state_of(job, index, slurm.states, asked)
        arrays.setdefault((job, model, group), Counter())[state.state if state else "?"] += 1
    for (job, model, group), counts in arrays.items():
        tasks = sum(counts.values())
        rows.append(
            [job, f"finetune {group}", model, str(tasks), ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))]
        )
    nobody = "; ".join(slurm.problems) if slurm.problems else "squeue and sacct are not here"
    source = " and ".join(asked) if asked else f"nobody: {nobody}"
    note = f" ({slurm.bad_lines} unreadable ledger lines skipped)" if slurm.bad_lines else ""
    heading = (
        f"Slurm jobs (ledger {slurm.out / 'slurm' / 'ledger.jsonl'}; states from {source}; ENDED: left the "
        f"queue, outcome read from the run folders){note}:"
    )
    return heading, rows


def slurm_headline(out: Path, slurm: SlurmView, finetune: list, plan) -> str:
    """The headline of a study submitted to Slurm (`finetune`: status's FinetuneRun rows; `plan`: the
    study's, whose record files tell an analysis of the records as they are from an older one)."""
    from reproduce.slurm.ledger import ACTIVE_STATES, FAILED_JOB_STATES

    live = Counter(s.state for s in slurm.states.values() if s.state in ACTIVE_STATES)
    if live:
        return "on Slurm: " + ", ".join(f"{n} {state.lower()}" for state, n in sorted(live.items()))
    if not slurm.asked:
        if slurm.problems:  # installed, but no answer: the controller is down or unreachable
            return f"submitted to Slurm ({'; '.join(slurm.problems)}: states read from the run folders only)"
        return "submitted to Slurm (no squeue here: states read from the run folders only)"
    lacking = sum(run.state not in ("done", "reused") for run in finetune)
    from reproduce.missing import analysis_is_current

    analysed = analysis_is_current(out, plan)
    if not lacking and analysed:
        return "finished (every Slurm job ended; every run has its record; the analysis has them all)"
    # the analysis job itself failing is said apart from the runs (issue 65): its log has the cause
    job, state = slurm.job_state("analysis", "analysis")
    failed = (
        f"; the analysis job {job} ended {state.state} (its log is in {out / 'slurm' / 'slurm_logs'})"
        if state is not None and state.state in FAILED_JOB_STATES
        else ""
    )
    return (
        f"stopped on Slurm with {lacking} fine-tuning runs lacking a record"
        + ("" if analysed or lacking else " and the analysis not done")
        + failed
        + f": python -m reproduce resubmit {out}"
    )
