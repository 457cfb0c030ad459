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
    TOY_PRETRAIN_STEPS,
    ReproduceConfig,
    finetune_jobs,
    pretraining_config,
    pretraining_dir,
    pretraining_runs,
    write_reproduce_config,
)
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
    write_reproduce_config(cfg)
    names = list(pretraining_runs(cfg))
    assert len(names) == 3
    finished, killed, pending = names
    _write_run(pretraining_dir(cfg) / finished, pretraining_config(cfg, finished), _rows(STEPS), finished=True)
    _write_run(pretraining_dir(cfg) / killed, pretraining_config(cfg, killed), _rows(60, resumed_at=41), finished=False)
    jobs = finetune_jobs(cfg, check_models=False)
    by_state = {"reused": jobs[0], "done": jobs[1], "failed": jobs[2], "interrupted": jobs[3]}
    from benchmarks.run import RunConfig
    from contracts.config import config_from_dict

    dirs = {state: config_from_dict(RunConfig, job["config"]).run_dir for state, job in by_state.items()}
    for run_dir in dirs.values():
        run_dir.mkdir(parents=True)
        (run_dir / RUN_CONFIG_FILE).write_text("config: {}\n")
    for state in ("reused", "done"):
        (dirs[state] / RECORD_FILE).write_text("{}\n")
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
    # done, reused, running, failed, interrupted, pending
    assert total[1:] == ["1", "1", "0", "1", "1", str(n - 4)]
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
    assert total[1:6] == ["1", "1", "0", "1", "1"]


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
    assert total[3] == "1" and total[5] == "0"  # the killed fine-tuning run counts as running
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
    assert total[1:3] == ["1", "1"] and total[5] == "1"  # done, reused; the killed run: interrupted


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
