import json
import math

import pytest

from analysis.aggregate import aggregate_runs
from analysis.audit import compare_cells, exit_code, published_internal_checks, run_audit, table_verdicts
from analysis.published import load_published_cells


def _strict_json(path):
    def refuse(constant):
        raise AssertionError(f"non-standard JSON constant {constant}")

    return json.loads(path.read_text(), parse_constant=refuse)


def test_released_mldr_runs_match_all_three_printed_copies(tmp_path, mldr_records):
    cells = aggregate_runs(mldr_records, reps=2000)
    summary = run_audit(cells, tmp_path, sources=["mldr"])
    assert summary["cells"] == {"published": 800, "match": 3, "mismatch": 0, "missing": 797, "exact": 3}
    details = [c for c in summary["cell_details"] if c["verdict"] != "missing"]
    assert sorted(c["table"] for c in details) == [5, 13, 17]
    assert all(c["published_in_boot_ci"] is True and abs(c["z"]) < 0.01 for c in details)
    verdicts = {t["table"]: t["verdict"] for t in summary["tables"]}
    assert verdicts[5] == "match" and verdicts[2] == "missing"
    assert _strict_json(tmp_path / "audit.json")["cells"]["exact"] == 3
    markdown = (tmp_path / "audit.md").read_text()
    assert "| 5 | 610m-mlm40-42k | IR | mldr_en | 60.25 ± 0.76 | 60.25 ± 0.76 |" in markdown
    assert not list(tmp_path.glob(".*.tmp"))  # atomic writes leave no temp files
    assert exit_code(summary, "any-mismatch") == 0 and exit_code(summary, "table-fail") == 0


def test_z_and_verdicts_hand_values():
    published = load_published_cells()
    ours = published[(published.table == 5) & (published.model == "610m-mlm40-42k")].drop(columns="table").copy()
    ours["mean"] = ours["mean"] + [1.0, 0.0, 0.75, 0.0]  # NQ, MS MARCO, MLDR, average
    ours["ci_halfwidth"] = [0.63, 0.45, 0.98, 0.35]
    ours["boot_low"], ours["boot_high"] = ours["mean"] - 1, ours["mean"] + 1
    cells = compare_cells(ours, published)
    cells = cells[(cells.table == 5) & (cells.model == "610m-mlm40-42k")].set_index("dataset")
    # MLDR: diff 0.75, se = sqrt((0.98/1.96)^2 + (0.76/1.96)^2) = sqrt(0.25 + 0.150354) = 0.632736
    assert cells.loc["mldr_en", "z"] == pytest.approx(0.75 / math.sqrt(0.25 + (0.76 / 1.96) ** 2))
    assert cells.loc["mldr_en", "verdict"] == "match" and cells.loc["mldr_en", "published_in_boot_ci"]
    # NQ (published 86.76 +- 0.63): diff 1, se = sqrt(2) * 0.63 / 1.96 -> z = 2.20 > 1.96
    assert cells.loc["nq", "z"] == pytest.approx(1.96 / (math.sqrt(2) * 0.63))
    assert cells.loc["nq", "verdict"] == "mismatch" and not cells.loc["nq", "exact"]
    assert cells.loc["msmarco", "exact"] and cells.loc["msmarco", "z"] == 0


def test_table_fails_only_when_mismatches_exceed_chance():
    published = load_published_cells()
    ours = published[published.table == 2].drop(columns="table").copy()
    ours["boot_low"] = ours["boot_high"] = float("nan")
    shifted = ours.copy()
    shifted.loc[shifted.index[:1], "mean"] += 5  # 1 mismatch in 60 cells: plausible by chance
    tables = table_verdicts(compare_cells(shifted, published)).set_index("table")
    assert tables.loc[2, "verdict"] == "ok-by-chance" and tables.loc[2, "mismatch"] == 1
    assert tables.loc[6, "verdict"] == "missing"
    shifted.loc[shifted.index[:10], "mean"] += 5  # 10 of 60: not chance
    tables = table_verdicts(compare_cells(shifted, published)).set_index("table")
    assert tables.loc[2, "verdict"] == "fail"
    summary = {"cells": {"mismatch": 10}, "tables": [{"verdict": "fail"}]}
    assert exit_code(summary, "none") == 0 and exit_code(summary, "table-fail") == 1
    assert exit_code({"cells": {"mismatch": 1}, "tables": [{"verdict": "ok-by-chance"}]}, "table-fail") == 0
    assert exit_code({"cells": {"mismatch": 1}, "tables": [{"verdict": "ok-by-chance"}]}, "any-mismatch") == 1


def test_published_internal_checks():
    published = load_published_cells()
    checks = published_internal_checks(published)
    assert checks["averages_checked"] == 200 and checks["averages_failed"] == []
    assert checks["repeated_cells_checked"] == 32 and checks["repeated_cells_failed"] == []
    broken = published.copy()
    broken.loc[(broken.table == 13) & (broken.model == "610m-mlm40-42k") & (broken.dataset == "nq"), "mean"] += 0.1
    checks = published_internal_checks(broken)
    assert len(checks["repeated_cells_failed"]) == 1 and len(checks["averages_failed"]) == 1


def test_published_values_audited_against_themselves_are_exact(tmp_path):
    published = load_published_cells()
    ours = published.drop_duplicates(["model", "task_type", "dataset"]).drop(columns="table")
    summary = run_audit(ours, tmp_path, sources=["published"])
    assert summary["cells"] == {"published": 800, "match": 800, "mismatch": 0, "missing": 0, "exact": 800}
    assert {t["verdict"] for t in summary["tables"]} == {"match"}
