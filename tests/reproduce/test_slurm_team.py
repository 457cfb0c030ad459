"""A study on a shared cluster (issue 80): its jobs are the study's, whoever submitted them or asks;
a Slurm that does not answer is said, and resubmit then submits nothing. Slurm is a stand-in here:
`squeue` and `sacct` scripts on PATH that answer as Slurm 22.05 does (squeue's `-u` filter and `-o`
fields, an unreachable controller's exit 1); tests/reproduce/test_resubmit_on_slurm.py runs the real one."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from pathlib import Path

import pytest
import yaml

from reproduce import cli
from reproduce.slurm.ledger import LedgerEntry, append_ledger, read_ledger
from tests.reproduce.slurm_study import toy_cluster_body

FAKE_SQUEUE = r"""#!{python}
import json, sys
args = sys.argv[1:]
state = json.load(open({state!r}))
if state.get("unreachable"):
    print("slurm_load_jobs error: Unable to contact slurm controller (connect failure)", file=sys.stderr)
    sys.exit(1)
user = args[args.index("-u") + 1] if "-u" in args else None
fields = args[args.index("-o") + 1].split("|")
for job in state["jobs"]:
    if user is None or job["user"] == user:
        named = {{"%i": job["id"], "%T": job["state"], "%r": job["reason"], "%u": job["user"]}}
        print("|".join(named[f] for f in fields))
