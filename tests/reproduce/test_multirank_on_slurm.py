"""A generated pretraining sbatch script on the local Slurm cluster: 2 ranks launched with srun and
the Composer launcher (gloo, no container), requeued by the time-limit signal mid-run, resumed by
autoresume, and finishing with the per-step losses of the single-process run (docs/pretraining.md).

"Mid-run" is an event, not a duration: the run holds at step HOLD_AT (after its step-10
checkpoint) until the test releases it, and the test sends the signal while it holds and releases
it only once Slurm has requeued the job and the held processes are gone."""

import json
import os
import sys
import time
from pathlib import Path

import pytest

from reproduce.plan import ReproduceConfig, build_plan
from reproduce.slurm import ClusterConfig, SlurmWriter
from tests.pretraining.toy_runs import hold_spec, prepare_embedded_data, write_toy_mlm_config

STEPS, CHECKPOINT_EVERY, HOLD_AT = 40, 10, 15


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _wait(condition, what: str, slurm, job: str, timeout: float = 300) -> None:
    """Poll `condition` (an event's trace: a file, a job record) while the job is alive."""
    deadline = time.monotonic() + timeout
    while not condition():
        state = slurm.job_state(job)
        assert state in ("PENDING", "RUNNING", "REQUEUED", "COMPLETING"), f"{what}: job {state}\n{slurm.log_tail()}"
        assert time.monotonic() < deadline, f"{what}: not after {timeout} s\n{slurm.log_tail()}"
        time.sleep(0.2)


@pytest.mark.slurm
@pytest.mark.multiprocess
@pytest.mark.e2e
def test_two_rank_pretraining_job_requeued_by_the_time_limit_signal_resumes_exactly(local_slurm, tmp_path, monkeypatch):
    from pretraining.config import load_pretrain_config
    from pretraining.train import train
    from tests.slurm.cluster import PARTITION

    data = prepare_embedded_data(tmp_path / "data")
    arrived, release = tmp_path / "held", tmp_path / "release"
    config = write_toy_mlm_config(
        tmp_path / "toy.yaml",
        data,
        tmp_path / "runs" / "toy",
        steps=STEPS,
        resume_interval=CHECKPOINT_EVERY,
        decay=4,
        callbacks=[hold_spec(HOLD_AT, arrived, release)],
    )
    cluster = ClusterConfig(
        partition=PARTITION,
        image=str(tmp_path / "absent.sif"),
        data_dir=str(data),
        runs_dir=str(tmp_path / "runs"),
        hf_cache=str(tmp_path / "hf"),
        gpus_per_node=0,
        cpu_ranks_per_node=2,
        pretraining_nodes=1,
        cpus_per_task=1,
        pretraining_time="00:30:00",
        master_port=29613,
        python=sys.executable,
    )
    reproduce_cfg = ReproduceConfig(out=str(tmp_path / "out"), scale="toy", runs_dir=str(tmp_path / "runs"))
    writer = SlurmWriter(build_plan(reproduce_cfg), cluster, container=False)
    writer.logs.mkdir(parents=True)
    script = writer.dir / "pretrain_toy.sbatch"
    # HoldAtStep lives in tests/, outside the packages a config may name without --trust-callbacks
    script.write_text(writer.pretraining_script("toy", config).replace(" train ", " train --trust-callbacks "))
    text = script.read_text()
    assert "srun --kill-on-bad-exit=1 bash -c 'composer -n 2 --world_size 2" in text

    env_path = os.pathsep.join([str(Path(sys.executable).parent), local_slurm.env["PATH"]])
    monkeypatch.setitem(local_slurm.env, "PATH", env_path)  # the jobs inherit it (sbatch --export=ALL)
    monkeypatch.setitem(local_slurm.env, "PYTHONPATH", str(Path(__file__).resolve().parents[2]))
    job = local_slurm.submit(script)
    run_dir = tmp_path / "runs" / "toy"
    markers = [arrived.with_name(f"{arrived.name}.rank{rank}") for rank in (0, 1)]
    _wait(lambda: all(m.exists() for m in markers), "both ranks held at step 15", local_slurm, job)
    assert (run_dir / "checkpoints" / f"ba{CHECKPOINT_EVERY}-rank0.pt").exists()
    held_pids = [int(m.read_text()) for m in markers]
    # What Slurm sends 10 min before the time limit (--signal=B:USR1@600), sent now.
    local_slurm.command("scancel", "--batch", "--signal=USR1", job)
    _wait(lambda: local_slurm.job_records(job)[0]["Restarts"] == "1", "requeued by the USR1 trap", local_slurm, job)
    _wait(lambda: not any(map(_alive, held_pids)), "the held ranks killed by the requeue", local_slurm, job)
    release.touch()
    local_slurm.wait_for(job, timeout=600)
    logs = "\n".join(p.read_text()[-3000:] for p in writer.logs.glob("*"))
    assert local_slurm.job_state(job) == "COMPLETED", logs
    (record,) = local_slurm.job_records(job)
    assert record["Restarts"] == "1", logs  # requeued once by its USR1 trap (the log restarts with it)
    rows = [json.loads(line) for line in (run_dir / "loss.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(1, STEPS + 1))
    # the first process started at step 0, the requeued one at the step-10 checkpoint (autoresume)
    assert arrived.with_name(arrived.name + ".starts").read_text().split() == ["0", str(CHECKPOINT_EVERY)]

    single = train(load_pretrain_config(config, [f"run_dir={tmp_path / 'single'}"]), trust_callbacks=True)
    expected = [json.loads(line)["loss"] for line in (single / "loss.jsonl").read_text().splitlines()]
    # Exact to float noise: the 2-rank gloo all-reduce and the single process sum in another order
    # (3e-4 relative apart by step 200), far below what a wrong resume step or batch would move (the
    # loss changes by ~1e-2 relative from one step to the next).
    assert [r["loss"] for r in rows] == pytest.approx(expected, rel=1e-5)
