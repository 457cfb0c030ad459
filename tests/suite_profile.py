"""Where the test suite's time goes (issue 64; docs/timings.md, "Where the suite's time goes").

    python -m tests.suite_profile [--out DIR] [--md FILE] [--tier NAME] -- -n 2 --dist loadgroup tests
    python -m tests.suite_profile --tiers DIR [DIR ...]     # the tiers' tables from their records

`make test` and `make test-e2e` run their tier through it (issue 77): each ends with the tier's wall
time, test time, ten slowest tests and the fast tier's tests over its 30 s rule; `.ci/run` prints both
tiers' tables at the end.

runs pytest with this module as a plugin: every test's setup + call + teardown time, its markers
and the subprocesses it started are written per worker to DIR (JSON lines), then summarised: time
by kind of test, by file, and the slowest tests. A test's kind is the first that applies: Slurm
(the local cluster), multi-rank (several training processes), subprocess (it started at least one
process: a CLI, a reproduction, a launcher), real pretraining (tests/pretraining), simulation (the
statistical checks of analysis/, by their module names), in-process. Module fixtures are counted in
the first test that uses them, as pytest reports them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

ENV = "SUITE_PROFILE_DIR"
KINDS = ("Slurm", "multi-rank", "subprocess", "real pretraining", "simulation", "in-process")
SIMULATION_MODULES = ("simulation", "coverage", "power", "calibration", "table_coverage", "small_sample")

_launches = [0]
_original_init = subprocess.Popen.__init__


def _counting_init(self, *args, **kwargs):
    _launches[0] += 1
    _original_init(self, *args, **kwargs)


def kind_of(nodeid: str, markers: set[str], launches: int) -> str:
    """The test's kind (module doc)."""
    path = nodeid.split("::")[0]
    if "slurm" in markers or path.startswith("tests/slurm/"):
        return "Slurm"
    if "multiprocess" in markers:
        return "multi-rank"
    if launches:
        return "subprocess"
    if path.startswith("tests/pretraining/"):
        return "real pretraining"
    if path.startswith("tests/analysis/") and any(m in Path(path).stem for m in SIMULATION_MODULES):
        return "simulation"
    return "in-process"


class _Recorder:
    def __init__(self, folder: Path):
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / f"{worker}.jsonl"
        self.rows: dict[str, dict] = {}

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        _launches[0] = 0
        start = time.perf_counter()
        yield
        markers = {m.name for m in item.iter_markers()}
        row = {
            "nodeid": item.nodeid,
            "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
            "seconds": time.perf_counter() - start,
            "markers": sorted(markers & {"e2e", "slurm", "multiprocess"}),
            "launches": _launches[0],
        }
        row["kind"] = kind_of(item.nodeid, markers, row["launches"])
        with self.path.open("a") as f:
            f.write(json.dumps(row) + "\n")


def pytest_configure(config):
    folder = os.environ.get(ENV)
    if folder and not config.pluginmanager.hasplugin("suite-profile-recorder"):
        subprocess.Popen.__init__ = _counting_init
        config.pluginmanager.register(_Recorder(Path(folder)), "suite-profile-recorder")


def read_rows(folder: Path) -> list[dict]:
    rows = []
    for path in sorted(folder.glob("*.jsonl")):
        rows += [{"worker": path.stem, **json.loads(line)} for line in path.read_text().splitlines() if line.strip()]
    return rows


