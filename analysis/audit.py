"""Compare regenerated cells with the published Tables 2-17, and check the paper's own CSV.

Per cell: diff = ours - published; whether the published mean lies in our bootstrap CI;
z = diff / sqrt(se_ours^2 + se_pub^2) with se = half-width / 1.96; verdict "match" (|z| <= 1.96),
"mismatch" or "missing" (no regenerated cell). Per table: "match" (no mismatch), "ok-by-chance"
(mismatches no more frequent than the 5% a correct reproduction produces: one-sided binomial
test p >= 0.05), "fail" (p < 0.05) or "missing" (no regenerated cell at all).
The cells are those of one evaluation protocol (`--protocol`, default "paper"); for the runs whose
records hold both protocols' scores, the audit also reports per dataset how far the paper metric
lies from the standard one (analysis.protocols.metric_differences; docs/release.md).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from analysis.intervals import Z_95
from analysis.protocols import DIFFERENCE_COLUMNS
from analysis.published import load_published_cells
from analysis.tables import TABLE_NOTES
from contracts.paper import AVERAGE
from contracts.provenance import atomic_write_json, atomic_write_text, utc_now

FAIL_ON = ("none", "any-mismatch", "table-fail")
CELL_KEY = ["model", "task_type", "dataset"]
AVERAGE_TOLERANCE = 0.01  # the CSV README: averages equal the mean of their datasets within 0.01


def _z(diff: float, hw_ours: float, hw_pub: float) -> float:
    se = math.sqrt(np.nan_to_num(hw_ours / Z_95) ** 2 + np.nan_to_num(hw_pub / Z_95) ** 2)
    if se == 0.0:
        return 0.0 if round(diff, 2) == 0.0 else math.copysign(math.inf, diff)
    return diff / se


def compare_cells(ours: pd.DataFrame, published: pd.DataFrame) -> pd.DataFrame:
    """One row per published cell (per table), with our value beside it and a verdict."""
    duplicated = ours.duplicated(CELL_KEY, keep=False)
    if duplicated.any():
        row = ours[duplicated].iloc[0]
        raise ValueError(
            f"several regenerated cells for {row.model}/{row.task_type}/{row.dataset} "
            "(runs with different train sets?); audit one set of runs at a time"
        )
    mine = ours[
        [
            *CELL_KEY,
            "n_seeds",
            "mean",
            "ci_halfwidth",
            "boot_low",
            "boot_high",
            *(["bootstrap"] if "bootstrap" in ours else []),
        ]
    ]
    merged = (
        published[["table", *CELL_KEY, "mean", "ci_halfwidth"]]
        .rename(columns={"mean": "published", "ci_halfwidth": "published_halfwidth"})
        .merge(mine.rename(columns={"mean": "ours", "ci_halfwidth": "ours_halfwidth"}), on=CELL_KEY, how="left")
    )
    present = merged["ours"].notna()
    merged["diff"] = merged["ours"] - merged["published"]
    merged["published_in_boot_ci"] = np.where(
        present & merged["boot_low"].notna(),
        (merged["boot_low"] <= merged["published"]) & (merged["published"] <= merged["boot_high"]),
        None,
    )
    merged["z"] = [
        _z(d, h, p) if ok else float("nan")
        for d, h, p, ok in zip(merged["diff"], merged["ours_halfwidth"], merged["published_halfwidth"], present)
    ]
    merged["exact"] = (
        present
        & (merged["ours"].round(2) == merged["published"])
        & (merged["ours_halfwidth"].round(2) == merged["published_halfwidth"])
    )
    merged["verdict"] = np.where(~present, "missing", np.where(merged["z"].abs() <= Z_95, "match", "mismatch"))
    return merged


def table_verdicts(cells: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for number, table in cells.groupby("table", sort=True):
        counts = table["verdict"].value_counts()
        n_present = int(counts.get("match", 0) + counts.get("mismatch", 0))
        n_mismatch = int(counts.get("mismatch", 0))
        p_value = (
            float(stats.binomtest(n_mismatch, n_present, 0.05, alternative="greater").pvalue)
            if n_present
            else float("nan")
        )
        if n_present == 0:
            verdict = "missing"
        elif n_mismatch == 0:
            verdict = "match"
        else:
            verdict = "fail" if p_value < 0.05 else "ok-by-chance"
        rows.append(
            {
                "table": int(number),
                "cells": len(table),
                "present": n_present,
                "match": int(counts.get("match", 0)),
                "mismatch": n_mismatch,
                "missing": int(counts.get("missing", 0)),
                "exact": int(table["exact"].sum()),
                "binomial_p": p_value,
                "verdict": verdict,
            }
        )
    return pd.DataFrame(rows)


def published_internal_checks(published: pd.DataFrame) -> dict:
    """The paper's own consistency: averages vs their datasets, repeated rows across tables."""
    row_key = ["table", "model", "task_type"]
    datasets = (
        published[published["dataset"] != AVERAGE].groupby(row_key)["mean"].agg(mean_of_datasets="mean", n="size")
    )
    printed = published[published["dataset"] == AVERAGE].set_index(row_key)["mean"]
    joined = datasets[datasets["n"] == 3].join(printed.rename("printed_average"), how="inner")
    joined["diff"] = joined["printed_average"] - joined["mean_of_datasets"]
    averages = [
        {
            "table": int(t),
            "model": m,
            "task_type": k,
            "printed_average": float(r.printed_average),
            "mean_of_datasets": round(float(r.mean_of_datasets), 4),
            "diff": round(float(r["diff"]), 4),
            "ok": abs(r["diff"]) <= AVERAGE_TOLERANCE + 1e-9,
        }
        for (t, m, k), r in joined.iterrows()
    ]
    counts = published.groupby(CELL_KEY)["mean"].transform("size")
    repeats = []
    for key, group in published[counts > 1].groupby(CELL_KEY):
        same = group["mean"].nunique() == 1 and group["ci_halfwidth"].nunique() == 1
        repeats.append(
            {
                **dict(zip(CELL_KEY, key)),
                "tables": sorted(group["table"].astype(int)),
                "values": sorted(set(zip(group["mean"], group["ci_halfwidth"]))),
                "ok": same,
            }
        )
    return {
        "averages_checked": len(averages),
        "averages_failed": [a for a in averages if not a["ok"]],
        "max_average_abs_diff": max((abs(a["diff"]) for a in averages), default=0.0),
        "repeated_cells_checked": len(repeats),
        "repeated_cells_failed": [r for r in repeats if not r["ok"]],
    }


