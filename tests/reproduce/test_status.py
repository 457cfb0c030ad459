"""`python -m reproduce status OUT` (docs/watching.md) on a study folder laid out by the same plan
functions the toy reproduction writes with: a finished run, a run killed mid-way (loss.jsonl and
checkpoints, no FINISHED.json), a pending one; fine-tuning runs done, reused, failed, killed, pending."""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from contracts.layout import ERROR_FILE, FINISHED_FILE, LOSS_LOG_FILE, RECORD_FILE, RUN_CONFIG_FILE
from contracts.locks import LOCK_FILE as RUN_LOCK_FILE
from reproduce import cli
from reproduce.housekeeping import LOCK_FILE
from reproduce.plan import (
    PLAN_FILE,
    TOY_PRETRAIN_STEPS,
    ReproduceConfig,
    build_plan,
    pretraining_dir,
    write_study_config,
)
from reproduce.slurm.view import SlurmView
from reproduce.status import format_duration, parse_holder, seconds_per_step

STEPS = TOY_PRETRAIN_STEPS  # the toy masking study's pretraining length
STARTED = dt.datetime(2026, 11, 25, 3, 0, tzinfo=dt.timezone.utc)


def _rows(steps: int, pace: float = 0.5, resumed_at: int | None = None) -> list[dict]:
    rows, clock = [], 0.0
    for step in range(1, steps + 1):
        clock = 0.0 if step == resumed_at else clock + pace
        rows.append(
            {
                "step": step,
                "loss": 8.0 - step / 100,
                "lr": 1e-3,
                "objective": "mlm",
                "tokens": 2048 * step,
                "seconds": clock,
            }
        )
    return rows


def _write_run(run_dir: Path, body: dict, rows: list[dict], finished: bool) -> None:
    run_dir.mkdir(parents=True)
    (run_dir / RUN_CONFIG_FILE).write_text(yaml.safe_dump({"config": body}))
    (run_dir / LOSS_LOG_FILE).write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run_dir / "checkpoints").mkdir()
    (run_dir / "checkpoints" / f"ba{rows[-1]['step'] // 10 * 10}-rank0.pt").write_bytes(b"weights")
    if finished:
        (run_dir / FINISHED_FILE).write_text(json.dumps({"name": body["name"], "steps": len(rows)}))


def _holder_line(pid: int, host: str | None = None) -> str:
    """What contracts.locks writes into a lock file (left behind, unlocked, by kill -9)."""
    return f"pid {pid} on {host or socket.gethostname()} since {STARTED.isoformat()}\n"


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)


