"""A stand-in `wandb` package for the tests of the `loggers:` section (docs/watching.md): wandb is an
optional package, not in requirements.lock, so the wiring from a run config to Composer's WandBLogger
is checked through this module, which appends each call it gets as one JSON line to a file."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

FAKE_WANDB = '''
"""A stand-in for wandb: each call appended as one JSON line to $FAKE_WANDB_LOG."""
import json, os, types

def _write(kind, **fields):
    with open(os.environ["FAKE_WANDB_LOG"], "a") as f:
        f.write(json.dumps({"call": kind, **fields}, default=str) + "\\n")

run = None
config = types.SimpleNamespace(update=lambda values, **kw: _write("config", keys=sorted(values)))

class _Run:
    entity, project = "offline-entity", "offline-project"
    def __init__(self, dir):
        self.dir = dir
    def get_url(self):
        return None

def init(**kwargs):
    global run
    run = _Run(kwargs.get("dir"))
    _write("init", kwargs=kwargs)
    return run

def log(metrics, step=None, **kw):
    _write("log", step=step, metrics={k: float(v) for k, v in metrics.items()})

def finish(exit_code=0, **kw):
    _write("finish", exit_code=exit_code)
'''


def wandb_calls(tmp_path: Path) -> Path:
    """The file the stand-in of a test writes its calls to."""
    return tmp_path / "wandb_calls.jsonl"


@pytest.fixture
def fake_wandb(tmp_path, monkeypatch) -> Path:
    """The stand-in importable as `wandb` for this test (use it with pytest.mark.usefixtures);
    its calls go to wandb_calls(tmp_path)."""
    package = tmp_path / "fake_site" / "wandb"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(FAKE_WANDB)
    monkeypatch.syspath_prepend(str(package.parent))
    monkeypatch.setenv("FAKE_WANDB_LOG", str(wandb_calls(tmp_path)))
    sys.modules.pop("wandb", None)
    yield wandb_calls(tmp_path)
    sys.modules.pop("wandb", None)


def logged_metrics(tmp_path: Path) -> dict[str, dict[int, float]]:
    """{metric: {step: value}} of what the stand-in of a test was handed through wandb.log."""
    logged: dict[str, dict[int, float]] = {}
    for call in map(json.loads, wandb_calls(tmp_path).read_text().splitlines()):
        for key, value in call.get("metrics", {}).items() if call["call"] == "log" else ():
            logged.setdefault(key, {})[call["step"]] = value
    return logged
