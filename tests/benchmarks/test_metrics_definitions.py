"""Metrics against hand-computed values and the official definitions on tricky inputs."""

import math

import pytest

from benchmarks.metrics import (
    accuracy,
    exact_match,
    ndcg_at_10,
    normalize_answer,
    pooled_doc_ids,
    rank_documents,
    record_f1,
    relevant_queries,
    run_from_scores,
    seqeval_f1,
    squad_v1,
    squad_v2,
    token_f1_v1,
    token_f1_v2,
)


def test_accuracy_x100_with_per_instance_scores():
    result = accuracy([1, 0, 2, 2], [1, 1, 2, 0], ids=["a", "b", "c", "d"])
    assert result.score == 50.0 and result.n == 4
    assert result.instance_scores == (100.0, 0.0, 100.0, 0.0)
    assert result.instance_ids == ("a", "b", "c", "d")
    with pytest.raises(ValueError):
        accuracy([1], [1, 0])


# --- seqeval -------------------------------------------------------------------------------


def test_seqeval_default_mode_is_conlleval_compatible_on_ill_formed_bio():
    gold = [["B-PER", "I-PER", "O", "B-LOC"]]
    # I-PER after O starts an entity in the default (conlleval) mode
    pred = [["I-PER", "I-PER", "O", "B-LOC"]]
    assert seqeval_f1(pred, gold).score == 100.0
    strict = seqeval_f1(pred, gold, mode="strict")
    assert strict.score == pytest.approx(100 * 2 * (1 * 0.5) / (1 + 0.5))  # P=1/1, R=1/2


def test_seqeval_type_change_inside_a_chunk_and_adjacent_entities():
    gold = [["B-ORG", "I-ORG", "B-ORG", "O"], ["O", "O"]]
    pred = [["B-ORG", "I-LOC", "B-ORG", "O"], ["B-MISC", "O"]]
    result = seqeval_f1(pred, gold)
    # predicted entities: ORG(0,0), LOC(1,1), ORG(2,2), MISC(0,0 of s2); gold: ORG(0,1), ORG(2,2)
    tp, n_pred, n_gold = 1, 4, 2
    assert result.score == pytest.approx(100 * 2 * tp / (n_pred + n_gold))
    assert (
        result.details["true_positives"],
        result.details["predicted_entities"],
        result.details["gold_entities"],
    ) == (tp, n_pred, n_gold)
    assert result.instance_scores == pytest.approx((100 * 2 * 1 / 5, 0.0))


def test_seqeval_is_micro_over_the_split_not_mean_of_sentences():
    gold = [["B-PER"], ["B-PER"], ["B-LOC"], ["O"]]
    pred = [["B-PER"], ["O"], ["B-LOC"], ["O"]]
    result = seqeval_f1(pred, gold)
    assert result.score == pytest.approx(100 * 2 * 2 / (2 + 3))
    assert result.instance_scores == (100.0, 0.0, 100.0, 100.0)  # empty/empty sentence = 100


def test_seqeval_rejects_length_mismatch():
    with pytest.raises(ValueError, match="sentence 0 has 1 predicted tags for 2 words"):
        seqeval_f1([["O"]], [["O", "B-PER"]])


# --- SQuAD / ReCoRD --------------------------------------------------------------------------


def test_normalisation_articles_punctuation_case_whitespace():
    assert normalize_answer("The  Eiffel-Tower!") == "eiffeltower"
    assert normalize_answer("an apple, a pear and THE plum.") == "apple pear and plum"
    assert normalize_answer("theatre Anthem") == "theatre anthem"  # whole words only
    assert normalize_answer("Café «déjà»") == "café «déjà»"  # only ASCII punctuation
    assert exact_match("the Beatles.", "Beatles") == 1.0


def test_token_f1_hand_computed():
    # pred tokens: [denver, broncos], gold: [broncos] -> P=1/2, R=1 -> F1=2/3
    assert token_f1_v1("Denver Broncos", "the Broncos") == pytest.approx(2 / 3)
    # repeated tokens count with multiplicity (bag of tokens)
    assert token_f1_v1("x b b", "b b c") == pytest.approx(2 / 3)
    assert token_f1_v1("a b b", "b b c") == pytest.approx(0.8)  # "a" is an article: dropped
    assert token_f1_v1("", "") == 0.0  # v1.1: nothing shared -> 0
    assert token_f1_v2("", "") == 1.0 and token_f1_v2("the", "") == 1.0  # both normalise to ""
    assert token_f1_v2("x", "") == 0.0


def test_squad_v1_max_over_duplicated_gold_answers_and_missing_prediction():
    refs = {
        "q1": {"text": ["Denver Broncos", "Denver Broncos", "Broncos"], "answer_start": [0, 0, 7]},
        "q2": {"text": ["1990"], "answer_start": [3]},
        "q3": {"text": ["Paris"], "answer_start": [0]},
    }
    preds = {"q1": "the Broncos", "q2": "in 1990", "extra": "ignored"}
    result = squad_v1(preds, refs)
    f1_q2 = 2 * (1 / 2 * 1) / (1 / 2 + 1)
    assert result.instance_scores == pytest.approx((100.0, 100 * f1_q2, 0.0))
    assert result.score == pytest.approx(100 * (1 + f1_q2 + 0) / 3)
    assert result.details["exact_match"] == pytest.approx(100 / 3)
    assert result.details["missing_predictions"] == 1
    with pytest.raises(ValueError, match="no gold answer"):
        squad_v1({"q": "x"}, {"q": {"text": [], "answer_start": []}})


