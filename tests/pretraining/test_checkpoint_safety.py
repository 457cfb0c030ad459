"""A Composer checkpoint from elsewhere cannot run code: CPT init, full-state init, autoresume, export
and Composer's own loads unpickle weights-only with our checkpoints' classes allowed; anything else is
one line naming the file and the class (docs/pretraining.md, "Checkpoints from elsewhere")."""

from __future__ import annotations

import builtins
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from pretraining.export import CheckpointError, export_checkpoint, guard_composer_loads, load_checkpoint_file
from pretraining.train import train
from tests.pretraining.conftest import TOY_IDS, interrupt_at, toy_dataloader, toy_run_config

ROOT = Path(__file__).resolve().parents[2]


class CreatesAFile:
    """Unpickling this runs `exec`, which creates `marker` (what a hostile checkpoint would do)."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return builtins.exec, (f"open({str(self.marker)!r}, 'w').close()",)


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory) -> tuple[Path, Path, Path]:
    """(config dir, run dir of a run stopped at step 13 whose latest checkpoint, ba8, has been made
    malicious, the marker file that unpickling it would create)."""
    root = tmp_path_factory.mktemp("hostile")
    cfg = toy_run_config(root, "stopped")
    with pytest.raises(KeyboardInterrupt):
        train(cfg, dataloader=toy_dataloader(), token_ids=TOY_IDS, extra_callbacks=[interrupt_at(13)])
    checkpoint = (cfg.run_dir / "checkpoints" / "latest-rank0.pt").resolve()
    assert checkpoint.name == "ba8-rank0.pt"
    marker = root / "code-ran"
    state = torch.load(checkpoint, weights_only=False)  # our own file
    state["state"]["callbacks"]["Hostile"] = CreatesAFile(marker)
    torch.save(state, checkpoint)
    assert not marker.exists()
    return root, cfg.run_dir, marker


def _hostile(run_dir: Path) -> Path:
    return run_dir / "checkpoints" / "ba8-rank0.pt"


def _refusal(path: Path) -> str:
    return re.escape(f"{path}: refused to unpickle class builtins.exec")


@pytest.mark.parametrize("kind", ["weights", "full_state"])
def test_cpt_and_branch_init_refuse_a_checkpoint_that_would_run_code(interrupted, kind):
    root, run_dir, marker = interrupted
    cfg = toy_run_config(root, f"init-{kind}", init={"kind": kind, "path": str(_hostile(run_dir))})
    with pytest.raises(CheckpointError, match=_refusal(_hostile(run_dir))) as error:
        train(cfg, dataloader=toy_dataloader(), token_ids=TOY_IDS)
    assert "--trust-checkpoint" in str(error.value) and "\n" not in str(error.value)
    assert not marker.exists() and not cfg.run_dir.exists()


def test_resume_refuses_a_checkpoint_that_would_run_code(interrupted):
    root, run_dir, marker = interrupted
    losses_before = (run_dir / "loss.jsonl").read_text()
    latest = run_dir / "checkpoints" / "latest-rank0.pt"
    refusal = re.escape(f"{latest} (-> {_hostile(run_dir)}): refused to unpickle class builtins.exec")
    with pytest.raises(CheckpointError, match=refusal):
        train(toy_run_config(root, "stopped"), dataloader=toy_dataloader(), token_ids=TOY_IDS)
    assert not marker.exists()
    assert (run_dir / "loss.jsonl").read_text() == losses_before  # nothing written is lost


def test_composers_own_load_is_guarded_too(interrupted, monkeypatch):
    """Composer unpickles with weights_only=False on every rank; its validation seam refuses first."""
    from composer.utils.checkpoint import safe_torch_load

    _, run_dir, marker = interrupted
    monkeypatch.delenv("CHECKPOINT_VALIDATION_FUNCTION", raising=False)
    guard_composer_loads(trust=False)  # what build_trainer does (monkeypatch restores the variable)
    with pytest.raises(CheckpointError, match=_refusal(_hostile(run_dir))):
        safe_torch_load(str(_hostile(run_dir)))
    assert not marker.exists()


def test_export_refuses_it_in_one_line_and_writes_nothing(interrupted, tmp_path):
    _, run_dir, marker = interrupted
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    argv = [sys.executable, "-m", "pretraining", "export", str(_hostile(run_dir)), str(tmp_path / "out")]
    result = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stderr[-2000:]
    (line,) = result.stderr.strip().splitlines()
    assert re.match(f"export: {_refusal(_hostile(run_dir))}", line) and "--trust-checkpoint" in line
    assert not marker.exists() and not (tmp_path / "out").exists()


def test_a_trusted_checkpoint_is_unpickled_fully(interrupted, tmp_path):
    """The flag does what it says: the file is unpickled as written (its code runs)."""
    root, run_dir, marker = interrupted
    export_checkpoint(_hostile(run_dir), tmp_path / "out", preset="toy_s", trust_checkpoint=True)
    assert marker.exists() and (tmp_path / "out" / "model.safetensors").exists()
    marker.unlink()


def test_our_own_checkpoint_loads_weights_only_without_trust(interrupted):
    """ba8 of the same run, as Composer wrote it: allowed without trusting it."""
    root, run_dir, _ = interrupted
    cfg = toy_run_config(root, "clean", train={"max_steps": 8, "resume_interval": 4})
    train(cfg, dataloader=toy_dataloader(), token_ids=TOY_IDS)
    state = load_checkpoint_file(cfg.run_dir / "checkpoints" / "ba8-rank0.pt")
    assert int(state["state"]["timestamp"]["Timestamp"]["batch"]) == 8