"""
FAKE_SACCT = "#!/bin/sh\necho 'sacct: error: Slurm accounting storage is disabled' >&2\nexit 1\n"


def _study(tmp_path: Path, tasks: str = "sst2", **cluster_settings) -> Path:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump(toy_cluster_body(tmp_path, "debug", **cluster_settings)))
    out = tmp_path / "out"
    argv = ["--figure", "3", "--slurm", "--no-container", "--cluster", str(cluster), "--dry-run", "--out", str(out)]
    argv += ["--sizes", "toy_s", "--ratios", "0.4", "--tasks", tasks, "--pretrain-steps", "8"]
    with contextlib.redirect_stdout(io.StringIO()):
        assert cli.main(argv) == 0
    return out


FAKE_SBATCH = '#!/bin/sh\necho "$@" >> "$(dirname "$0")/sbatch.calls"\necho $$\n'  # a job id (its pid) per call


def _slurm_here(tmp_path: Path, monkeypatch, jobs: list[dict], unreachable: bool = False, sbatch=False) -> None:
    """squeue and sacct stand-ins first on PATH, answering with `jobs` (and an sbatch with `sbatch`)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    state = tmp_path / "slurm_state.json"
    state.write_text(json.dumps({"jobs": jobs, "unreachable": unreachable}))
    (bin_dir / "squeue").write_text(FAKE_SQUEUE.format(python=sys.executable, state=str(state)))
    (bin_dir / "sacct").write_text(FAKE_SACCT)
    if sbatch:
        (bin_dir / "sbatch").write_text(FAKE_SBATCH)
    for tool in ("squeue", "sacct", "sbatch")[: 3 if sbatch else 2]:
        (bin_dir / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


def _queued_by_alice(out: Path) -> list[dict]:
    """Alice submitted the study: its data job runs, the rest waits; every job is in the ledger."""
    jobs = []
    for number, (kind, name, script, group, tasks) in enumerate(
        [
            ("data", "data", "data.sbatch", "", ""),
            ("pretraining", "toy_s-mlm40-8", "pretrain_toy_s-mlm40-8.sbatch", "", ""),
            ("pretraining", "toy_s-clm-8", "pretrain_toy_s-clm-8.sbatch", "", ""),
            ("finetune", "toy_s-mlm40-8", "finetune_toy_s-mlm40-8.sh", "finetune", "0-0"),
            ("finetune", "toy_s-clm-8", "finetune_toy_s-clm-8.sh", "finetune", "0-0"),
            ("finetune", "toy_s-random-init", "finetune_toy_s-random-init.sh", "finetune", "0-0"),
            ("analysis", "analysis", "analysis.sbatch", "", ""),
        ],
        start=500,
    ):
        append_ledger(out, LedgerEntry(str(number), kind, name, script, group, tasks))
        shown = f"{number}_[0]" if tasks else str(number)
        running = kind == "data"
        jobs.append(
            {"id": shown, "state": "RUNNING" if running else "PENDING", "reason": "" if running else "Dependency"}
            | {"user": "alice"}
        )
    return jobs


def test_a_teammates_resubmit_leaves_the_studys_queued_jobs_alone(tmp_path, monkeypatch, capsys):
    """Issue 80, item 1: squeue was asked with `-u $USER`, so under another user name every queued job
    of the study looked gone and resubmit planned the whole DAG again (a real run: duplicates)."""
    out = _study(tmp_path)
    _slurm_here(tmp_path, monkeypatch, _queued_by_alice(out))
    monkeypatch.setenv("LOGNAME", "bob")  # getpass.getuser() reads LOGNAME first
    monkeypatch.setenv("USER", "bob")
    before = len(read_ledger(out)[0])
    assert cli.main(["resubmit", str(out), "--dry-run"]) == 0, capsys.readouterr().err
    shown = capsys.readouterr().out
    assert "resubmit: nothing to submit" in shown and "sbatch" not in shown, shown
    assert "pretraining toy_s-mlm40-8: job 501 (submitted by alice) still queued or running" in shown
    assert len(read_ledger(out)[0]) == before
    # status reads the same states: Alice's jobs are on Slurm, not lost
    assert cli.main(["status", str(out)]) == 0
    assert "on Slurm: 6 pending, 1 running" in capsys.readouterr().out


def test_a_slurm_that_does_not_answer_is_said_and_nothing_is_resubmitted(tmp_path, monkeypatch, capsys):
    """Issue 80: an unreachable controller was reported as "no squeue here", and resubmit took every
    job for gone."""
    out = _study(tmp_path)
    _slurm_here(tmp_path, monkeypatch, _queued_by_alice(out), unreachable=True)
    assert cli.main(["status", str(out)]) == 0
    headline = capsys.readouterr().out.splitlines()[0]
    assert "squeue failed (exit 1: slurm_load_jobs error: Unable to contact slurm controller" in headline, headline
    assert "no squeue here" not in headline
    assert cli.main(["resubmit", str(out), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "cannot tell which of the study's jobs are still queued or running (squeue failed" in err
    assert "nothing submitted" in err and len(err.strip().splitlines()) == 1


def _argv(out: Path, cluster: Path, *extra: str) -> list[str]:
    argv = ["--figure", "3", "--slurm", "--no-container", "--cluster", str(cluster), "--out", str(out)]
    return argv + ["--sizes", "toy_s", "--ratios", "0.4", "--tasks", "sst2", "--pretrain-steps", "8", *extra]


def test_one_study_per_folder(tmp_path, monkeypatch, capsys):
    """Issue 80, item 3: the same study submitted twice queued a second DAG; another study into the
    same folder replaced reproduce.yaml and mixed the ledgers. Now each is one line, nothing written;
    --force replaces a study none of whose jobs runs, its files moved aside, none deleted."""
    from tests.hostile import snapshot

    out = _study(tmp_path)
    cluster = tmp_path / "cluster.yaml"
    jobs = _queued_by_alice(out)
    _slurm_here(tmp_path, monkeypatch, jobs)
    before = snapshot(out)
    # the same study again: resubmit is the way (a dry run may write its scripts again)
    assert cli.main(_argv(out, cluster)) == 2
    err = capsys.readouterr().err
    assert "holds this study, already submitted to Slurm (7 jobs in its ledger)" in err and "resubmit" in err
    assert snapshot(out) == before
    with contextlib.redirect_stdout(io.StringIO()):
        assert cli.main(_argv(out, cluster, "--dry-run")) == 0
    before = snapshot(out)  # the same scripts, with a new `# written` time when a second has passed
    # another study: refused, even as a dry run; --force too while its jobs run
    other = _argv(out, cluster, "--dry-run", "--seeds", "1")
    for extra in ((), ("--force",)):
        assert cli.main(other + list(extra)) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1, err
        assert "holds another study" in err if not extra else "still queued or running: scancel them first" in err
        assert snapshot(out) == before
    # once every job has ended: --force with --dry-run moves and writes nothing (issue 88: it moved the study)
    _slurm_here(tmp_path, monkeypatch, [job | {"state": "COMPLETED", "reason": ""} for job in jobs], sbatch=True)
    assert cli.main([*other, "--force"]) == 2
    assert "a dry run moves and writes nothing" in capsys.readouterr().err and snapshot(out) == before
    # --force replaces it: every file of the old study kept under one OUT/replaced-<time>/, none overwritten
    # (issue 88: its job lists and configs were overwritten in place); the runs folder's record stays
    old = {k: v for k, v in snapshot(out).items() if v[0] == "file" and ".planned-by" not in k}
    assert cli.main([*_argv(out, cluster, "--seeds", "1"), "--force"]) == 0, capsys.readouterr().err
    assert "moved to" in capsys.readouterr().out
    (kept,) = out.glob("replaced-*")
    assert {k: v for k, v in snapshot(kept).items() if v[0] == "file"} == old
    assert len(old) > 10 and any(k.startswith("finetune/jobs/") for k in old)
    assert "- 1" in (out / "reproduce.yaml").read_text() and len(read_ledger(out)[0]) == 7  # the new study's


@pytest.mark.parametrize("damage", ["a malformed line", "a forged job", "missing", "a link"])
def test_a_damaged_job_list_is_one_line_before_any_sbatch(tmp_path, monkeypatch, capsys, damage):
    """Issue 88: a malformed job-list line was a traceback in resubmit; a forged one ran other jobs."""
    out = _study(tmp_path)
    jobs = _queued_by_alice(out)
    _slurm_here(tmp_path, monkeypatch, [job | {"state": "COMPLETED", "reason": ""} for job in jobs], sbatch=True)
    path = out / "finetune" / "jobs" / "toy_s-clm-8.jsonl"
    if damage == "a malformed line":
        path.write_text(path.read_text() + "{not json\n")
    elif damage == "a forged job":
        path.write_text(path.read_text().replace('"seed": 0', '"seed": 7'))
    elif damage == "missing":
        path.unlink()
    else:
        (tmp_path / "elsewhere.jsonl").write_text(path.read_text())
        path.unlink()
        path.symlink_to(tmp_path / "elsewhere.jsonl")
    assert cli.main(["resubmit", str(out)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and str(path) in err and "write the study again" in err, err
    assert not (tmp_path / "bin" / "sbatch.calls").exists()


def test_force_moves_into_a_fresh_folder_whatever_is_planted(tmp_path, monkeypatch):
    """Issue 88: a planted `replaced-<time>` name blocked --force with a raw [Errno 17]."""
    from reproduce.slurm import folder

    out = tmp_path / "out"
    (out / "slurm").mkdir(parents=True)
    (out / "slurm" / "ledger.jsonl").write_text("old\n")
    monkeypatch.setattr("reproduce.slurm.ledger.utc_now", lambda: "2026-11-29T00:00:00Z")
    (out / "replaced-2026-11-29T000000Z").symlink_to(tmp_path, target_is_directory=True)  # planted: a link
    (out / "replaced-2026-11-29T000000Z-2").write_text("planted file")
    target = folder.move_aside(out, [out / "slurm"])
    assert target == out / "replaced-2026-11-29T000000Z-3"
    assert (target / "slurm" / "ledger.jsonl").read_text() == "old\n" and not (tmp_path / "slurm").exists()


def _pretrained(out: Path):
    """The study's plan, with its data prepared and every pretraining run finished, as the jobs leave
    them (the prepared data's manifest, each run's FINISHED.json)."""
    from contracts.layout import FINISHED_FILE
    from pretraining.data.format import MANIFEST
    from reproduce.plan import data_dir, read_plan

    plan = read_plan(out)
    (data_dir(plan.config) / MANIFEST).parent.mkdir(parents=True, exist_ok=True)
    (data_dir(plan.config) / MANIFEST).write_text("{}")
    for run in plan.runs:
        run.run_dir.mkdir(parents=True, exist_ok=True)
        (run.run_dir / FINISHED_FILE).write_text("{}")
    return plan


def _finished_on_slurm(out: Path) -> list[Path]:
    """Every file a finished study's resubmit reads: `_pretrained`, each planned run's record, and an
    analysis that had them all (missing.csv with its header only, analysis_inputs.json naming each
    record). Returns the records."""
    from contracts.layout import RECORD_FILE

    plan = _pretrained(out)
    records = []
    for job in plan.jobs:
        job.run_dir.mkdir(parents=True, exist_ok=True)
        (job.run_dir / RECORD_FILE).write_text('{"a": 1}')
        records.append(job.run_dir / RECORD_FILE)
    from reproduce.missing import analysis_outputs

    for output in analysis_outputs(plan):
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text("written by the analysis\n")
    (out / "missing.csv").write_text("id,model,task,lr,seed,why\n")
    stamp = [[str(r), r.stat().st_mtime_ns, r.stat().st_size] for r in records]
    (out / "analysis_inputs.json").write_text(json.dumps({"hash": "h", "config": {"out": str(out)}, "records": stamp}))
    return plan, records


@pytest.mark.parametrize("damage", ["cells.csv deleted", "tables/ deleted", "stamp of Infinity", "stamp nested deep"])
def test_an_analysis_whose_outputs_are_gone_or_stamp_damaged_is_not_finished(tmp_path, monkeypatch, capsys, damage):
    """Issue 88: analysis_is_current trusted analysis_inputs.json without checking the outputs exist (with
    cells.csv and tables/ deleted, status said finished and resubmit submitted nothing); a stamp holding
    Infinity or nested deep was a traceback."""
    import shutil

    out = _study(tmp_path)
    jobs = _queued_by_alice(out)
    _slurm_here(tmp_path, monkeypatch, [job | {"state": "COMPLETED", "reason": ""} for job in jobs])
    _finished_on_slurm(out)
    if damage == "cells.csv deleted":
        (out / "cells.csv").unlink()
    elif damage == "tables/ deleted":
        shutil.rmtree(out / "tables")
    else:
        stamp = '{"records": [["x", Infinity, 1]]}' if "Infinity" in damage else '{"records": ' + "[" * 50_000
        (out / "analysis_inputs.json").write_text(stamp)
    assert cli.main(["resubmit", str(out), "--dry-run"]) == 0
    shown = capsys.readouterr().out
    assert "resubmit: 1 sbatch call(s):" in shown and "analysis.sbatch" in shown, shown
    assert cli.main(["status", str(out)]) == 0
    assert "and the analysis not done" in capsys.readouterr().out


def test_an_analysis_older_than_a_rerun_record_is_not_finished(tmp_path, monkeypatch, capsys):
    """Issue 80: a run rerun after the analysis, then the analysis job lost: status said `finished`
    and resubmit had nothing to submit. The analysis is current only if it read every planned record as
    it is now (OUT/analysis_inputs.json)."""
    from reproduce.missing import analysis_is_current

    out = _study(tmp_path)
    jobs = _queued_by_alice(out)
    _slurm_here(tmp_path, monkeypatch, [job | {"state": "COMPLETED", "reason": ""} for job in jobs])
    plan, records = _finished_on_slurm(out)
    assert analysis_is_current(out, plan)
    assert cli.main(["resubmit", str(out), "--dry-run"]) == 0
    assert "resubmit: nothing to submit" in capsys.readouterr().out
    assert cli.main(["status", str(out)]) == 0
    assert ": finished (every Slurm job ended" in capsys.readouterr().out.splitlines()[0]
    records[0].write_text('{"a": 2, "rerun": true}')  # rerun after the analysis; the new analysis lost
    assert not analysis_is_current(out, plan)
    assert cli.main(["resubmit", str(out), "--dry-run"]) == 0
    shown = capsys.readouterr().out
    assert "resubmit: 1 sbatch call(s):" in shown and "analysis.sbatch" in shown, shown
    assert cli.main(["status", str(out)]) == 0
    assert (
        "stopped on Slurm with 0 fine-tuning runs lacking a record and the analysis not done" in capsys.readouterr().out
    )


def test_an_analysis_with_no_record_at_all_still_says_what_is_missing(tmp_path):
    """Issue 80: with every pretraining job lost, the analysis job ended FAILED and wrote no
    missing.csv, so neither status nor the reports said which runs were missing, or why."""
    from reproduce.local import reproduce
    from reproduce.plan import ReproduceConfig, ReproduceError

    cfg = ReproduceConfig(out=str(tmp_path / "study"), sizes=("toy_s",), ratios=(0.4,), tasks=("sst2",))
    try:
        reproduce(cfg, log=lambda line: None, stages=("analysis",))
    except ReproduceError as exc:
        assert "none of the 3 planned run records exists yet" in str(exc)
    else:
        raise AssertionError("an analysis of no record passed")
    missing = (tmp_path / "study" / "missing.csv").read_text().splitlines()
    assert len(missing) == 1 + 3, missing
    assert any("pretraining run toy_s-mlm40-250 has no export" in line for line in missing[1:])
    assert any("the model has no export" in line for line in missing[1:])  # the untrained reference
    # issue 89: only the untrained reference has its record (every pretraining job lost): one line and
    # missing.csv, not a traceback in the learning table
    from reproduce.plan import build_plan, with_absolute_folders

    plan = build_plan(with_absolute_folders(cfg))
    (job,) = [j for j in plan.jobs if j.model not in plan.made_by]
    job.run_dir.mkdir(parents=True)
    (job.run_dir / "record.json").write_text("{}")
    (tmp_path / "study" / "missing.csv").unlink()
    try:
        reproduce(cfg, log=lambda line: None, stages=("analysis",))
    except ReproduceError as exc:
        assert "none of the 2 pretrained models has a run record (2 runs missing" in str(exc), exc
    else:
        raise AssertionError("an analysis of the untrained reference alone passed")
    assert len((tmp_path / "study" / "missing.csv").read_text().splitlines()) == 1 + 2


def test_status_builds_the_task_map_once_and_imports_no_model_code(tmp_path, monkeypatch, capsys):
    """Issue 80, item 5: status of the 5,400-run paper study took 11-13 s of CPU: the ledger's task map
    was built again for each run, and reading the study index imported transformers' modelling code.
    Measured after the change: 1.1 s of CPU (docs/watching.md). Here: the map is built once however
    many runs ask; the study plan is read with neither torch nor transformers imported; a study where
    nothing has started draws no PNG (nothing to draw; matplotlib is 1.2 s of CPU)."""
    import subprocess

    from reproduce.slurm import ledger

    out = _study(tmp_path)
    _slurm_here(tmp_path, monkeypatch, _queued_by_alice(out))
    built = []
    real = ledger.current_tasks
    monkeypatch.setattr(ledger, "current_tasks", lambda entries: built.append(1) or real(entries))
    assert cli.main(["status", str(out)]) == 0
    said = capsys.readouterr().out
    assert len(built) == 1 and said.count("pending") >= 3, (built, said)
    assert "loss curves: none yet (no run has started" in said and not (out / "status" / "loss.png").exists()
    probe = (
        "import sys; from reproduce import cli; code = cli.main(['status', sys.argv[1]]); "
        "heavy = sorted(m for m in ('torch', 'transformers', 'matplotlib') if m in sys.modules); "
        "print('HEAVY', heavy); sys.exit(code)"
    )
    done = subprocess.run([sys.executable, "-c", probe, str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "HEAVY []" in done.stdout, (done.stdout[-500:], done.stderr[-2000:])


def test_resubmit_keeps_each_lane_behind_its_live_arrays(tmp_path, monkeypatch, capsys):
    """Issue 80, item 4: with one lane (throttle 2, max_running_finetune_tasks 2) and the first model's
    array still queued, resubmit gave the second model's new array no dependency on it: 3 tasks ran at
    once against the cap of 2. Now the next model of the lane waits for the live array (afterany)."""
    out = _study(tmp_path, array_throttle=2, max_running_finetune_tasks=2)
    assert json.loads((out / "slurm" / "arrays.json").read_text())["lanes"] == 1
    plan = _pretrained(out)
    first = plan.finetuned_models[0]
    append_ledger(out, LedgerEntry("510", "finetune", first, f"finetune_{first}.sh", "finetune", "0-0%2"))
    _slurm_here(tmp_path, monkeypatch, [{"id": "510_[0]", "state": "PENDING", "reason": "Priority", "user": "me"}])
    assert cli.main(["resubmit", str(out), "--dry-run"]) == 0, capsys.readouterr().err
    arrays = [line for line in capsys.readouterr().out.splitlines() if "--array=" in line]
    assert len(arrays) == 2, arrays  # the second and third models; the first is queued
    assert "afterany:510" in arrays[0], arrays  # behind the live array of its lane
    assert "afterany:$finetune1" in arrays[1], arrays  # and the third behind the second


def test_a_submission_records_its_folders_absolute_and_a_moved_study_is_not_resubmitted(tmp_path, monkeypatch, capsys):
    """Issue 80, item 2: a relative --out given from another folder was recorded relative, and the jobs
    (run from the checkout) wrote the data into the checkout; a moved study was resubmitted with scripts
    that write to its old folder. Now every folder is recorded absolute, and resubmit refuses a study
    whose reproduce.yaml records another folder, in one line, submitting nothing."""
    import shutil

    from contracts.bounded import load_yaml

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump(toy_cluster_body(tmp_path, "debug")))
    monkeypatch.chdir(elsewhere)
    with contextlib.redirect_stdout(io.StringIO()):
        assert cli.main([*_argv(Path("..") / "elsewhere" / "rel" / "study", cluster), "--dry-run"]) == 0
    out = elsewhere / "rel" / "study"
    recorded = load_yaml((out / "reproduce.yaml").read_text())
    # absolute and with `..` resolved (a recorded `elsewhere/../elsewhere/...` read as a moved study)
    assert recorded["out"] == str(out) and Path(recorded["finetune_config"]).is_absolute()
    assert f"--config {out / 'reproduce.yaml'}" in (out / "slurm" / "data.sbatch").read_text()
    moved = tmp_path / "moved"
    shutil.copytree(out, moved)
    append_ledger(moved, LedgerEntry("700", "data", "data", "data.sbatch"))
    _slurm_here(tmp_path, monkeypatch, [])
    assert cli.main(["resubmit", str(moved), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"records the study at {out}, where its scripts and run configs write" in err[0], err


def test_what_a_team_sees_of_a_study_is_true(tmp_path, monkeypatch, capsys):
    """Issue 89, item 6: a study reached through a symlinked path was refused as moved; a moved finished
    study read as not analysed (and resubmit then refused it); a deleted plan.json was planned again but
    not written back; after reproduce.yaml was edited (seeds 0 -> 0,1) status and resubmit planned again
    silently and resubmit said every run was finished while the added runs were never submitted."""
    out = _study(tmp_path)
    jobs = _queued_by_alice(out)
    _slurm_here(tmp_path, monkeypatch, [job | {"state": "COMPLETED", "reason": ""} for job in jobs])
    _finished_on_slurm(out)
    link = tmp_path / "through-a-link"
    link.symlink_to(out, target_is_directory=True)
    assert cli.main(["resubmit", str(link), "--dry-run"]) == 0, capsys.readouterr().err
    assert "resubmit: nothing to submit" in capsys.readouterr().out
    moved = tmp_path / "moved"
    out.rename(moved)
    assert cli.main(["status", str(moved)]) == 0
    assert ": finished (every Slurm job ended" in capsys.readouterr().out.splitlines()[0]
    moved.rename(out)
    (out / "plan.json").unlink()
    assert cli.main(["status", str(out)]) == 0 and (out / "plan.json").is_file()
    capsys.readouterr()
    config = out / "reproduce.yaml"
    config.write_text(config.read_text().replace("seeds:\n- 0\n", "seeds:\n- 0\n- 1\n"))
    assert cli.main(["status", str(out)]) == 0
    assert "changed since the study was written (fine-tuning runs: 3 added, 0 removed): planned again" in (
        capsys.readouterr().out
    )
    assert cli.main(["resubmit", str(out), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "changed since the study was written" in err[0] and "write it again" in err[0], err


def test_a_models_new_array_waits_for_its_own_live_tasks(tmp_path, monkeypatch, capsys):
    """Issue 89, item 4: after one task of an array was cancelled and resubmitted, the new array waited for
    the previous model's arrays but not for its own model's live tasks: 2 tasks of one model ran at once
    against a throttle of 1 (Slurm's own start and end times on the local cluster)."""
    out = _study(tmp_path, tasks="sst2,qqp", array_throttle=1)
    plan = _pretrained(out)
    first = plan.finetuned_models[0]
    append_ledger(out, LedgerEntry("610", "finetune", first, f"finetune_{first}.sh", "finetune", "0-1%1"))
    live = [{"id": "610_0", "state": "RUNNING", "reason": "None", "user": "me"}]  # task 1 was cancelled
    _slurm_here(tmp_path, monkeypatch, live + [{"id": "610_1", "state": "CANCELLED", "reason": "", "user": "me"}])
    assert cli.main(["resubmit", str(out), "--dry-run"]) == 0, capsys.readouterr().err
    (mine,) = [line for line in capsys.readouterr().out.splitlines() if f"mlmclm-finetune-{first}" in line]
    assert "--array=1%1" in mine and "afterany:610" in mine, mine


def test_a_resubmit_that_cannot_write_the_ledger_makes_no_sbatch_call(tmp_path, monkeypatch, capsys):
    """Issue 89, item 1: the teammate's resubmit ran sbatch (a job queued) and then failed on the ledger
    (Permission denied): a job in no ledger, unseen by status, planned again by the owner. Now what the
    resubmission and its jobs write is checked first: one line naming the file, its owner and mode."""
    out = _study(tmp_path)
    jobs = _queued_by_alice(out)
    _slurm_here(tmp_path, monkeypatch, [job | {"state": "COMPLETED", "reason": ""} for job in jobs], sbatch=True)
    real_access = os.access
    ledger = out / "slurm" / "ledger.jsonl"
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: Path(path) != ledger and real_access(path, mode, **kw))
    assert cli.main(["resubmit", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{ledger}: " in err[0] and "cannot write it (owner " in err[0] and "mode -rw" in err[0]
    assert "nothing submitted" in err[0] and not (tmp_path / "bin" / "sbatch.calls").exists()


def test_a_job_queued_and_not_recorded_in_the_ledger_is_named_and_seen(tmp_path, monkeypatch, capsys):
    """Issue 89, item 1: if recording still fails once a job is queued, the command names every job it
    queued and the scancel line, and the pending record it wrote first is read with the ledger."""
    from reproduce.slurm import resubmit

    out = _study(tmp_path)
    jobs = _queued_by_alice(out)
    _slurm_here(tmp_path, monkeypatch, [job | {"state": "COMPLETED", "reason": ""} for job in jobs], sbatch=True)
    before = len(read_ledger(out)[0])

    def full_disk(out, entry):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(resubmit, "append_ledger", full_disk)
    assert cli.main(["resubmit", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "queued but not recorded (No space left on device)" in err[0] and "scancel " in err[0]
    job = err[0].split("job(s) ")[1].split(" queued")[0]
    (pending,) = (out / "slurm" / "pending").glob("*.jsonl")
    assert json.loads(pending.read_text())["job"] == job and str(pending) in err[0]
    entries = read_ledger(out)[0]
    assert len(entries) == before + 1 and entries[-1].job == job  # status and resubmit see it


def test_two_resubmits_at_once_one_waits_or_refuses_naming_the_other(tmp_path, monkeypatch, capsys):
    """Issue 89, item 3: two resubmits at the same moment both submitted (a duplicate array, two analysis
    jobs). Now a resubmission holds OUT/slurm/.submit.lock from planning to its last ledger line."""
    from contracts.locks import folder_lock
    from reproduce.slurm import ledger

    out = _study(tmp_path)
    jobs = _queued_by_alice(out)
    _slurm_here(tmp_path, monkeypatch, [job | {"state": "COMPLETED", "reason": ""} for job in jobs], sbatch=True)
    monkeypatch.setattr(ledger, "SUBMIT_WAIT_S", 0.0)
    with folder_lock(out / "slurm", name=ledger.SUBMIT_LOCK, job="submission of this study"):
        assert cli.main(["resubmit", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is in use by another submission of this study (pid " in err[0], err
    assert not (tmp_path / "bin" / "sbatch.calls").exists()
    assert cli.main(["resubmit", str(out)]) == 0, capsys.readouterr().err  # once it is free
    assert (tmp_path / "bin" / "sbatch.calls").exists() and not list((out / "slurm" / "pending").glob("*"))


def test_a_team_study_keeps_what_it_makes_group_writable_and_caches_per_user(tmp_path, monkeypatch):
    """Issue 89, items 2 and 5: in a setgid study folder every job script sets umask 0002 (a teammate's
    umask 022 left files the owner could not write) and the CLI clears the group bit of its own umask;
    each Unix user's pretraining jobs cache shards in a folder of their own (another user's job made the
    shared one first and the owner's jobs failed)."""
    from reproduce.slurm.permissions import team_study, team_umask

    shared = tmp_path / "project"
    shared.mkdir()
    shared.chmod(0o2770)
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump(toy_cluster_body(tmp_path, "debug", data_cache_dir="/tmp/node-cache")))
    out = shared / "out"
    previous = os.umask(0o022)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            assert cli.main([*_argv(out, cluster), "--dry-run"]) == 0
        assert os.umask(0o022) == 0o022  # the CLI's team umask lasts as long as the command (issue 89)
    finally:
        os.umask(previous)
    scripts = sorted((out / "slurm").glob("*.sbatch")) + [out / "slurm" / "python.sh"]
    assert scripts and all("\numask 0002\n" in path.read_text() for path in scripts)
    pretraining = next((out / "slurm").glob("pretrain_*.sbatch")).read_text()
    assert 'data.cache_dir=/tmp/node-cache-"$(id -un)"/toy_s-' in pretraining
    assert team_study(out) and not team_study(tmp_path / "alone")  # pytest's tmp_path: 0700
    previous = os.umask(0o022)
    try:
        with team_umask(out):
            assert os.umask(0o002) == 0o002  # the group's bit cleared while the command runs
        assert os.umask(0o022) == 0o022  # and the caller's umask back after it
    finally:
        os.umask(previous)


def test_status_for_a_teammate_who_may_only_read_prints_the_table_and_a_note(tmp_path, monkeypatch, capsys):
    """Issue 89, item 2: a teammate with read access only always got exit 2 from status (the PNG)."""
    from reproduce import status

    out = _study(tmp_path)
    plan = _pretrained(out)
    (plan.runs[0].run_dir / "loss.jsonl").write_text('{"step": 1, "loss": 5.0, "tokens": 80, "seconds": 1.0}\n')

    def refused(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(status, "draw_losses", refused)
    assert cli.main(["status", str(out)]) == 0
    shown = capsys.readouterr()
    assert "loss curves: not drawn" in shown.out and "not writable by you" in shown.out and shown.err == ""


def test_lanes_hold_through_a_cancelled_array_and_arrays_behind_a_lost_pretraining_are_submitted_again(
    tmp_path, monkeypatch, capsys
):
    """Issue 89, found on the local Slurm: with one lane, the third model's array waited only for the
    second's; the second's was cancelled early (its pretraining lost), so the third ran beside the first
    (2 tasks against a cap of 1). And an array still queued behind a lost pretraining job (a dependency
    never met: Slurm cancels it) was left alone by resubmit, so its runs were never fine-tuned."""
    out = _study(tmp_path, array_throttle=1, max_running_finetune_tasks=1)
    submit = (out / "slurm" / "submit.sh").read_text()
    third = next(line for line in submit.splitlines() if "finetune_toy_s-random-init" in line and "sbatch" in line)
    assert 'afterany:"$finetune1":"$finetune0"' in third, third
    jobs = _queued_by_alice(out)  # 501 and 502 pretraining, 503-505 arrays, 506 analysis
    lost = [job | {"state": "CANCELLED", "reason": ""} if job["id"] == "502" else job for job in jobs]
    lost = [
        job | {"state": "PENDING", "reason": "DependencyNeverSatisfied"} if job["id"] == "504_[0]" else job
        for job in lost
    ]
    _slurm_here(tmp_path, monkeypatch, lost)
    assert cli.main(["resubmit", str(out), "--dry-run"]) == 0, capsys.readouterr().err
    shown = capsys.readouterr().out
    assert "pretrain_toy_s-clm-8.sbatch" in shown and "mlmclm-finetune-toy_s-clm-8" in shown, shown