@pytest.fixture
def study(tmp_path):
    """A toy masking study (toy_s MLM-20, MLM-40 and CLM, 2 tasks, 1 LR x 1 seed) left by a reproduce
    killed with kill -9 while it trained the MLM-40 run and fine-tuned a run, after an earlier
    invocation: every lock file it held is left behind, naming a pid that no longer runs."""
    cfg = ReproduceConfig(
        out=str(tmp_path / "masking"),
        sizes=("toy_s",),
        ratios=(0.2, 0.4),
        tasks=("sst2", "conll2003"),
        lrs=(1e-4,),
        seeds=(0,),
    )
    plan = build_plan(cfg)
    write_study_config(plan)
    names = plan.run_names
    assert len(names) == 3
    finished, killed, pending = names
    _write_run(pretraining_dir(cfg) / finished, plan.run(finished).body(), _rows(STEPS), finished=True)
    _write_run(pretraining_dir(cfg) / killed, plan.run(killed).body(), _rows(60, resumed_at=41), finished=False)
    jobs = plan.finetune_jobs()
    by_state = {"reused": jobs[0], "done": jobs[1], "failed": jobs[2], "interrupted": jobs[3]}
    from benchmarks.run import RunConfig
    from contracts.config import config_from_dict

    dirs = {state: config_from_dict(RunConfig, job["config"]).run_dir for state, job in by_state.items()}
    for run_dir in dirs.values():
        run_dir.mkdir(parents=True)
        (run_dir / RUN_CONFIG_FILE).write_text("config: {}\n")
    (dirs["reused"] / RECORD_FILE).write_text("{}\n")
    # the done run collapsed (issue 67): its record is flagged at its chance level
    flagged = {"provenance": {"chance": {"at_chance": ["test"], "why": "test 50.00 vs chance 50.00"}}}
    (dirs["done"] / RECORD_FILE).write_text(json.dumps(flagged) + "\n")
    before = (STARTED - dt.timedelta(days=1)).timestamp()
    os.utime(dirs["reused"] / RECORD_FILE, (before, before))
    (dirs["failed"] / ERROR_FILE).write_text(
        "RuntimeError: CUDA out of memory\n\nTraceback (most recent call last):\n  ...\n"
    )
    dead = _dead_pid()
    (Path(cfg.out) / LOCK_FILE).write_text(_holder_line(dead))
    (pretraining_dir(cfg) / killed / RUN_LOCK_FILE).write_text(_holder_line(dead))
    (dirs["interrupted"] / RUN_LOCK_FILE).write_text(_holder_line(dead))
    return {
        "cfg": cfg,
        "out": Path(cfg.out),
        "names": names,
        "jobs": jobs,
        "by_state": by_state,
        "killed_dirs": [pretraining_dir(cfg) / killed, dirs["interrupted"]],
    }


def _section(text: str, title: str) -> dict[str, list[str]]:
    """The table rows under `title` (up to the next blank line), by their first cell."""
    lines = text.split(title + "\n", 1)[1].split("\n\n", 1)[0].splitlines()[2:]  # past the header and rule
    return {line.split()[0]: line.split() for line in lines}


def _files(folder: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*") if p.is_file()
    }


def test_status_of_a_study_killed_mid_way_shows_what_is_done_and_what_is_not(study, capsys):
    out = study["out"]
    before = _files(out)
    assert cli.main(["status", str(out)]) == 0
    text = capsys.readouterr().out
    finished, killed, pending = study["names"]
    rows = _section(text, "pretraining:")
    assert rows[finished][1:5] == ["finished", f"{STEPS}/{STEPS}", f"{2048 * STEPS:,}", f"{8 - STEPS / 100:.4f}"]
    assert rows[killed][1:6] == ["interrupted", f"60/{STEPS}", f"{2048 * 60:,}", f"{8 - 0.6:.4f}", "-"]
    assert rows[pending][1:3] == ["pending", f"0/{STEPS}"]
    assert "not running: the last reproduce" in text.splitlines()[0]
    total = _section(text, f"fine-tuning ({len(study['jobs'])} runs):")["all"]
    n = len(study["jobs"])
    # done, reused, running, failed, missing (Slurm only), interrupted, pending, at chance
    assert total[1:] == ["1", "1", "0", "1", "0", "1", str(n - 4), "1"]
    assert f"  {study['by_state']['done']['id']}: test 50.00 vs chance 50.00" in text.split("at their chance level")[1]
    assert f"  {study['by_state']['failed']['id']}: RuntimeError: CUDA out of memory" in text
    png = out / "status" / "loss.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"loss curves: {png}" in text
    after = _files(out)
    assert {k: v for k, v in after.items() if k != "status/loss.png"} == before  # the study is only read


def test_a_moved_study_is_read_relative_to_out_from_any_folder(study, capsys, tmp_path, monkeypatch):
    """Issue 53, item 1: status resolved the run folders from the `out` recorded in reproduce.yaml,
    so a moved or copied study (or a relative `out` read from another folder) showed every run
    pending. It reads everything relative to OUT."""
    moved = tmp_path / "elsewhere" / "masking-copy"
    moved.parent.mkdir()
    study["out"].rename(moved)
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert cli.main(["status", os.path.relpath(moved, elsewhere)]) == 0
    text = capsys.readouterr().out
    finished, killed, pending = study["names"]
    rows = _section(text, "pretraining:")
    assert [rows[name][1] for name in (finished, killed, pending)] == ["finished", "interrupted", "pending"]
    total = _section(text, f"fine-tuning ({len(study['jobs'])} runs):")["all"]
    assert total[1:7] == ["1", "1", "0", "1", "0", "1"]


