"""Issue 53 on the local Slurm cluster: a toy DAG with one fine-tuning run forced to fail ends with its
analysis done (afterany) and the run reported missing on top of every report; `reproduce status`
shows the jobs from the ledger and Slurm, from another folder and on a copied study;
`reproduce resubmit` reruns only that array task and the analysis, which then has every run."""

import json
import os
import shlex
import shutil
import subprocess

import pandas as pd
import pytest

from contracts.run_store import iter_records_in
from reproduce import cli
from reproduce.slurm.ledger import read_ledger
from tests.reproduce.slurm_study import held_sbatch, toy_cluster_config


def _status(out, capsys) -> str:
    assert cli.main(["status", str(out)]) == 0, capsys.readouterr().err
    return capsys.readouterr().out


def _wait_for_ledger_jobs(local_slurm, out, kind="analysis"):
    entries, _ = read_ledger(out)
    last = [e for e in entries if e.kind == kind][-1]
    local_slurm.wait_for(last.job, timeout=600)
    return last.job


def _toy_dag(tmp_path, local_slurm, monkeypatch, **settings) -> tuple:
    """(OUT, the reproduce argv, its --out relative to this test's folder) of the reduced toy DAG these
    tests submit to the local Slurm: toy_s MLM-40, CLM and the untrained model on SST-2, QQP and MNLI,
    throttle 2 (or `settings`' cluster values), 30-minute limits. Three
    tasks are the least this DAG can have: Figure 3's SC point is the average of the three SC
    datasets (with two it is missing, measured)."""
    cluster = toy_cluster_config(
        tmp_path,
        local_slurm,
        monkeypatch,
        **{
            "array_throttle": 2,
            "data_cache_dir": str(tmp_path / "node_cache"),
            "pretraining_time": "00:30:00",
            "finetune_time": "00:30:00",
            "analysis_time": "00:30:00",
            "data_time": "00:30:00",
            **settings,
        },
    )
    out = tmp_path / "out"
    # given relative, from another folder than the checkout the jobs run in (issue 80: the data job wrote
    # into the checkout and the analysis found no record)
    (tmp_path / "launch").mkdir()
    monkeypatch.chdir(tmp_path / "launch")
    argv = ["--figure", "3", "--scale", "toy", "--slurm", "--no-container", "--cluster", str(cluster)]
    argv += ["--out", "../out", "--sizes", "toy_s", "--ratios", "0.4", "--tasks", "sst2,qqp,mnli"]
    argv += ["--lrs", "5e-4", "--seeds", "0", "--pretrain-steps", "8", "--reps", "200"]
    return out, argv


