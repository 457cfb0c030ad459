"""Call a stage's command line in this process (issue 77): the same parser, the same one-line error
mapping (contracts.cli.run_command, under each stage's `main`) and the same exit codes as `python -m
STAGE ...`, without the 8-11 s a new interpreter spends importing torch, transformers and Composer.

Use the `cli` fixture (tests/conftest.py):

    result = cli("analysis", "table", "runs.jsonl")
    assert result.returncode == 2 and "runs.jsonl" in result.stderr

Where the process boundary is what a test checks (imports, signals, exit status of the
interpreter, environment read at start-up), it starts a process instead; each stage keeps at least
one such test (tests/README.md).
"""

from __future__ import annotations

import importlib
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

# What `python -m STAGE` runs: the function its __main__ calls.
STAGE_MAINS = {
    "pretraining": "pretraining.__main__",
    "benchmarks": "benchmarks.__main__",
    "analysis": "analysis.cli",
    "paper_figures": "paper_figures.cli",
    "reproduce": "reproduce.cli",
}


@dataclass(frozen=True)
class CliResult:
    """The fields of subprocess.CompletedProcess that tests read."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str

    def check_returncode(self) -> None:
        if self.returncode:
            raise subprocess.CalledProcessError(self.returncode, self.args, self.stdout, self.stderr)


class CliRunner:
    """Runs `python -m STAGE ARGV` in-process; capture through pytest's capsys."""

    def __init__(self, capsys, monkeypatch):
        self._capsys, self._monkeypatch = capsys, monkeypatch

    def __call__(self, stage: str, *argv, cwd: str | os.PathLike | None = None, env: dict | None = None) -> CliResult:
        if stage not in STAGE_MAINS:
            raise ValueError(f"unknown stage {stage!r}; one of {', '.join(STAGE_MAINS)}")
        argv = [str(a) for a in argv]
        main = importlib.import_module(STAGE_MAINS[stage]).main
        self._capsys.readouterr()  # what the test printed before is not this command's output
        with self._monkeypatch.context() as patch:
            if cwd is not None:
                patch.chdir(Path(cwd))
            for name, value in (env or {}).items():
                if value is None:
                    patch.delenv(name, raising=False)
                else:
                    patch.setenv(name, str(value))
            patch.setenv("MPLBACKEND", "Agg")
            try:
                code = main(argv)
            except SystemExit as exc:  # argparse: --help (0) and usage errors (2)
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        out, err = self._capsys.readouterr()
        return CliResult(["python", "-m", stage, *argv], int(code or 0), out, err)