def test_status_reads_plan_json_and_plans_again_only_when_reproduce_yaml_changed(study, capsys, monkeypatch):
    """Issue 53, item 1: planning a paper-scale study (5,400 runs; importing torch for the registry)
    took 13 s of status's 13.3 s. Issue 79: the study plan is written as OUT/plan.json beside
    reproduce.yaml; status reads it while its sha256 of reproduce.yaml matches, and plans again
    otherwise, or when it names a folder the study does not (issue 66)."""
    from reproduce.plan import builder, read_plan
    from reproduce.plan.study_plan import sign_plan_text

    out = study["out"]
    assert cli.main(["status", str(out)]) == 0
    planned = capsys.readouterr().out
    real_build = builder.build_plan

    def refuse(cfg):
        raise AssertionError("planned again although plan.json matches")

    monkeypatch.setattr(builder, "build_plan", refuse)
    assert cli.main(["status", str(out)]) == 0
    assert capsys.readouterr().out == planned
    written = json.loads((out / PLAN_FILE).read_text())
    assert len(written["jobs"]) == len(study["jobs"]) and written["jobs"][0]["config"]["out"] == "$OUT/finetune"
    # an edited reproduce.yaml (one more comment line) makes plan.json stale: planned again, same answer
    config = out / "reproduce.yaml"
    config.write_text(config.read_text() + "# edited\n")
    calls = []
    monkeypatch.setattr(builder, "build_plan", lambda cfg: calls.append(cfg) or real_build(cfg))
    assert cli.main(["status", str(out)]) == 0
    assert capsys.readouterr().out == planned and len(calls) == 1
    # a plan pointing out of the study is not followed, even with its digest made again (a forger
    # who knows the format); without it, it is not read at all (issue 88)
    config.write_text(config.read_text().removesuffix("# edited\n"))
    edited = json.loads(json.dumps(written))
    edited["jobs"][0]["config"]["out"] = "$OUT/../../etc"
    (out / PLAN_FILE).write_text(json.dumps(edited))
    notes = []
    assert read_plan(out, notes) is None and "content does not match its digest" in notes[0]
    del edited["plan_sha256"]
    (out / PLAN_FILE).write_text(sign_plan_text(json.dumps(edited, separators=(",", ":"))))
    assert read_plan(out) is None
    # issue 66: absolute folders of another study (its losses were shown): planned again, one line
    other = out.parent / "other-study"
    edited["jobs"][0]["config"]["out"] = str(other / "finetune")
    (out / PLAN_FILE).write_text(sign_plan_text(json.dumps(edited, separators=(",", ":"))))
    assert cli.main(["status", str(out)]) == 0
    shown = capsys.readouterr().out
    assert f"names a folder the study does not (fine-tuning run {edited['jobs'][0]['id']} at {other}" in shown
    assert shown.replace(shown.splitlines()[1] + "\n", "", 1) == planned and len(calls) == 2  # the plan's answer
    edited = json.loads(json.dumps(written))
    del edited["plan_sha256"]
    name = edited["runs"][0]["name"]
    edited["runs"][0]["config"]["run_dir"] = str(other / "pretraining" / name)
    (out / PLAN_FILE).write_text(sign_plan_text(json.dumps(edited, separators=(",", ":"))))
    notes = []  # its inventory still names the study's own folder: not the one its plan gives
    assert read_plan(out, notes) is None and "its inventory is not the one its own plan gives" in notes[0]
    for item in edited["inventory"]:
        if item["path"] == f"$OUT/pretraining/{name}":
            item.update(path=str(other / "pretraining" / name), shared=True)
    (out / PLAN_FILE).write_text(sign_plan_text(json.dumps(edited, separators=(",", ":"))))
    notes = []
    assert read_plan(out, notes) is None and f"pretraining run {name} at {other}" in notes[0]
    (out / PLAN_FILE).write_text(json.dumps(written, separators=(",", ":")))  # as it was, for the other tests
    assert read_plan(out) is not None


