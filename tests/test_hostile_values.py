"""The hostile corpus's values (issue 78; tests/hostile.py): alias-bombed, recursive and deep YAML,
files that are FIFOs, devices or folders, malformed numbers in the environment and on the command
line, archives that declare more than they hold, ledgers too long in total, a moved study, a study
folder that shadows the packages, a gpu-check killed with -9. Each ends in one line, bounded."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests import hostile
from tests.test_hostile_corpus import no_hang

ROOT = Path(__file__).resolve().parents[1]
YAML_BOMBS = {"alias-bomb": hostile.ALIAS_BOMB, "recursive": hostile.RECURSIVE_YAML, "deep": hostile.DEEP_YAML}


# --- YAML -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", list(YAML_BOMBS))
def test_a_hostile_yaml_config_is_one_line_in_every_yaml_reader(case, tmp_path):
    from contracts.bounded import BoundedReadError, read_yaml
    from contracts.config import ConfigError, apply_overrides, load_config
    from pretraining.config import PretrainConfig as RunConfig
    from reproduce.cli import _yaml_mapping

    path = tmp_path / "run.yaml"
    path.write_text(YAML_BOMBS[case])
    readers = [
        (lambda: load_config(RunConfig, path), ConfigError),
        (lambda: read_yaml(path, 8 << 20), BoundedReadError),
        (lambda: apply_overrides({}, [f"loggers={YAML_BOMBS[case]}"]), ConfigError),
        (lambda: _yaml_mapping(YAML_BOMBS[case]), Exception),  # argparse.ArgumentTypeError
    ]
    for call, error in readers:
        with no_hang(60), pytest.raises(error) as caught:
            call()
        assert "\n" not in str(caught.value).strip() and len(str(caught.value)) < 2000


def test_an_alias_bomb_in_the_loggers_section_is_refused_before_the_secret_scan(tmp_path):
    """Issue 78: the `loggers:` secret scan walked the 387-million-node expansion for hours."""
    from contracts.config import ConfigError, load_config
    from pretraining.config import PretrainConfig as RunConfig

    path = tmp_path / "run.yaml"
    body = hostile.ALIAS_BOMB.replace("\n", "\n  ")
    path.write_text(f"name: x\nloggers:\n  {body}\n")
    with no_hang(60), pytest.raises(ConfigError, match="once its aliases are expanded"):
        load_config(RunConfig, path)


def test_yaml_anchors_of_ordinary_size_still_load():
    from contracts.bounded import load_yaml

    assert load_yaml("base: &b {lr: 1.0e-4, steps: 10}\nrun: *b\n") == {
        "base": {"lr": 1.0e-4, "steps": 10},
        "run": {"lr": 1.0e-4, "steps": 10},
    }


def test_error_messages_show_a_bounded_value():
    from contracts.config import ConfigError, config_from_dict
    from reproduce.plan import ReproduceConfig

    with pytest.raises(ConfigError) as caught:
        config_from_dict(ReproduceConfig, {"out": "x", "sizes": {"a": ["b" * 10_000] * 1000}})
    assert len(str(caught.value)) < 1000


# --- write_if_changed ------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["fifo", "dev-zero-link", "folder"])
def test_write_if_changed_reads_no_more_than_it_writes_and_refuses_what_is_not_a_file(kind, tmp_path):
    """Issue 78: a FIFO hung resubmit's remedy, a link to /dev/zero filled the memory."""
    from reproduce.plan import ReproduceError, write_if_changed

    path = tmp_path / "reproduce.yaml"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero-link":
        path.symlink_to("/dev/zero")
    else:
        path.mkdir()
    with no_hang(60):
        if kind == "dev-zero-link":  # a link is replaced by the file, its target never read
            write_if_changed(path, "study: masking\n")
            assert not path.is_symlink() and path.read_text() == "study: masking\n"
        else:
            with pytest.raises(ReproduceError, match="not a regular file"):
                write_if_changed(path, "study: masking\n")


# --- numbers ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", hostile.HOSTILE_NUMBERS)
def test_a_malformed_hub_setting_is_one_line_naming_the_variable(value, monkeypatch):
    from contracts.hub import HUB_SETTINGS, HubError, hub_setting

    for variable in HUB_SETTINGS:
        monkeypatch.setenv(variable, value)
        if value in ("1e400", "inf", "Infinity"):  # float() takes them: infinite, so refused as well
            pass
        with pytest.raises(HubError) as caught:
            hub_setting(variable)
        assert str(caught.value).startswith(f"environment variable {variable}=") and len(str(caught.value)) < 300


