"""Test-wide settings: everything offline and headless, as on CI (no hub, no display)."""

import atexit
import os
import shutil
import tempfile

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Model code that tests load with trust_remote_code is copied into this session's own folder,
# not ~/.cache, where concurrent sessions with different code would overwrite each other's copies.
if "HF_MODULES_CACHE" not in os.environ:
    os.environ["HF_MODULES_CACHE"] = tempfile.mkdtemp(prefix="hf_modules_")
    atexit.register(shutil.rmtree, os.environ["HF_MODULES_CACHE"], ignore_errors=True)


@pytest.fixture
def cli(capsys, monkeypatch):
    """`cli(STAGE, *argv, cwd=..., env=...)`: `python -m STAGE ARGV` in this process, with its
    stdout, stderr and exit code (tests/cli_runner.py)."""
    from tests.cli_runner import CliRunner

    return CliRunner(capsys, monkeypatch)


@pytest.fixture(scope="session")
def toy_study(tmp_path_factory):
    """(config, out, timings, log lines) of the reduced toy reproduction, built once per run and never
    changed: a test that changes it works on tests.toy_study.copy_toy_study (tests/toy_study.py)."""
    from tests.toy_study import build_toy_study

    return build_toy_study(tmp_path_factory.mktemp("toy-study"))


# The local single-node Slurm cluster fixture (`local_slurm`), usable by tests in any folder.
pytest_plugins = ["tests.slurm.cluster"]


def _needs_slurm(item) -> bool:
    return "local_slurm" in getattr(item, "fixturenames", ()) or item.get_closest_marker("slurm") is not None


# tryfirst: pytest-xdist reads the xdist_group marks in its own collection hook (it suffixes each
# node id with its group); a conftest hook that runs after it would group nothing. pytest 9.2 breaks
# that suffix too (pyproject.toml pins pytest<9.2); tests/test_repository.py checks the grouping.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (`make test`: `-n 2 --dist loadgroup`) every module stays on one worker, so
    its module fixtures (e.g. a reduced reproduction) are built once. The modules that start the
    local Slurm cluster (one cluster per session, one such test at a time) share one worker, and
    those that launch several training ranks another: the two groups run beside each other, each
    behind the other tier's modules (issue 77: one group of both was 33 of the e2e tier's minutes on
    one worker). (A Slurm job of ranks that failed with "Connection reset by peer", once blamed on
    another worker's ranks, was a second rendezvous on one port: docs/pretraining.md, "Several ranks
    and nodes".)"""
    for item in items:  # the two tiers (tests/README.md): Slurm and launched ranks are always end to end
        if _needs_slurm(item) or item.get_closest_marker("multiprocess"):
            item.add_marker(pytest.mark.e2e)
    if not config.pluginmanager.hasplugin("xdist"):
        return
    slurm = {item.module.__name__ for item in items if _needs_slurm(item)}
    ranks = {item.module.__name__ for item in items if item.get_closest_marker("multiprocess")} - slurm
    studies = {item.module.__name__ for item in items if "toy_study" in getattr(item, "fixturenames", ())}
    for item in items:
        module = item.module.__name__
        group = "slurm" if module in slurm else "ranks" if module in ranks else module
        if group == module and module in studies:
            group = "toy-study"  # one build of the session's toy study (tests/toy_study.py)
        item.add_marker(pytest.mark.xdist_group(group))
