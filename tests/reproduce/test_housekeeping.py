"""One reproduce per output folder (an flock), and `make clean` (python -m reproduce --clean)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from reproduce import cli
from reproduce.housekeeping import LOCK_FILE, output_lock
from reproduce.plan import ReproduceConfig, ReproduceError, write_reproduce_config

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


def _study(root: Path, name: str, finished: bool) -> Path:
    out = root / name
    write_reproduce_config(ReproduceConfig(out=str(out)))
    for run, run_finished in (("toy_s-mlm40-42", True), ("toy_s-clm-42", False)):
        run_dir = out / "pretraining" / run
        (run_dir / "checkpoints").mkdir(parents=True)
        (run_dir / "checkpoints" / "ba42-rank0.pt").write_bytes(b"x" * 1000)
        (run_dir / "hf" / "step-42").mkdir(parents=True)
        (run_dir / "hf" / "step-42" / "model.safetensors").write_bytes(b"w" * 10)
        if run_finished:
            (run_dir / "FINISHED.json").write_text("{}")
    if finished:
        (out / "timings.json").write_text(json.dumps({"seconds": {}}))
    return out


def test_clean_removes_only_resume_checkpoints_of_finished_runs_of_finished_studies(tmp_path, capsys):
    done, running = _study(tmp_path, "masking", True), _study(tmp_path, "cpt", False)
    assert cli.main(["--clean", "--out-root", str(tmp_path)]) == 0
    assert "freed 0.0 MB" in capsys.readouterr().out  # 1000 bytes
    assert not (done / "pretraining" / "toy_s-mlm40-42" / "checkpoints").exists()
    assert (done / "pretraining" / "toy_s-mlm40-42" / "hf" / "step-42" / "model.safetensors").is_file()
    assert (done / "pretraining" / "toy_s-clm-42" / "checkpoints" / "ba42-rank0.pt").is_file()  # unfinished run
    assert (running / "pretraining" / "toy_s-mlm40-42" / "checkpoints" / "ba42-rank0.pt").is_file()
    assert cli.main(["--clean", "--out", str(done)]) == 0  # one study folder; nothing left to remove