def test_the_file_deadline_is_capped_whatever_size_the_server_declares(monkeypatch):
    """Issue 78: a Hub declaring a 50 GB file got a 5.8-day deadline."""
    from contracts.hub import file_deadline

    assert file_deadline(50_000_000_000) == 86_400
    assert file_deadline(1_000_000) == 600 + 10
    monkeypatch.setenv("MLM_VS_CLM_HUB_MAX_DEADLINE", "3600")
    assert file_deadline(50_000_000_000) == 3600


def test_every_pretraining_command_starts_with_a_malformed_hub_variable():
    """Issue 78: MLM_VS_CLM_HUB_TIMEOUT=abc crashed every `python -m pretraining` command, --help
    included (read at import). The process boundary is what is tested: the environment at start-up."""
    env = {**os.environ, "MLM_VS_CLM_HUB_TIMEOUT": "abc", "MLM_VS_CLM_HUB_DEADLINE": "nan"}
    result = subprocess.run(
        [sys.executable, "-m", "pretraining", "--help"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0 and "Traceback" not in result.stderr


@pytest.mark.parametrize("seed", [str(2**32), "-1", "1e3", "99999999999999999999999"])
def test_a_seed_out_of_range_is_one_line(seed, cli):
    result = cli("benchmarks", "run", "--model", "m", "--task", "sst2", "--lr", "1e-5", "--seed", seed)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "--seed" in result.stderr.strip().splitlines()[-1]


def test_a_seed_out_of_range_in_a_config_is_refused():
    from benchmarks.run import RunConfig

    with pytest.raises(ValueError, match="seed must be between 0 and 4294967295"):
        RunConfig(model="m", task="sst2", lr=1e-5, seed=2**32)


# --- archives --------------------------------------------------------------------------------------
def test_a_checkpoint_that_declares_more_than_it_holds_is_refused_before_allocation(tmp_path):
    """Issue 78: a 6.6 MB checkpoint made torch allocate 4 GiB before the unpickler saw it. A
    compressed entry (torch.save never compresses) declaring 512 MiB in a few hundred kB."""
    from pretraining.export import CheckpointError, load_checkpoint_file

    path = tmp_path / "ba10-rank0.pt"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("archive/data.pkl", b"\x80\x02}q\x00.")
        with archive.open("archive/data/0", "w", force_zip64=True) as entry:
            block = bytes(1 << 20)
            for _ in range(512):
                entry.write(block)
    assert path.stat().st_size < 4 << 20
    with no_hang(60), pytest.raises(CheckpointError, match="refused before anything is allocated") as caught:
        load_checkpoint_file(path)
    assert "\n" not in str(caught.value)


# --- ledgers ---------------------------------------------------------------------------------------
def test_the_ledger_caps_task_ids_over_all_its_lines(tmp_path):
    """Issue 78: many lines of 100,000 task ids each exhausted memory (the cap was per line)."""
    from reproduce.slurm.ledger import LEDGER_FILE, MAX_ARRAY_TASKS, MAX_LEDGER_TASKS, read_ledger

    lines = MAX_LEDGER_TASKS // MAX_ARRAY_TASKS + 2
    path = tmp_path / LEDGER_FILE
    path.parent.mkdir(parents=True)
    row = {"job": "1", "kind": "finetune", "name": "m", "script": "f.sh", "tasks": f"0-{MAX_ARRAY_TASKS - 1}"}
    path.write_text("".join(json.dumps({**row, "job": str(i + 1)}) + "\n" for i in range(lines)))
    entries, bad = read_ledger(tmp_path)
    assert len(entries) == MAX_LEDGER_TASKS // MAX_ARRAY_TASKS and bad == 2


# --- a moved study ---------------------------------------------------------------------------------
def test_clean_on_a_moved_study_cleans_that_study_and_no_other(tmp_path, monkeypatch):
    """Issue 78: `reproduce --clean` resolved a moved study's recorded relative `out:` against the
    current folder: run from the checkout, it deleted another study's checkpoints."""
    import yaml

    from reproduce.housekeeping import clean_checkpoints
    from reproduce.plan import ReproduceConfig, build_plan, write_study_config

    def finished_study(folder: Path, recorded_out: str) -> Path:
        plan = build_plan(ReproduceConfig(out=str(folder), sizes=("toy_s",), ratios=(0.4,), clm=False))
        write_study_config(plan)
        run = plan.runs[0]
        (run.run_dir / "checkpoints").mkdir(parents=True)
        (run.run_dir / "checkpoints" / "ba10-rank0.pt").write_bytes(b"x" * 10)
        (run.run_dir / "FINISHED.json").write_text("{}")
        (run.run_dir / "config.yaml").write_text(yaml.safe_dump({"config": run.body()}))
        (folder / "reproduce.yaml").write_text(
            f"out: {recorded_out}\nstudy: masking\nscale: toy\nsizes: [toy_s]\nratios: [0.4]\nclm: false\n"
        )
        (folder / "timings.json").write_text("{}")
        return run.run_dir / "checkpoints"

    checkout = tmp_path / "checkout"
    other = finished_study(checkout / "outputs" / "masking", "outputs/masking")
    moved = finished_study(tmp_path / "elsewhere" / "masking", "outputs/masking")  # recorded before the move
    monkeypatch.chdir(checkout)
    clean_checkpoints(tmp_path / "elsewhere" / "masking", log=lambda line: None)
    assert not moved.exists() and (other / "ba10-rank0.pt").is_file()


def test_status_refuses_an_absolute_run_name_in_its_plan(tmp_path):
    """Issue 78: an absolute run name in the study index passed its check (runs / name is the name
    itself) and status showed a run outside the study; the same in plan.json (issue 79)."""
    from reproduce.plan import read_plan

    out = hostile.study_with_plan(tmp_path / "study", str(tmp_path / "other"), str(tmp_path / "other"))
    notes = []
    assert read_plan(out, notes) is None
    assert len(notes) == 1 and "an absolute name" in notes[0]


# --- processes -------------------------------------------------------------------------------------
def test_the_stage_packages_are_not_shadowed_by_a_study_folder(tmp_path):
    """Issue 78: run from inside a finished study (`cd outputs/masking`), its `pretraining/` folder
    was imported as the `pretraining` package. The project is installed so that the checkout's
    packages win (a path entry, not an import finder placed after the current folder's)."""
    study = tmp_path / "masking"
    for folder in ("pretraining/toy_s-mlm40-150/hf", "benchmarks", "analysis", "reproduce", "contracts"):
        (study / folder).mkdir(parents=True)
    code = "import analysis, benchmarks, contracts, pretraining, reproduce; print(pretraining.__file__)"
    found = subprocess.run([sys.executable, "-c", code], cwd=study, capture_output=True, text=True, timeout=300)
    assert found.returncode == 0 and found.stdout.strip() == str(ROOT / "pretraining" / "__init__.py"), found.stderr
    helped = subprocess.run(
        [sys.executable, "-m", "reproduce", "--help"], cwd=study, capture_output=True, text=True, timeout=300
    )
    assert helped.returncode == 0, helped.stderr


def test_a_child_started_with_dies_with_this_process_dies_on_kill_9_of_its_parent(tmp_path):
    """Issue 78: kill -9 of gpu-check left its step process running. The parent here starts a child
    as gpu-check starts its steps, prints the child's pid, and is killed with -9; the child's end is
    awaited as an event (a pidfd becoming readable), not slept on."""
    import select

    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys, time\n"
            "from contracts.processes import dies_with_this_process\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'],"
            " preexec_fn=dies_with_this_process())\n"
            "print(child.pid, flush=True)\n"
            "time.sleep(600)\n",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    child = int(parent.stdout.readline())
    pidfd = os.pidfd_open(child)
    try:
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        readable, _, _ = select.select([pidfd], [], [], 120)
        assert readable, "the child outlived its parent's kill -9"
    finally:
        os.close(pidfd)


def test_gpu_check_starts_every_process_so_that_it_dies_with_gpu_check():
    """Every Popen of gpu-check passes `dies_with_this_process` (the rule the test above checks)."""
    import ast

    for path in sorted((ROOT / "pretraining" / "gpu_check").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "subprocess.Popen":
                keywords = {k.arg: ast.unparse(k.value) for k in node.keywords}
                assert keywords.get("preexec_fn") == "dies_with_this_process()", f"{path.name}:{node.lineno}"


def test_pickled_weights_that_would_run_code_are_one_line_and_never_run(tmp_path):
    """Issue 78: a model folder whose pytorch_model.bin pickles a call ended in a 45-line traceback
    (torch's weights-only unpickler refused it; nothing ran). Now one line, and still nothing runs."""
    import pickle

    from benchmarks.kinds.checkpoint import ModelLoadError
    from benchmarks.kinds.common import load_backbone
    from tests.benchmarks.tiny import save_tiny_model

    folder = save_tiny_model(tmp_path / "model", "bert")
    for weights in list(Path(folder).glob("*.safetensors")):
        weights.unlink()
    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    import torch

    torch.save({"weights": Payload()}, Path(folder) / "pytorch_model.bin", pickle_module=pickle)
    with pytest.raises(ModelLoadError, match="weights-only unpickler") as caught:
        load_backbone(str(folder))
    assert "\n" not in str(caught.value) and not marker.exists()
