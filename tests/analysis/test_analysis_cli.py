import json
from pathlib import Path

import pandas as pd
import pytest

from analysis.cells import CELL_COLUMNS
from analysis.cli import main
from contracts.run_record import write_run_records

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def runs_file(tmp_path_factory, mldr_records):
    return write_run_records(tmp_path_factory.mktemp("runs") / "runs.jsonl", mldr_records)


def _one_line_error(capsys, *needles):
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    for needle in needles:
        assert needle in err


def test_help_lists_the_subcommands(cli):
    result = cli("analysis", "--help")
    assert result.returncode == 0
    for command in ("import-released", "table", "tables", "audit"):
        assert command in result.stdout


def test_table_prints_and_writes_cells(tmp_path, runs_file, capsys):
    out = tmp_path / "cells.csv"
    assert main(["table", str(runs_file), "--csv", str(out), "--reps", "500", "--rng-seed", "1"]) == 0
    printed = capsys.readouterr().out
    assert "60.25 ± 0.76" in printed and "1e-04;2e-05;5e-05;2e-05;2e-05" in printed
    cells = pd.read_csv(out)
    assert list(cells.columns[: len(CELL_COLUMNS)]) == CELL_COLUMNS and len(cells) == 1


def test_tables_published_and_from_runs(tmp_path, runs_file):
    assert main(["tables", "--published", "--out", str(tmp_path / "pub"), "--format", "md"]) == 0
    assert "60.25 ± 0.76" in (tmp_path / "pub" / "tables.md").read_text()
    assert main(["tables", str(runs_file), "--out", str(tmp_path / "ours"), "--reps", "200"]) == 0
    assert {"tables.md", "tables.tex", "table_05.csv"} <= {p.name for p in (tmp_path / "ours").iterdir()}


def test_audit_exit_codes(tmp_path, runs_file, mldr_records, capsys):
    assert (
        main(["audit", str(runs_file), "--out", str(tmp_path / "a"), "--reps", "200", "--fail-on", "any-differs"]) == 0
    )
    assert "1 reproduced, 0 inconclusive, 0 undecidable at their margin, 0 differ" in capsys.readouterr().out
    shifted = tmp_path / "shifted.jsonl"
    lines = [json.loads(line) for line in runs_file.read_text().splitlines()]
    for line in lines:
        line["test_score"] = min(100.0, line["test_score"] + 5)
        line["test_instance_scores"] = None
    shifted.write_text("".join(json.dumps(line) + "\n" for line in lines))
    args = ["audit", str(shifted), "--out", str(tmp_path / "b"), "--reps", "200"]
    assert main(args) == 0
    assert main([*args, "--fail-on", "any-differs"]) == 1  # 5 points above, margin 1.64
    assert json.loads((tmp_path / "b" / "audit.json").read_text())["cells"]["differs"] == 1
    # a margin wider than the shift: no longer a difference (the margin is printed in the report)
    assert main([*args, "--margin", "mldr_en=12", "--fail-on", "any-differs"]) == 0
    assert "| mldr_en | 12 | --margin mldr_en=12 |" in (tmp_path / "b" / "audit.md").read_text()


def test_errors_are_one_line_with_exit_2(tmp_path, capsys):
    assert main(["table", str(tmp_path / "missing.jsonl")]) == 2
    _one_line_error(capsys, "missing.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        json.dumps(
            {
                "schema_version": 1,
                "model": "m",
                "task_type": "SC",
                "dataset": "sst2",
                "lr": 1e-5,
                "seed": 0,
                "validation_score": 0.5,
                "test_score": 150,
            }
        )
        + "\n"
    )
    assert main(["audit", str(bad), "--out", str(tmp_path / "o")]) == 2
    _one_line_error(capsys, f"{bad}:1", "test_score")
    assert main(["tables", "--out", str(tmp_path / "o")]) == 2
    _one_line_error(capsys, "--published")
    assert main(["tables", "--published", "--out", str(tmp_path / "o"), "--format", "pdf"]) == 2
    _one_line_error(capsys, "pdf")
    assert main(["audit", str(bad), "--out", str(tmp_path), "--fail-on", "sometimes"]) == 2
    _one_line_error(capsys, "--fail-on")
    assert main(["audit", str(bad), "--out", str(tmp_path / "m"), "--margin", "sst3=1"]) == 2
    _one_line_error(capsys, "--margin sst3")
    assert not (tmp_path / "m").exists()
    assert main(["no-such-command"]) == 2
    _one_line_error(capsys, "invalid choice")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert main(["table", str(empty)]) == 2
    _one_line_error(capsys, "no run records")


def test_a_seed_missing_an_lr_is_selected_with_a_warning(tmp_path, mldr_records, capsys):
    """Issue 35 item 14: the seed's LR was selected from the other five without a word."""
    complete = write_run_records(tmp_path / "complete.jsonl", mldr_records)
    assert main(["table", str(complete), "--reps", "50"]) == 0
    assert "warning" not in capsys.readouterr().err
    dropped = next(r for r in mldr_records if r.seed == 3)
    gappy = write_run_records(tmp_path / "gappy.jsonl", [r for r in mldr_records if r is not dropped])
    assert main(["table", str(gappy), "--reps", "50"]) == 0
    err = capsys.readouterr().err
    assert f"seed 3: no run at LR {dropped.lr:g} (5 of the cell's 6 LRs); its LR is selected from the others" in err
