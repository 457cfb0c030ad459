"""Every command line entry point that reads a file or folder, given the hostile corpus's files
(issue 78, item 4; tests/hostile.py): a FIFO, a link to /dev/zero, a folder where a file belongs, a
file where a folder belongs, a YAML alias bomb, a missing path. Each ends in one line on stderr
naming the path, exit status 2, no traceback, no hang, and nothing written beside it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests import hostile
from tests.test_hostile_corpus import no_hang

# (stage, argv with {path} for the input under test, what the input is)
ENTRY_POINTS = {
    "pretraining-train": ("pretraining", ["train", "{path}"], "file"),
    "pretraining-verify-data": ("pretraining", ["verify-data", "{path}"], "folder"),
    "pretraining-export": ("pretraining", ["export", "{path}", "{sandbox}/exported"], "file"),
    "pretraining-prepare-data-config": (
        "pretraining",
        ["prepare-data", "--out", "{sandbox}/p", "--config", "{path}"],
        "file",
    ),
    "pretraining-fetch-model-check": ("pretraining", ["fetch-model", "--check", "{path}"], "folder"),
    "benchmarks-run-model": (
        "benchmarks",
        ["run", "--model", "{path}", "--task", "sst2", "--lr", "1e-5", "--seed", "0", "--out", "{sandbox}/runs"],
        "folder",
    ),
    "benchmarks-job": ("benchmarks", ["job", "--jobs", "{path}", "--group", "finetune", "--index", "0"], "file"),
    "benchmarks-score": ("benchmarks", ["score", "sst2", "{path}", "{path}"], "file"),
    "benchmarks-export-st": ("benchmarks", ["export-st", "{path}", "{sandbox}/st"], "folder"),
    "analysis-table": ("analysis", ["table", "{path}"], "file"),
    "paper-figures-runs": (
        "paper_figures",
        ["figure3", "--source", "runs", "--runs", "{path}", "--out", "{sandbox}/fig"],
        "file",
    ),
    "reproduce-config": ("reproduce", ["--config", "{path}", "--dry-run"], "file"),
    "reproduce-status": ("reproduce", ["status", "{path}"], "folder"),
    "reproduce-resubmit": ("reproduce", ["resubmit", "--dry-run", "{path}"], "folder"),
    "analysis-import-released": ("analysis", ["import-released", "-o", "{sandbox}/runs.jsonl", "{path}"], "folder"),
    "analysis-claims-released": ("analysis", ["claims", "--released", "{path}", "--reps", "10"], "folder"),
    "analysis-claims-doc": ("analysis", ["claims-doc", "{path}"], "file"),  # issue 88: it read the page whole
}
# Check commands answer "the input fails the check" with exit 1 (as `verify-data` and `fetch-model
# --check` document in their help); every other command exits 2 on bad input.
CHECKS = {"pretraining-verify-data", "pretraining-fetch-model-check"}
KINDS = ["fifo", "dev-zero-link", "wrong-kind", "alias-bomb", "missing"]
# A folder input given a file: its YAML bomb is only text to it (covered by "wrong-kind").
NOT_APPLICABLE = {(name, "alias-bomb") for name, (_, _, what) in ENTRY_POINTS.items() if what == "folder"}


def make_input(kind: str, what: str, sandbox: Path) -> Path:
    path = sandbox / ("input.yaml" if what == "file" else "input")
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero-link":
        path.symlink_to("/dev/zero")
    elif kind == "wrong-kind":
        path.mkdir() if what == "file" else path.write_text("not a folder\n")
    elif kind == "alias-bomb":
        path.write_text(hostile.ALIAS_BOMB)
    return path


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_every_entry_point_refuses_a_hostile_input_in_one_line(entry, kind, tmp_path, cli):
    if (entry, kind) in NOT_APPLICABLE:
        pytest.skip("a folder input: an alias bomb is only a file to it (the wrong-kind case)")
    stage, template, what = ENTRY_POINTS[entry]
    sandbox = tmp_path / "sandbox"
    sandbox.mkdir()
    hostile.plant_victims(sandbox)
    path = make_input(kind, what, sandbox)
    argv = [a.format(path=path, sandbox=sandbox) for a in template]
    before = hostile.snapshot(sandbox)
    with no_hang():
        result = cli(stage, *argv, cwd=sandbox)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == (1 if entry in CHECKS else 2), result.stderr[-2000:]
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    assert lines and str(path.name) in lines[-1] and len(lines[-1]) < 1000, result.stderr[-2000:]
    after = hostile.snapshot(sandbox)
    assert {k: v for k, v in after.items() if k in before} == before  # nothing changed or removed
