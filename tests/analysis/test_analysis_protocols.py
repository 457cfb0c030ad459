"""--protocol in the analysis: which scores are aggregated, and the paper-vs-standard comparison."""

import json

import pytest

from analysis.cli import main
from analysis.protocols import metric_differences, records_under
from contracts.run_record import write_run_records
from tests.analysis.analysis_testlib import make_record


def _tc(seed, lr, paper, standard, model="m"):
    """A TC run scored under both protocols (one prediction serves both metrics)."""
    return make_record(
        model=model,
        task_type="TC",
        dataset="conll2003",
        lr=lr,
        seed=seed,
        val=paper,
        test=paper,
        protocol="paper",
        metric="sentence_macro_f1",
        other_scores={
            "standard": {
                "metric": "seqeval_f1",
                "validation_score": standard,
                "test_score": standard,
                "test_instance_scores": None,
            }
        },
    )


def _qa(seed, lr, score, protocol):
    """A QA run: the two protocols use different heads, so a run has one protocol's scores only."""
    return make_record(
        task_type="QA",
        dataset="squad",
        lr=lr,
        seed=seed,
        val=score,
        test=score,
        protocol=protocol,
        metric="answer_token_f1" if protocol == "paper" else "squad_f1",
    )


def test_records_under_keeps_the_records_that_hold_the_protocol():
    both, paper_only, unknown = _tc(0, 1e-5, 90.0, 88.0), _qa(0, 1e-5, 70.0, "paper"), make_record()
    kept, note = records_under([both, paper_only, unknown], "standard")
    assert [r.test_score for r in kept] == [88.0, 50.0]
    assert kept[0].protocol == "standard" and kept[0].metric == "seqeval_f1"
    assert kept[1] is unknown  # protocol unknown (null): used as is
    assert note == (
        "note: --protocol standard: left out 1 of 3 run records that hold no 'standard' "
        "scores (scored under 'paper' only: squad 1)"
    )
    kept, note = records_under([both, paper_only, unknown], "paper")
    assert [r.test_score for r in kept] == [90.0, 70.0, 50.0] and note is None


def test_metric_differences_per_dataset_on_runs_holding_both():
    records = [
        _tc(0, 1e-5, 90.0, 88.0),
        _tc(1, 1e-5, 91.0, 92.5),
        _tc(2, 1e-5, 80.0, 80.0),
        _qa(0, 1e-5, 70.0, "paper"),
        _qa(0, 1e-5, 60.0, "standard"),
        make_record(),
    ]
    diffs = metric_differences(records)
    assert diffs.to_dict(orient="records") == [
        {
            "task_type": "TC",
            "dataset": "conll2003",
            "paper_metric": "sentence_macro_f1",
            "standard_metric": "seqeval_f1",
            "runs": 3,
            "mean_diff": pytest.approx((2.0 - 1.5 + 0.0) / 3),
            "max_abs_diff": 2.0,
        }
    ]
    # A standard-protocol record holding the paper scores counts the same way (paper - standard).
    flipped = [r.scores_under("standard") for r in records[:3]]
    assert metric_differences(flipped)["mean_diff"].tolist() == pytest.approx([0.5 / 3])
    assert metric_differences([make_record()]).empty


def test_cli_protocol_flag_for_table_tables_and_audit(tmp_path, capsys):
    records = [_tc(seed, lr, 90.0 + seed + 10 * lr, 85.0 + seed) for seed in range(5) for lr in (1e-5, 2e-5)]
    records += [_qa(seed, 1e-5, 70.0 + seed, "paper") for seed in range(5)]
    runs = write_run_records(tmp_path / "runs.jsonl", records)

    assert main(["table", str(runs), "--reps", "200"]) == 0
    out = capsys.readouterr()
    assert out.out.startswith("protocol: paper\n") and "92.00 ± 1.39" in out.out and out.err == ""
    assert main(["table", str(runs), "--reps", "200", "--protocol", "standard"]) == 0
    out = capsys.readouterr()
    assert "87.00 ± 1.39" in out.out and "squad" not in out.out
    assert out.err.startswith(
        "note: --protocol standard: left out 5 of 15 run records that hold no 'standard' "
        "scores (scored under 'paper' only: squad 5)\n"
    )  # then the tie note: the standard validation scores here do not depend on the LR
    assert "note: 5 seed(s) with tied best validation scores, ties go to the smallest LR" in out.err

    assert (
        main(
            [
                "tables",
                str(runs),
                "--out",
                str(tmp_path / "t"),
                "--format",
                "md",
                "--reps",
                "200",
                "--protocol",
                "standard",
            ]
        )
        == 0
    )
    assert "(protocol standard)" in (tmp_path / "t" / "tables.md").read_text()
    capsys.readouterr()

    assert main(["audit", str(runs), "--out", str(tmp_path / "a"), "--reps", "200"]) == 0
    # model "m" is in no paper table: nothing audited (issue 90), the metric differences still reported
    assert "audit (protocol paper; question: none): none of these models is in the paper's tables (m)" in (
        capsys.readouterr().out
    )
    summary = json.loads((tmp_path / "a" / "audit.json").read_text())
    assert summary["protocol"] == "paper"
    assert summary["metric_differences"] == [
        {
            "task_type": "TC",
            "dataset": "conll2003",
            "paper_metric": "sentence_macro_f1",
            "standard_metric": "seqeval_f1",
            "runs": 10,
            "mean_diff": pytest.approx(5.00015),
            "max_abs_diff": pytest.approx(5.0002),
        }
    ]
    markdown = (tmp_path / "a" / "audit.md").read_text()
    assert "| TC | conll2003 | sentence_macro_f1 | seqeval_f1 | 10 | 5.00 | 5.00 |" in markdown

    only_paper = write_run_records(tmp_path / "qa.jsonl", records[-5:])
    assert main(["table", str(only_paper), "--protocol", "standard"]) == 2
    err = capsys.readouterr().err
    assert err.endswith("has 'standard' scores; try --protocol paper\n") and err.count("\n") == 2
