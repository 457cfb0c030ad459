"""tests/suite_profile.py (issue 64): the suite's time by kind, file and test, from a pytest run."""

import json
import re
from pathlib import Path

from tests import suite_profile


def test_kinds_follow_markers_launches_and_folders():
    assert suite_profile.kind_of("tests/slurm/test_x.py::t", set(), 0) == "Slurm"
    assert suite_profile.kind_of("tests/reproduce/test_x.py::t", {"slurm"}, 3) == "Slurm"
    assert suite_profile.kind_of("tests/pretraining/test_x.py::t", {"multiprocess"}, 2) == "multi-rank"
    assert suite_profile.kind_of("tests/pretraining/test_x.py::t", set(), 1) == "subprocess"
    assert suite_profile.kind_of("tests/pretraining/test_x.py::t", set(), 0) == "real pretraining"
    assert suite_profile.kind_of("tests/analysis/claims/test_simulation.py::t", set(), 0) == "simulation"
    assert suite_profile.kind_of("tests/analysis/test_audit.py::t", set(), 0) == "in-process"


def test_a_profiled_run_counts_each_tests_launches_and_time(tmp_path, capsys):
    """The docs' command on a two-test file, with two xdist workers: one test starts a process."""
    (tmp_path / "test_two.py").write_text(
        "import subprocess, sys, time\n"
        "def test_launch():\n    subprocess.run([sys.executable, '-c', 'pass'], check=True)\n"
        "def test_plain():\n    time.sleep(0.01)\n"
    )
    out, md = tmp_path / "records", tmp_path / "profile.md"
    # docs/timings.md's command, on this folder instead of tests/ and with its outputs here
    timings = (Path(__file__).resolve().parents[1] / "docs" / "timings.md").read_text()
    documented = re.search(r"^python -m tests\.suite_profile (.*)$", timings, re.MULTILINE).group(1).split()
    assert documented[-1] == "tests" and documented[documented.index("--out") + 1] == "outputs/suite_profile"
    argv = [
        str(out) if a == "outputs/suite_profile" else str(md) if a == "outputs/suite_profile.md" else a
        for a in documented
    ]
    argv = argv[:-1] + ["-p", "no:cacheprovider", str(tmp_path)]
    assert suite_profile.main(argv) == 0
    rows = {r["nodeid"].split("::")[1]: r for r in suite_profile.read_rows(out)}
    assert rows["test_launch"]["launches"] == 1 and rows["test_launch"]["kind"] == "subprocess"
    assert rows["test_plain"]["launches"] == 0 and rows["test_plain"]["kind"] == "in-process"
    assert rows["test_plain"]["seconds"] >= 0.01
    assert len(list(out.glob("*.jsonl"))) >= 1 and all(
        json.loads(line) for line in out.glob("*.jsonl").__next__().read_text().splitlines()
    )
    text = md.read_text()
    assert "| subprocess | 1 |" in text and "| in-process | 1 |" in text and "test_two.py::test_launch" in text
    assert "| worker | minutes |" in text and "| xdist group (one worker each) | tests | minutes |" in text
    assert {r["worker"] for r in rows.values()} <= {"gw0", "gw1"}
    # the summary again from the records alone; no records is a one-line error
    assert suite_profile.main(["--out", str(out), "--report-only"]) == 0
    assert suite_profile.main(["--out", str(tmp_path / "none"), "--report-only"]) == 2
    assert capsys.readouterr().err.startswith("error: no test records in ")


def test_the_tier_table_floors_each_selection_by_its_time_over_the_workers_and_its_largest_group():
    rows = [
        {"nodeid": "a.py::t1@slurm-and-ranks", "seconds": 600.0, "markers": ["e2e", "slurm"]},
        {"nodeid": "a.py::t2@slurm-and-ranks", "seconds": 300.0, "markers": ["e2e", "multiprocess"]},
        {"nodeid": "b.py::t@b", "seconds": 120.0, "markers": ["e2e"]},
        {"nodeid": "c.py::t@c", "seconds": 60.0, "markers": []},
        {"nodeid": "d.py::t@d", "seconds": 60.0, "markers": []},
    ]
    table = dict(
        (cells[1].strip(), cells[2:5]) for cells in (line.split("|") for line in suite_profile.tier_table(rows)[2:])
    )
    # every test: 1,140 s over 2 workers is 9.5 min, the group of the first two 15 min
    assert [c.strip() for c in table["every test (`make test` + `make test-e2e`)"]] == ["5", "19.0", "15.0"]
    assert [c.strip() for c in table["fast tier (`make test`: not e2e)"]] == ["2", "2.0", "1.0"]
    assert [c.strip() for c in table["e2e tier (`make test-e2e`)"]] == ["3", "17.0", "15.0"]


def test_each_tier_ends_with_its_times_its_slowest_tests_and_the_fast_tiers_30_s_rule(tmp_path, capsys):
    """What `make test` and `make test-e2e` print at their end, and `.ci/run` for both tiers."""
    rows = [
        {"nodeid": "a.py::slow_one@a", "seconds": 31.0, "markers": []},
        {"nodeid": "a.py::quick@a", "seconds": 29.0, "markers": []},
        *({"nodeid": f"b.py::t{i}@b", "seconds": float(i), "markers": []} for i in range(12)),
    ]
    report = suite_profile.tier_report(rows, "fast", wall=120.0).splitlines()
    assert report[0] == "tier fast: 14 tests, 2.0 min wall, 2.1 min of test time"
    assert len([line for line in report if line.startswith("   ")]) == 10  # the ten slowest
    warnings = [line for line in report if "warning:" in line]
    assert len(warnings) == 1 and "a.py::slow_one@a took 31.0 s in the fast tier" in warnings[0]
    assert "warning" not in suite_profile.tier_report(rows, "e2e", wall=None)  # no such rule there
    for tier, wall, code in (("fast", 120.0, 0), ("e2e", 600.0, 1)):
        folder = tmp_path / tier
        folder.mkdir()
        (folder / "gw0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        (folder / suite_profile.WALL_FILE).write_text(json.dumps({"tier": tier, "wall_s": wall, "returncode": code}))
    assert suite_profile.main(["--tiers", str(tmp_path / "fast"), str(tmp_path / "e2e")]) == 0
    out = capsys.readouterr().out
    assert "| fast | 14 | 2.0 | 2.1 | 0 |" in out and "| e2e | 14 | 10.0 | 2.1 | 1 |" in out
    assert suite_profile.main(["--tiers", str(tmp_path / "fast"), str(tmp_path / "not-run")]) == 0
    assert "| not-run | — | — | — | not run |" in capsys.readouterr().out
    assert suite_profile.main(["--tiers", str(tmp_path / "nothing")]) == 2
