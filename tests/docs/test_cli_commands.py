"""Every `python -m <stage> ...` command in a shell block of README.md or docs/*.md parses with
that stage's CLI (issue 53, item 8): an unknown flag, a removed subcommand or a missing required
argument fails here, not in a user's terminal. Commands inside `apptainer run|exec IMAGE ...` are
parsed too. Shell variables become placeholder values; what follows a shell operator (|, &&, ;,
>, ...) is cut off. Blocks marked runnable also run (test_runnable_blocks.py)."""

from __future__ import annotations

import contextlib
import importlib
import io
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
STAGES = {
    "pretraining": "pretraining.__main__",
    "benchmarks": "benchmarks.__main__",
    "analysis": "analysis.cli",
    "paper_figures": "paper_figures.cli",
    "reproduce": "reproduce.cli",
}
SUBCOMMANDS = {  # (stage, first word) -> (module, its parser's builder)
    ("reproduce", "status"): ("reproduce.status", "build_parser"),
    ("reproduce", "resubmit"): ("reproduce.slurm.resubmit", "build_parser"),
    ("reproduce", "own-checkpoint"): ("reproduce.own_checkpoint", "build_parser"),
    ("reproduce", "budget"): ("reproduce.budget", "build_parser"),
    ("paper_figures", "compare"): ("paper_figures.cli", "build_compare_parser"),
}
SHELL_FENCES = ("```bash", "```sh", "```shell", "```console")
OPERATORS = {"|", "||", "&&", ";", "&", ">", ">>", "2>", "2>&1", "<", "\\"}
STAGE_COMMAND = re.compile(r"(?:python3?|\$PY|\$\(PY\)|\.venv/bin/python)\s+-m\s+(" + "|".join(STAGES) + r")\b")
IN_IMAGE = re.compile(r"apptainer\s+(?:run|exec)\b.*?\s(" + "|".join(STAGES) + r")\s")


def shell_commands(text: str) -> list[tuple[int, str]]:
    """(line, command) of each shell-block line, continuation lines joined."""
    out, lines, inside, pending, start = [], text.splitlines(), False, "", 0
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if stripped.startswith("```"):
            inside = not inside and stripped in SHELL_FENCES
            pending = ""
            continue
        if not inside:
            continue
        stripped = stripped.removeprefix("$ ")
        if not pending:
            start = number
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        out.append((start, pending + stripped))
        pending = ""
    return out


def stage_invocations(command: str) -> list[tuple[str, list[str]]]:
    """(stage, argv) of each stage CLI the command line calls."""
    found, seen = [], set()
    for pattern in (STAGE_COMMAND, IN_IMAGE):
        for match in pattern.finditer(command):
            if match.start(1) in seen:  # `apptainer exec IMAGE python -m STAGE`: matched by both
                continue
            seen.add(match.start(1))
            rest = command[match.end() :]
            rest = re.sub(r"\$\{?\w+\}?|\$\([^)]*\)", "X", rest)  # shell variables -> placeholders
            try:
                words = shlex.split(rest, comments=True)
            except ValueError:
                words = rest.split()
            argv = []
            for word in words:
                if word in OPERATORS or re.fullmatch(r"\d?>>?.*|<.*", word):
                    break
                argv.append(word)
            found.append((match.group(1), argv))
    return found


def _cases():
    for document in DOCUMENTS:
        for line, command in shell_commands(document.read_text()):
            for stage, argv in stage_invocations(command):
                yield pytest.param(stage, argv, id=f"{document.relative_to(ROOT)}:{line}")


CASES = list(_cases())


def test_the_docs_have_commands_to_check():
    assert len(CASES) >= 40
    # reproduce's commands are documented through make targets and its own walked docs/cluster.md
    assert {c.values[0] for c in CASES} >= set(STAGES) - {"reproduce"}


@pytest.mark.parametrize(("stage", "argv"), CASES)
def test_each_documented_command_parses(stage, argv):
    module, builder = STAGES[stage], "build_parser"
    if argv[:1] and (stage, argv[0]) in SUBCOMMANDS:  # `reproduce status OUT`, `paper_figures compare DIR`, ...
        (module, builder), argv = SUBCOMMANDS[(stage, argv[0])], argv[1:]
    parser = getattr(importlib.import_module(module), builder)()
    if not argv or argv[0] in ("-h", "--help"):
        return
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            parser.parse_args(argv)
        except SystemExit as exc:
            if exc.code:
                pytest.fail(f"python -m {stage} {shlex.join(argv)}: {err.getvalue().strip().splitlines()[-1]}")
