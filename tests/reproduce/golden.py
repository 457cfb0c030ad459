"""Golden outputs of the orchestrator (issue 79): what `python -m reproduce --dry-run` writes for the
toy and the paper DAG of Figure 3 (the sbatch scripts, submit.sh, the job lists, the configs), with
the folders that differ between machines replaced by placeholders, as {relative path: sha256}.
Recorded before reproduce/ was reorganised (tests/reproduce/golden/*.json); the test compares them
byte for byte after. `python -m tests.reproduce.golden` writes them again (only when a change of
behaviour is meant, and said in its commit)."""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path

import yaml

GOLDEN_DIR = Path(__file__).with_name("golden")
REPO = Path(__file__).resolve().parents[2]
# Lines that carry the moment or the machine of the writing, not what the study is.
VOLATILE = re.compile(r"^(\s*(written|git_sha|created|submitted|package_versions)\b|# written ).*$", re.M)
# Hashes of texts that hold the folders above (a config's hash, a script's sha256): what they hash is
# compared itself.
HASHES = re.compile(r"\b[0-9a-f]{16,64}\b")
TIMES = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?")


def normalised(text: str, folders: dict[str, str]) -> str:
    for folder, placeholder in sorted(folders.items(), key=lambda item: -len(item[0])):
        text = text.replace(folder, placeholder)
    return TIMES.sub("<time>", HASHES.sub("<hash>", VOLATILE.sub(r"\1<volatile>", text)))


def dry_run_outputs(tmp: Path, scale: str) -> dict[str, str]:
    """{path under the study folder: sha256 of its normalised text} of a Figure 3 dry run."""
    from reproduce import cli
    from reproduce.slurm import CONFIG_DIR
    from tests.reproduce.slurm_study import toy_cluster_body

    out = tmp / f"{scale}-study"
    if scale == "paper":
        cluster = CONFIG_DIR / "cluster.example.yaml"
    else:
        cluster = tmp / "cluster.yaml"
        cluster.write_text(yaml.safe_dump(toy_cluster_body(tmp, "debug")))
    argv = ["--figure", "3", "--scale", scale, "--out", str(out), "--dry-run", "--cluster", str(cluster)]
    if scale == "toy":
        argv.append("--no-container")
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()):  # the dry run prints the sbatch commands
        assert cli.main(argv) == 0
    folders = {str(out): "<OUT>", str(tmp): "<TMP>", str(REPO): "<REPO>", sys.executable: "<PYTHON>"}
    hashes = {}
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        text = normalised(path.read_text(errors="replace"), folders)
        hashes[str(path.relative_to(out))] = hashlib.sha256(text.encode()).hexdigest()
    return hashes


def golden_file(scale: str) -> Path:
    return GOLDEN_DIR / f"dag_{scale}_figure3.json"


STUDY_GOLDEN = GOLDEN_DIR / "toy_study_reduced.json"
# Durations, rates and clock times in status lines: the machine's, not the study's.
DURATIONS = re.compile(r"\b\d+(\.\d+)?\s?(ms|s|min|h|d|steps/s|tokens/s|it/s)\b|\b\d\d:\d\d(:\d\d)?\b")


def comparable_status(text: str) -> str:
    """`status` text with the fine-tuning table's `done` and `reused` columns summed: which of the two
    a run counts as depends on the study's history (a rerun reuses every record; the shared toy study
    is rerun by other tests), not on the orchestrator; the rest of the text is kept as it is."""
    lines, in_table = [], False
    for line in text.splitlines():
        words = line.split()
        if words[:3] == ["model", "done", "reused"]:
            in_table = True
            lines.append(" ".join(["model", "done+reused", *words[3:]]))
        elif in_table and len(words) >= 3 and words[1].isdigit() and words[2].isdigit():
            lines.append(" ".join([words[0], str(int(words[1]) + int(words[2])), *words[3:]]))
        else:
            in_table = in_table and bool(words)
            lines.append(line)
    return "\n".join(lines)


def study_outputs(out: Path) -> dict[str, str]:
    """The shared reduced toy study (tests/toy_study.py): `reproduce status` of it (normalised) and
    the sha256 of its cells.csv (the aggregated Figure 3 cells)."""
    import contextlib
    import io

    from reproduce import cli

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert cli.main(["status", str(out)]) == 0
    status = DURATIONS.sub("<t>", normalised(printed.getvalue(), {str(out): "<OUT>", str(REPO): "<REPO>"}))
    return {
        "status": status,
        "cells.csv": hashlib.sha256((out / "cells.csv").read_bytes()).hexdigest(),
    }


if __name__ == "__main__":
    import tempfile

    GOLDEN_DIR.mkdir(exist_ok=True)
    if sys.argv[1:2] == ["--study"]:  # the reduced toy study: about 5 minutes to build
        from tests.toy_study import build_toy_study

        with tempfile.TemporaryDirectory() as tmp:
            _, out, _, _ = build_toy_study(Path(tmp) / "study")
            STUDY_GOLDEN.write_text(json.dumps(study_outputs(out), indent=1, sort_keys=True) + "\n")
        print(f"{STUDY_GOLDEN}: written")
        sys.exit(0)
    for scale in ("toy", "paper"):
        with tempfile.TemporaryDirectory() as tmp:
            hashes = dry_run_outputs(Path(tmp), scale)
        golden_file(scale).write_text(json.dumps(hashes, indent=1, sort_keys=True) + "\n")
        print(f"{golden_file(scale)}: {len(hashes)} files")
