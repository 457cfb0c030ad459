"""The fine-tuning runs an analysis went without (issue 53): on a cluster a run fails or its job is
killed, and the analysis job (afterany) analyses what finished. Every report it writes then opens
with the missing runs and the cells they leave short or absent, and OUT/missing.csv lists them, so
nothing is dropped silently; `python -m reproduce resubmit OUT` reruns them."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pandas as pd

from contracts.provenance import atomic_write_text
from reproduce.plan.inventory import ANALYSIS_STAMP, MISSING_FILE  # noqa: F401 - as local.py imports it

COLUMNS = ("id", "model", "task", "lr", "seed", "why")


def analysis_has_every_run(out: Path) -> bool:
    """Whether the last analysis of OUT had every planned run: its missing.csv holds only the header."""
    from contracts.bounded import LARGE, BoundedReadError, read_text

    try:
        return len(read_text(Path(out) / MISSING_FILE, LARGE).strip().splitlines()) == 1
    except (OSError, BoundedReadError):
        return False


def analysis_outputs(plan) -> list[Path]:
    """What the analysis of the study of `plan` writes (every one must exist for it to count as done)."""
    from reproduce.figures import figure_files
    from reproduce.plan import out_dir, task_data_root

    out, cfg = out_dir(plan.config), plan.config
    return [
        out / "runs.jsonl",
        out / "cells.csv",
        out / "tables" / "tables.md",
        out / "audit" / "audit.md",
        *(out / "figure" / f"{name}.png" for name in figure_files(plan)),
        *([out / "chance.csv", out / "learning.csv"] if task_data_root(cfg) else []),
        *([out / "claims" / "claims.md"] if cfg.pretrain_replicates > 1 else []),
        *([out / "claims" / "arc.md"] if cfg.study == "data-efficiency" else []),
        out / MISSING_FILE,
    ]


def _where_now(path: str, stamp: dict, out: Path) -> str:
    """A record path of the analysis stamp where it is now: one under the folder the study was analysed
    in (its `config.out`) is read under OUT (issue 89: a moved finished study read as not analysed)."""
    analysed_in = (stamp.get("config") or {}).get("out")
    if isinstance(analysed_in, str) and Path(path).is_relative_to(analysed_in):
        return str(Path(out) / Path(path).relative_to(analysed_in))
    return str(path)


def analysis_is_current(out: Path, plan) -> bool:
    """Whether the last analysis of OUT had every planned run, is the analysis of the records as they
    are now, and its outputs are all there: OUT/analysis_inputs.json lists exactly the planned runs'
    record files with their present size and time (issue 80: a rerun run's new record, then a lost
    analysis job, still read as finished), and every file `analysis_outputs` names exists (issue 88:
    with cells.csv and tables/ deleted, status said finished and resubmit submitted nothing)."""
    import json

    from contracts.bounded import LARGE, BoundedReadError, read_text

    if not analysis_has_every_run(out) or not all(path.is_file() for path in analysis_outputs(plan)):
        return False
    try:
        stamp = json.loads(read_text(Path(out) / ANALYSIS_STAMP, LARGE))
        analysed = {_where_now(path, stamp, out): (int(mtime), int(size)) for path, mtime, size in stamp["records"]}
        present = {}
        for record in plan.record_files:
            info = record.stat()
            present[str(record)] = (info.st_mtime_ns, info.st_size)
    except (OSError, BoundedReadError, ValueError, KeyError, TypeError, OverflowError, RecursionError):
        return False  # an unreadable stamp (Infinity, deep nesting: issue 88) is no analysis
    return present == analysed


def missing_frame(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=list(COLUMNS))


def missing_section(missing: pd.DataFrame, planned: Counter) -> str:
    """The Markdown that opens every report of a partial analysis: how many runs are missing and, per
    (model, task) cell, how many of its planned runs; `planned` counts the runs of each cell."""
    if missing.empty:
        return ""
    short = missing.groupby(["model", "task"], sort=True)
    lines = [
        f"## Missing runs: {len(missing)} of {sum(planned.values())} planned fine-tuning runs have no record",
        "",
        f"This analysis used the runs that finished ({MISSING_FILE} lists the others). A cell below with "
        "missing runs is averaged over fewer seeds than planned, or is absent (— in the tables; a claim "
        "that needs it says it cannot be tested). `python -m reproduce resubmit OUT` reruns them.",
        "",
        "| model | task | missing | planned | why (first run) |",
        "|---|---|---|---|---|",
    ]
    for (model, task), group in short:
        why = str(group["why"].iloc[0]).replace("|", "/")[:160]
        lines.append(f"| {model} | {task} | {len(group)} | {planned[(model, task)]} | {why} |")
    return "\n".join(lines) + "\n\n"


def at_chance_section(cells) -> str:
    """A report's section naming the cells whose mean includes a run at its chance level (issue 67);
    '' when there is none (or the cells predate the count)."""
    from analysis.aggregate import at_chance_cells

    flagged = at_chance_cells(cells)
    if flagged.empty:
        return ""
    lines = [
        f"**Runs at chance: {int(flagged['at_chance_runs'].sum())} selected runs in {len(flagged)} cells** "
        "(a collapsed fine-tuning run is in their mean; each run's record says why, `provenance.chance`; "
        'docs/benchmarks.md, "Runs at chance")',
        "",
        "| model | task | runs at chance | seeds |",
        "|---|---|---|---|",
    ]
    for row in flagged.itertuples():
        lines.append(f"| {row.model} | {row.dataset} | {row.at_chance_runs} | {row.n_seeds} |")
    return "\n".join(lines) + "\n\n"


def prepend(path: Path, section: str) -> None:
    """Put `section` at the top of a report just written (atomically; nothing when there is none)."""
    path = Path(path)
    if section and path.is_file():
        atomic_write_text(path, section + path.read_text())