def test_squad_v2_no_answer_rules():
    refs = {
        "has": {"text": ["Paris", "paris"], "answer_start": [0, 0]},
        "none": {"text": [], "answer_start": []},
        "punct": ["."],  # normalises to "": treated as unanswerable
        "has2": ["blue whale"],
    }
    preds = {"has": "Paris", "none": "", "punct": "something", "has2": ""}
    result = squad_v2(preds, refs)
    assert result.instance_scores == (100.0, 100.0, 0.0, 0.0)
    assert result.details["HasAns_total"] == 2 and result.details["NoAns_total"] == 2
    assert result.details["HasAns_f1"] == 50.0 and result.details["NoAns_f1"] == 50.0
    # threshold: a probability above it turns the prediction into "no answer"
    probs = {"has": 0.9, "none": 0.9, "punct": 0.9, "has2": 0.1}
    assert squad_v2(preds, refs, probs).instance_scores == (100.0, 100.0, 0.0, 0.0)  # 1.0 = never
    assert squad_v2(preds, refs, probs, no_answer_threshold=0.5).instance_scores == (0.0, 100.0, 100.0, 0.0)


def test_record_max_f1_over_answers_with_squad_normalisation():
    refs = {0: ["Acme Corp", "ACME"], 1: ["Alice Smith"], 2: ["Berlin"]}
    preds = {0: "acme", 1: "Smith", 2: "the Berlin."}
    result = record_f1(preds, refs)
    assert result.instance_scores == pytest.approx((100.0, 100 * 2 / 3, 100.0))
    assert result.details["exact_match"] == pytest.approx(200 / 3)
    assert record_f1({}, refs).score == 0.0


# --- NDCG@10 ---------------------------------------------------------------------------------


def _dcg(gains):
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains))


def test_ndcg_hand_computed_binary_and_graded():
    qrels = {"q1": {"d1": 3, "d2": 1, "d3": 0}}
    run = {"q1": {"d3": 0.9, "d2": 0.8, "d1": 0.1}}
    binary = ndcg_at_10(run, qrels)
    assert binary.score == pytest.approx(100 * _dcg([0, 1, 1]) / _dcg([1, 1]))
    graded = ndcg_at_10(run, qrels, relevance="graded")
    assert graded.score == pytest.approx(100 * _dcg([0, 1, 3]) / _dcg([3, 1]))  # linear gain


def test_ndcg_cuts_at_10():
    qrels = {"q": {"rel": 1}}
    run = {"q": {**{f"x{i:02d}": 1.0 - i / 100 for i in range(10)}, "rel": 0.0}}
    assert ndcg_at_10(run, qrels).score == 0.0
    run["q"]["x09"] = -1.0
    assert ndcg_at_10(run, qrels).score == pytest.approx(100 / math.log2(11))


def test_ndcg_ties_follow_pytrec_doc_id_descending():
    qrels = {"q": {"a": 1}}
    run = {"q": {"a": 0.5, "b": 0.5, "c": 0.5}}  # tie: order c, b, a
    assert ndcg_at_10(run, qrels).score == pytest.approx(100 / math.log2(4))
    assert [d for d, _ in rank_documents(run["q"])] == ["c", "b", "a"]


def test_ndcg_queries_without_hits_count_as_zero():
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 1}, "q4": {"d": 0}}
    run = {"q1": {"a": 2.0}, "q3": {}, "q5": {"a": 1.0}}  # q2 absent, q3 empty, q5 unjudged
    result = ndcg_at_10(run, qrels)
    assert result.instance_ids == ("q1", "q2", "q3")  # q4 has no relevant document
    assert result.instance_scores == (100.0, 0.0, 0.0)
    assert result.score == pytest.approx(100 / 3)
    assert result.details["queries_without_run"] == 2
    assert ndcg_at_10({}, qrels).score == 0.0


def test_run_from_scores_keeps_pytrec_order_under_truncation():
    docs = ["d1", "d2", "d3", "d4"]
    run = run_from_scores(["q"], docs, [[0.1, 0.7, 0.7, 0.2]], top_k=2)
    assert list(run["q"]) == ["d3", "d2"]
    qrels = {"q": {"d2": 1}}
    full = run_from_scores(["q"], docs, [[0.1, 0.7, 0.7, 0.2]], top_k=None)
    assert ndcg_at_10(run, qrels).score == ndcg_at_10(full, qrels).score
    with pytest.raises(ValueError, match="shape"):
        run_from_scores(["q"], docs, [[0.1, 0.2]])


def test_pool_helpers():
    qrels = {"q1": {"a": 1, "b": 0}, "q2": {"c": 0}}
    assert relevant_queries(qrels) == ["q1"]
    assert pooled_doc_ids(qrels) == {"a", "b", "c"}