def summary(rows: list[dict], wall: float | None = None, slowest: int = 20, files: int = 25, groups: int = 8) -> str:
    """Markdown: time by kind, by file (the `files` slowest), by worker and xdist group, and the
    `slowest` tests."""
    total = sum(r["seconds"] for r in rows) or 1.0
    lines = []
    if wall is not None:
        lines.append(f"Wall time {wall / 60:.1f} min; {len(rows)} tests; {total / 60:.1f} min of test time in all.")
        lines.append("")
    by_kind: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        by_kind[r["kind"]].append(r["seconds"])
    lines += ["| kind | tests | minutes | share |", "|---|---:|---:|---:|"]
    for kind in KINDS:
        seconds = by_kind.get(kind, [])
        lines.append(f"| {kind} | {len(seconds)} | {sum(seconds) / 60:.1f} | {sum(seconds) / total:.0%} |")
    by_file: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        by_file[r["nodeid"].split("::")[0]].append(r["seconds"])
    lines += ["", "| file | tests | minutes | share |", "|---|---:|---:|---:|"]
    for name, seconds in sorted(by_file.items(), key=lambda kv: -sum(kv[1]))[:files]:
        lines.append(f"| `{name}` | {len(seconds)} | {sum(seconds) / 60:.1f} | {sum(seconds) / total:.0%} |")
    # Under `--dist loadgroup` a group's tests run one after the other on one worker: the largest
    # group bounds the wall time from below, whatever the number of workers.
    by_group: dict[str, list[float]] = defaultdict(list)
    by_worker: dict[str, float] = defaultdict(float)
    for r in rows:
        by_group[r["nodeid"].rpartition("@")[2] if "@" in r["nodeid"] else "(none)"].append(r["seconds"])
        by_worker[r.get("worker", "main")] += r["seconds"]
    lines += ["", "| worker | minutes |", "|---|---:|"]
    lines += [f"| {w} | {m / 60:.1f} |" for w, m in sorted(by_worker.items())]
    lines += ["", "| xdist group (one worker each) | tests | minutes |", "|---|---:|---:|"]
    for name, seconds in sorted(by_group.items(), key=lambda kv: -sum(kv[1]))[:groups]:
        lines.append(f"| `{name}` | {len(seconds)} | {sum(seconds) / 60:.1f} |")
    lines += ["", *tier_table(rows)]
    lines += ["", "| slowest tests | kind | seconds |", "|---|---|---:|"]
    for r in sorted(rows, key=lambda r: -r["seconds"])[:slowest]:
        lines.append(f"| `{r['nodeid']}` | {r['kind']} | {r['seconds']:.1f} |")
    return "\n".join(lines)


# The selections of the two tiers (tests/README.md), by the markers of pyproject.toml.
TIERS = (
    ("every test (`make test` + `make test-e2e`)", lambda markers: True),
    ("fast tier (`make test`: not e2e)", lambda markers: "e2e" not in markers),
    ("e2e tier (`make test-e2e`)", lambda markers: "e2e" in markers),
)
FAST_TEST_LIMIT_S = 30.0  # tests/README.md: a fast-tier test over this goes to e2e or gets faster
WALL_FILE = "wall.json"


def tier_table(rows: list[dict], workers: int = 2) -> list[str]:
    """Markdown rows: each selection's tests, test time and the least wall time `workers` workers
    could take for it: its test time over the workers, or its largest xdist group (one worker
    runs a group), whichever is longer. A floor for a perfect schedule, not a forecast."""
    lines = [
        f"| selection | tests | test minutes | wall floor on {workers} workers, minutes |",
        "|---|---:|---:|---:|",
    ]
    for name, keep in TIERS:
        chosen = [r for r in rows if keep(set(r.get("markers", ())))]
        groups: dict[str, float] = defaultdict(float)
        for r in chosen:
            groups[r["nodeid"].rpartition("@")[2] if "@" in r["nodeid"] else r["nodeid"]] += r["seconds"]
        seconds = sum(r["seconds"] for r in chosen)
        floor = max([seconds / workers, *groups.values()]) if chosen else 0.0
        lines.append(f"| {name} | {len(chosen)} | {seconds / 60:.1f} | {floor / 60:.1f} |")
    return lines


