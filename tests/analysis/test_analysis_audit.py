import json
import math

import pytest

from analysis.aggregate import aggregate_runs
from analysis.audit import compare_cells, exit_code, published_internal_checks, run_audit
from analysis.published import load_published_cells


def _strict_json(path):
    def refuse(constant):
        raise AssertionError(f"non-standard JSON constant {constant}")

    return json.loads(path.read_text(), parse_constant=refuse)


def test_released_mldr_runs_reproduce_the_cell_all_three_tables_print(tmp_path, mldr_records):
    cells = aggregate_runs(mldr_records, reps=2000)
    summary = run_audit(cells, tmp_path, sources=["mldr"])
    # only the audited model's published cells count (issue 90): its 12 datasets, 11 without runs
    distinct = load_published_cells().drop_duplicates(["model", "task_type", "dataset"])
    n_datasets = int(((distinct.dataset != "average") & (distinct.model == "610m-mlm40-42k")).sum())
    assert n_datasets == 12 and summary["models_audited"] == ["610m-mlm40-42k"]
    assert summary["models_outside_paper"] == []
    assert summary["cells"] == {
        "distinct": n_datasets,
        "reproduced": 1,
        "inconclusive": 0,
        "undecidable": 0,
        "differs": 0,
        "other_data": 0,
        "missing": n_datasets - 1,
        "exact": 1,
        "assumed": dict.fromkeys(("reproduced", "inconclusive", "undecidable", "differs", "other_data", "missing"), 0),
    }
    (mldr,) = [c for c in summary["cell_details"] if c["verdict"] != "missing"]
    assert mldr["tables"] == [5, 13, 17] and mldr["diff"] == pytest.approx(0, abs=0.005)
    assert mldr["published_in_boot_ci"] is True and mldr["ours_in_published_interval"] is True
    per_table = {t["table"]: t for t in summary["tables"]}
    assert per_table[5]["reproduced"] == 1 and per_table[2]["reproduced"] == 0
    assert _strict_json(tmp_path / "audit.json")["cells"]["exact"] == 1
    markdown = (tmp_path / "audit.md").read_text()
    assert "| 610m-mlm40-42k | IR | mldr_en | 5, 13, 17 | 60.25 ± 0.76 (5) | 60.25 ± 0.76 | 5 |" in markdown
    assert (
        "**Distinct dataset cells: 1 reproduced, 0 inconclusive, 0 undecidable at their margin, 0 differ, "
        "0 without a verdict (tested on other data)**" in markdown
    )
    assert not list(tmp_path.glob(".*.tmp"))  # atomic writes leave no temp files
    assert exit_code(summary, "any-differs") == 0 and exit_code(summary, "not-reproduced") == 0


def test_verdicts_and_intervals_hand_values():
    published = load_published_cells()
    ours = published[(published.table == 5) & (published.model == "610m-mlm40-42k")].drop(columns="table").copy()
    ours["mean"] = ours["mean"] + [3.0, 0.0, 0.75, 0.0]  # NQ, MS MARCO, MLDR, average
    ours["ci_halfwidth"] = [0.63, 0.45, 0.98, 0.35]
    ours["boot_low"], ours["boot_high"] = ours["mean"] - 1, ours["mean"] + 1
    cells = compare_cells(ours, published)
    cells = cells[cells.model == "610m-mlm40-42k"].set_index("dataset")
    # MLDR: diff 0.75, se = sqrt((0.98/1.96)^2 + (0.76/1.96)^2) = sqrt(0.25 + 0.150354)
    mldr = cells.loc["mldr_en"]
    assert mldr["diff_se"] == pytest.approx(math.sqrt(0.25 + (0.76 / 1.96) ** 2))
    assert mldr["diff_ci95_low"] < 0 < mldr["diff_ci95_high"] and mldr["ours_in_published_interval"]  # 0.75 <= 0.76
    assert mldr["verdict"] == "inconclusive"  # 0.75 +- 1.2 straddles the 1.64 margin
    # NQ 3 points above, intervals of 0.63: far beyond its margin (2.4 x 0.625 = 1.5)
    assert cells.loc["nq", "verdict"] == "differs" and cells.loc["nq", "margin"] == 1.5
    assert cells.loc["msmarco", "exact"] and cells.loc["msmarco", "verdict"] == "reproduced"
    ir_average = cells[(cells.index == "average") & (cells.task_type == "IR")].iloc[0]
    assert ir_average["tables"] == [5, 13, 17] and ir_average["verdict"] == "reproduced"


def test_the_per_table_view_repeats_cells_and_the_headline_does_not(tmp_path):
    published = load_published_cells()
    ours = published[published.model == "610m-mlm40-42k"].drop_duplicates(["dataset"]).drop(columns="table").copy()
    ours.loc[ours.dataset == "mnli", "mean"] -= 3
    summary = run_audit(ours, tmp_path, sources=["shifted"])
    assert summary["cells"]["differs"] == 1
    per_table = {t["table"]: t for t in summary["tables"]}
    assert [per_table[n]["differs"] for n in (2, 10, 14)] == [1, 1, 1]  # MNLI of 610m is printed 3 times
    assert exit_code(summary, "none") == 0 and exit_code(summary, "any-differs") == 1
    assert (
        exit_code(
            {"cells": {"differs": 0, "inconclusive": 1}, "averages": {"differs": 0, "inconclusive": 0}}, "any-differs"
        )
        == 0
    )
    assert (
        exit_code(
            {"cells": {"differs": 0, "inconclusive": 1}, "averages": {"differs": 0, "inconclusive": 0}},
            "not-reproduced",
        )
        == 1
    )
    undecidable = {"differs": 0, "inconclusive": 0, "undecidable": 1}
    assert exit_code({"cells": undecidable, "averages": undecidable}, "not-reproduced") == 1


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
    n_datasets = int((ours.dataset != "average").sum())
    assert summary["cells"]["distinct"] == n_datasets and summary["cells"]["exact"] == n_datasets
    assert summary["cells"]["differs"] == summary["cells"]["missing"] == 0
    # an equal number is reproduced unless its printed interval is too wide for its margin
    assert summary["cells"]["reproduced"] > 0.8 * n_datasets
