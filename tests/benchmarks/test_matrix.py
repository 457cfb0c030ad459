"""`benchmarks matrix`: expansion, Slurm script, local runner resumable after a kill."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import matrix
from benchmarks.datasets import TOY_DATA_ROOT
from benchmarks.run import CONFIG_DIR, load_run_config
from contracts.run_store import iter_records_in
from tests.benchmarks.tiny import one_torch_thread, save_tiny_model  # noqa: F401 (autouse fixture)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return save_tiny_model(tmp_path_factory.mktemp("matrix") / "bert", "bert")


def _base(out, **kw):
    values = {
        "model": "-",
        "task": "-",
        "lr": 1.0,
        "seed": 0,
        "out": str(out),
        "data_root": str(TOY_DATA_ROOT),
        "max_steps": 1,
        **kw,
    }
    return load_run_config(values, CONFIG_DIR / "toy.yaml")


def test_paper_matrix_has_360_jobs_per_model(model, tmp_path):
    jobs = matrix.expand(_base(tmp_path), [str(model)])
    assert len(jobs) == 1 * 12 * 6 * 5 == 360
    assert len({j["id"] for j in jobs}) == 360
    by_group = {g: [j for j in jobs if j["group"] == g] for g in matrix.GROUPS}
    assert [len(by_group[g]) for g in matrix.GROUPS] == [9 * 30, 30, 60]
    assert matrix.array_sizes(jobs) == {"finetune": 270, "ir_train": 30, "ir_eval": 30}
    # every IR evaluation shares its array index with the MS MARCO training of the same lr/seed
    train = {j["index"]: (j["config"]["lr"], j["config"]["seed"]) for j in by_group["ir_train"]}
    for job in by_group["ir_eval"]:
        assert train[job["index"]] == (job["config"]["lr"], job["config"]["seed"])
    # and comes after it in the list (the local runner's order)
    position = {j["id"]: i for i, j in enumerate(jobs)}
    first_eval = min(position[j["id"]] for j in by_group["ir_eval"])
    assert max(position[j["id"]] for j in by_group["ir_train"]) < first_eval
    same_twice = matrix.expand(_base(tmp_path), [str(model), str(model) + "/"], lrs=[1e-5], seeds=[0])
    assert len(same_twice) == 12
    # the paper's protocol unless asked otherwise (toy.yaml, as used by `python -m reproduce`)
    assert {j["config"]["protocol"] for j in jobs} == {"paper"}
    standard = matrix.expand(_base(tmp_path, protocol="standard"), [str(model)], tasks=["sst2"], lrs=[1e-5], seeds=[0])
    assert standard[0]["config"]["protocol"] == "standard"


def test_job_configs_hold_absolute_paths(model, tmp_path, monkeypatch):
    monkeypatch.chdir(model.parent)
    jobs = matrix.expand(_base("runs", data_root="toy"), ["bert"], tasks=["sst2"], lrs=[1e-5], seeds=[0])
    config = jobs[0]["config"]
    assert config["model"] == str(model) and config["out"] == str(model.parent / "runs")
    assert config["data_root"] == str(model.parent / "toy") and jobs[0]["id"] == "bert/sst2/lr1e-05_sd0"


def test_ir_evaluation_implies_its_training_run(model, tmp_path):
    jobs = matrix.expand(_base(tmp_path), [str(model)], tasks=["nq"], lrs=[1e-4], seeds=[0, 1])
    assert [(j["config"]["task"], j["group"], j["index"]) for j in jobs] == [
        ("msmarco", "ir_train", 0),
        ("msmarco", "ir_train", 1),
        ("nq", "ir_eval", 0),
        ("nq", "ir_eval", 1),
    ]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"lrs": []}, "empty LR grid"),
        ({"seeds": []}, "empty seeds"),
        ({"lrs": [0.0]}, "not > 0"),
        ({"tasks": ["sst2", "nope"]}, "unknown task 'nope'"),
        ({"lrs": [1e-5, 0.00001]}, "LR grid 1e-05,1e-05: 1e-05 given more than once; give each once"),  # issue 88
        ({"seeds": [0, 1, 0]}, "seeds 0,1,0: 0 given more than once; give each once"),
    ],
)
def test_bad_matrices_are_refused(model, tmp_path, kwargs, message):
    with pytest.raises((matrix.MatrixError, KeyError), match=message):
        matrix.expand(_base(tmp_path), [str(model)], **kwargs)


def test_two_checkpoints_with_one_folder_name_are_refused(model, tmp_path):
    """E.g. two pretraining runs' hf/step-250 exports: their runs would share <out>/step-250/..."""
    other = tmp_path / "other-run" / "bert"
    other.parent.mkdir()
    other.symlink_to(model, target_is_directory=True)
    with pytest.raises(matrix.MatrixError, match=r"would both be recorded as 'bert'.*symlink"):
        matrix.expand(_base(tmp_path / "runs"), [str(model), str(other)], tasks=["sst2"], lrs=[1e-5], seeds=[0])
    assert not (tmp_path / "runs").exists()


