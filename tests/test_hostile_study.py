"""The hostile corpus of a whole study (issue 88; tests/hostile.py has the names, tests/test_hostile_corpus.py
the readers): every command that changes a study (a same-study dry run, resubmit, --force, --clean,
status's PNG, the analysis stage) against a study folder with a link in each of its fixed sub-folders,
a linked ledger, a forged plan.json (its digest made again), a stale plan.json of another study and a
relative recorded runs folder. Each case asserts: exit 0 or one line on stderr with exit 2, never a
traceback; every victim file outside the study (what the links point at) unchanged, hashed before and
after; and a command that would write through a link refuses, naming it.

The study is a toy Slurm study (dry run, its ledger, a finished run with its checkpoints, a finished
marker); Slurm is the stand-ins of tests/reproduce/test_slurm_team.py."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest
import yaml

from reproduce import cli
from reproduce.plan.inventory import LEDGER, STUDY_FOLDERS
from tests import hostile
from tests.reproduce.slurm_study import toy_cluster_body
from tests.reproduce.test_slurm_team import _argv, _queued_by_alice, _slurm_here

CASES = [f"link:{folder}" for folder in STUDY_FOLDERS] + ["link:ledger", "forged-plan", "stale-plan", "relative-runs"]
COMMANDS = ["dry-run", "resubmit", "force", "clean", "status", "analysis"]
# the commands that write into the study's fixed sub-folders (each refuses a link on its way)
WRITES = {
    "dry-run": set(STUDY_FOLDERS) - {"status", "tables", "audit", "figure", "claims"} | {"ledger"},
    "resubmit": {"slurm", "ledger"},
    "force": set(STUDY_FOLDERS) | {"ledger"},  # every path of the old study moves
    "status": {"status"},
    "analysis": set(STUDY_FOLDERS) - {"slurm", "status"},
}


def _finished_study(root: Path) -> None:
    """A submitted, finished toy Slurm study in root/out, its runs and data folders beside it, its
    cluster file root/cluster.yaml."""
    cluster = root / "cluster.yaml"
    cluster.write_text(yaml.safe_dump(toy_cluster_body(root, "debug")))
    out = root / "out"
    with contextlib.redirect_stdout(io.StringIO()):
        assert cli.main(_argv(out, cluster, "--dry-run")) == 0
    _queued_by_alice(out)
    from reproduce.plan import read_plan

    run = read_plan(out).runs[0]
    (run.run_dir / "checkpoints").mkdir(parents=True)
    (run.run_dir / "checkpoints" / "ba8-rank0.pt").write_bytes(b"x" * 100)
    (run.run_dir / "config.yaml").write_text(yaml.safe_dump({"config": run.body()}))
    (run.run_dir / "loss.jsonl").write_text(json.dumps({"step": 1, "loss": 5.0, "tokens": 80, "seconds": 1.0}) + "\n")
    (run.run_dir / "FINISHED.json").write_text("{}")
    (out / "timings.json").write_text(json.dumps({"seconds": {}}))


def _victims(root: Path) -> Path:
    """Files a link could lead a write, move or delete to: one folder per link target."""
    victims = root / "victims"
    for name in [*STUDY_FOLDERS, "runs"]:
        (victims / name).mkdir(parents=True)
        (victims / name / "victim.txt").write_text(f"the user's own {name} file\n")
    (victims / "ledger.jsonl").write_text('{"job": "1", "kind": "data", "name": "data", "script": "data.sbatch"}\n')
    hostile.plant_victims(victims)
    return victims


def _apply(case: str, root: Path, out: Path, victims: Path) -> None:
    if case.startswith("link:"):
        name = case.split(":", 1)[1]
        place = out / LEDGER if name == "ledger" else out / name
        if place.exists():
            shutil.rmtree(place) if place.is_dir() else place.unlink()
        target = victims / ("ledger.jsonl" if name == "ledger" else name)
        place.symlink_to(target, target_is_directory=target.is_dir())
    elif case == "forged-plan":
        hostile.forge_plan(
            out,
            lambda body: body.update(
                runs=[], inventory=[item for item in body["inventory"] if item["what"] != "pretraining run"]
            ),
        )
    elif case == "stale-plan":  # the plan.json of another study whose runs folder is the victims'
        from reproduce.plan import ReproduceConfig, build_plan
        from reproduce.plan.study_plan import plan_to_json

        other = build_plan(ReproduceConfig(out=str(out), sizes=("toy_s",), runs_dir=str(victims / "runs")))
        (out / "plan.json").write_text(plan_to_json(other, "another reproduce.yaml"))
    elif case == "relative-runs":  # an older study's relative runs folder: read against the study
        config = out / "reproduce.yaml"
        config.write_text(config.read_text().replace(f"runs_dir: {root / 'runs'}", "runs_dir: runs"))


def _run(command: str, out: Path, cluster: Path) -> tuple[int, str]:
    argv = {
        "dry-run": _argv(out, cluster, "--dry-run"),
        "resubmit": ["resubmit", str(out)],
        "force": _argv(out, cluster, "--seeds", "1", "--force"),
        "clean": ["--clean", "--out", str(out)],
        "status": ["status", str(out)],
        "analysis": ["--config", str(out / "reproduce.yaml"), "--stage", "analysis"],
    }[command]
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = cli.main(argv)
    return code, err.getvalue()


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("command", COMMANDS)
def test_a_command_that_changes_a_study_leaves_everything_outside_it_as_it_was(tmp_path, monkeypatch, case, command):
    root = tmp_path / "world"
    root.mkdir()
    _finished_study(root)
    out, cluster = root / "out", root / "cluster.yaml"
    jobs = _queued_by_alice(tmp_path / "scratch")  # the ledger's jobs, all ended by now
    _slurm_here(tmp_path, monkeypatch, [job | {"state": "COMPLETED", "reason": ""} for job in jobs], sbatch=True)
    victims = _victims(tmp_path)
    _apply(case, root, out, victims)
    before = hostile.snapshot(victims)
    with hostile_no_hang():
        code, err = _run(command, out, cluster)
    assert hostile.snapshot(victims) == before, f"{command} changed a file outside the study ({case})"
    assert "Traceback" not in err and code in (0, 2), err
    if code == 2:
        assert len(err.strip().splitlines()) == 1, err
    name = case.split(":", 1)[1] if case.startswith("link:") else None
    if name in WRITES.get(command, ()):
        assert code == 2 and "a link" in err, f"{command} wrote through {case}: {err or 'exit 0'}"


@contextlib.contextmanager
def hostile_no_hang(seconds: float = 120):
    from tests.test_hostile_corpus import no_hang

    with no_hang(seconds):
        yield