@pytest.mark.slurm
@pytest.mark.e2e
def test_a_failed_run_is_reported_missing_and_resubmit_reruns_only_it(local_slurm, tmp_path, monkeypatch, capsys):
    out, argv = _toy_dag(tmp_path, local_slurm, monkeypatch)
    argv.append("--dry-run")
    assert cli.main(argv) == 0, capsys.readouterr().err
    capsys.readouterr()
    # the forced failure: one run of the CLM model reads a model folder that will not exist
    jobs_file = out / "finetune" / "jobs" / "toy_s-clm-8.jsonl"
    good = jobs_file.read_text()
    jobs = [json.loads(line) for line in good.splitlines()]
    broken = next(j for j in jobs if j["config"]["task"] == "qqp")
    broken["config"]["model"] += "-absent"
    jobs_file.write_text("".join(json.dumps(j, sort_keys=True) + "\n" for j in jobs))

    submitted = subprocess.run(["bash", str(out / "slurm" / "submit.sh")], capture_output=True, text=True)
    assert submitted.returncode == 0, submitted.stderr
    entries, bad = read_ledger(out)
    assert bad == 0 and [e.kind for e in entries].count("finetune") == 3
    assert {e.kind for e in entries} == {"data", "pretraining", "finetune", "analysis"}

    # while the DAG runs, status names the jobs from the ledger and their Slurm states
    running = _status(out, capsys)
    assert "Slurm jobs (ledger" in running and "squeue" in running, running

    analysis = _wait_for_ledger_jobs(local_slurm, out)
    logs = "\n".join(f"--- {p.name}\n{p.read_text()[-1200:]}" for p in sorted((out / "slurm" / "slurm_logs").glob("*")))
    assert local_slurm.job_state(analysis) == "COMPLETED", logs
    missing = pd.read_csv(out / "missing.csv")
    assert missing["id"].tolist() == [broken["id"]], logs
    for report in ("tables/tables.md", "audit/audit.md"):
        assert (out / report).read_text().startswith("## Missing runs: 1 of 9 planned"), report
    for entry in entries:  # the first submission: every job but the failed run's array ended well
        if entry.kind != "finetune" or entry.name != "toy_s-clm-8":
            assert local_slurm.job_state(entry.job) == "COMPLETED", (entry, logs)
    assert (out / "figure" / "figure3.png").stat().st_size > 0  # drawn from what finished

    # from another folder, on a copy of the study: the failed task, its log line, the way out
    copy = tmp_path / "copy"
    shutil.copytree(out, copy, symlinks=True)
    monkeypatch.chdir(tmp_path / "runs")
    for folder in (out, copy):
        report = _status(folder, capsys)
        assert "stopped on Slurm with 1 fine-tuning runs lacking a record" in report, report
        assert f"{broken['id']}: job " in report and "python -m reproduce resubmit" in report, report

    # resubmit: only that task (and the analysis), after the job list is mended
    jobs_file.write_text(good)
    assert cli.main(["resubmit", str(out), "--dry-run"]) == 0
    shown = capsys.readouterr().out
    assert "--array=1%2" in shown and "finetune_toy_s-clm-8.sh finetune" in shown, shown
    assert shown.count("sbatch --parsable") == 2 and "afterany:$finetune1" in shown, shown
    assert len(read_ledger(out)[0]) == len(entries)  # a dry run submits nothing

    assert cli.main(["resubmit", str(out)]) == 0, capsys.readouterr().err
    assert "resubmitted finetune toy_s-clm-8 finetune tasks 1%2" in capsys.readouterr().out
    analysis = _wait_for_ledger_jobs(local_slurm, out)
    assert local_slurm.job_state(analysis) == "COMPLETED"
    assert pd.read_csv(out / "missing.csv").empty
    assert not (out / "tables" / "tables.md").read_text().startswith("## Missing runs")
    assert "finished (every Slurm job ended" in _status(out, capsys)
    assert cli.main(["resubmit", str(out), "--dry-run"]) == 0
    assert "nothing to submit" in capsys.readouterr().out
    _assert_the_reduced_toy_study_is_complete(tmp_path, out)


def _assert_the_reduced_toy_study_is_complete(tmp_path, out):
    """What the jobs made: the pretraining runs, the records, the figure, chance levels, tables, audit."""
    for name in ("toy_s-mlm40-8", "toy_s-clm-8"):
        assert (tmp_path / "runs" / name / "FINISHED.json").is_file()
    records = list(iter_records_in([out / "finetune"]))
    assert len(records) == 3 * 3 * 1 * 1  # the two runs and the untrained toy_s (its export in the data job)
    assert {r.model for r in records} == {"toy_s-mlm40-8", "toy_s-clm-8", "toy_s-random-init"}
    points = pd.read_csv(out / "figure" / "figure3_points.csv")
    sc = points[points["panel"] == "SC"]
    assert sc["mean"].notna().all() and sorted(sc["series"]) == ["210M", "210M", "210M", "chance"]
    assert (sc["x_label"] == "random init").sum() == 1
    assert sorted(pd.read_csv(out / "chance.csv")["dataset"]) == ["mnli", "qqp", "sst2"]
    for name in ("figure3.png", "figure3.pdf", "figure3_published.png"):
        assert (out / "figure" / name).stat().st_size > 0
    assert json.loads((out / "audit" / "audit.json").read_text())["models_outside_paper"]  # toy models (issue 90)
    assert (out / "tables" / "tables.md").is_file()


