"""The dataset's shared-memory prefix is chosen by each node's local leader alone
(pretraining/data/shm_prefix.py): the two start-up races of mosaicml-streaming 0.13.0, forced by
file events (tests/pretraining/shm_prefix_race.py), no longer fail a run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pretraining.data.prepare import MANIFEST, MDS_COLUMNS
from tests.pretraining.test_multirank import free_port

pytestmark = pytest.mark.multiprocess

ROOT = Path(__file__).resolve().parents[2]
SEQ_LEN = 16


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    from streaming import MDSWriter

    root = tmp_path_factory.mktemp("prepared")
    with MDSWriter(out=str(root), columns=MDS_COLUMNS, compression=None) as writer:
        for index in range(16):
            ids = np.arange(index, index + SEQ_LEN, dtype=np.uint32)
            writer.write({"input_ids": ids, "doc_lengths": np.array([SEQ_LEN], dtype=np.uint32)})
    (root / MANIFEST).write_text(json.dumps({"seq_len": SEQ_LEN}))
    return root


def race(mode: str, prepared: Path, sync: Path, *flags: str) -> list[subprocess.CompletedProcess]:
    """Both processes of one race (tests/pretraining/shm_prefix_race.py), run to the end."""
    sync.mkdir()
    port = str(free_port())
    processes = []
    for me in (0, 1):
        env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
        if mode == "ranks":
            env.update(
                RANK=str(me), LOCAL_RANK=str(me), WORLD_SIZE="2", LOCAL_WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                MASTER_PORT=port,
            )  # fmt: skip
        else:
            env.update(RACE_ID=str(me))
            for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE"):
                env.pop(name, None)
        command = [sys.executable, "-m", "tests.pretraining.shm_prefix_race", mode, str(prepared), str(sync), *flags]
        output = {"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT, "text": True}
        processes.append(subprocess.Popen(command, env=env, **output))
    results = []
    for process in processes:
        out, _ = process.communicate(timeout=300)
        results.append(subprocess.CompletedProcess(process.args, process.returncode, out))
    return results


def prefixes(sync: Path) -> list[int]:
    return [int((sync / f"prefix.{me}").read_text()) for me in (0, 1)]


def test_a_dataset_freed_between_the_ranks_scans_does_not_split_a_node(prepared, tmp_path):
    """Another dataset of the node is freed after the local leader has scanned and before the other
    rank would: both ranks use the leader's prefix (streaming's own choice fails here)."""
    results = race("ranks", prepared, tmp_path / "sync")
    assert all(r.returncode == 0 for r in results), "\n".join(r.stdout[-3000:] for r in results)
    leader_scanned = int((tmp_path / "sync" / "leader_scanned").read_text())
    assert prefixes(tmp_path / "sync") == [leader_scanned, leader_scanned]


def test_streaming_own_prefix_choice_fails_in_the_same_race(prepared, tmp_path):
    """The race above is real: with streaming 0.13.0's get_shm_prefix, rank 1 attaches to the freed
    prefix, which its leader never registered. (If a streaming release fixes it, this test fails: then
    pretraining/data/shm_prefix.py can go.)"""
    results = race("ranks", prepared, tmp_path / "sync", "--streaming-prefix")
    assert results[1].returncode != 0
    assert "was not registered by local leader" in results[1].stdout


def test_a_leader_that_cannot_claim_a_prefix_fails_its_ranks_with_its_message(prepared, tmp_path):
    """The other rank gets the leader's reason at once instead of waiting at a barrier."""
    results = race("ranks", prepared, tmp_path / "sync", "--leader-fails")
    assert [r.returncode != 0 for r in results] == [True, True]
    assert "no free shared-memory prefix (forced)" in results[0].stdout
    assert "rank 0 (a local leader) could not choose the dataset's shared-memory prefix: RuntimeError: no free" in (
        results[1].stdout
    )


def test_two_single_rank_jobs_that_pick_one_prefix_both_start(prepared, tmp_path):
    """Two jobs scan at the same moment and pick one prefix: the second to claim it scans again."""
    for attempt in range(3):
        sync = tmp_path / f"sync{attempt}"
        results = race("single", prepared, sync)
        assert all(r.returncode == 0 for r in results), "\n".join(r.stdout[-3000:] for r in results)
        scanned = {int((sync / f"scanned.{me}").read_text()) for me in (0, 1)}
        if len(scanned) == 1:  # the collision happened (another test's dataset can come between the scans)
            break
    else:
        pytest.fail("the two jobs never picked the same prefix in 3 tries")
    assert scanned.pop() in prefixes(sync)
    assert len(set(prefixes(sync))) == 2


def test_streaming_own_prefix_choice_fails_when_two_jobs_pick_one_prefix(prepared, tmp_path):
    results = race("single", prepared, tmp_path / "sync", "--streaming-prefix")
    failed = [r for r in results if r.returncode != 0]
    assert len(failed) == 1 and "FileExistsError" in failed[0].stdout


def test_a_rank_whose_leader_registered_other_directories_is_refused_in_one_line(tmp_path, monkeypatch):
    """A non-leader checks its leader's `locals` block as streaming does (same data.path on every rank)."""
    from pretraining.data import shm_prefix

    prefix, block = shm_prefix.claim_free_prefix([str(tmp_path / "leader")], [None], retry=0)
    try:
        assert bytes(shm_prefix._attach(prefix, [str(tmp_path / "leader")]).buf) == bytes(block.buf)
        with pytest.raises(RuntimeError, match=r"holds local directories .*leader.* but this rank's are .*other"):
            shm_prefix._attach(prefix, [str(tmp_path / "other")])
    finally:
        block.cleanup()

    def removed(name, create):  # the block unlinked under a live job (a freed prefix may be reused at once)
        raise FileNotFoundError(name)

    monkeypatch.setattr(shm_prefix, "SharedMemory", removed)
    with pytest.raises(RuntimeError, match=f"prefix={prefix}, registered by this node's local leader, is gone"):
        shm_prefix._attach(prefix, [str(tmp_path / "leader")])