def test_runs_whose_folder_a_live_job_holds_are_running_with_an_eta(study, capsys):
    out = study["out"]
    for lock in (out / LOCK_FILE, *(d / RUN_LOCK_FILE for d in study["killed_dirs"])):
        lock.write_text(_holder_line(os.getpid()))  # this process: alive
    png = out.parent / "elsewhere.png"
    assert cli.main(["status", str(out), "--png", str(png)]) == 0 and png.is_file()
    text = capsys.readouterr().out
    killed = study["names"][1]
    row = _section(text, "pretraining:")[killed]
    # 0.5 s a step since the resume at step 41, STEPS - 60 steps to go
    assert row[1] == "running" and " ".join(row[5:]) == format_duration((STEPS - 60) * 0.5)
    total = _section(text, f"fine-tuning ({len(study['jobs'])} runs):")["all"]
    assert total[3] == "1" and total[6] == "0"  # the killed fine-tuning run counts as running
    assert not (out / "status").exists()
    assert f"running: pid {os.getpid()}" in text.splitlines()[0]


def test_a_run_held_on_another_host_counts_as_running(study, capsys):
    """A Slurm node's lock cannot be checked from here: running (squeue tells)."""
    for run_dir in study["killed_dirs"]:
        (run_dir / RUN_LOCK_FILE).write_text(_holder_line(4242, host="gpu-node-17"))
    assert cli.main(["status", str(study["out"])]) == 0
    text = capsys.readouterr().out
    assert _section(text, "pretraining:")[study["names"][1]][1] == "running"
    assert _section(text, f"fine-tuning ({len(study['jobs'])} runs):")["all"][3] == "1"


def test_a_finished_study_tells_reused_records_from_its_timings(study, capsys):
    """A reproduce that ends removes its lock: its start is timings.json's finish minus its stages."""
    out = study["out"]
    (out / LOCK_FILE).unlink()
    for run_dir in study["killed_dirs"]:
        (run_dir / RUN_LOCK_FILE).unlink()
    finished = STARTED + dt.timedelta(seconds=300)
    (out / "timings.json").write_text(
        json.dumps({"finished": finished.isoformat(), "seconds": {"data": 100, "x": 200}})
    )
    assert cli.main(["status", str(out)]) == 0
    text = capsys.readouterr().out
    assert "finished (timings.json)" in text.splitlines()[0]
    total = _section(text, f"fine-tuning ({len(study['jobs'])} runs):")["all"]
    assert total[1:3] == ["1", "1"] and total[6] == "1"  # done, reused; the killed run: interrupted