def test_slurm_script_is_valid_bash_with_arrays_and_dependency(model, tmp_path):
    jobs = matrix.expand(_base(tmp_path), [str(model)])
    jobs_path = matrix.write_jobs(jobs, tmp_path / "jobs.jsonl")
    script = tmp_path / "submit.sh"
    script.write_text(matrix.slurm_script(jobs_path, jobs, 8, tmp_path, ["--gres=gpu:1", "--time=02:00:00"]))
    check = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    text = script.read_text()
    assert "--array=0-269%8" in text and "--array=0-29%8" in text
    assert '--dependency=aftercorr:"${ir_train_id}"' in text
    assert "#SBATCH --gres=gpu:1" in text and "#SBATCH --time=02:00:00" in text
    assert f"JOBS={jobs_path.resolve()}" in text
    assert '-m benchmarks job --jobs "$JOBS" --group "$1" --index "$SLURM_ARRAY_TASK_ID"' in text
    assert len(matrix.read_jobs(jobs_path)) == 360


def test_cli_writes_the_job_list_and_script(model, tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks",
            "matrix",
            "--models",
            str(model),
            "--tasks",
            "sst2,nq,mldr_en",
            "--lrs",
            "1e-5,2e-5",
            "--seeds",
            "0,1,2",
            "--out",
            str(tmp_path / "runs"),
            "--slurm-script",
            str(tmp_path / "submit.sh"),
            "--array-throttle",
            "4",
            "--data-root",  # the jobs run offline: a local mirror (checked before anything is written)
            str(TOY_DATA_ROOT),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "24 runs" in result.stdout  # sst2 6 + msmarco 6 (implied) + nq 6 + mldr 6
    assert subprocess.run(["bash", "-n", str(tmp_path / "submit.sh")]).returncode == 0
    assert len(matrix.read_jobs(tmp_path / "runs" / "jobs.jsonl")) == 24


class _Killed(BaseException):
    """Stands in for SIGKILL: not an Exception, so the runner does not catch it."""


def test_local_runner_resumes_after_a_kill(model, tmp_path, monkeypatch):
    import benchmarks.run as run_module

    jobs = matrix.expand(_base(tmp_path), [str(model)], tasks=["sst2", "nq"], lrs=[1e-3], seeds=[0, 1])
    assert len(jobs) == 6
    real_execute = run_module._execute
    calls = []

    def dies_on_third(cfg, spec, out_dir, *rest):
        calls.append(cfg.task)
        if len(calls) == 3:
            (out_dir / "partial.bin").write_text("half")  # the kill leaves a partial run behind
            raise _Killed()
        return real_execute(cfg, spec, out_dir, *rest)

    monkeypatch.setattr(run_module, "_execute", dies_on_third)
    with pytest.raises(_Killed):
        matrix.run_local(jobs, progress=False)
    done = {r.dataset: r for r in iter_records_in([tmp_path])}
    assert len(list(tmp_path.rglob("record.json"))) == 2
    mtimes = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("record.json")}
    monkeypatch.setattr(run_module, "_execute", real_execute)
    outcome = matrix.run_local(jobs, progress=False)
    assert len(outcome["skipped"]) == 2 and len(outcome["done"]) == 4 and not outcome["failed"]
    assert all(p.stat().st_mtime_ns == t for p, t in mtimes.items()), "finished records are not rewritten"
    assert not list(tmp_path.rglob("partial.bin"))
    records = list(iter_records_in([tmp_path]))
    assert sorted((r.dataset, r.seed) for r in records) == sorted(
        [(t, s) for t in ("msmarco", "sst2", "nq") for s in (0, 1)]
    )
    assert done  # the records of the first pass are among them
    # the Slurm array task entry point runs (here: skips) the jobs of one index
    assert matrix.run_array_task(jobs, "ir_eval", 1) == 0


STUB_PYTHON = """#!/bin/bash
# Stands in for `python -m benchmarks job ...`: logs which array task ran, when; MS MARCO task 1 fails.
while [[ $# -gt 0 ]]; do case "$1" in --group) group=$2; shift;; --index) index=$2; shift;; esac; shift; done
echo "$group $index start $(date +%s.%N)" >> {log}
if [[ $group == ir_train ]]; then sleep 1; fi
echo "$group $index end $(date +%s.%N)" >> {log}
if [[ $group == ir_train && $index == 1 ]]; then exit 1; fi
exit 0
"""


