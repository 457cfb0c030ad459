"""The `score` command on files in the documented formats (called through scoring.main).

The default protocol is `paper` (the released harness's metrics); the community metrics need
`--protocol standard`.
"""

import argparse
import json

import pytest

from benchmarks import scoring


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _run(capsys, *argv):
    code = scoring.main(["score", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if code == 0 else err)


def test_squad_scores_and_per_instance_file(tmp_path, capsys):
    preds = _write(
        tmp_path / "p.jsonl", [{"id": "a", "prediction_text": "the Broncos"}, {"id": "b", "prediction_text": "Paris"}]
    )
    refs = _write(
        tmp_path / "r.jsonl",
        [
            {"id": "a", "answers": {"text": ["Broncos", "Denver Broncos"], "answer_start": [7, 0]}},
            {"id": "b", "answers": {"text": ["London"], "answer_start": [0]}},
        ],
    )
    out = tmp_path / "per" / "instances.jsonl"
    code, result = _run(capsys, "squad", preds, refs, "--per-instance", out, "--protocol", "standard")
    assert code == 0
    assert result == {"task": "squad", "protocol": "standard", "metric": "squad_f1", "score": 50.0, "n": 2}
    assert [json.loads(line) for line in out.read_text().splitlines()] == [
        {"id": "a", "score": 100.0},
        {"id": "b", "score": 0.0},
    ]


def test_squad_v2_no_answer_probability_and_threshold(tmp_path, capsys):
    preds = _write(
        tmp_path / "p.jsonl",
        [
            {"id": "a", "prediction_text": "Paris", "no_answer_probability": 0.8},
            {"id": "b", "prediction_text": "", "no_answer_probability": 0.0},
        ],
    )
    refs = _write(
        tmp_path / "r.jsonl",
        [
            {"id": "a", "answers": {"text": [], "answer_start": []}},
            {"id": "b", "answers": {"text": [], "answer_start": []}},
        ],
    )
    assert _run(capsys, "squad_v2", preds, refs, "--protocol", "standard")[1]["score"] == 50.0
    assert (
        _run(capsys, "squad_v2", preds, refs, "--protocol", "standard", "--no-answer-threshold", "0.5")[1]["score"]
        == 100.0
    )


def test_record_keys_by_idx(tmp_path, capsys):
    preds = _write(tmp_path / "p.jsonl", [{"idx": {"passage": 0, "query": 1}, "prediction_text": "ACME"}])
    refs = _write(tmp_path / "r.jsonl", [{"idx": {"query": 1, "passage": 0}, "answers": ["Acme", "Acme Corp"]}])
    assert _run(capsys, "record", preds, refs, "--protocol", "standard")[1] == {
        "task": "record",
        "protocol": "standard",
        "metric": "record_f1",
        "score": 100.0,
        "n": 1,
    }


def test_seqeval_lines_of_tags(tmp_path, capsys):
    preds = _write(tmp_path / "p.jsonl", [["B-PER", "I-PER", "O"], ["O", "B-LOC"]])
    refs = _write(tmp_path / "r.jsonl", [["B-PER", "I-PER", "O"], ["O", "B-ORG"]])
    code, result = _run(capsys, "conll2003", preds, refs, "--protocol", "standard")
    assert result["metric"] == "seqeval_f1" and result["score"] == 50.0 and result["n"] == 2
    # the paper protocol: mean sentence macro-F1 (1 and (1 + 0 + 0) / 3)
    code, result = _run(capsys, "conll2003", preds, refs)
    assert result["metric"] == "sentence_macro_f1" and result["score"] == pytest.approx(100 * (1 + 1 / 3) / 2)


def test_accuracy_by_id_or_by_line(tmp_path, capsys):
    preds = _write(tmp_path / "p.jsonl", [{"id": 2, "prediction": 1}, {"id": 1, "prediction": 0}])
    refs = _write(tmp_path / "r.jsonl", [{"id": 1, "label": 0}, {"id": 2, "label": 0}])
    assert _run(capsys, "sst2", preds, refs)[1]["score"] == 50.0
    preds = _write(tmp_path / "p2.jsonl", ["entailment", "neutral"])
    refs = _write(tmp_path / "r2.jsonl", ["entailment", "contradiction"])
    assert _run(capsys, "mnli", preds, refs)[1] == {
        "task": "mnli",
        "protocol": "paper",
        "metric": "accuracy",
        "score": 50.0,
        "n": 2,
    }
    assert _run(capsys, "mnli", preds, refs, "--protocol", "standard")[1]["score"] == 50.0


def test_ndcg_trec_files_and_queries_without_hits(tmp_path, capsys):
    run = tmp_path / "run.trec"
    run.write_text("q1 Q0 d1 1 2.0 model\nq1 Q0 d2 2 1.0 model\n")
    qrels = tmp_path / "qrels.trec"
    qrels.write_text("q1 0 d1 1\nq2 0 d9 1\nq3 0 d4 0\n")
    code, result = _run(capsys, "msmarco", run, qrels, "--protocol", "standard")
    assert result == {"task": "msmarco", "protocol": "standard", "metric": "ndcg@10", "score": 50.0, "n": 2}
    assert _run(capsys, "msmarco", run, qrels)[1] == {
        "task": "msmarco",
        "protocol": "paper",
        "metric": "retrieved_ndcg@10",
        "score": 50.0,
        "n": 2,
    }
    js = tmp_path / "run.json"
    js.write_text(json.dumps({"q1": {"d1": 2.0}, "q2": {"d9": 1.0}}))
    assert _run(capsys, "nq", js, qrels, "--protocol", "standard")[1]["score"] == 100.0


def test_qa_paper_positions_by_id(tmp_path, capsys):
    preds = _write(tmp_path / "p.jsonl", [{"id": "b", "positions": []}, {"id": "a", "positions": [4, 5]}])
    refs = _write(tmp_path / "r.jsonl", [{"id": "a", "positions": [5, 6]}, {"id": "b", "positions": []}])
    out = tmp_path / "per.jsonl"
    code, result = _run(capsys, "squad_v2", preds, refs, "--per-instance", out)
    assert result == {"task": "squad_v2", "protocol": "paper", "metric": "answer_token_f1", "score": 75.0, "n": 2}
    assert [json.loads(line) for line in out.read_text().splitlines()] == [
        {"id": "a", "score": 50.0},
        {"id": "b", "score": 100.0},
    ]


@pytest.mark.parametrize(
    "task, protocol, preds, refs, message",
    [
        ("conll2003", "paper", [["O"]], [["O"], ["B-PER"]], "p.jsonl: 1 sentences (lines), but"),
        ("uner", "standard", [["O"], ["O"]], [["O"]], "p.jsonl: 2 sentences (lines), but"),
        ("ontonotes5", "paper", [["O"]], [["O", "O"]], "p.jsonl:1: 1 tags for the 2 words"),
        (
            "squad",
            "paper",
            [{"id": "a", "positions": [1]}],
            [{"id": "a", "positions": [1]}, {"id": "b", "positions": []}],
            "p.jsonl: 1 lines for the 2 of",
        ),
        (
            "record",
            "paper",
            [{"id": "a", "positions": [1]}, {"id": "z", "positions": []}],
            [{"id": "a", "positions": [1]}],
            "id 'z' is not in",
        ),
        ("squad_v2", "paper", [{"id": "a", "positions": "1"}], [{"id": "a", "positions": [1]}], "must be a list"),
        ("sst2", "paper", [1, 0, 1], [1, 0], "p.jsonl has 3 lines"),
    ],
)
def test_prediction_files_that_do_not_match_the_references_are_one_clear_error(
    tmp_path, capsys, task, protocol, preds, refs, message
):
    code, err = _run(
        capsys, task, _write(tmp_path / "p.jsonl", preds), _write(tmp_path / "r.jsonl", refs), "--protocol", protocol
    )
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_standard_only_options_are_refused_under_paper(tmp_path, capsys):
    refs = _write(tmp_path / "r.jsonl", [["O"]])
    code, err = _run(capsys, "conll2003", refs, refs, "--seqeval-mode", "strict")
    assert code == 2 and "--protocol standard only" in err


def test_errors_are_reported_not_raised(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    code, err = _run(capsys, "squad", bad, bad)
    assert code == 2 and "bad.jsonl:1: not valid JSON" in err
    preds = _write(tmp_path / "p.jsonl", [{"id": "a"}])
    code, err = _run(capsys, "squad", preds, preds, "--protocol", "standard")
    assert code == 2 and "no 'prediction_text' field" in err
    with pytest.raises(SystemExit):
        scoring.main(["score", "nosuchtask", str(bad), str(bad)])
    capsys.readouterr()


def test_register_adds_score_to_any_subparsers():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    scoring.register(sub)
    args = parser.parse_args(["score", "uner", "p", "r", "--per-instance", "o"])
    assert args.func is not None and args.task == "uner" and str(args.per_instance) == "o"


@pytest.mark.parametrize(
    "task, preds, refs, bad",
    [
        ("sst2", [1, 0], [1, 7], "r.jsonl: entry 2: label 7 is not one of the 2 labels of sst2 (ids 0-1 or negative"),
        ("mnli", ["entailment", "maybe"], ["entailment", "neutral"], "p.jsonl: entry 2: label 'maybe' is not one"),
        ("conll2003", [["B-PER", "O"]], [["B-PER", "B-FOO"]], "r.jsonl: entry 1: label 'B-FOO' is not one of the 9"),
    ],
)
def test_a_label_outside_the_tasks_label_set_is_refused_not_scored(tmp_path, capsys, task, preds, refs, bad):
    """Issue 35 item 14: such a label was scored (a gold label no model can predict counted as a miss)."""
    code, err = _run(capsys, task, _write(tmp_path / "p.jsonl", preds), _write(tmp_path / "r.jsonl", refs))
    assert code == 2 and bad in err and len(err.strip().splitlines()) == 1, err


def test_an_empty_or_device_predictions_file_is_one_line(tmp_path, capsys):
    """Issue 66: an empty predictions file scored 0.0 over 0 examples with exit 0; /dev/zero was read
    until memory ran out. Both are one line naming the file, exit 2."""
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    refs = _write(tmp_path / "refs.jsonl", [{"id": 1, "label": 0}])
    code, err = _run(capsys, "mnli", empty, refs)
    assert code == 2 and f"{empty}: no rows" in err and err.count("\n") == 1
    code, err = _run(capsys, "msmarco", empty, empty)
    assert code == 2 and f"{empty}: empty" in err
    code, err = _run(capsys, "mnli", "/dev/zero", refs)
    assert code == 2 and "not a regular file" in err and err.count("\n") == 1
