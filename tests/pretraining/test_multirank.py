"""`python -m pretraining train` on 1, 2 and 4 CPU ranks through the Composer launcher (gloo).

The same toy MLM run gives the same per-step losses and final weights on any number of ranks, and a
run stopped at step 10 on 2 ranks continues on 4 (and the reverse) exactly as an uninterrupted one:
samples are ordered by mosaicml-streaming independently of the ranks and every MLM mask is drawn
from (seed, the sample's global index) (docs/pretraining.md, "Several ranks and nodes").
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

pytestmark = pytest.mark.multiprocess

STEPS, STOP = 12, 10
REL = 1e-5


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def launch(ranks: int, config: Path, *overrides: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """`composer -n RANKS -m pretraining train CONFIG OVERRIDES` on CPU (gloo)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    command = [
        sys.executable,
        "-m",
        "composer.cli.launcher",
        "-n",
        str(ranks),
        "--master_port",
        str(free_port()),
        "-m",
        "pretraining",
        "train",
        str(config),
        *overrides,
    ]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{ranks} ranks: rc {result.returncode}\n{result.stderr[-3000:]}"
    return result


def outcome(run_dir: Path) -> tuple[list[float], dict[str, torch.Tensor]]:
    """(per-step losses, final weights) of a finished run."""
    rows = [json.loads(line) for line in (run_dir / "loss.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(1, STEPS + 1))
    return [r["loss"] for r in rows], load_file(run_dir / "hf" / f"step-{STEPS}" / "model.safetensors")


def assert_same_run(run, reference) -> None:
    (losses, weights), (expected_losses, expected_weights) = run, reference
    assert losses == pytest.approx(expected_losses, rel=REL)
    assert weights.keys() == expected_weights.keys()
    for key in weights:
        torch.testing.assert_close(weights[key], expected_weights[key], rtol=1e-4, atol=1e-5, msg=key)


def stop_at(run_dir: Path, step: int) -> None:
    """Leave `run_dir` as a run killed after its step-`step` checkpoint: the later checkpoints,
    exports and FINISHED.json removed, latest-rank0.pt pointing at ba<step> (Composer's autoresume)."""
    checkpoints = run_dir / "checkpoints"
    for later in checkpoints.glob("ba*-rank0.pt"):
        if int(later.name[2:].split("-")[0]) > step:
            later.unlink()
    latest = checkpoints / "latest-rank0.pt"
    latest.unlink()
    latest.symlink_to(f"ba{step}-rank0.pt")
    shutil.rmtree(run_dir / "hf")
    (run_dir / "FINISHED.json").unlink()


@pytest.fixture(scope="module")
def toy_config(tmp_path_factory) -> Path:
    from pretraining.__main__ import main as cli

    root = tmp_path_factory.mktemp("multirank")
    data = root / "data"
    assert (
        cli(
            [
                "prepare-data",
                "--input",
                "embedded",
                "--seq-len",
                "64",
                "--max-documents",
                "30",
                "--out",
                str(data),
                "--no-progress",
            ]
        )
        == 0
    )
    config = {
        "name": "toy",
        "run_dir": str(root / "unused"),
        "tokenizer": "embedded",
        "data": {"path": str(data), "seq_len": 64},
        "model": {"preset": "toy_s"},
        "objective": {"kind": "mlm", "mlm_ratio": 0.4},
        "optimizer": {"lr": 3e-3},
        "schedule": {"warmup": 2, "decay": 2},
        "train": {
            "max_steps": STEPS,
            "global_batch_size": 8,
            "resume_interval": STOP,
            "progress_bar": False,
            "seed": 5,
        },
    }
    path = root / "toy.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture(scope="module")
def runs(toy_config) -> dict[int, tuple[Path, tuple]]:
    """The same config trained on 1, 2 and 4 ranks (the 1-rank run in this process, without the
    launcher: each launched rank spends ~12 s CPU importing torch and Composer on this machine):
    {ranks: (run_dir, its outcome as trained)}."""
    from pretraining.config import load_pretrain_config
    from pretraining.train import train

    root = toy_config.parent
    out = {}
    for ranks in (1, 2, 4):
        run_dir = root / f"ranks{ranks}"
        if ranks == 1:
            train(load_pretrain_config(toy_config, [f"run_dir={run_dir}"]))
        else:
            launch(ranks, toy_config, f"run_dir={run_dir}")
        out[ranks] = run_dir, outcome(run_dir)
    return out


@pytest.mark.slow
def test_losses_and_weights_do_not_depend_on_the_number_of_ranks(runs):
    assert_same_run(runs[2][1], runs[1][1])
    assert_same_run(runs[4][1], runs[1][1])


@pytest.mark.slow
@pytest.mark.parametrize("before, after", [(2, 4), (4, 2)])
def test_a_run_stopped_on_some_ranks_resumes_on_others_as_if_uninterrupted(runs, toy_config, before, after):
    run_dir = runs[before][0]  # resumed in place: the config (hash) is the one it was started with
    stop_at(run_dir, STOP)
    launch(after, toy_config, f"run_dir={run_dir}")
    assert_same_run(outcome(run_dir), runs[1][1])
