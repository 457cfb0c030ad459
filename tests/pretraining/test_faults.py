"""Faults during pretraining: a kill or a full disk in the middle of a checkpoint write, a
truncated checkpoint. The run resumes from the newest complete checkpoint with the losses of an
uninterrupted run, and every error names its file (docs/pretraining.md, "Faults and recovery")."""

from __future__ import annotations

import errno
import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pretraining.export import CheckpointError, export_checkpoint
from pretraining.train import PretrainError, train
from tests.pretraining.conftest import TOY_IDS, interrupt_at, toy_dataloader, toy_run_config

ROOT = Path(__file__).resolve().parents[2]
OBJECTIVE = {"kind": "clm_then_mlm", "switch_at": 10}  # 24 steps, resume checkpoints at 8, 16, 24


def _run(cfg, **kwargs):
    return train(cfg, dataloader=toy_dataloader(), token_ids=TOY_IDS, **kwargs)


def _losses(run_dir):
    return [json.loads(line) for line in (run_dir / "loss.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The losses of the uninterrupted run."""
    return _losses(_run(toy_run_config(tmp_path_factory.mktemp("ref"), "straight", objective=OBJECTIVE)))


def _assert_same_run(run_dir, reference):
    rows = _losses(run_dir)
    assert [r["step"] for r in rows] == list(range(1, 25))
    assert [r["loss"] for r in rows] == pytest.approx([r["loss"] for r in reference], abs=1e-6)
    assert [r["lr"] for r in rows] == pytest.approx([r["lr"] for r in reference], abs=1e-12)


def failing_writes(name: str, after: int, fail):
    """An `open` for Composer's checkpoint module: writing file `name`, the write call number
    `after` calls `fail()` first (a kill, a full disk); other files open as usual."""

    class Failing(io.FileIO):
        calls = 0

        def write(self, data):
            Failing.calls += 1
            if Failing.calls == after:
                fail()
            return super().write(data)

    def fake_open(file, mode="r", *args, **kwargs):
        if Path(file).name == name and "w" in mode:
            return Failing(file, mode.replace("b", ""))
        return open(file, mode, *args, **kwargs)

    return fake_open


KILLED_WHILE_SAVING = """
import os, signal, sys
sys.path.insert(0, {root!r})
import composer.utils.checkpoint
from pretraining.train import train
from tests.pretraining.conftest import TOY_IDS, toy_dataloader, toy_run_config
from tests.pretraining.test_faults import OBJECTIVE, failing_writes
from pathlib import Path

composer.utils.checkpoint.open = failing_writes("ba16-rank0.pt", 3, lambda: os.kill(os.getpid(), signal.SIGKILL))
train(toy_run_config(Path({tmp!r}), "killed", objective=OBJECTIVE), dataloader=toy_dataloader(), token_ids=TOY_IDS)
"""


def test_a_kill_during_a_checkpoint_write_resumes_from_the_last_complete_one(tmp_path, reference, capsys):
    script = KILLED_WHILE_SAVING.format(root=str(ROOT), tmp=str(tmp_path))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    killed = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    checkpoints = tmp_path / "killed" / "checkpoints"
    assert os.readlink(checkpoints / "latest-rank0.pt") == "ba8-rank0.pt"  # Composer links after writing
    with pytest.raises(CheckpointError, match="ba16-rank0.pt: truncated"):
        export_checkpoint(checkpoints / "ba16-rank0.pt", tmp_path / "export")
    run_dir = _run(toy_run_config(tmp_path, "killed", objective=OBJECTIVE))
    assert "ba16-rank0.pt: truncated or not a checkpoint" in capsys.readouterr().out
    _assert_same_run(run_dir, reference)


def test_a_truncated_latest_checkpoint_is_named_and_the_previous_one_resumes(tmp_path, reference, capsys):
    cfg = toy_run_config(tmp_path, "truncated", objective=OBJECTIVE)
    with pytest.raises(KeyboardInterrupt):
        _run(cfg, extra_callbacks=[interrupt_at(20)])
    checkpoints = tmp_path / "truncated" / "checkpoints"
    latest = (checkpoints / "latest-rank0.pt").resolve()
    assert latest.name == "ba16-rank0.pt"
    latest.write_bytes(latest.read_bytes()[: latest.stat().st_size // 2])  # as a crash would leave it
    branch = toy_run_config(tmp_path, "branch", objective=OBJECTIVE, init={"kind": "full_state", "path": str(latest)})
    with pytest.raises(CheckpointError, match="ba16-rank0.pt: truncated"):
        _run(branch)
    run_dir = _run(cfg)
    printed = capsys.readouterr().out
    assert f"{latest}: truncated or not a checkpoint" in printed
    assert f"resuming from {checkpoints / 'ba8-rank0.pt'} (step 8)" in printed
    _assert_same_run(run_dir, reference)


def test_a_full_disk_during_a_checkpoint_write_is_a_clear_error_and_earlier_files_stay(
    tmp_path, reference, monkeypatch
):
    import composer.utils.checkpoint

    def disk_full():
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    cfg = toy_run_config(tmp_path, "full", objective=OBJECTIVE)
    monkeypatch.setattr(composer.utils.checkpoint, "open", failing_writes("ba16-rank0.pt", 3, disk_full), raising=False)
    with pytest.raises(PretrainError, match="no space left on the device while training"):
        _run(cfg)
    checkpoints = tmp_path / "full" / "checkpoints"
    assert os.readlink(checkpoints / "latest-rank0.pt") == "ba8-rank0.pt"
    export_checkpoint(checkpoints / "ba8-rank0.pt", tmp_path / "export")  # complete and readable
    assert [r["step"] for r in _losses(tmp_path / "full")] == list(range(1, 17))
    monkeypatch.undo()
    _assert_same_run(_run(cfg), reference)
