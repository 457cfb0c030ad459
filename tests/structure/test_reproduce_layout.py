"""reproduce/'s layout (issue 79): the Slurm side in its own folder, no file over 600 lines."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 600


def test_no_file_of_reproduce_is_over_600_lines():
    long = {
        str(path.relative_to(ROOT)): n
        for path in sorted((ROOT / "reproduce").rglob("*.py"))
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert not long, long


def test_the_slurm_side_is_one_folder():
    slurm = {p.name for p in (ROOT / "reproduce" / "slurm").glob("*.py")}
    assert {
        "cluster.py",
        "jobs.py",
        "writer.py",
        "ledger.py",
        "resubmit.py",
        "preflight.py",
        "cost.py",
        "view.py",
    } <= slurm
    flat = {p.name for p in (ROOT / "reproduce").glob("*.py")}
    assert not flat & {"slurm.py", "ledger.py", "resubmit.py", "preflight.py", "cost.py"}