def tier_report(rows: list[dict], tier: str, wall: float | None, slowest: int = 10) -> str:
    """The lines a tier's run ends with: wall and test time, the `slowest` tests, and (fast tier) the
    tests over FAST_TEST_LIMIT_S."""
    total = sum(r["seconds"] for r in rows)
    wall_text = f"{wall / 60:.1f} min wall, " if wall is not None else ""
    lines = [f"tier {tier}: {len(rows)} tests, {wall_text}{total / 60:.1f} min of test time"]
    lines += [f"  {r['seconds']:7.1f} s  {r['nodeid']}" for r in sorted(rows, key=lambda r: -r["seconds"])[:slowest]]
    if tier == "fast":
        over = [r for r in rows if r["seconds"] > FAST_TEST_LIMIT_S]
        for r in sorted(over, key=lambda r: -r["seconds"]):
            lines.append(
                f"  warning: {r['nodeid']} took {r['seconds']:.1f} s in the fast tier (limit "
                f"{FAST_TEST_LIMIT_S:.0f} s, module fixtures included): mark it e2e or make it faster (tests/README.md)"
            )
    return "\n".join(lines)


def tiers_table(folders: list[Path]) -> str:
    """Markdown: one row per tier folder (its wall.json and records), then each tier's slowest tests."""
    lines = ["| tier | tests | wall minutes | test minutes | exit |", "|---|---:|---:|---:|---:|"]
    reports = []
    for folder in folders:
        rows = read_rows(folder)
        if not rows:  # a tier that did not run (CI stops at the first failing one)
            lines.append(f"| {folder.name} | — | — | — | not run |")
            continue
        meta = json.loads((folder / WALL_FILE).read_text()) if (folder / WALL_FILE).is_file() else {}
        tier = meta.get("tier", folder.name)
        wall = meta.get("wall_s")
        wall_text = f"{wall / 60:.1f}" if wall is not None else "—"
        total = sum(r["seconds"] for r in rows) / 60
        lines.append(f"| {tier} | {len(rows)} | {wall_text} | {total:.1f} | {meta.get('returncode', '—')} |")
        reports.append(tier_report(rows, tier, wall))
    return "\n".join(lines + [""] + reports)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.suite_profile", description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="outputs/suite_profile", help="folder for the per-worker records")
    parser.add_argument("--md", help="also write the whole summary (Markdown) here")
    parser.add_argument("--tier", help="name the run's tier (fast, e2e): print its short report, not the summary")
    parser.add_argument("--report-only", action="store_true", help="summarise the records in --out, run nothing")
    parser.add_argument("--tiers", nargs="+", metavar="DIR", help="print the tables of these tier folders, run nothing")
    parser.add_argument("pytest_args", nargs=argparse.REMAINDER, help="pytest's arguments, after --")
    args = parser.parse_args(argv)
    if args.tiers:
        if not any(read_rows(Path(d)) for d in args.tiers):
            print(f"error: no test records in {', '.join(args.tiers)}: run the tiers first", file=sys.stderr)
            return 2
        print(tiers_table([Path(d) for d in args.tiers]))
        return 0
    out = Path(args.out)
    wall = None
    rc = 0
    if not args.report_only:
        pytest_args = args.pytest_args[1:] if args.pytest_args[:1] == ["--"] else args.pytest_args
        if not pytest_args:
            parser.error("give pytest's arguments after -- (e.g. -- -n 2 --dist loadgroup tests)")
        out.mkdir(parents=True, exist_ok=True)
        for old in [*out.glob("*.jsonl"), out / WALL_FILE]:
            old.unlink(missing_ok=True)
        start = time.perf_counter()
        command = [sys.executable, "-m", "pytest", "-p", "tests.suite_profile", *pytest_args]
        rc = subprocess.run(command, env={**os.environ, ENV: str(out.resolve())}).returncode
        wall = time.perf_counter() - start
        meta = {"tier": args.tier or out.name, "wall_s": round(wall, 1), "returncode": rc, "pytest_args": pytest_args}
        (out / WALL_FILE).write_text(json.dumps(meta) + "\n")
    rows = read_rows(out)
    if not rows:
        if rc:  # pytest's own exit status (5: no tests collected) is the answer
            return rc
        print(f"error: no test records in {out}: run the suite through this command first", file=sys.stderr)
        return 2
    text = summary(rows, wall)
    print(tier_report(rows, args.tier, wall) if args.tier else text)
    if args.md:
        Path(args.md).write_text(text + "\n")
        print(f"wrote {args.md}")
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
