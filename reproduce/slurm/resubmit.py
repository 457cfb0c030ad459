"""`python -m reproduce resubmit OUT [--dry-run]`: submit again only what a Slurm study still lacks
(issue 53), read from its job ledger (reproduce.slurm.ledger) and its run folders.

What counts as done is what the folders hold, not what Slurm says: prepared data with its manifest,
a pretraining run with FINISHED.json, a fine-tuning run with record.json. Jobs and array tasks still
queued or running are left alone (the new jobs wait for them where they depend on them). For each
array, only the tasks whose runs lack a record are resubmitted (`--array=3,7`, with the throttle
and lanes the study was written with, OUT/slurm/arrays.json, also for arrays the first submission
never queued); a resubmitted pretraining job brings the arrays of its models after it; an IR evaluation task
runs after its resubmitted training task (aftercorr). The analysis job is submitted again (afterany
on every job it must wait for) whenever something was resubmitted or its reports miss runs.

The scripts are the ones `python -m reproduce --slurm` wrote in OUT/slurm (their settings, paths and
image): a study moved since must be written again there first.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from contracts.layout import FINISHED_FILE, RECORD_FILE
from reproduce.plan import ReproduceError, StudyPlan
from reproduce.slurm.ledger import (
    ARRAYS_FILE,
    KILL_ON_INVALID_DEP,
    LEDGER_FILE,
    PENDING_DIR,
    SCRIPTS_FILE,
    LedgerEntry,
    append_ledger,
    current_jobs,
    current_tasks,
    format_task_ids,
    is_active,
    ledger_line,
    owner_note,
    query_slurm,
    read_ledger,
    state_of,
    submission_lock,
    utc_now,
)


@dataclass
class Submission:
    """One sbatch call of the resubmission. `after` holds (dependency type, job) pairs, a job being a
    Slurm id or the `var` of another Submission of this plan (its id once submitted)."""

    var: str
    kind: str
    name: str
    script: str
    group: str = ""
    tasks: str = ""  # sbatch --array (with its %throttle); "" for a job
    options: list[str] = field(default_factory=list)
    after: list[tuple[str, str]] = field(default_factory=list)

    def argv(self, ids: dict[str, str]) -> list[str]:
        args = ["sbatch", "--parsable", *self.options]
        if self.tasks:
            args.append(f"--array={self.tasks}")
        deps: dict[str, list[str]] = {}
        for kind, job in self.after:
            deps.setdefault(kind, []).append(ids.get(job, job))
        if deps:
            args.append("--dependency=" + ",".join(f"{k}:{':'.join(v)}" for k, v in deps.items()))
            if any(k in ("afterok", "aftercorr") for k in deps):
                args.append(KILL_ON_INVALID_DEP)
        return [*args, self.script, *([self.group] if self.group else [])]


def _throttle(tasks: str) -> str:
    return "%" + tasks.split("%", 1)[1] if "%" in tasks else ""


def written_arrays(out: Path) -> dict:
    """OUT/slurm/arrays.json: the throttle and lanes of the study's fine-tuning arrays; {} for a study
    written before it existed (each array's throttle is then read from its ledger line)."""
    from contracts.bounded import BoundedReadError, read_json_object

    path = out / ARRAYS_FILE
    if not path.exists():
        return {}
    try:
        arrays = read_json_object(path)
    except BoundedReadError as exc:
        raise ReproduceError(f"{exc}: write the study again (python -m reproduce ... --dry-run)") from None
    for key in ("throttle", "lanes"):
        value = arrays.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise ReproduceError(f"{path}: {key} is {value!r}, not a positive number or null: write the study again")
    return arrays


def recorded_elsewhere(out: Path) -> Path | None:
    """The folder OUT/reproduce.yaml records the study in when that is not OUT (an absolute `out`, as a
    submission records it since issue 80), else None."""
    from contracts.config import ConfigError, load_config
    from reproduce.plan.config import CONFIG_FILE, ReproduceConfig

    try:
        recorded = load_config(ReproduceConfig, out / CONFIG_FILE).out
    except (ConfigError, OSError):
        return None  # the one-line error of an unreadable config comes from the plan
    # the same folder through a link is the same study (issue 89: a symlinked path read as "moved")
    if not Path(recorded).is_absolute() or os.path.realpath(recorded) == os.path.realpath(out):
        return None
    return Path(recorded)


def _job_done(job: dict) -> bool:
    from reproduce.plan.study_plan import job_model_and_dir

    return (job_model_and_dir(job["config"])[1] / RECORD_FILE).is_file()


def check_job_list(path: Path, model: str, jobs: list[dict]) -> None:
    """The job list an array reads its tasks from is the one the study's plan gives (as the writer wrote
    it): a missing, edited or damaged one is one line before any sbatch (issue 88: a malformed line was a
    traceback, a forged one ran other jobs)."""
    from benchmarks.matrix import job_list_text
    from contracts.bounded import LARGE, BoundedReadError, read_text

    again = "write the study again (python -m reproduce --config OUT/reproduce.yaml --slurm ... --dry-run)"
    try:
        if path.is_symlink():
            raise BoundedReadError(f"{path}: a link")
        text = read_text(path, LARGE)
    except FileNotFoundError:
        raise ReproduceError(f"{path}: the job list of {model}'s arrays is missing: {again}") from None
    except (OSError, BoundedReadError) as exc:
        raise ReproduceError(f"{path}: the job list of {model}'s arrays cannot be read ({exc}): {again}") from None
    if text != job_list_text(jobs):
        raise ReproduceError(f"{path}: not the job list of {model} the study's plan gives (changed since): {again}")


def plan_resubmission(out: Path) -> tuple[list[Submission], list[str], StudyPlan]:
    """What to submit again, lines saying what is left alone (still queued or running) and why, after
    any note on the study's plan.json, and the study's plan it was made from."""
    from benchmarks.matrix import GROUPS
    from pretraining.data.format import MANIFEST
    from reproduce.missing import analysis_is_current
    from reproduce.plan import acting_plan, data_dir, finetune_dir, pretraining_dir
    from reproduce.plan.inventory import check_no_links
    from reproduce.plan.study_plan import plan_changes, read_plan_or_stale

    moved = recorded_elsewhere(out)
    if moved is not None:  # its scripts and run configs write to the old folder (issue 80)
        raise ReproduceError(
            f"{out / 'reproduce.yaml'} records the study at {moved}, where its scripts and run configs write: "
            f"nothing submitted; resubmit it from {moved} (move it back), or submit it anew under another --out"
        )
    study = acting_plan(out, plan_notes := [])  # from reproduce.yaml: a forged plan.json is never obeyed
    _, written = read_plan_or_stale(out)
    changes = plan_changes(written, study) if written is not None else None
    if changes:  # issue 89: resubmit said "every run is finished" while 6 added runs were never submitted
        raise ReproduceError(
            f"{out / 'reproduce.yaml'} changed since the study was written ({changes}): its scripts and job lists "
            f"are the earlier study's; nothing submitted: write it again (python -m reproduce --config "
            f"{out / 'reproduce.yaml'} --slurm --cluster FILE --dry-run), then resubmit"
        )
    cfg = study.config
    check_no_links(study)  # its folders and ledger, before any sbatch
    check_no_links(study, [out / ARRAYS_FILE, out / SCRIPTS_FILE])
    entries, bad = read_ledger(out)
    if not entries:
        raise ReproduceError(
            f"{out / 'slurm' / 'ledger.jsonl'}: no job ledger, so nothing is known of this study's Slurm jobs "
            "(it was not submitted with --slurm, or by a version before the ledger): submit it with "
            "python -m reproduce --slurm ... (finished runs are kept)"
        )
    states, asked = query_slurm([e.job for e in entries])
    if "squeue" not in asked:  # every job would look gone, and the whole study be submitted again
        why = "; ".join(getattr(asked, "problems", ())) or "squeue is not installed here"
        raise ReproduceError(
            f"cannot tell which of the study's jobs are still queued or running ({why}); nothing submitted: "
            "run resubmit where squeue answers (a login node of the cluster)"
        )
    jobs, tasks = current_jobs(entries), current_tasks(entries)
    notes = [f"{bad} unreadable ledger line(s) skipped"] if bad else []

    def active(job: str | None, task: int | None = None) -> bool:
        return is_active(job, task, states, asked)

    def whose(job: str) -> str:
        return owner_note(state_of(job, None, states, asked))

    plan: list[Submission] = []
    waits: dict[str, str] = {}  # what the new jobs of a thing wait for: a plan var or a live job id

    data_job = jobs.get(("data", "data", ""))
    if not (data_dir(cfg) / MANIFEST).exists():
        if active(data_job.job if data_job else None):
            waits["data"] = data_job.job
            notes.append(f"data: job {data_job.job}{whose(data_job.job)} still queued or running")
        else:
            plan.append(Submission("data", "data", "data", "data.sbatch"))
            waits["data"] = "data"

    for i, run in enumerate(study.runs):
        name = run.name
        if (pretraining_dir(cfg) / name / FINISHED_FILE).is_file():
            continue
        entry = jobs.get(("pretraining", name, ""))
        if active(entry.job if entry else None):
            waits[name] = entry.job
            notes.append(f"pretraining {name}: job {entry.job}{whose(entry.job)} still queued or running")
            continue
        source = run.starts_from
        after = waits.get(source) if source else waits.get("data")
        plan.append(
            Submission(
                f"pt{i}", "pretraining", name, f"pretrain_{name}.sbatch", after=[("afterok", after)] if after else []
            )
        )
        waits[name] = f"pt{i}"

    made_by = {**study.made_by, **dict.fromkeys(study.random_init_models, "data")}
    array_entries = {(e.name, e.group): e for e in entries if e.tasks}
    arrays = written_arrays(out)
    lanes = arrays.get("lanes")
    pretraining_vars = {s.var for s in plan if s.kind == "pretraining"}
    found: dict[str, dict[str, tuple[set, set]]] = {}  # model -> group -> (task ids to submit, live array ids)
    for model in study.finetuned_models:
        model_jobs = study.finetune_jobs(model)
        check_job_list(finetune_dir(cfg) / "jobs" / f"{model}.jsonl", model, model_jobs)
        # the model's pretraining is submitted again: its queued arrays wait (afterok) on the lost job, a
        # dependency never met (Slurm cancels them): their tasks are submitted again behind the new one
        doomed = waits.get(made_by.get(model, "")) in pretraining_vars
        found[model] = {group: (set(), set()) for group in GROUPS}
        for job in model_jobs:
            if _job_done(job):
                continue
            todo, live = found[model][job["group"]]
            if not doomed and active(tasks.get((model, job["group"], job["index"])), job["index"]):
                live.add(tasks[(model, job["group"], job["index"])])
            else:
                todo.add(job["index"])
    # what a new array waits for besides its maker: with lanes, every array still queued or running from
    # before, whichever model's (issue 89: an array of a later model, queued behind a lost one, started
    # beside the arrays resubmitted for it: 2 tasks against a cap of 1), and the new arrays of the model
    # `lanes` before it; without lanes, its own model's live arrays (a resubmitted task ran beside its
    # array's live tasks, twice one model's throttle)
    every_live = sorted({job for groups in found.values() for _, live in groups.values() for job in live}, key=int)
    lane_vars: list[list[str]] = []
    last_arrays: list[str] = list(every_live)
    for j, model in enumerate(study.finetuned_models):
        maker = waits.get(made_by.get(model, ""))
        model_live = sorted({job for _, live in found[model].values() for job in live}, key=int)
        new_vars = {}
        for group in GROUPS:
            todo, live = found[model][group]
            if live:
                owners = "".join(dict.fromkeys(whose(job) for job in sorted(live)))
                notes.append(
                    f"fine-tuning {model} {group}: job(s) {', '.join(sorted(live))}{owners} still queued or running"
                )
            if not todo:
                continue
            entry = array_entries.get((model, group))
            var = f"{group}{j}"
            after = [("afterok", maker)] if maker else []
            if group == "ir_eval" and "ir_train" in new_vars:
                after = [("aftercorr", new_vars["ir_train"])]
            elif lanes and len(lane_vars) >= lanes:  # after the new arrays of every model earlier in its lane
                after += [("afterany", v) for earlier in lane_vars[-lanes::-lanes] for v in earlier]
            after += [("afterany", v) for v in (every_live if lanes else model_live)]
            throttle = f"%{arrays['throttle']}" if arrays.get("throttle") else ""
            plan.append(
                Submission(
                    var,
                    "finetune",
                    model,
                    f"finetune_{model}.sh",
                    group,
                    format_task_ids(sorted(todo)) + (throttle if arrays else _throttle(entry.tasks if entry else "")),
                    [f"--job-name=mlmclm-{group}-{model}"],
                    after,
                )
            )
            new_vars[group] = var
            last_arrays.append(var)
        if new_vars:
            lane_vars.append(list(new_vars.values()))

    analysis_entry = jobs.get(("analysis", "analysis", ""))
    complete = analysis_is_current(out, study)
    if active(analysis_entry.job if analysis_entry else None) and not plan:
        notes.append(f"analysis: job {analysis_entry.job}{whose(analysis_entry.job)} still queued or running")
    elif plan or not complete:
        # after every live job of the study too: the analysis never runs beside another analysis or the
        # data job, which hold the study lock (issue 89: one of them FAILED on it)
        live_jobs = sorted({e.job for e in jobs.values() if active(e.job)} - set(last_arrays), key=int)
        after = [("afterany", a) for a in [*last_arrays, *live_jobs]]
        plan.append(Submission("analysis", "analysis", "analysis", "analysis.sbatch", after=after))
    return plan, [f"note: {line}" for line in plan_notes] + [f"left alone: {line}" for line in notes], study


def check_scripts(out: Path, plan: list[Submission]) -> None:
    """Each script the plan submits is one `python -m reproduce` wrote in OUT/slurm, unchanged since
    (its sha256 in OUT/slurm/scripts.json), as is the python.sh its arrays call: a regular file, no
    link; anything else is one line before any sbatch (issue 66)."""
    import hashlib

    from contracts.bounded import LARGE, SMALL, BoundedReadError, read_json_object, read_text

    again = "write the study again (python -m reproduce ... --dry-run) and rerun resubmit"
    try:
        recorded = read_json_object(out / SCRIPTS_FILE, SMALL)
    except FileNotFoundError:
        raise ReproduceError(f"{out / SCRIPTS_FILE}: no record of the scripts the study wrote: {again}") from None
    except BoundedReadError as exc:
        raise ReproduceError(f"{exc}: {again}") from None
    names = dict.fromkeys([s.script for s in plan] + (["python.sh"] if any(s.tasks for s in plan) else []))
    from contracts.paths import UnsafeNameError, contained

    for name in names:
        try:  # a name from the ledger: the containment rule (contracts.paths), one part, no option
            path = contained(out / "slurm", name, f"{out / LEDGER_FILE}: script")
        except UnsafeNameError as exc:
            raise ReproduceError(f"{exc}: {again}") from None
        if "/" in name or name.startswith("-") or name not in recorded:
            raise ReproduceError(
                f"{path} (named in {out / LEDGER_FILE}): not a script the study wrote ({out / SCRIPTS_FILE}): {again}"
            )
        try:
            if path.is_symlink():
                raise BoundedReadError(f"{path}: a link")
            text = read_text(path, LARGE)
        except (OSError, BoundedReadError) as exc:
            raise ReproduceError(f"{path}: cannot be checked ({exc}): {again}") from None
        if hashlib.sha256(text.encode()).hexdigest() != recorded[name]:
            raise ReproduceError(f"{path}: changed since the study wrote it (its sha256 differs): {again}")


def describe(plan: list[Submission]) -> list[str]:
    """The sbatch lines, with `$var` for the ids of jobs this plan submits first."""
    ids = {s.var: f"${s.var}" for s in plan}
    return [f"{s.var}=$({' '.join(s.argv(ids))})" for s in plan]


def submission_paths(out: Path, study, plan: list[Submission]) -> list[Path]:
    """What the resubmission and the jobs it queues write: the ledger and its folder (the pending
    records), the Slurm logs, the study lock the data and analysis jobs take, and the folders of each
    kind of job (issue 89: a teammate's sbatch queued a job its ledger could not record)."""
    from reproduce.missing import analysis_outputs
    from reproduce.plan import data_dir, pretraining_dir
    from reproduce.plan.inventory import LOCK_FILE

    paths = [out / LEDGER_FILE, out / "slurm", out / "slurm" / "slurm_logs", out / LOCK_FILE]
    for s in plan:
        if s.kind == "data":
            paths.append(data_dir(study.config))
        elif s.kind == "pretraining":
            paths += [pretraining_dir(study.config) / s.name, out / "slurm" / "requeue"]
        elif s.kind == "finetune":
            paths += [job.run_dir for job in study.jobs_of(s.name)]
        elif s.kind == "analysis":
            paths += [out, *(path.parent for path in analysis_outputs(study))]
    return paths


def _pending_record(out: Path) -> tuple[Path, int]:
    """A new file of this process's own under OUT/slurm/pending/, for the jobs it queues."""
    import getpass
    import socket

    folder = out / PENDING_DIR
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{getpass.getuser()}.{socket.gethostname()}.{os.getpid()}.jsonl"
    try:
        return path, os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
    except OSError as exc:
        raise ReproduceError(f"{path}: cannot be created ({exc.strerror}); nothing submitted") from None


def submit(out: Path, plan: list[Submission], log=print) -> dict[str, str]:
    """Run the sbatch calls in order from OUT/slurm, each id appended to the ledger as it comes. Each
    job is first written to a pending record of this process (OUT/slurm/pending/), which status and
    resubmit read with the ledger (reproduce.slurm.ledger.read_ledger) and which goes once the ledger
    has every line: a job is never queued and recorded nowhere (issue 89)."""
    ids: dict[str, str] = {}
    pending, fd = _pending_record(out)
    try:
        for s in plan:
            argv = s.argv(ids)
            try:
                result = subprocess.run(argv, cwd=out / "slurm", capture_output=True, text=True, timeout=120)
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise ReproduceError(f"sbatch for {s.kind} {s.name} {s.group}: {exc}") from None
            if result.returncode != 0:
                last = (result.stderr.strip().splitlines() or ["no message"])[-1]
                raise ReproduceError(
                    f"sbatch for {s.kind} {s.name} {s.group} failed ({last}); the jobs before it are submitted and "
                    "in the ledger: rerun resubmit to go on"
                )
            job = result.stdout.strip().split(";")[0]
            ids[s.var] = job
            entry = LedgerEntry(job, s.kind, s.name, s.script, s.group, s.tasks, utc_now())
            try:
                os.write(fd, ledger_line(entry).encode())
                append_ledger(out, entry)
            except OSError as exc:
                queued = " ".join(ids.values())
                raise ReproduceError(
                    f"{out / LEDGER_FILE}: job(s) {queued} queued but not recorded ({exc.strerror}); they are in "
                    f"{pending}, which status and resubmit read: scancel {queued} if they should not run"
                ) from None
            what = " ".join(filter(None, [s.kind, s.name, s.group, f"tasks {s.tasks}" if s.tasks else ""]))
            log(f"resubmitted {what}: job {job}")
    finally:
        os.close(fd)
    pending.unlink()  # every job is in the ledger
    return ids


def build_parser():
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m reproduce resubmit",
        description="Submit again only what a Slurm study lacks: the failed or missing array tasks, pretraining "
        "and data jobs, the jobs downstream of them and the analysis (docs/cluster.md, 'When jobs fail').",
    )
    parser.add_argument("out", help="the study's output folder (the --out of python -m reproduce --slurm)")
    parser.add_argument("--dry-run", action="store_true", help="print the sbatch lines, submit nothing")
    return parser


