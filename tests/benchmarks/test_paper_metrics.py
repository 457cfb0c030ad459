"""The `paper` protocol's metrics (docs/protocol.md) against scikit-learn and hand-computed values."""

import pytest
from sklearn.metrics import f1_score, ndcg_score

from benchmarks.metrics import METRICS, answer_token_f1, retrieved_ndcg_at_10, sentence_macro_f1
from benchmarks.tasks import TASKS
from contracts.paper import PAPER_PROTOCOL_METRICS

# --- TC: mean over sentences of scikit-learn's macro F1 -----------------------------------------


def test_sentence_macro_f1_is_the_mean_of_sklearn_per_sentence():
    gold = [["B-PER", "I-PER", "O", "O"], ["O", "B-LOC", "O"], ["O", "O"]]
    pred = [["B-PER", "O", "O", "O"], ["O", "B-LOC", "B-ORG"], ["O", "O"]]
    result = sentence_macro_f1(pred, gold)
    expected = [f1_score(g, p, average="macro") for g, p in zip(gold, pred)]
    assert result.instance_scores == pytest.approx(tuple(100 * e for e in expected))
    assert result.score == pytest.approx(100 * sum(expected) / 3) and result.n == 3


def test_sentence_macro_f1_tags_only_predicted_and_all_o_sentences():
    # B-ORG, only predicted, is one of the labels averaged, with F1 0; O: P = 1, R = 2/3, F1 = 0.8
    result = sentence_macro_f1([["O", "O", "B-ORG"]], [["O", "O", "O"]])
    assert result.score == pytest.approx(100 * (0.8 + 0.0) / 2)
    assert sentence_macro_f1([["O"] * 5], [["O"] * 5]).score == 100.0  # all "O" predicted all "O"
    # tag ids or names: the same sentence scores
    assert sentence_macro_f1([[0, 0, 3]], [[0, 0, 0]]).score == result.score


def test_sentence_macro_f1_rejects_misaligned_input():
    with pytest.raises(ValueError, match="2 predicted sentences for 1"):
        sentence_macro_f1([["O"], ["O"]], [["O"]])
    with pytest.raises(ValueError, match="sentence 0 has 1 predicted tags for 2"):
        sentence_macro_f1([["O"]], [["O", "O"]])


# --- QA: F1 of the predicted and gold answer-token position sets ----------------------------------


def test_answer_token_f1_sets_and_empty_sets_as_position_0():
    gold = {"a": [10, 11, 12], "b": [], "c": [5], "d": []}
    pred = {"a": [11, 12, 13, 14], "b": [], "c": [], "d": [7]}
    result = answer_token_f1(pred, gold)
    # a: P = 2/4, R = 2/3 -> 4/7; b: {0} vs {0} -> 1 (unanswerable, abstained);
    # c: nothing predicted = {0} vs {5} -> 0; d: {7} vs {0} -> 0
    assert result.instance_scores == pytest.approx((100 * 4 / 7, 100.0, 0.0, 0.0))
    assert result.instance_ids == ("a", "b", "c", "d")
    assert answer_token_f1({"x": [0]}, {"x": []}).score == 100.0  # position 0 itself = no answer
    with pytest.raises(ValueError, match="no prediction for reference 'b'"):
        answer_token_f1({"a": [1]}, {"a": [1], "b": []})


# --- IR: scikit-learn ndcg_score on the 10 best documents ----------------------------------------


def test_retrieved_ndcg_takes_the_ideal_from_the_top_10_only():
    # 12 documents ranked; the relevant d11 is outside the top 10, d2 inside
    run = {"q": {f"d{i}": 1.0 - i / 100 for i in range(12)}}
    qrels = {"q": {"d2": 1, "d11": 2, "d5": 0}}
    result = retrieved_ndcg_at_10(run, qrels)
    top_gains = [int(i == 2) for i in range(10)]
    top_scores = [1.0 - i / 100 for i in range(10)]
    assert result.score == pytest.approx(100 * ndcg_score([top_gains], [top_scores]))
    assert result.score == pytest.approx(50.0)  # d2 3rd: 1/log2(4); the ideal of these 10 ranks it 1st: 1
    # standard NDCG@10 (pytrec_eval) is lower: its ideal ranking holds both relevant documents
    assert METRICS["ndcg@10"](run, qrels).score < result.score


def test_retrieved_ndcg_queries_without_relevant_top_10_and_without_run():
    run = {"q1": {f"d{i}": -i for i in range(11)}, "q2": {"d0": 0.5, "d1": 0.4}}
    qrels = {"q1": {"d10": 1}, "q2": {"d1": 1}, "q3": {"d0": 1}, "q4": {"d3": 0}}
    result = retrieved_ndcg_at_10(run, qrels)
    # q1: its only relevant document is 11th -> 0; q2: ranked 2nd of 2 -> 1/log2(3) / 1;
    # q3: not in the run -> 0; q4: no relevant document -> not evaluated
    assert result.instance_ids == ("q1", "q2", "q3")
    assert result.instance_scores == pytest.approx((0.0, 100 * ndcg_score([[0, 1]], [[0.5, 0.4]]), 0.0))
    assert result.details == {"queries_without_run": 1, "queries_without_relevant": 1}
    single = retrieved_ndcg_at_10({"q": {"d1": 1.0}}, {"q": {"d1": 1}})
    assert single.score == 100.0  # one retrieved document: its relevance


def test_every_task_has_a_metric_under_both_protocols():
    for spec in TASKS.values():
        assert spec.metric_under("standard") == spec.metric in METRICS
        assert spec.metric_under("paper") == PAPER_PROTOCOL_METRICS[spec.task_type] in METRICS
    with pytest.raises(ValueError, match="unknown protocol"):
        TASKS["sst2"].metric_under("glue")
