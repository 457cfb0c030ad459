"""Every bash block of README.md and docs/*.md marked `<!-- runnable -->` (the line before its
opening fence) runs and exits 0; `<!-- runnable e2e -->` marks one that takes more than ~30 s
(the e2e tier, `make test-e2e`; tests/README.md). Blocks run with bash -euo pipefail in a scratch folder that links
the repository's top-level entries, so relative paths to the repository work and outputs (outputs/,
runs/, ...) land in the scratch folder."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MARK = "<!-- runnable -->"
SLOW_MARK = "<!-- runnable e2e -->"
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SCRATCH_EXCLUDES = {".git", "outputs", "runs", ".pytest_cache"}


class MarkError(ValueError):
    pass


def runnable_blocks(text: str, where: str) -> list[tuple[int, str, bool]]:
    """(line number, body, slow) of each block opened by ```bash right after a MARK or SLOW_MARK line."""
    lines, blocks = text.splitlines(), []
    for i, line in enumerate(lines):
        if line.strip() not in (MARK, SLOW_MARK):
            continue
        if i + 1 >= len(lines) or lines[i + 1].strip() != "```bash":
            raise MarkError(f"{where}:{i + 1}: {MARK} must be followed by a ```bash block")
        end = next((j for j in range(i + 2, len(lines)) if lines[j].strip() == "```"), None)
        if end is None:
            raise MarkError(f"{where}:{i + 2}: the ```bash block is never closed")
        blocks.append((i + 2, "\n".join(lines[i + 2 : end]) + "\n", line.strip() == SLOW_MARK))
    return blocks


def _all_blocks():
    return [
        pytest.param(body, id=f"{doc.relative_to(ROOT)}:{line}", marks=[pytest.mark.e2e] if slow else [])
        for doc in DOCUMENTS
        for line, body, slow in runnable_blocks(doc.read_text(), str(doc.relative_to(ROOT)))
    ]


def test_the_docs_mark_some_blocks_runnable():
    assert len(_all_blocks()) >= 4


def test_a_mark_must_open_a_bash_block():
    text = f"{MARK}\n```bash\necho hi\n```\n```bash\nnot marked\n```\n{SLOW_MARK}\n```bash\nsleep 1\n```\n"
    assert runnable_blocks(text, "x.md") == [(2, "echo hi\n", False), (9, "sleep 1\n", True)]
    with pytest.raises(MarkError, match="x.md:1: .* must be followed by a ```bash block"):
        runnable_blocks(f"{MARK}\n```\necho hi\n```\n", "x.md")


@pytest.mark.parametrize("body", _all_blocks())
def test_runnable_block(body, tmp_path):
    for entry in ROOT.iterdir():
        if entry.name not in SCRATCH_EXCLUDES:
            (tmp_path / entry.name).symlink_to(entry)
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "OMP_NUM_THREADS": "1",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", body], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, f"{body}\nstdout:\n{result.stdout[-3000:]}\nstderr:\n{result.stderr[-3000:]}"