@pytest.mark.slurm
def test_slurm_arrays_run_and_ir_evaluation_waits_for_its_training(local_slurm, model, tmp_path):
    import re

    jobs = matrix.expand(_base(tmp_path), [str(model)], tasks=["sst2", "nq"], lrs=[1e-3], seeds=[0, 1])
    jobs_path = matrix.write_jobs(jobs, tmp_path / "jobs.jsonl")
    log = tmp_path / "ran.log"
    stub = tmp_path / "stub_python"
    stub.write_text(STUB_PYTHON.format(log=log))
    stub.chmod(0o755)
    script = tmp_path / "submit.sh"
    script.write_text(matrix.slurm_script(jobs_path, jobs, 2, tmp_path, python=str(stub)))
    submitted = local_slurm.command("bash", str(script), cwd=tmp_path)
    ids = dict(re.findall(r"submitted (\w+): job array (\d+)", submitted.stdout))
    assert set(ids) == {"finetune", "ir_train", "ir_eval"}, submitted.stdout + submitted.stderr
    local_slurm.wait_for(list(ids.values()), timeout=90)
    events = [line.split() for line in log.read_text().splitlines()]
    ran = {(g, int(i)) for g, i, what, _ in events if what == "start"}
    assert ran == {("finetune", 0), ("finetune", 1), ("ir_train", 0), ("ir_train", 1), ("ir_eval", 0)}
    when = {(g, int(i), what): float(t) for g, i, what, t in events}
    assert when[("ir_eval", 0, "start")] >= when[("ir_train", 0, "end")]
    states = local_slurm.job_states(ids["ir_eval"])
    assert states[f"{ids['ir_eval']}_0"] == "COMPLETED"
    assert states[f"{ids['ir_eval']}_1"] != "COMPLETED"  # its training failed: never runs


@pytest.mark.e2e  # a real SIGKILL of a running matrix
def test_local_matrix_survives_a_real_sigkill(model, tmp_path):
    import os
    import re
    import signal
    import time

    out = tmp_path / "runs"
    argv = [
        sys.executable,
        "-m",
        "benchmarks",
        "matrix",
        "--models",
        str(model),
        "--tasks",
        "sst2",
        "--lrs",
        "1e-3",
        "--seeds",
        "0,1,2,3",
        "--data-root",
        str(TOY_DATA_ROOT),
        "--out",
        str(out),
        "--config",
        str(CONFIG_DIR / "toy.yaml"),
        "--max-steps",
        "1",
        "--local",
        "--no-progress",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    while not list(out.rglob("record.json")) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    first = {p: p.stat().st_mtime_ns for p in out.rglob("record.json")}
    assert first, "the first run finished before the kill"
    result = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    done, skipped = map(int, re.search(r"(\d+) runs done, (\d+) skipped", result.stdout).groups())
    assert skipped == len(first) and done + skipped == 4
    assert all(p.stat().st_mtime_ns == t for p, t in first.items())
    run_dirs = list((out / "bert" / "sst2").iterdir())
    assert len(run_dirs) == 4 and all((d / "record.json").is_file() for d in run_dirs)
    # no lost, torn or duplicated record: each job's record parses, once; no temp file is left
    records = list(iter_records_in([out]))
    assert sorted(r.seed for r in records) == [0, 1, 2, 3]
    assert all(sorted(p.name for p in d.iterdir()) == ["config.yaml", "record.json"] for d in run_dirs)


def test_a_newline_in_an_sbatch_option_is_refused_before_anything_is_written(model, tmp_path, capsys):
    """It became a shell line of its own in the submit script (docs/reliability.md)."""
    from benchmarks.__main__ import main

    script = tmp_path / "submit.sh"
    argv = ["matrix", "--models", str(model), "--tasks", "sst2", "--data-root", str(TOY_DATA_ROOT)]
    argv += ["--out", str(tmp_path / "out"), "--slurm-script", str(script)]
    assert main([*argv, "--sbatch-option=--constraint=a100"]) == 0 and script.is_file()  # a valid option: written
    script.unlink()
    jobs = (tmp_path / "out" / "jobs.jsonl").stat().st_mtime_ns
    assert main([*argv, "--sbatch-option", "--constraint=a100\ntouch PWNED"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--sbatch-option '--constraint=a100\\ntouch PWNED': holds a newline" in err[0], err
    assert not script.exists() and (tmp_path / "out" / "jobs.jsonl").stat().st_mtime_ns == jobs


def test_a_repeated_seed_is_refused_before_anything_is_written(model, tmp_path, capsys):
    """Issue 88: `--seeds 0,0` listed each run twice (two array tasks on one run folder)."""
    from benchmarks.__main__ import main

    argv = ["matrix", "--models", str(model), "--tasks", "sst2", "--data-root", str(TOY_DATA_ROOT)]
    argv += ["--out", str(tmp_path / "out"), "--slurm-script", str(tmp_path / "submit.sh"), "--seeds", "0,0"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: seeds 0,0: 0 given more than once; give each once"], err
    assert not (tmp_path / "out").exists() and not (tmp_path / "submit.sh").exists()
