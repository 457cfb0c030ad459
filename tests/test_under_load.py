"""`make test-stress`'s runner: the command runs while the busy processes spin, is repeated, and its
first failure is the exit code; no busy process outlives it."""

import os
import sys

from tests.under_load import main

CHECK_BURNERS = (
    "import os, sys; pids = os.environ['UNDER_LOAD_PIDS'].split(); "
    "states = [open(f'/proc/{p}/stat').read().split()[2] for p in pids]; "
    "len(pids) == 2 and all(s in 'RS' for s in states) or sys.exit(3)"
)


def test_the_command_runs_under_busy_processes_and_repeats(tmp_path, capsys):
    log = tmp_path / "runs"
    command = f"{CHECK_BURNERS}; open({str(log)!r}, 'a').write('x')"
    assert main(["--repeat", "3", "--burners", "2", "--", sys.executable, "-c", command]) == 0
    assert log.read_text() == "xxx"
    assert "3 of 3 runs passed" in capsys.readouterr().out
    for pid in os.environ.pop("UNDER_LOAD_PIDS").split():
        assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split()[2] == "Z"


def test_the_first_failure_stops_the_repeats(tmp_path):
    log = tmp_path / "runs"
    command = f"open({str(log)!r}, 'a').write('x'); raise SystemExit(4)"
    assert main(["--repeat", "3", "--burners", "1", "--", sys.executable, "-c", command]) == 4
    assert log.read_text() == "x"
    os.environ.pop("UNDER_LOAD_PIDS")
