"""The repository's user-facing contract: layout, citation, CI entry and README commands."""

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent


def test_layout_has_the_pipeline_stages():
    for folder in [
        "container",
        "contracts",
        "benchmarks",
        "pretraining",
        "analysis",
        "paper_figures",
        "reproduce",
        "tests",
    ]:
        assert (ROOT / folder).is_dir(), folder
    for file in ["Makefile", "CITATION.cff", "README.md", "pyproject.toml", "requirements.lock"]:
        assert (ROOT / file).is_file(), file


def test_citation_cites_the_paper_and_the_software():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["type"] == "software"
    assert "2507.00994" in cff["preferred-citation"]["url"]


def test_ci_runs_both_tiers_then_the_linter():
    """`.ci/run` calls the README's test commands (the fast tier, then e2e), then `make lint`."""
    lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    order = [next(i for i, line in enumerate(lines) if line.startswith(step)) for step in TIER_STEPS]
    assert order == sorted(order), lines
    readme = (ROOT / "README.md").read_text()
    assert "make test" in readme and "make test-e2e" in readme


TIER_STEPS = ("tier test ||", "tier test-e2e ||", "make lint ||")


# What a stage's `--help` must not load (issue 77): these take seconds to import; torch only where
# a command trains, evaluates or loads a model.
HEAVY_MODULES = ("torch", "transformers", "composer", "streaming", "pandas", "scipy", "matplotlib", "sklearn")


@pytest.mark.parametrize("package", ["analysis", "paper_figures", "pretraining", "benchmarks", "reproduce"])
def test_every_stage_has_a_cli_whose_help_loads_no_heavy_library(package):
    """A process per stage: what a fresh interpreter imports is the boundary under test. Its time
    (at most 1.5 s on an idle core) is measured in docs/timings.md, not asserted here."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", package, "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, (package, result.stderr[-2000:])
    assert "usage" in result.stdout.lower()
    lines = [line for line in result.stderr.splitlines() if line.startswith("import time:")]
    imported = {line.rsplit("|", 1)[-1].strip() for line in lines}
    assert imported, "no -X importtime lines"
    assert not imported & set(HEAVY_MODULES), (package, sorted(imported & set(HEAVY_MODULES)))


def test_lock_pins_every_package_exactly():
    lines = [
        line for line in (ROOT / "requirements.lock").read_text().splitlines() if line and not line.startswith("#")
    ]
    assert lines and all("==" in line for line in lines)
    pins = dict(line.split("==") for line in lines)
    assert pins["torch"] == "2.7.0" and pins["mosaicml"] == "0.32.1"


def test_make_test_keeps_each_module_on_one_worker():
    """`make test` runs `-n 2 --dist loadgroup`: tests/conftest.py puts each module in its own
    xdist group, so a module fixture (e.g. the reduced reproduction, minutes) is built once. Broken
    silently twice before: by the hook order and by pytest 9.2 (pyproject.toml pins pytest<9.2)."""
    modules = ["tests/contracts/test_model_names.py", "tests/contracts/test_run_record.py"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v", "-p", "no:cacheprovider", *modules],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:]
    workers = {module: set() for module in modules}
    for line in done.stdout.splitlines():
        if " PASSED " in line and line.startswith("[gw"):
            node = line.split(" PASSED ")[1].strip()
            workers[node.split("::")[0]].add(line.split("]")[0])
    assert all(len(w) == 1 for w in workers.values()), workers
    assert sum("@tests.contracts.test_model_names" in line for line in done.stdout.splitlines()) > 1


def test_a_sites_cluster_config_is_never_committed():
    """docs/cluster.md has users copy the example to reproduce/configs/cluster.yaml and fill in their
    account and paths (issue 65): git ignores that file, not the example."""

    def ignored(path: str) -> bool:
        return subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=ROOT, check=False).returncode == 0

    assert ignored("reproduce/configs/cluster.yaml") and not ignored("reproduce/configs/cluster.example.yaml")
