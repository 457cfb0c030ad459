"""One reproduce per output folder (an flock), and `make clean` (python -m reproduce --clean)."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from reproduce import cli
from reproduce.housekeeping import LOCK_FILE, clean_checkpoints, output_lock
from reproduce.plan import (
    ReproduceConfig,
    ReproduceError,
    build_plan,
    with_absolute_folders,
    write_study_config,
)

REPO = Path(__file__).resolve().parents[2]


def test_a_second_reproduce_on_the_same_folder_refuses_before_writing(tmp_path, capsys):
    out = tmp_path / "masking"
    with output_lock(out):
        assert cli.main(["--figure", "3", "--reduced", "--out", str(out)]) == 2
        assert sorted(p.name for p in out.iterdir()) == [LOCK_FILE]  # nothing else was written
    err = capsys.readouterr().err
    assert "is in use by another reproduce (pid" in err and "another output folder" in err
    assert not out.exists()  # the refused reproduce wrote nothing; the holder, which wrote nothing, tidied up
    with output_lock(out):  # released by the first holder
        pass


def test_the_lock_holds_across_processes_and_dies_with_its_holder(tmp_path):
    out = tmp_path / "study"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from reproduce.housekeeping import "
            "output_lock\nwith output_lock(Path(sys.argv[1])):\n    print('held', flush=True); time.sleep(60)",
            str(out),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(ReproduceError, match=f"pid {holder.pid} on"):
            with output_lock(out):
                pass
    finally:
        holder.kill()  # as kill -9: the kernel releases the lock when the process's files close,
        holder.wait()  # which has happened once wait() has reaped it
    with output_lock(out):
        pass


SMALL = {"sizes": ("toy_s",), "ratios": (0.4,), "tasks": ("sst2",), "random_init": False}  # MLM-40 and CLM


def _trained(run, finished: bool = True) -> Path:
    """A pretraining run's folder as training leaves it: its config, a resume checkpoint, an export,
    FINISHED.json when `finished`; returns its checkpoints folder."""
    (run.run_dir / "checkpoints").mkdir(parents=True, exist_ok=True)
    (run.run_dir / "checkpoints" / "ba250-rank0.pt").write_bytes(b"x" * 1000)
    (run.run_dir / "hf" / "step-250").mkdir(parents=True, exist_ok=True)
    (run.run_dir / "hf" / "step-250" / "model.safetensors").write_bytes(b"w" * 10)
    (run.run_dir / "config.yaml").write_text(yaml.safe_dump({"config": run.body()}))
    if finished:
        (run.run_dir / "FINISHED.json").write_text("{}")
    return run.run_dir / "checkpoints"


def _study(out: Path, finished: bool, runs_dir: str | None = None, train=("toy_s-mlm40-250",)):
    """A study written as reproduce writes it (reproduce.yaml, plan.json, the runs record), its runs
    `train` finished and the others started; timings.json when `finished`. Returns its plan."""
    plan = build_plan(with_absolute_folders(ReproduceConfig(out=str(out), runs_dir=runs_dir, **SMALL)))
    write_study_config(plan)
    for run in plan.runs:
        _trained(run, finished=run.name in train)
    if finished:
        (out / "timings.json").write_text(json.dumps({"seconds": {}}))
    return plan


def test_clean_removes_only_resume_checkpoints_of_finished_runs_of_finished_studies(tmp_path, capsys):
    done, running = _study(tmp_path / "masking", True), _study(tmp_path / "cpt", False)
    assert cli.main(["--clean", "--out-root", str(tmp_path)]) == 0
    assert "freed 0.0 MB" in capsys.readouterr().out  # 1000 bytes
    mlm, clm = done.run("toy_s-mlm40-250").run_dir, done.run("toy_s-clm-250").run_dir
    assert not (mlm / "checkpoints").exists()
    assert (mlm / "hf" / "step-250" / "model.safetensors").is_file()
    assert (clm / "checkpoints" / "ba250-rank0.pt").is_file()  # unfinished run
    assert (running.run("toy_s-mlm40-250").run_dir / "checkpoints" / "ba250-rank0.pt").is_file()
    assert cli.main(["--clean", "--out", str(tmp_path / "masking")]) == 0  # one study; nothing left to remove


def test_clean_of_one_study_keeps_what_another_study_still_plans_in_a_shared_runs_folder(tmp_path, capsys):
    """Issue 88: with the shared runs folder --help recommends, cleaning one finished study removed the
    resume checkpoints of another study's runs (a continued CPT needs its base's last checkpoint). Now a
    run another study plans is kept, finished or not, until a clean takes both studies together."""
    shared = str(tmp_path / "runs")
    first = _study(tmp_path / "first", True, runs_dir=shared)
    _study(tmp_path / "second", False, runs_dir=shared, train=("toy_s-clm-250",))  # also plans first's runs
    checkpoints = first.run("toy_s-mlm40-250").run_dir / "checkpoints"
    lines = []
    assert clean_checkpoints(tmp_path / "first", log=lines.append) == 0
    assert (checkpoints / "ba250-rank0.pt").is_file()
    assert any(f"kept {checkpoints}: also planned by {tmp_path / 'second'}" in line for line in lines), lines
    (tmp_path / "second" / "timings.json").write_text("{}")  # finished: still planned by it
    assert clean_checkpoints(tmp_path / "first", log=lines.append) == 0 and checkpoints.is_dir()
    # a clean of both studies (make clean OUT=<their folder>) frees what only they plan, each folder once
    assert cli.main(["--clean", "--out-root", str(tmp_path)]) == 0
    assert not checkpoints.exists() and not (first.run("toy_s-clm-250").run_dir / "checkpoints").exists()
    assert capsys.readouterr().out.count("removing") == 2


def test_clean_acts_on_the_plans_runs_not_on_a_folder_walk(tmp_path):
    """Issue 88: --clean walked every finished run folder under the runs folder, whatever made it, and
    followed links; it cleaned studies moved aside by --force (`replaced-*`)."""
    out = tmp_path / "study"
    plan = _study(out, True)
    stranger_checkpoints = out / "pretraining" / "someone-elses-run" / "checkpoints"  # not in the plan
    stranger_checkpoints.mkdir(parents=True)
    (stranger_checkpoints / "ba250-rank0.pt").write_bytes(b"x")
    (stranger_checkpoints.parent / "FINISHED.json").write_text("{}")
    aside = _study(out / "replaced-20261129T000000Z", True)
    lines = []
    clean_checkpoints(tmp_path, log=lines.append)  # the folder of studies
    assert not (plan.run("toy_s-mlm40-250").run_dir / "checkpoints").exists()
    assert (stranger_checkpoints / "ba250-rank0.pt").is_file()
    assert (aside.run("toy_s-mlm40-250").run_dir / "checkpoints" / "ba250-rank0.pt").is_file()


def test_clean_keeps_a_run_of_another_config_and_refuses_a_link_naming_it(tmp_path):
    """Issue 88: `runs_dir: ../..` and linked run folders led --clean outside the study."""
    victim = _study(tmp_path / "victim", False)
    # a study whose runs folder is another study's (as `runs_dir: ../..` can make it): same names
    other = _study(tmp_path / "other", True, runs_dir=str(tmp_path / "victim" / "pretraining"), train=())
    run = victim.run("toy_s-mlm40-250")
    body = run.body()
    body["train"]["max_steps"] = 500  # the victim's run computes something else
    (run.run_dir / "config.yaml").write_text(yaml.safe_dump({"config": body}))
    lines = []
    assert clean_checkpoints(tmp_path / "other", log=lines.append) == 0
    assert (run.run_dir / "checkpoints" / "ba250-rank0.pt").is_file()
    assert any("not this study's run (train.max_steps 500 there, 250 here)" in line for line in lines), lines
    # a linked checkpoints folder of a finished run of the study: refused, naming the link
    out = tmp_path / "linked"
    plan = _study(out, True)
    checkpoints = plan.run("toy_s-mlm40-250").run_dir / "checkpoints"
    shutil.rmtree(checkpoints)
    checkpoints.symlink_to(run.run_dir / "checkpoints", target_is_directory=True)
    assert cli.main(["--clean", "--out", str(out)]) == 2
    assert (run.run_dir / "checkpoints" / "ba250-rank0.pt").is_file()
    assert other.run_names == victim.run_names


def test_clean_skips_a_linked_study_in_a_folder_of_studies(tmp_path):
    real = _study(tmp_path / "elsewhere" / "study", True)
    (tmp_path / "outputs").mkdir()
    (tmp_path / "outputs" / "study").symlink_to(tmp_path / "elsewhere" / "study", target_is_directory=True)
    lines = []
    assert clean_checkpoints(tmp_path / "outputs", log=lines.append) == 0
    assert (real.run("toy_s-mlm40-250").run_dir / "checkpoints" / "ba250-rank0.pt").is_file()
    assert any("skipped" in line and "a link" in line for line in lines)


def test_a_local_study_made_with_a_relative_runs_dir_reads_as_finished_and_cleans_only_its_own(
    tmp_path, monkeypatch, capsys
):
    """Issue 88: the local executor recorded a relative --runs-dir as given (relative to the folder it ran
    from) and status and --clean read it against the study folder: finished runs showed as pending,
    plan.json was blamed, and --clean freed nothing or another folder's checkpoints. Now every folder is
    recorded absolute, locally as on Slurm; an older study's relative entry is read against its own
    folder, and one that does not exist there is said."""
    from reproduce.plan import read_plan

    launch = tmp_path / "launch"
    launch.mkdir()
    monkeypatch.chdir(launch)
    argv = ["--figure", "3", "--sizes", "toy_s", "--ratios", "0.4", "--tasks", "sst2", "--out", "../study"]
    assert cli.main([*argv, "--runs-dir", "runs", "--stage", "analysis"]) == 2  # no records yet: stops there
    study = tmp_path / "study"
    recorded = yaml.safe_load((study / "reproduce.yaml").read_text())
    assert recorded["out"] == str(study) and recorded["runs_dir"] == str(launch / "runs")
    plan = read_plan(study)
    for run in plan.runs:
        _trained(run)
    decoy = study / "runs" / plan.runs[0].name / "checkpoints"  # where the old reading looked
    decoy.mkdir(parents=True)
    (decoy / "ba250-rank0.pt").write_bytes(b"x")
    (decoy.parent / "FINISHED.json").write_text("{}")
    (study / "timings.json").write_text("{}")
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert cli.main(["status", str(study)]) == 0
    shown = capsys.readouterr().out
    rows = [line.split() for line in shown.split("pretraining:")[1].split("fine-tuning")[0].splitlines()[3:] if line]
    assert {row[1] for row in rows} == {"finished"} and len(rows) == len(plan.runs), shown
    assert "planned again" not in shown
    assert cli.main(["--clean", "--out", str(study)]) == 0
    assert all(not (run.run_dir / "checkpoints").exists() for run in plan.runs) and (decoy / "ba250-rank0.pt").is_file()
    # an older study's relative runs_dir, read against its folder where nothing is: said in status
    text = (study / "reproduce.yaml").read_text().replace(f"runs_dir: {launch / 'runs'}", "runs_dir: lost-runs")
    (study / "reproduce.yaml").write_text(text)
    assert cli.main(["status", str(study)]) == 0
    assert f"runs_dir 'lost-runs' is relative, read against the study's folder as {study / 'lost-runs'}" in (
        capsys.readouterr().out
    )
