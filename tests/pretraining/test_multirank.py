"""`python -m pretraining train` on 1 (in this process), 2 and 4 CPU ranks through the Composer
launcher (gloo).

The same toy MLM run (and CLM run) gives the same per-step losses and final weights on any number
of ranks, and a run stopped at step 10 on 1 rank continues on 4 (and one stopped on 2 ranks
continues on 1) exactly as an uninterrupted one, each block split into the same two windows:
samples are ordered by mosaicml-streaming independently of the ranks and every MLM mask and window
split is drawn from (seed, the sample's global index) (docs/pretraining.md, "Several ranks and
nodes").
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
from safetensors.torch import load_file

from pretraining.data.windows import split_point
from tests.pretraining.toy_runs import (
    SEQ_LEN,
    prepare_embedded_data,
    record_windows_spec,
    recorded_windows,
    write_toy_mlm_config,
)

pytestmark = pytest.mark.multiprocess

STEPS, STOP = 12, 10
REL = 1e-5


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def launch(
    ranks: int, config: Path, *overrides: str, rendezvous_log: Path, timeout: float = 300
) -> subprocess.CompletedProcess:
    """`composer -n RANKS -m pretraining train CONFIG OVERRIDES` on CPU (gloo), each rank's
    process-group initialisations recorded in `<rendezvous_log>.rank<r>` (count_rendezvous)."""
    env = dict(
        os.environ,
        OMP_NUM_THREADS="1",
        PYTHONPATH=str(Path(__file__).resolve().parents[2]),
        RENDEZVOUS_LOG=str(rendezvous_log),
    )
    command = [
        sys.executable,
        "-m",
        "composer.cli.launcher",
        "-n",
        str(ranks),
        "--master_port",
        str(free_port()),
        "-m",
        "tests.pretraining.count_rendezvous",
        "train",
        "--trust-callbacks",  # RecordWindows lives in tests/, outside the packages a config may name freely
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


DATA_SEED = 17  # data.shuffle_seed's default: it seeds the window splits too


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return prepare_embedded_data(tmp_path_factory.mktemp("multirank") / "data")


def _config(data: Path, objective: str) -> Path:
    root = data.parent
    return write_toy_mlm_config(
        root / f"{objective}.yaml",
        data,
        root / "unused",
        steps=STEPS,
        resume_interval=STOP,
        decay=2,
        callbacks=[record_windows_spec(root / f"windows-{objective}")],
        objective=objective,
    )


@pytest.fixture(scope="module")
def toy_config(data) -> Path:
    return _config(data, "mlm")


def windows_of_last_run(config: Path) -> dict[int, list[tuple[int, int]]]:
    """{step: (sample index, first window length) of each block} that every rank of the run read."""
    windows = recorded_windows(config.parent / f"windows-{config.stem}")
    assert windows, "the run recorded no windows"
    for blocks in windows.values():
        assert len(blocks) == 8 and len({index for index, _ in blocks}) == 8  # the whole batch, once
        # at the drawn split, or at a document end at most 12 tokens before it (the early end)
        assert all(0 <= split_point(DATA_SEED, index, SEQ_LEN) - first <= 12 for index, first in blocks)
    return windows


def train_on(ranks: int, config: Path, run_dir: Path) -> None:
    """Train (or resume) `config` in `run_dir` on `ranks` ranks: one rank in this process, without
    the launcher (each launched rank spends ~12 s CPU importing torch and Composer on this machine)."""
    if ranks == 1:
        from pretraining.config import load_pretrain_config
        from pretraining.train import train

        train(load_pretrain_config(config, [f"run_dir={run_dir}"]), trust_callbacks=True)
    else:
        launch(ranks, config, f"run_dir={run_dir}", rendezvous_log=rendezvous_log(run_dir))


def rendezvous_log(run_dir: Path) -> Path:
    return run_dir.with_name(f"{run_dir.name}.rendezvous")


def on_1_and_2_ranks(config: Path) -> dict[int, tuple[Path, tuple, dict]]:
    """The config trained on 1 and 2 ranks: {ranks: (run_dir, its outcome, its windows)}."""
    out = {}
    for ranks in (1, 2):
        run_dir = config.parent / f"{config.stem}-ranks{ranks}"
        train_on(ranks, config, run_dir)
        out[ranks] = run_dir, outcome(run_dir), windows_of_last_run(config)
    return out


@pytest.fixture(scope="module")
def runs(toy_config) -> dict[int, tuple[Path, tuple, dict]]:
    return on_1_and_2_ranks(toy_config)


@pytest.mark.e2e
def test_losses_weights_and_windows_do_not_depend_on_the_number_of_ranks(runs):
    assert_same_run(runs[2][1], runs[1][1])
    assert runs[2][2] == runs[1][2] and list(runs[1][2]) == list(range(STEPS))


@pytest.mark.e2e
def test_each_launched_rank_joins_one_process_group(runs):
    """Composer's, set up before the data. Streaming's dataset would otherwise open and close a
    group of its own on the same port first, and a rank that then reached the Trainer's rendezvous
    while rank 0 was still serving the closing group failed ("Connection reset by peer") while rank 0
    timed out waiting for it (docs/pretraining.md, "Several ranks and nodes")."""
    log = rendezvous_log(runs[2][0])
    for rank in (0, 1):
        assert log.with_name(f"{log.name}.rank{rank}").read_text().splitlines() == ["init_process_group"]


@pytest.mark.e2e
def test_a_clm_run_over_random_windows_does_not_depend_on_the_number_of_ranks(data):
    clm = on_1_and_2_ranks(_config(data, "clm"))
    assert_same_run(clm[2][1], clm[1][1])
    assert clm[2][2] == clm[1][2]


# Fewer ranks to more and the reverse; 4 ranks (2 samples each of the batch of 8) only here, for the
# last STEPS - STOP steps: each test stops a different run of `runs` (their outcomes are kept in memory).
@pytest.mark.e2e
@pytest.mark.parametrize("before, after", [(1, 4), (2, 1)])
def test_a_run_stopped_on_some_ranks_resumes_on_others_as_if_uninterrupted(runs, toy_config, before, after):
    run_dir = runs[before][0]  # resumed in place: the config (hash) is the one it was started with
    stop_at(run_dir, STOP)
    train_on(after, toy_config, run_dir)
    assert_same_run(outcome(run_dir), runs[1][1])
    resumed = windows_of_last_run(toy_config)  # the blocks of steps 10 and 11, split as before
    assert resumed == {step: runs[1][2][step] for step in range(STOP, STEPS)}