@pytest.mark.slurm
@pytest.mark.e2e
def test_a_cancelled_pretraining_job_is_a_missing_model_and_resubmit_reruns_it(
    local_slurm, tmp_path, monkeypatch, capsys
):
    """Issue 65, item 1 on the cluster: a pretraining job cancelled while it waits for the data job
    (deterministic: it cannot have started) leaves no export; its arrays are cancelled
    (--kill-on-invalid-dep), the analysis (afterany) completes from the rest and lists that model's
    runs with the reason; resubmit reruns the pretraining job, its array (throttle kept) and the
    analysis, and status says finished."""
    out, argv = _toy_dag(tmp_path, local_slurm, monkeypatch)
    argv.append("--dry-run")
    assert cli.main(argv) == 0, capsys.readouterr().err
    capsys.readouterr()
    # every job submitted held (--hold), so the cancel lands before anything starts
    held = {**os.environ, "PATH": held_sbatch(tmp_path, os.environ["PATH"])}
    submitted = subprocess.run(["bash", str(out / "slurm" / "submit.sh")], capture_output=True, text=True, env=held)
    assert submitted.returncode == 0, submitted.stderr
    entries, _ = read_ledger(out)
    lost = next(e for e in entries if e.kind == "pretraining" and e.name == "toy_s-clm-8")
    assert local_slurm.job_state(lost.job) == "PENDING"
    # issue 80, on the cluster: while the study's jobs are queued, a teammate's resubmit plans nothing
    # (squeue was asked with -u $USER: every job looked gone) and a second submission is refused
    with pytest.MonkeyPatch.context() as teammate:
        for variable in ("LOGNAME", "USER"):
            teammate.setenv(variable, "teammate")
        assert cli.main(["resubmit", str(out), "--dry-run"]) == 0, capsys.readouterr().err
        shown = capsys.readouterr().out
        assert "resubmit: nothing to submit" in shown and f"pretraining toy_s-clm-8: job {lost.job}" in shown, shown
    assert cli.main(argv[:-1]) == 2  # the same study again, not a dry run
    assert "holds this study, already submitted to Slurm" in capsys.readouterr().err
    assert len(read_ledger(out)[0]) == len(entries)  # nothing queued
    local_slurm.command("scancel", lost.job)
    for entry in entries:  # its array may already be cancelled (its dependency can never be met)
        if entry.job != lost.job:
            local_slurm.command("scontrol", "release", entry.job, check=False)

    analysis = _wait_for_ledger_jobs(local_slurm, out)
    logs = "\n".join(f"--- {p.name}\n{p.read_text()[-1200:]}" for p in sorted((out / "slurm" / "slurm_logs").glob("*")))
    assert local_slurm.job_state(analysis) == "COMPLETED", logs
    lost_array = next(e for e in entries if e.kind == "finetune" and e.name == "toy_s-clm-8")
    assert set(local_slurm.job_states(lost_array.job).values()) == {"CANCELLED"}, logs
    missing = pd.read_csv(out / "missing.csv")
    assert sorted(missing["task"]) == ["mnli", "qqp", "sst2"] and set(missing["model"]) == {"toy_s-clm-8"}, missing
    assert missing["why"].str.startswith("pretraining run toy_s-clm-8 has no export").all(), missing["why"].tolist()
    for report in ("tables/tables.md", "audit/audit.md"):
        assert (out / report).read_text().startswith("## Missing runs: 3 of 9 planned"), report
    assert (out / "figure" / "figure3.png").stat().st_size > 0
    assert "analysis job" not in _status(out, capsys).split("\n", 1)[0]  # the headline: no failed analysis

    assert cli.main(["resubmit", str(out), "--dry-run"]) == 0
    shown = capsys.readouterr().out
    assert "pretrain_toy_s-clm-8.sbatch" in shown and "--array=0-2%2" in shown, shown
    assert "afterok:$pt1" in shown or "afterok:$pt0" in shown, shown
    assert shown.count("sbatch --parsable") == 3, shown  # pretraining, its array, the analysis
    assert cli.main(["resubmit", str(out)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    analysis = _wait_for_ledger_jobs(local_slurm, out)
    assert local_slurm.job_state(analysis) == "COMPLETED"
    assert pd.read_csv(out / "missing.csv").empty
    assert "finished (every Slurm job ended" in _status(out, capsys)
    _assert_the_reduced_toy_study_is_complete(tmp_path, out)


@pytest.mark.slurm
@pytest.mark.e2e
def test_a_submission_stopped_half_way_is_finished_by_resubmit(local_slurm, tmp_path, monkeypatch, capsys):
    """Issue 65, item 3 on the cluster: an sbatch that refuses the 4th job (the first array) after
    the data and pretraining jobs were queued; the one line names the queued ids; `resubmit` with
    the real sbatch submits the rest (arrays, throttle kept, and the analysis), waiting on the jobs
    already queued; the study then finishes."""
    out, argv = _toy_dag(tmp_path, local_slurm, monkeypatch)
    real_path = os.environ["PATH"]
    count, wrapper = tmp_path / "sbatch_count", tmp_path / "failing" / "sbatch"
    wrapper.parent.mkdir()
    wrapper.write_text(
        f"#!/bin/bash\nn=$(( $(cat {count} 2>/dev/null || echo 0) + 1 )); echo $n > {count}\n"
        'if [ "$n" -eq 4 ]; then echo "sbatch: error: Batch job submission failed: Invalid partition" >&2; exit 1; fi\n'
        f'PATH={shlex.quote(real_path)} exec sbatch "$@"\n'
    )
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper.parent}:{real_path}")
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    entries, _ = read_ledger(out)
    queued = [e.job for e in entries]
    assert [e.kind for e in entries] == ["data", "pretraining", "pretraining"], entries
    assert len(err) == 1 and f"stopped after queuing 3 job(s) ({' '.join(queued)}): sbatch: error: " in err[0], err
    assert f"python -m reproduce resubmit {out} submits the rest, or scancel {' '.join(queued)}" in err[0]

    monkeypatch.setenv("PATH", real_path)  # the cause mended
    assert cli.main(["resubmit", str(out)]) == 0, capsys.readouterr().err
    said = capsys.readouterr().out
    assert said.count("resubmitted finetune") == 3 and "tasks 0-2%2" in said, said
    analysis = _wait_for_ledger_jobs(local_slurm, out)
    logs = "\n".join(f"--- {p.name}\n{p.read_text()[-1200:]}" for p in sorted((out / "slurm" / "slurm_logs").glob("*")))
    assert local_slurm.job_state(analysis) == "COMPLETED", logs
    for job in queued:  # the jobs of the first submission ran once, not again
        assert local_slurm.job_state(job) == "COMPLETED", logs
    assert pd.read_csv(out / "missing.csv").empty
    assert "finished (every Slurm job ended" in _status(out, capsys)
    _assert_the_reduced_toy_study_is_complete(tmp_path, out)


def _task_spans(local_slurm, jobs: list[str]) -> list[tuple[str, str, str]]:
    """(task, StartTime, EndTime) of every array task of `jobs` that ran, as Slurm recorded them."""
    spans = []
    for job in jobs:
        for record in local_slurm.job_records(job):
            if record.get("StartTime", "Unknown") not in ("Unknown", "None") and record["JobState"] != "CANCELLED":
                spans.append((record["JobId"], record["StartTime"], record["EndTime"]))
    return spans


def _most_at_once(spans) -> int:
    """The most tasks whose [start, end) spans overlap (Slurm's times: whole seconds, ISO text)."""
    events = sorted([(start, 1) for _, start, _ in spans] + [(end, -1) for _, _, end in spans])
    running = peak = 0
    for _, change in events:  # at one second an end (-1) sorts before a start (+1): not an overlap
        running += change
        peak = max(peak, running)
    return peak