def main(argv: list[str]) -> int:
    from reproduce.slurm.permissions import team_umask

    args = build_parser().parse_args(argv)
    from reproduce.plan.study_plan import study_folder

    out = study_folder(args.out)  # a link to the study is the study (issue 89)
    with team_umask(out):  # a team's study: what this writes stays the group's
        return _resubmit(out, args)


def _resubmit(out: Path, args) -> int:
    import sys

    from reproduce.slurm.permissions import check_writable

    try:
        # one writer at a time: a submission plans under the lock, so a second one, which waited for it,
        # plans from what the first queued (issue 89: two at the same moment both submitted)
        if not args.dry_run:  # the lock is a file in OUT/slurm: who may not write there hears why first
            check_writable(out, [out / LEDGER_FILE, out / "slurm"])
        with contextlib.nullcontext() if args.dry_run else submission_lock(out):
            plan, notes, study = plan_resubmission(out)
            for line in notes:
                print(line)
            if not plan:
                print(f"resubmit: nothing to submit: every run of {out} is finished or still queued")
                return 0
            check_scripts(out, plan)  # before any line of the plan, in a dry run too
            print(f"resubmit: {len(plan)} sbatch call(s):")
            for line in describe(plan):
                print("  " + line)
            if args.dry_run:
                print("resubmit: dry run, nothing submitted")
                return 0
            check_writable(out, submission_paths(out, study, plan))  # before the first sbatch
            submit(out, plan)
    except ReproduceError as exc:
        print(f"reproduce resubmit: error: {exc}", file=sys.stderr)
        return 2
    return 0