def _fmt(value, digits=2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{round(value, digits) + 0.0:.{digits}f}"  # + 0.0: no "-0.00"


def _differences_markdown(differences: pd.DataFrame) -> list[str]:
    lines = ["", "## Paper vs standard metric on the same runs", ""]
    if differences.empty:
        return lines + ["No run record holds the scores of both protocols."]
    lines += [
        "diff = paper-protocol minus standard-protocol test score (x100 points) of the same run.",
        "",
        "| task | dataset | paper metric | standard metric | runs | mean diff | max abs diff |",
        "|---|---|---|---|---:|---:|---:|",
    ]
    for d in differences.itertuples():
        lines.append(
            f"| {d.task_type} | {d.dataset} | {d.paper_metric} | {d.standard_metric} | {d.runs} | "
            f"{_fmt(d.mean_diff)} | {_fmt(d.max_abs_diff)} |"
        )
    return lines


def _markdown(
    cells: pd.DataFrame,
    tables: pd.DataFrame,
    checks: dict,
    sources: list[str],
    protocol: str,
    differences: pd.DataFrame,
) -> str:
    counts = cells["verdict"].value_counts()
    lines = [
        "# Audit: regenerated cells vs the published Tables 2-17",
        "",
        f"Written {utc_now()} from: {', '.join(sources)}; scores of protocol '{protocol}'.",
        "",
        f"Cells: {len(cells)} published; {counts.get('match', 0)} match, "
        f"{counts.get('mismatch', 0)} mismatch, {counts.get('missing', 0)} missing; "
        f"{int(cells['exact'].sum())} exact to 2 decimals (mean and half-width).",
        "",
        "z = (ours - published) / sqrt(se_ours^2 + se_pub^2), se = half-width / 1.96; "
        "match when |z| <= 1.96. A table fails when its mismatches are more frequent than the "
        "5% expected by chance (one-sided binomial test, p < 0.05).",
        "",
        "## Tables",
        "",
        "| table | cells | present | match | mismatch | missing | exact | binomial p | verdict |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for t in tables.itertuples():
        lines.append(
            f"| {t.table} | {t.cells} | {t.present} | {t.match} | {t.mismatch} | {t.missing} | "
            f"{t.exact} | {_fmt(t.binomial_p, 3)} | {t.verdict} |"
        )
    present = cells[cells["verdict"] != "missing"]
    lines += ["", "## Regenerated cells", ""]
    if present.empty:
        lines.append("No published cell has regenerated data.")
    else:
        lines += [
            "| table | model | task | dataset | published | ours | diff | z | pub. in our bootstrap CI "
            "| bootstrap | verdict |",
            "|---:|---|---|---|---:|---:|---:|---:|---|---|---|",
        ]
        for c in present.itertuples():
            boot = (
                f"[{_fmt(c.boot_low)}, {_fmt(c.boot_high)}] {'yes' if c.published_in_boot_ci else 'no'}"
                if c.published_in_boot_ci is not None
                else "—"
            )
            lines.append(
                f"| {c.table} | {c.model} | {c.task_type} | {c.dataset} | "
                f"{_fmt(c.published)} ± {_fmt(c.published_halfwidth)} | {_fmt(c.ours)} ± {_fmt(c.ours_halfwidth)} | "
                f"{_fmt(c.diff)} | {_fmt(c.z)} | {boot} | {getattr(c, 'bootstrap', '—')} | {c.verdict} |"
            )
    lines += [
        "",
        "## The paper's internal checks (published CSV)",
        "",
        f"- Category averages equal the mean of their 3 datasets within {AVERAGE_TOLERANCE}: "
        f"{checks['averages_checked'] - len(checks['averages_failed'])}/{checks['averages_checked']} "
        f"(largest |diff| {checks['max_average_abs_diff']:.4f}).",
        f"- Cells repeated across tables agree exactly: "
        f"{checks['repeated_cells_checked'] - len(checks['repeated_cells_failed'])}/"
        f"{checks['repeated_cells_checked']}.",
    ]
    for failure in checks["averages_failed"] + checks["repeated_cells_failed"]:
        lines.append(f"  - FAILED: {failure}")
    lines += _differences_markdown(differences)
    lines += ["", "## Notes", ""] + [f"- Table {n}: {note}" for n, note in TABLE_NOTES.items()]
    return "\n".join(lines) + "\n"


def run_audit(
    ours: pd.DataFrame,
    out_dir: str | Path,
    sources: list[str],
    protocol: str = "paper",
    differences: pd.DataFrame | None = None,
) -> dict:
    """Write audit.md and audit.json (atomically) into out_dir; return the JSON summary.

    `ours` holds the cells of `protocol`; `differences` (analysis.protocols.metric_differences of
    the same records) the paper-minus-standard comparison, None when not computed.
    """
    if differences is None:
        differences = pd.DataFrame(columns=DIFFERENCE_COLUMNS)
    published = load_published_cells()
    cells = compare_cells(ours, published)
    tables = table_verdicts(cells)
    checks = published_internal_checks(published)
    counts = cells["verdict"].value_counts()
    summary = {
        "sources": sources,
        "written": utc_now(),
        "protocol": protocol,
        "cells": {
            "published": len(cells),
            "match": int(counts.get("match", 0)),
            "mismatch": int(counts.get("mismatch", 0)),
            "missing": int(counts.get("missing", 0)),
            "exact": int(cells["exact"].sum()),
        },
        "tables": tables.to_dict(orient="records"),
        "cell_details": json.loads(cells.to_json(orient="records")),
        "published_internal_checks": checks,
        "metric_differences": differences.to_dict(orient="records"),
        "notes": {str(n): note for n, note in TABLE_NOTES.items()},
    }
    out_dir = Path(out_dir)
    atomic_write_text(out_dir / "audit.md", _markdown(cells, tables, checks, sources, protocol, differences))
    summary = _plain(summary)
    atomic_write_json(out_dir / "audit.json", summary)
    return summary


def _plain(value):
    """JSON-safe copy: numpy scalars -> Python, NaN -> null (strict JSON has no NaN)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, (np.integer, int)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        return None if math.isnan(value) else float(value)
    return value


def exit_code(summary: dict, fail_on: str) -> int:
    if fail_on == "any-mismatch" and summary["cells"]["mismatch"] > 0:
        return 1
    if fail_on == "table-fail" and any(t["verdict"] == "fail" for t in summary["tables"]):
        return 1
    return 0
