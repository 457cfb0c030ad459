"""Issue 53, item 3: a login node's old python3 (RHEL 8: 3.6) is refused by `make setup` and
`make container` in one line naming the minimum, before a virtual environment is created (it
failed late, inside pip or on the first f-string)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OLD_PYTHON = """#!/bin/sh
# a stand-in for Python 3.6: fails the version check, prints its version
case "$2" in
  *version_info*) exit 1 ;;
  *) echo 3.6.8 ;;
esac
"""


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
@pytest.mark.parametrize("target", ["setup", "container"])
def test_an_old_login_python_is_refused_in_one_line(tmp_path, target):
    python = tmp_path / "python3.6"
    python.write_text(OLD_PYTHON)
    python.chmod(0o755)
    venv = tmp_path / "venv"
    result = subprocess.run(
        ["make", "-s", target, f"PYTHON={python}", f"VENV={venv}"], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 2
    first = result.stderr.splitlines()[0]
    assert first == (
        f"make: {python} is Python 3.6.8; the project needs Python >= 3.10: pass PYTHON=python3.11 "
        "(on a cluster, e.g. after module load python/3.11)"
    )
    assert not venv.exists() and not (ROOT / ".venv-container" / "bin" / "python3.6").exists()


def test_the_minimum_is_the_projects():
    """The Makefile's minimum is pyproject's requires-python."""
    makefile = (ROOT / "Makefile").read_text()
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert "PYTHON_MIN := 3.10" in makefile and 'requires-python = ">=3.10"' in pyproject
