"""Issue 65, item 5: requeue that makes progress. A pretraining time limit that leaves no time for a
checkpoint before the requeue signal is refused before anything is written; a job restarted
MAX_STALLED_RESTARTS times without a new checkpoint stops instead of requeueing for ever (the
generated script itself, run by bash with a stand-in python and SLURM_RESTART_COUNT as Slurm sets it)."""

import os
import subprocess

import pytest
import yaml

from reproduce import cli, plan, slurm
from tests.reproduce.slurm_study import toy_cluster_body

TOY = ["--figure", "3", "--scale", "toy", "--slurm", "--no-container", "--sizes", "toy_s", "--ratios", "0.4"]
TOY += ["--tasks", "sst2", "--lrs", "5e-4", "--seeds", "0", "--dry-run"]


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("10", 600), ("10:30", 630), ("1:00:00", 3600), ("48:00:00", 172_800), ("2-0", 172_800)]
    + [("2-1:30", 178_200), ("1-00:00:01", 86_401), ("UNLIMITED", None), ("infinite", None)],
)
def test_slurm_time_limits_in_every_format_sbatch_takes(text, seconds):
    slurm.check_slurm_value("pretraining_time", text)
    assert slurm.slurm_time_seconds(text) == seconds


def _cluster(tmp_path, **settings):
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(toy_cluster_body(tmp_path, "debug", **settings)))
    return path


def test_a_toy_time_limit_without_room_for_a_checkpoint_is_one_line_before_anything_is_written(tmp_path, capsys):
    """The toy runs save every 25 steps, bounded at 1 s a step on a CPU job: 600 s of lead + 300 s of
    start + 25 s; 15 minutes (900 s) is refused, 16 (960 s) passes, and so does a per-kind limit."""
    out = tmp_path / "out"
    for limit in ("00:10:00", "00:15:00"):
        assert cli.main([*TOY, "--out", str(out), "--cluster", str(_cluster(tmp_path, pretraining_time=limit))]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"pretraining_time: '{limit}' (" in err[0], err
        assert "leaves no time for a checkpoint: USR1 comes 600 s before the limit" in err[0]
        assert "(train.resume_interval 25 steps) about 25 s" in err[0] and 'set it to at least "00:16:00"' in err[0]
        assert not out.exists()  # nothing written
    jobs = {"pretraining": {"time": "5"}}
    assert cli.main([*TOY, "--out", str(out), "--cluster", str(_cluster(tmp_path, jobs=jobs))]) == 2
    assert "jobs.pretraining.time: '5' (300 s) leaves no time" in capsys.readouterr().err
    assert cli.main([*TOY, "--out", str(out), "--cluster", str(_cluster(tmp_path, pretraining_time="00:16:00"))]) == 0
    assert (out / "slurm" / "submit.sh").is_file()


def test_a_paper_time_limit_is_judged_at_the_estimated_step_time_of_its_gpus(tmp_path):
    """Paper scale: a 1,000-step resume interval at the cost model's step time (6 N D FLOPs at MFU
    40% of 989 TFLOP/s on 192 GPUs): the line's own minimum passes, a minute less is refused, and a
    lower MFU (slower steps) needs more time."""
    cfg = plan.ReproduceConfig(out=str(tmp_path / "out"), scale="paper", data_root=None, sizes=("610m",))
    cluster = slurm.load_cluster_config(slurm.CONFIG_DIR / "cluster.example.yaml")
    assert slurm.requeue_time_problem(plan.build_plan(cfg), cluster, 0.4, 989.0) is None  # the example's 48 h
    short = slurm.ClusterConfig(**{**cluster.__dict__, "pretraining_time": "00:10:00"})
    line = slurm.requeue_time_problem(plan.build_plan(cfg), short, 0.4, 989.0)
    assert "at MFU 40% of 989 TFLOP/s on 192 GPUs" in line and "train.resume_interval 1,000 steps" in line, line
    minimum = line.split('set it to at least "')[1].rstrip('"')
    hours, minutes, _ = map(int, minimum.split(":"))
    fits = slurm.ClusterConfig(**{**cluster.__dict__, "pretraining_time": minimum})
    assert slurm.requeue_time_problem(plan.build_plan(cfg), fits, 0.4, 989.0) is None
    less = f"{hours:02d}:{minutes - 1:02d}:00" if minutes else f"{hours - 1:02d}:59:00"
    assert slurm.requeue_time_problem(
        plan.build_plan(cfg), slurm.ClusterConfig(**{**cluster.__dict__, "pretraining_time": less}), 0.4, 989.0
    )
    assert slurm.requeue_time_problem(plan.build_plan(cfg), fits, 0.04, 989.0) is not None  # 10x slower steps


@pytest.fixture
def pretraining_job(tmp_path, capsys):
    """A toy study's pretraining script, its python a stand-in that logs its call and, when told
    (WRITE_CHECKPOINT=N), writes checkpoint ba<N>-rank0.pt as training would."""
    stand_in = tmp_path / "python"
    calls = tmp_path / "trained"
    stand_in.write_text(
        "#!/bin/bash\n"
        f'echo "$@" >> {calls}\n'
        'if [[ -n "${WRITE_CHECKPOINT:-}" ]]; then\n'
        '  mkdir -p "$CKPT_DIR"; : > "$CKPT_DIR/ba${WRITE_CHECKPOINT}-rank0.pt"\n'
        "fi\n"
    )
    stand_in.chmod(0o755)
    out = tmp_path / "out"
    cluster = _cluster(tmp_path, python=str(stand_in), pretraining_time="01:00:00")
    assert cli.main([*TOY, "--out", str(out), "--cluster", str(cluster)]) == 0
    capsys.readouterr()
    name = "toy_s-clm-250"
    script = out / "slurm" / f"pretrain_{name}.sbatch"
    checkpoints = tmp_path / "runs" / name / "checkpoints"  # the cluster config's runs_dir

    def start(restart: int, checkpoint: int | None = None) -> subprocess.CompletedProcess:
        env = {**os.environ, "SLURM_JOB_ID": "7", "SLURM_RESTART_COUNT": str(restart), "CKPT_DIR": str(checkpoints)}
        if checkpoint is not None:
            env["WRITE_CHECKPOINT"] = str(checkpoint)
        return subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60)

    return start, calls


