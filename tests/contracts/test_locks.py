"""One job per output folder (contracts.locks): a second `pretraining train` of a live run_dir, or a
second `benchmarks run` of a live run, refuses in one line naming the folder and the holder's pid,
and touches nothing (docs/reliability.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from contracts.locks import LOCK_FILE, FolderInUse, folder_lock

ROOT = Path(__file__).resolve().parents[2]
HOLD = (
    "import sys; from pathlib import Path; from contracts.locks import folder_lock\n"
    "with folder_lock(Path(sys.argv[1])):\n    print('held', flush=True); sys.stdin.read()"
)


@pytest.fixture
def held(tmp_path):
    """Hold a folder's lock from another process (as a live job does) until the test ends."""
    holders = []

    def hold(folder: Path) -> int:
        argv = [sys.executable, "-c", HOLD, str(folder)]
        holder = subprocess.Popen(argv, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        holders.append(holder)
        assert holder.stdout.readline().strip() == "held"
        return holder.pid

    def kill(pid: int) -> None:
        """kill -9 and wait until the holder is gone (its flock is released at exit, not at the signal)."""
        (holder,) = [h for h in holders if h.pid == pid]
        subprocess.run(["kill", "-9", str(pid)], check=True)
        holder.wait()

    hold.kill = kill

    yield hold
    for holder in holders:
        holder.kill()
        holder.wait()


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_the_lock_is_refused_while_held_removed_after_and_free_once_its_holder_is_killed(tmp_path, held):
    folder = tmp_path / "run"
    pid = held(folder)
    with pytest.raises(FolderInUse, match=f"{folder} is in use by another job \\(pid {pid} on "):
        with folder_lock(folder):
            pass
    held.kill(pid)  # released by the kernel, even on kill -9
    with folder_lock(folder) as lock:
        assert lock.read_text().startswith("pid ")
    assert not (folder / LOCK_FILE).exists()  # the lock file of a finished job is removed


def test_a_job_that_fails_before_writing_leaves_no_folder_behind(tmp_path):
    folder = tmp_path / "new" / "run"
    with pytest.raises(ValueError), folder_lock(folder):
        raise ValueError("bad input found after taking the lock")
    assert not folder.exists()


def test_a_second_train_of_a_live_run_dir_refuses_and_touches_nothing(tmp_path, held, capsys):
    from pretraining.__main__ import main

    run_dir = tmp_path / "run"
    (run_dir / "checkpoints").mkdir(parents=True)
    (run_dir / "checkpoints" / "ba8-rank0.pt").write_bytes(b"the live run's checkpoint")
    (run_dir / "loss.jsonl").write_text('{"step": 1}\n')
    config = tmp_path / "toy.yaml"
    config.write_text(
        yaml.safe_dump({"name": "toy", "run_dir": str(run_dir), "tokenizer": "embedded", "data": {"path": "x"}})
    )
    pid = held(run_dir)
    before = _snapshot(run_dir)
    assert main(["train", str(config)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{run_dir} is in use by another train (pid {pid} on" in err[0], err
    assert _snapshot(run_dir) == before


def test_a_second_benchmarks_run_never_clears_a_live_runs_folder(tmp_path, held, capsys):
    from benchmarks.__main__ import main
    from benchmarks.datasets import TOY_DATA_ROOT
    from contracts.layout import finetune_run_dir
    from tests.benchmarks.tiny import save_tiny_model

    model = save_tiny_model(tmp_path / "bert", "bert")
    run_dir = finetune_run_dir(tmp_path / "out", "bert", "sst2", 1e-3, 0)
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text("the live run's config\n")
    pid = held(run_dir)
    before = _snapshot(run_dir)
    argv = ["run", "--model", str(model), "--task", "sst2", "--lr", "1e-3", "--seed", "0"]
    argv += ["--data-root", str(TOY_DATA_ROOT), "--out", str(tmp_path / "out"), "--max-steps", "1"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{run_dir} is in use by another benchmarks run (pid {pid} on" in err[0], err
    assert _snapshot(run_dir) == before


@pytest.mark.parametrize(
    "kind", ["link", "dangling link", "device link", "hard link", "folder", "fifo", "folder is a file"]
)
def test_a_lock_path_that_is_not_our_plain_file_is_refused_and_nothing_is_written_through_it(tmp_path, kind):
    """Issue 56: the lock was opened with open("a+"), which follows a link, then truncated: a
    `.lock -> victim.txt` overwrote the victim; a folder, FIFO or device gave a raw OSError."""
    import os

    from contracts.locks import BadLockFile

    folder = tmp_path / "run"
    folder.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    lock = folder / LOCK_FILE
    if kind == "link":
        lock.symlink_to(victim)
    elif kind == "dangling link":
        lock.symlink_to(tmp_path / "nowhere")
    elif kind == "device link":
        lock.symlink_to("/dev/zero")
    elif kind == "hard link":  # issue 66: the victim was overwritten with the holder line
        os.link(victim, lock)
    elif kind == "folder":
        lock.mkdir()
    elif kind == "fifo":
        os.mkfifo(lock)
    else:
        folder.rmdir()
        folder.write_text("a file")
    with pytest.raises(BadLockFile) as caught:
        with folder_lock(folder):
            pytest.fail("the lock was taken")
    message = str(caught.value)
    assert "\n" not in message and str(folder) in message
    if kind == "hard link":
        assert "(a hard link: 2 names for one file): remove it and rerun" in message
    assert victim.read_text() == "precious\n"
    assert not (tmp_path / "nowhere").exists()
    if kind != "folder is a file":
        assert lock.is_symlink() or lock.exists()  # left for the user to look at, not removed


@pytest.mark.skipif(__import__("os").geteuid() != 0, reason="chown to another user needs root")
def test_a_teammates_lock_file_is_usable_when_the_group_may_write_it(tmp_path):
    """Issue 89: lock files were made 0644 whatever the umask and another user's was always refused, so a
    lock left by a killed job of one member blocked the others' jobs. A group-writable one of one of our
    groups is usable (flock died with its holder); another user's private one is still refused."""
    import os
    import pwd

    from contracts.locks import BadLockFile

    stranger = pwd.getpwnam("nobody").pw_uid
    folder = tmp_path / "run"
    folder.mkdir()
    lock = folder / LOCK_FILE
    lock.write_text("pid 1 on elsewhere since 2026-11-29T00:00:00Z\n")
    os.chown(lock, stranger, os.getgid())
    lock.chmod(0o664)
    with folder_lock(folder):
        pass
    lock.write_text("left\n")
    os.chown(lock, stranger, os.getgid())
    lock.chmod(0o644)
    with pytest.raises(BadLockFile, match="another user's file"):
        with folder_lock(folder):
            pytest.fail("another user's private lock file was taken")
    previous = os.umask(0o002)
    try:
        with folder_lock(tmp_path / "fresh") as made:
            assert made.stat().st_mode & 0o777 == 0o664  # 0o666 under the umask, not a fixed 0644
    finally:
        os.umask(previous)
