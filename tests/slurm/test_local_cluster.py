"""The local Slurm test cluster runs job arrays, dependencies and failures as a real cluster does."""

from pathlib import Path

import pytest

from tests.slurm.cluster import LocalSlurm, parse_scontrol_records, slurm_conf

ARRAY_JOB = """#!/bin/bash
#SBATCH --job-name=parts
#SBATCH --array=0-2
#SBATCH --output=parts_%A_%a.out
echo "part $SLURM_ARRAY_TASK_ID" > "part_$SLURM_ARRAY_TASK_ID.txt"
"""

JOIN_JOB = """#!/bin/bash
#SBATCH --job-name=join
#SBATCH --output=join_%j.out
set -e
cat part_0.txt part_1.txt part_2.txt > joined.txt
"""

FAILING_JOB = """#!/bin/bash
#SBATCH --job-name=fails
#SBATCH --output=fails_%j.out
echo "about to fail" >&2
exit 3
"""


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    return path


@pytest.mark.slurm
def test_array_dependency_and_failure(local_slurm, tmp_path):
    array = local_slurm.submit(write(tmp_path, "parts.sh", ARRAY_JOB))
    join = local_slurm.submit(write(tmp_path, "join.sh", JOIN_JOB), f"--dependency=afterok:{array}")
    fails = local_slurm.submit(write(tmp_path, "fails.sh", FAILING_JOB))
    never = local_slurm.submit(write(tmp_path, "never.sh", JOIN_JOB), f"--dependency=afterok:{fails}")

    local_slurm.wait_for([array, join, fails, never], timeout=60)

    assert local_slurm.job_states(array) == {f"{array}_{i}": "COMPLETED" for i in range(3)}
    assert local_slurm.job_state(f"{array}_1") == "COMPLETED"
    assert sorted(p.name for p in tmp_path.glob(f"parts_{array}_*.out")) == [f"parts_{array}_{i}.out" for i in range(3)]
    assert local_slurm.job_state(join) == "COMPLETED"
    assert (tmp_path / "joined.txt").read_text() == "part 0\npart 1\npart 2\n"

    assert local_slurm.job_state(fails) == "FAILED"
    assert local_slurm.exit_code(fails) == "3:0"
    assert "about to fail" in (tmp_path / f"fails_{fails}.out").read_text()
    # kill_invalid_depend: a job waiting on a failed job is cancelled instead of pending forever.
    assert local_slurm.job_state(never) == "CANCELLED"

    finished = local_slurm.jobcomp.read_text()
    assert f"JobId={fails} " in finished and "JobState=FAILED" in finished


def test_scontrol_records_keep_values_with_equals_and_spaces():
    line = (
        "JobId=7 ArrayJobId=5 ArrayTaskId=2 JobName=x JobState=COMPLETED Reason=None "
        "ExitCode=0:0 TRES=cpu=1,node=1 ReqB:S:C:T=0:0:*:* Command=/tmp/a b.sh WorkDir=/tmp"
    )
    (record,) = parse_scontrol_records(line + "\n")
    assert record["TRES"] == "cpu=1,node=1"
    assert record["ReqB:S:C:T"] == "0:0:*:*"
    assert record["Command"] == "/tmp/a b.sh"
    assert record["ArrayTaskId"] == "2" and record["JobState"] == "COMPLETED"


def test_config_keeps_everything_in_its_folder(tmp_path):
    conf = slurm_conf(tmp_path, "node1", 20001, 20002)
    assert "SchedulerParameters=batch_sched_delay=0" in conf
    assert "CPUs=8" in conf and "SlurmdParameters=config_overrides" in conf
    paths = [v for line in conf.splitlines() for v in line.split("=", 1)[1:] if v.startswith("/")]
    assert paths and all(p.startswith(str(tmp_path)) or p == "/bin/true" for p in paths)


def test_waiting_asks_a_controller_that_did_not_answer_again(tmp_path, monkeypatch):
    """A loaded machine's slurmctld can miss a client's message timeout (seen under load in CI):
    `wait_for` polls again until its deadline instead of failing, and still fails on other errors."""
    import subprocess

    answers = [
        (1, "", "slurm_load_jobs error: Socket timed out on send/recv operation"),
        (0, "12\n", ""),
        (0, "", ""),
    ]
    asked = []

    def squeue(*argv, check=True, cwd=None, timeout=60):
        asked.append(argv)
        code, out, err = answers[min(len(asked), len(answers)) - 1]
        return subprocess.CompletedProcess(argv, code, out, err)

    cluster = LocalSlurm(tmp_path)
    monkeypatch.setattr(cluster, "command", squeue)
    monkeypatch.setattr("tests.slurm.cluster.POLL_S", 0)
    cluster.wait_for("12", timeout=60)
    assert len(asked) == 3
    answers[:] = [(1, "", "slurm_load_jobs error: Access/permission denied")]
    asked.clear()
    with pytest.raises(RuntimeError, match="squeue failed: .*permission denied"):
        cluster.wait_for("12", timeout=60)
    assert "MessageTimeout=60" in slurm_conf(tmp_path, "node1", 20001, 20002)