def test_a_job_requeued_three_times_without_a_new_checkpoint_stops(pretraining_job):
    start, calls = pretraining_job
    assert start(0).returncode == 0  # the first start: no checkpoint yet, trains
    assert start(1).returncode == 0 and start(2).returncode == 0  # two restarts without progress
    stopped = start(3)
    assert stopped.returncode == 1, stopped.stderr
    assert stopped.stderr.strip() == (
        "pretraining toy_s-clm-250, newest checkpoint none: 3 restarts without a new checkpoint: not training again; "
        "raise the pretraining time limit or lower train.resume_interval, then python -m reproduce resubmit "
        f"{calls.parent / 'out'}"
    )
    assert len(calls.read_text().splitlines()) == 3  # the stopped start trained nothing
    assert start(0).returncode == 0  # a new job (resubmit) counts again from zero


def test_restarts_that_find_a_new_checkpoint_each_time_requeue_for_as_long_as_they_progress(pretraining_job):
    start, calls = pretraining_job
    assert start(0, checkpoint=25).returncode == 0
    for restart in range(1, 8):  # each allocation saves a newer checkpoint
        assert start(restart, checkpoint=25 * (restart + 1)).returncode == 0
    # start 8 finds ba200, saved during start 7: progress; then three starts find it again
    assert start(8).returncode == 0 and start(9).returncode == 0 and start(10).returncode == 0
    assert start(11).returncode == 1
    assert len(calls.read_text().splitlines()) == 11
