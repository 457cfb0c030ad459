"""Chance levels (benchmarks.chance) on the committed toy data, checked against the raw files."""

import json
from collections import Counter

import pytest

from benchmarks.chance import chance_score
from benchmarks.datasets import TOY_DATA_ROOT
from benchmarks.kinds.common import load_tokenizer
from benchmarks.metrics import sentence_macro_f1


@pytest.fixture(scope="module")
def tokenizer():
    from pretraining.tokenizer import load_tokenizer as embedded

    return embedded("embedded")


def _rows(*parts):
    return [json.loads(line) for line in TOY_DATA_ROOT.joinpath(*parts).read_text().splitlines()]


@pytest.mark.parametrize("task", ["sst2", "qqp"])
def test_sc_chance_is_the_majority_class_of_the_test_split(task):
    labels = [r["label"] for r in _rows("nyu-mll", "glue", task, "validation.jsonl")]  # the carved-out test split
    majority = Counter(labels).most_common(1)[0][1] / len(labels)
    assert chance_score(task, TOY_DATA_ROOT, "standard") == pytest.approx(100 * majority)
    assert chance_score(task, TOY_DATA_ROOT, "paper") == pytest.approx(100 * majority)


def test_qa_no_answer_scores_the_unanswerable_share(tokenizer):
    rows = _rows("rajpurkar", "squad_v2", "squad_v2", "validation.jsonl")
    unanswerable = sum(not r["answers"]["text"] for r in rows) / len(rows)
    assert chance_score("squad_v2", TOY_DATA_ROOT, "standard") == pytest.approx(100 * unanswerable)
    assert chance_score("squad", TOY_DATA_ROOT, "standard") == 0.0
    # paper protocol: long windows keep every answer, so only the unanswerable ones score; short
    # windows cut answers away, and a constant "no answer" is then right on those too
    long = chance_score("squad_v2", TOY_DATA_ROOT, "paper", tokenizer, 1024)
    short = chance_score("squad_v2", TOY_DATA_ROOT, "paper", tokenizer, 48)
    assert long == pytest.approx(100 * unanswerable)
    assert short > long + 5
    assert chance_score("squad", TOY_DATA_ROOT, "paper", tokenizer, 1024) == 0.0


def test_tc_all_outside(tokenizer):
    assert chance_score("conll2003", TOY_DATA_ROOT, "standard") == 0.0  # seqeval: no entity found
    rows = _rows("hgissbkh", "conll2003-en", "default", "test.jsonl")
    from benchmarks.tasks import CONLL2003_TAGS

    gold = [[CONLL2003_TAGS[t] for t in r["ner"]] for r in rows]
    everything_seen = sentence_macro_f1([["O"] * len(g) for g in gold], gold).score
    assert chance_score("conll2003", TOY_DATA_ROOT, "paper", tokenizer, 4096) == pytest.approx(everything_seen)
    assert 0 < everything_seen < 60


def test_ir_random_ranking_is_low_and_deterministic():
    first = chance_score("msmarco", TOY_DATA_ROOT, "paper", draws=20)
    assert first == chance_score("msmarco", TOY_DATA_ROOT, "paper", draws=20)
    assert 0 < first < 20
    assert chance_score("msmarco", TOY_DATA_ROOT, "paper", draws=20, seed=1) != first


def test_paper_protocol_tc_and_qa_need_the_tokenizer():
    with pytest.raises(ValueError, match="tokenizer and max_length"):
        chance_score("squad", TOY_DATA_ROOT, "paper")


def test_an_exported_tokenizer_gives_the_same_levels(tokenizer, tmp_path):
    tokenizer.save_pretrained(tmp_path)
    again = load_tokenizer(str(tmp_path))
    assert chance_score("uner", TOY_DATA_ROOT, "paper", again, 64) == chance_score(
        "uner", TOY_DATA_ROOT, "paper", tokenizer, 64
    )