def test_status_of_a_folder_that_is_no_study_is_one_line(tmp_path, capsys):
    assert cli.main(["status", str(tmp_path)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("reproduce status: error: ") and "reproduce.yaml" in line
    assert list(tmp_path.iterdir()) == []


def test_pace_and_holder_parsing():
    rows = _rows(100, pace=2.0, resumed_at=80)
    assert seconds_per_step(rows) == pytest.approx(2.0)
    assert seconds_per_step(rows[:1]) is None
    assert (
        format_duration(3 * 86400 + 7200) == "3d 2h"
        and format_duration(3725) == "1h 02m"
        and format_duration(None) == "-"
    )
    holder = parse_holder("pid 12 on node7 since 2026-11-25T03:00:00+00:00\n", "node7", lambda pid: pid == 12)
    assert holder.alive and holder.since == STARTED
    assert not parse_holder("pid 12 on node8 since 2026-11-25T03:00:00+00:00", "node7", lambda pid: True).alive
    assert parse_holder("", "node7", lambda pid: True).since is None


def test_the_png_stays_readable_with_the_15_runs_of_a_paper_study(tmp_path):
    """Issue 53, item 1: one panel per objective with its legend outside, and the fine-tuning
    progress drawn as one stacked bar per model."""
    from reproduce.status import FinetuneRun, PretrainingRun, draw_losses, loss_panels, objective_of

    names = [f"{s}-{o}-42k" for s in ("210m", "610m", "1b") for o in ("mlm20", "mlm30", "mlm40", "mlm50", "clm")]
    rows = [{"step": i, "loss": 10 - i / 100} for i in range(0, 400, 20)]
    runs = [PretrainingRun(n, tmp_path, 42000, "running", rows, None) for n in names]
    runs.append(PretrainingRun("610m-clm-dec42k-mlm40-44k", tmp_path, 44000, "pending", [], None))
    assert objective_of("610m-clm-dec42k-mlm40-44k") == "CLM -> MLM" and objective_of("toy_s-mlm40-8") == "MLM"
    assert {k: len(v) for k, v in loss_panels(runs).items()} == {"MLM": 12, "CLM": 3}  # no losses: no panel
    finetune = [FinetuneRun(f"{n}/sst2/{i}", n, "done" if i % 3 else "missing") for n in names for i in range(6)]
    import matplotlib.image

    png = draw_losses(runs, tmp_path / "loss.png", finetune)
    height, width = matplotlib.image.imread(png).shape[:2]
    assert width > 900 and height > width  # two loss panels and the bars, stacked


def test_status_shows_only_what_parses_and_never_reads_unbounded(study, capsys):
    """Issue 56: a garbage FINISHED.json showed its run finished, a truncated record.json its run
    done, a string loss crashed the table, a timings.json linked to /dev/zero read until memory ran
    out, and an OUT/status that is a file crashed the PNG. Each is now shown for what it is."""
    out, (finished, killed, _) = study["out"], study["names"]
    cfg = study["cfg"]
    (pretraining_dir(cfg) / finished / FINISHED_FILE).write_text("not json{")
    with (pretraining_dir(cfg) / killed / LOSS_LOG_FILE).open("a") as log:
        log.write('{"step": 61, "loss": "nan-ish", "tokens": 1, "seconds": 1.0}\n{"step": "x", "loss": 1.0}\n')
        # issue 66: an infinite clock and a 400-digit step were an OverflowError in the ETA
        log.write('{"step": 62, "loss": 1.0, "tokens": 1, "seconds": Infinity}\n')
        log.write('{"step": 1' + "0" * 400 + ', "loss": 1.0, "tokens": 1, "seconds": 2.0}\n')
    from benchmarks.run import RunConfig
    from contracts.config import config_from_dict

    done = config_from_dict(RunConfig, study["by_state"]["done"]["config"]).run_dir / RECORD_FILE
    done.write_text('{"metrics": {"acc')  # truncated
    (out / "timings.json").symlink_to("/dev/zero")
    (out / LOCK_FILE).unlink()  # so that status looks at timings.json
    (out / "status").write_text("a file where the PNG folder goes")
    assert cli.main(["status", str(out)]) == 2
    captured = capsys.readouterr()
    rows = _section(captured.out, "pretraining:")
    assert rows[finished][1:3] == ["broken", "FINISHED.json"]
    assert rows[killed][2] == f"60/{STEPS}"  # the four odd lines skipped
    assert f"{study['by_state']['done']['id']}: record.json unreadable" in captured.out
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and "cannot write the PNG" in err[0] and "pass --png PATH" in err[0]


def test_many_failed_or_missing_runs_are_summarised_per_model_and_all_lists_each():
    """Issue 65: a study whose every run was missing printed all 5,512 lines."""
    from reproduce.status import LISTED_RUNS, FinetuneRun, run_lines

    runs = [FinetuneRun(f"{m}-sst2-{i}", m, "missing", f"job 7_{i}: Killed") for m in ("a", "b") for i in range(15)]
    few = run_lines(runs[:LISTED_RUNS], False, Path("OUT"))
    assert few == [f"  {r.id}: {r.detail}" for r in runs[:LISTED_RUNS]]
    summary = run_lines(runs, False, Path("OUT"))
    assert summary == [
        "  a: 15 runs (a-sst2-0, a-sst2-1, a-sst2-2, ...); the first: job 7_0: Killed",
        "  b: 15 runs (b-sst2-0, b-sst2-1, b-sst2-2, ...); the first: job 7_0: Killed",
        "  (30 runs of 2 models; each one: python -m reproduce status OUT --all)",
    ]
    assert run_lines(runs, True, Path("OUT")) == [f"  {r.id}: {r.detail}" for r in runs]


def test_the_headline_says_when_the_analysis_job_itself_failed(tmp_path):
    """Issue 65: the status header did not say that the analysis job failed (it wrote no report)."""
    from reproduce.plan import ReproduceConfig, build_plan
    from reproduce.slurm.ledger import LedgerEntry, SlurmState
    from reproduce.slurm.view import SlurmView, slurm_headline

    plan = build_plan(ReproduceConfig(out=str(tmp_path), sizes=("toy_s",), ratios=(0.4,), clm=False))
    entries = (
        LedgerEntry("8", "data", "data", "data.sbatch"),
        LedgerEntry("9", "analysis", "analysis", "analysis.sbatch"),
    )
    ended = {"8": SlurmState("COMPLETED"), "9": SlurmState("FAILED")}
    headline = slurm_headline(tmp_path, SlurmView(tmp_path, entries, ended, ("squeue",)), [], plan)
    assert headline == (
        "stopped on Slurm with 0 fine-tuning runs lacking a record and the analysis not done; the analysis job 9 "
        f"ended FAILED (its log is in {tmp_path / 'slurm' / 'slurm_logs'}): python -m reproduce resubmit {tmp_path}"
    )
    ended["9"] = SlurmState("COMPLETED")
    assert "analysis job" not in slurm_headline(tmp_path, SlurmView(tmp_path, entries, ended, ("squeue",)), [], plan)


@pytest.mark.parametrize("kind", ["link to /dev/zero", "fifo", "3 GB file"])
def test_a_lock_or_slurm_log_that_is_no_regular_small_file_is_not_read(tmp_path, kind):
    """Issue 66, item 5: `.reproduce.lock` linked to /dev/zero (MemoryError) or a FIFO (a hang), a
    run's 3 GB `.lock` (MemoryError), a Slurm log that is /dev/zero or a FIFO. None is opened for
    reading: the lock has no holder, the log's line says it is unreadable."""
    from reproduce import status

    def make(path):
        if kind == "fifo":
            os.mkfifo(path)
        elif kind == "link to /dev/zero":
            path.symlink_to("/dev/zero")
        else:
            path.write_bytes(b"pid 1 on h since 2026-01-01T00:00:00+00:00\n")
            os.truncate(path, 3 << 30)  # sparse: no disk behind it

    make(tmp_path / LOCK_FILE)
    assert status.read_holder(tmp_path / LOCK_FILE).pid is None
    logs = tmp_path / "slurm" / "slurm_logs"
    logs.mkdir(parents=True)
    make(logs / "mlmclm-data_12.out")
    line = SlurmView(tmp_path).log_tail("12")
    if kind == "3 GB file":  # a regular file: read from its end only (the holder line is at its start)
        assert line == ""
    else:
        assert line.startswith("(log unreadable: ") and "not a regular file" in line
