"""Issue 90: your models beside the paper's (analysis compare, paper_figures compare), mixed setups
said or refused, validation ties printed, the audit of a model outside the paper."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from analysis.setups import Setups, against_paper, data_label, mixing_lines
from contracts.paper import DATASETS, PAPER_TEST_INSTANCES
from contracts.run_record import RunRecord, write_run_records

TOY_TEST = 64


def _records(model, steps, test_size=TOY_TEST, seeds=(0, 1, 2), lrs=(1e-4, 5e-4), base=70.0, batch=16, types=None):
    rng = np.random.default_rng(abs(hash((model, steps))) % 2**32)
    out = []
    for d in DATASETS:
        if types and d.task_type not in types:
            continue
        size = PAPER_TEST_INSTANCES[d.id] if test_size == "paper" else test_size
        sizes = {"test": {"queries": size, "corpus": 10 * size}} if d.task_type == "IR" else {"test": size}
        for seed in seeds:
            for i, lr in enumerate(lrs):
                out.append(
                    RunRecord.create(
                        model,
                        task_type=d.task_type,
                        dataset=d.id,
                        lr=lr,
                        seed=seed,
                        validation_score=float(base + i + rng.normal()),
                        test_score=float(base + i + rng.normal()),
                        provenance={"splits": {"sizes": sizes}, "train": {"steps": steps, "batch_size": batch}},
                        protocol="paper",
                    )
                )
    return out


@pytest.fixture
def runs(tmp_path):
    path = tmp_path / "runs.jsonl"
    write_run_records(path, _records("minilm", 20) + _records("tiny-bert", 4, base=60.0))
    return path


def test_compare_puts_your_rows_beside_the_published_ones_marked_toy(cli, runs, tmp_path):
    out = tmp_path / "cmp"
    result = cli("analysis", "compare", runs, "--published", "--out", out, "--reps", "200")
    assert result.returncode == 0, result.stderr
    assert "mixed setups" in result.stderr and "steps differ" in result.stderr
    table = pd.read_csv(out / "compare.csv")
    assert set(table["table"]) == {2, 3, 4, 5}
    published = table[(table["source"] == "published") & (table["table"] == 2)]
    assert set(published["model"]) >= {"210m-clm-42k", "610m-mlm40-42k", "1b-mlm40-42k"}
    row = published[(published["model"] == "210m-mlm20-42k") & (published["dataset"] == "sst2")].iloc[0]
    assert row["mean"] == 89.93 and row["halfwidth"] == 0.26 and row["n_seeds"] == 5
    mine = table[(table["source"] == "yours") & (table["dataset"] == "conll2003")]
    assert set(mine["model"]) == {"minilm", "tiny-bert"}
    assert (~mine["comparable"]).all()
    assert mine["data"].str.contains("toy or partial data: 64 of the paper's 3,453 test rows").all()
    assert mine["interval_rule"].str.contains("3 seeds").all()
    text = (out / "compare.md").read_text()
    assert "yours, **not comparable**" in text and "20 steps (paper 1,000)" in text
    assert "1 seed(s)" not in text and "3 seed(s) (paper 5)" in text
    meta = json.loads((out / "compare.json").read_text())
    assert meta["tables"] == [2, 3, 4, 5] and set(meta["not_comparable"]) == {"minilm", "tiny-bert"}

    drawn = cli("paper_figures", "compare", out)
    assert drawn.returncode == 0, drawn.stderr
    points = pd.read_csv(out / "compare_points.csv")
    assert (out / "compare.png").stat().st_size > 10_000
    yours = points[points["source"] == "yours"]
    assert set(yours["series"]) == {"minilm", "tiny-bert"} and len(yours) == 8
    assert yours["note"].str.contains("not comparable").all()
    lines = points[(points["source"] == "published") & (points["table"] == 2)]
    assert set(lines["x"]) == {"210M", "610M", "1B"} and "CLM" in set(lines["series"])


def test_compare_strict_refuses_mixed_steps_and_writes_nothing(cli, runs, tmp_path):
    out = tmp_path / "cmp"
    result = cli("analysis", "compare", runs, "--out", out, "--strict", "--reps", "50")
    assert result.returncode == 2
    assert "steps differ" in result.stderr and "nothing written" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_a_paper_sized_run_is_comparable_and_the_average_too(cli, tmp_path):
    path = tmp_path / "runs.jsonl"
    write_run_records(
        path,
        _records("mine", 1000, test_size="paper", seeds=(0, 1, 2, 3, 4), lrs=(1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4),
                 batch=32, types={"SC"}),
    )  # fmt: skip
    out = tmp_path / "cmp"
    assert cli("analysis", "compare", path, "--out", out, "--tables", "2", "--reps", "50").returncode == 0
    table = pd.read_csv(out / "compare.csv")
    mine = table[table["source"] == "yours"]
    assert mine["comparable"].all() and len(mine) == 4
    assert (mine["data"].iloc[0]) == "paper test set (872 rows)"


def test_compare_refuses_bad_table_numbers_in_one_line(cli, runs, tmp_path):
    for bad in ("1", "x", "18"):
        result = cli("analysis", "compare", runs, "--out", tmp_path / "o", "--tables", bad)
        assert result.returncode == 2 and "--tables" in result.stderr
    assert not (tmp_path / "o").exists()


def test_tables_of_mixed_steps_say_so_and_skip_the_empty_paper_tables(cli, runs, tmp_path):
    out = tmp_path / "tables"
    result = cli("analysis", "tables", runs, "--out", out, "--format", "md,csv", "--reps", "50")
    assert result.returncode == 0, result.stderr
    text = (out / "tables.md").read_text()
    assert "Mixed setups" in text and "steps differ: minilm 20; tiny-bert 4" in text
    assert "Left out: Tables 2, 3, 4, 5, 6" in text
    assert not (out / "table_02.csv").exists() and (out / "extra_SC.csv").exists()
    strict = cli("analysis", "tables", runs, "--out", tmp_path / "t2", "--strict")
    assert strict.returncode == 2 and not (tmp_path / "t2").exists()
    table = cli("analysis", "table", runs, "--reps", "50")
    assert table.returncode == 0 and "Mixed setups" in table.stdout


def test_validation_ties_are_printed_with_the_rule(cli, tmp_path):
    records = [
        RunRecord.create("m", task_type="SC", dataset="sst2", lr=lr, seed=0, validation_score=100.0,
                         test_score=score, protocol="paper")
        for lr, score in ((5e-4, 90.0), (1e-4, 80.0), (2e-3, 70.0))
    ]  # fmt: skip
    path = tmp_path / "r.jsonl"
    write_run_records(path, records)
    result = cli("analysis", "table", path, "--reps", "20")
    assert result.returncode == 0
    assert "1 seed(s) with tied best validation scores, ties go to the smallest LR" in result.stderr
    assert "m sst2 seed 0: validation 100.00 at LRs 0.0001, 0.0005, 0.002; picked 0.0001" in result.stderr


def test_setups_name_what_differs_from_the_paper():
    setups = Setups()
    for r in _records("a", 100, seeds=(0,), types={"TC"}):
        setups.add(r)
    setup = setups.of("a", "ontonotes5")
    assert data_label("ontonotes5", setup) == "toy or partial data: 64 of the paper's 8,262 test rows"
    notes = against_paper(setup, "ontonotes5")
    assert notes[0] == "100 steps (paper 1,000)" and "batch 16 (paper 32)" in notes
    assert not [n for n in against_paper(setups.of("a", "conll2003"), "conll2003") if "steps" in n]  # one epoch
    assert mixing_lines(setups, ["a"], ["ontonotes5"]) == []
    released = Setups()
    released.add(
        RunRecord.create("210m-clm-42k", task_type="SC", dataset="sst2", lr=1e-5, seed=0, validation_score=1.0,
                         test_score=1.0, provenance={"source": "released"}, protocol="paper")
    )  # fmt: skip
    assert against_paper(released.of("210m-clm-42k", "sst2"), "sst2") == []
    assert data_label("sst2", released.of("210m-clm-42k", "sst2")) == "the paper's released runs"


def test_the_audit_of_a_model_outside_the_paper_says_so_first_and_counts_nothing_missing(cli, runs, tmp_path):
    result = cli("analysis", "audit", runs, "--out", tmp_path / "audit", "--reps", "50", "--fail-on", "any-differs")
    assert result.returncode == 0, result.stderr
    assert "none of these models is in the paper's tables (minilm, tiny-bert): nothing to audit" in result.stdout
    summary = json.loads((tmp_path / "audit" / "audit.json").read_text())
    assert summary["cells"]["missing"] == summary["cells"]["distinct"] == 0
    assert summary["models_outside_paper"] == ["minilm", "tiny-bert"] and summary["models_audited"] == []
    markdown = (tmp_path / "audit" / "audit.md").read_text()
    assert markdown.splitlines()[2].startswith("**Not audited: minilm, tiny-bert**")
    assert "origin not recorded" not in markdown


def test_a_paper_model_on_toy_data_gets_no_verdict_and_says_why(cli, tmp_path):
    path = tmp_path / "runs.jsonl"
    write_run_records(path, _records("210m-mlm40-42k", 20, base=50.0, types={"TC"}))
    out = tmp_path / "audit"
    result = cli("analysis", "audit", path, "--out", out, "--reps", "50", "--fail-on", "any-differs")
    assert result.returncode == 0, result.stderr  # a 40-point gap on toy data is not `differs`
    summary = json.loads((out / "audit.json").read_text())
    assert summary["cells"]["other_data"] == 3 and summary["cells"]["differs"] == 0
    assert summary["averages"]["other_data"] == 1
    assert "no verdict, tested on other data (toy or partial test sets): 3 cells, 1 averages" in result.stdout
    row = next(c for c in summary["cell_details"] if c["dataset"] == "conll2003")
    assert row["note"].startswith("toy or partial data: 64 of the paper's 3,453 test rows")
    strict = cli("analysis", "audit", path, "--out", tmp_path / "a2", "--reps", "50", "--fail-on", "not-reproduced")
    assert strict.returncode == 1
