"""The job ledger and the parsing of what squeue and sacct say (reproduce.slurm.ledger), and the sbatch
lines of a resubmission (reproduce.slurm.resubmit.Submission): pure, no Slurm needed."""

import json
import subprocess

import pytest

from reproduce.missing import missing_frame, missing_section
from reproduce.slurm.ledger import (
    LedgerEntry,
    append_ledger,
    current_jobs,
    current_tasks,
    format_task_ids,
    ledger_shell_function,
    parse_states,
    parse_task_ids,
    read_ledger,
    state_of,
)
from reproduce.slurm.resubmit import Submission


@pytest.mark.parametrize("ids", [[0], [0, 1, 2], [1, 3, 4, 5, 9], [7, 2, 2, 3]])
def test_task_ids_round_trip_through_the_sbatch_array_syntax(ids):
    text = format_task_ids(ids)
    assert parse_task_ids(text) == sorted(set(ids))
    assert parse_task_ids(text + "%4") == sorted(set(ids))  # the throttle is not a task


def test_a_ledger_line_with_two_billion_task_ids_is_unreadable_not_a_memory_error(tmp_path):
    """Issue 66, item 5: tasks `0-2000000000` built the whole task list (MemoryError in status and
    resubmit); the count is checked before any id is made, and the line is skipped as unreadable."""
    from reproduce.slurm.ledger import MAX_ARRAY_TASKS, LedgerEntry, append_ledger, read_ledger

    for text in ("0-2000000000", f"0-{MAX_ARRAY_TASKS}", "5-3", "-1"):
        with pytest.raises(ValueError):
            parse_task_ids(text)
    assert len(parse_task_ids(f"0-{MAX_ARRAY_TASKS - 1}")) == MAX_ARRAY_TASKS
    append_ledger(tmp_path, LedgerEntry("7", "finetune", "m", "ft.sh", "finetune", "0-2000000000%2"))
    append_ledger(tmp_path, LedgerEntry("8", "finetune", "m", "ft.sh", "finetune", "0-3%2"))
    entries, bad = read_ledger(tmp_path)
    assert [e.job for e in entries] == ["8"] and bad == 1
    assert parse_states("9_[0-2000000000%4]|PENDING|None") == {
        "9_[0-2000000000%4]": parse_states("9|PENDING|None")["9"]
    }


def test_squeue_and_sacct_lines_become_per_task_states():
    states = parse_states(
        "\n".join(
            [
                "101|COMPLETED|0:0",
                "102_0|FAILED|1:0",
                "102_[2-3%2]|PENDING|JobArrayTaskLimit",
                "103|CANCELLED by 0|0:0",
                "garbage line",
                "104;x|RUNNING|None",
            ]
        )
    )
    assert states["101"].state == "COMPLETED"
    assert states["102_0"].state == "FAILED"
    assert states["102_2"].state == states["102_3"].state == "PENDING"
    assert states["102_3"].reason == "JobArrayTaskLimit"
    assert states["103"].state == "CANCELLED"
    assert "104;x" not in states and len(states) == 5
    # a task squeue no longer lists has ended; without squeue nothing is known
    assert state_of("102", 1, states, ["squeue"]).state == "ENDED"
    assert state_of("102", 1, states, []) is None


def test_the_submit_script_function_and_python_write_the_same_ledger(tmp_path):
    out = tmp_path / "study"
    script = "\n".join(
        [*ledger_shell_function(out / "slurm" / "ledger.jsonl"), "ledger 7 finetune toy_s-clm-8 ft.sh finetune 0-3%2"]
    )
    (out / "slurm").mkdir(parents=True)
    subprocess.run(["bash", "-c", script], check=True)
    append_ledger(out, LedgerEntry("9", "finetune", "toy_s-clm-8", "ft.sh", "finetune", "2", "now"))
    (out / "slurm" / "ledger.jsonl").open("a").write('{"job": "x; rm -rf /", "kind": "data"}\nnot json\n')
    append_ledger(out, LedgerEntry("10", "analysis", "analysis", "analysis.sbatch"))
    entries, bad = read_ledger(out)
    assert bad == 2 and [e.job for e in entries] == ["7", "9", "10"]
    assert entries[0].task_ids() == [0, 1, 2, 3] and entries[0].submitted  # stamped by date
    # the latest submission of a task is its job
    tasks = current_tasks(entries)
    assert tasks[("toy_s-clm-8", "finetune", 2)] == "9" and tasks[("toy_s-clm-8", "finetune", 3)] == "7"
    assert current_jobs(entries)[("analysis", "analysis", "")].job == "10"


def test_a_resubmission_waits_on_its_new_jobs_and_cancels_on_a_failed_one():
    pretrain = Submission("pt0", "pretraining", "toy_s-clm-8", "pretrain_toy_s-clm-8.sbatch")
    array = Submission(
        "finetune1", "finetune", "toy_s-clm-8", "ft.sh", "finetune", "1,4-5%2", ["--job-name=x"], [("afterok", "pt0")]
    )
    analysis = Submission(
        "analysis", "analysis", "analysis", "analysis.sbatch", after=[("afterany", "finetune1"), ("afterany", "55")]
    )
    assert pretrain.argv({}) == ["sbatch", "--parsable", "pretrain_toy_s-clm-8.sbatch"]
    assert array.argv({"pt0": "301"}) == [
        "sbatch",
        "--parsable",
        "--job-name=x",
        "--array=1,4-5%2",
        "--dependency=afterok:301",
        "--kill-on-invalid-dep=yes",
        "ft.sh",
        "finetune",
    ]
    assert analysis.argv({"finetune1": "302"})[2] == "--dependency=afterany:302:55"


def test_the_missing_section_counts_each_cell_against_its_planned_runs():
    from collections import Counter

    frame = missing_frame(
        [
            {"id": "m/sst2/lr5e-04_sd0", "model": "m", "task": "sst2", "lr": 5e-4, "seed": 0, "why": "failed: a | b"},
            {"id": "m/sst2/lr5e-04_sd1", "model": "m", "task": "sst2", "lr": 5e-4, "seed": 1, "why": "not run"},
        ]
    )
    text = missing_section(frame, Counter({("m", "sst2"): 3, ("m", "qqp"): 3}))
    assert text.startswith("## Missing runs: 2 of 6 planned")
    assert "| m | sst2 | 2 | 3 | failed: a / b |" in text
    assert missing_section(missing_frame([]), Counter()) == ""
    assert json.dumps(list(frame.columns)) == '["id", "model", "task", "lr", "seed", "why"]'


def test_a_missing_run_is_named_by_its_error_files_first_line_read_from_its_head(tmp_path):
    """missing.csv's `why` for a failed run: the first non-empty line of its error.txt, read from
    the file's first 4 kB only (a long traceback is not read whole); an error.txt that is no
    regular file counts as none."""
    from reproduce.local import _missing_row

    job = {"id": "m/sst2/lr5e-04_sd0", "config": {"model": "org/m", "task": "sst2", "lr": 5e-4, "seed": 0}}
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    assert _missing_row(job, run_dir)["why"] == "not run (no record, no error.txt)"
    (run_dir / "error.txt").write_text("\n  CUDA out of memory  \n" + "x" * (1 << 20))
    row = _missing_row(job, run_dir)
    assert row == {"id": job["id"], "model": "m", "task": "sst2", "lr": 5e-4, "seed": 0, "why": row["why"]}
    assert row["why"] == "failed: CUDA out of memory"
    (run_dir / "error.txt").unlink()
    (run_dir / "error.txt").mkdir()
    assert _missing_row(job, run_dir)["why"] == "not run (no record, no error.txt)"
