"""Task metrics as pure functions (no model, no Composer): every score is x100 and comes with
per-instance scores, in the order of the references.

- `accuracy`: mean(prediction == label).
- `seqeval_f1`: entity-level micro F1 of `seqeval` in its default mode (conlleval-compatible:
  an I-X after O or after another type starts a new entity; what HF `run_ner` and
  `evaluate`'s seqeval report). `mode="strict"` + a scheme is available but not the default.
  Per-instance score = the sentence's entity F1 (100 when the sentence has no gold and no
  predicted entity); the corpus score is the micro F1, not their mean.
- `squad_v1`: official SQuAD v1.1 EM/F1 (normalisation: lower-case, drop ASCII punctuation,
  drop the words a/an/the, collapse whitespace; max over the gold answers); score = F1.
- `squad_v2`: official SQuAD v2.0: gold answers normalising to "" are dropped and a question
  without gold answers has gold [""]; an empty prediction means "no answer" and scores 1 only
  against an empty gold; `no_answer_probability` > `no_answer_threshold` (default 1.0, as
  `evaluate`'s squad_v2, i.e. never) also means "no answer": the harness decides abstention in
  its post-processing and passes "" then. Score = F1.
- `record_f1`: official ReCoRD v1.0 script: SQuAD v1.1 normalisation and F1, max over the gold
  answers; score = F1.
- `ndcg_at_10`: trec_eval `ndcg_cut.10` through pytrec_eval (linear gain = relevance,
  log2 discount, ideal DCG from all judged documents, score ties ordered by doc id descending).
  Relevance `binary` (default, as the released harness: grade >= 1 is relevant) or `graded`.
  Evaluated queries = those with at least one relevant document; a query the run misses or
  ranks nothing for scores 0 instead of being dropped (pytrec_eval silently drops it).
In all QA metrics a reference without a prediction scores 0 (as the official scripts count
unanswered questions).

The `paper` protocol's metrics (docs/protocol.md; what the paper's released harness EncodEval,
branch MLM_vs_CLM, computes in its `encodeval/eval_tasks/*_eval.py`):
- `accuracy` (SC), as above.
- `sentence_macro_f1` (TC): per sentence, scikit-learn `f1_score(gold, pred, average="macro")`
  over the word tags of that sentence (the labels present in either list); score = their mean.
- `answer_token_f1` (QA): per example, F1 between the set of predicted answer-token positions
  and the set of gold ones, an empty set counting as {0}; score = the mean. (The release computes
  this set F1 itself, not with scikit-learn; so does this function.)
- `retrieved_ndcg@10` (IR): per query with a relevant document, scikit-learn `ndcg_score` on the
  query's 10 best-scored documents with binary relevance (grade >= 1), so the ideal DCG comes from
  those 10 only; a query without a relevant document among them scores 0.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal


@dataclass(frozen=True)
class MetricResult:
    metric: str
    score: float  # x100
    instance_scores: tuple[float, ...]  # x100, aligned with instance_ids
    instance_ids: tuple = ()
    details: dict = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.instance_scores)

    def summary(self) -> dict:
        return {"metric": self.metric, "score": self.score, "n": self.n, **self.details}


def _mean100(values: Sequence[float]) -> float:
    return 100.0 * sum(values) / len(values) if values else 0.0


# ------------------------------------------------------------------------------------ SC


def accuracy(predictions: Sequence, references: Sequence, ids: Sequence | None = None) -> MetricResult:
    if len(predictions) != len(references):
        raise ValueError(f"accuracy: {len(predictions)} predictions for {len(references)} references")
    hits = [float(p == r) for p, r in zip(predictions, references)]
    return MetricResult(
        "accuracy",
        _mean100(hits),
        tuple(100.0 * h for h in hits),
        tuple(ids) if ids is not None else tuple(range(len(hits))),
    )


# ------------------------------------------------------------------------------------ TC


def _entities(tags: Sequence[str], mode, scheme) -> set:
    if mode == "strict":
        from seqeval.scheme import Entities

        return {(e.tag, e.start, e.end) for e in Entities([list(tags)], scheme).entities[0]}
    from seqeval.metrics.sequence_labeling import get_entities

    return set(get_entities(list(tags)))


def seqeval_f1(
    predictions: Sequence[Sequence[str]], references: Sequence[Sequence[str]], mode: str | None = None, scheme=None
) -> MetricResult:
    """Entity F1 over a split; tags are strings ("B-PER"), one list per sentence."""
    from seqeval.metrics import f1_score, precision_score, recall_score

    if len(predictions) != len(references):
        raise ValueError(f"seqeval: {len(predictions)} predicted sentences for {len(references)}")
    for i, (p, r) in enumerate(zip(predictions, references)):
        if len(p) != len(r):
            raise ValueError(
                f"seqeval: sentence {i} has {len(p)} predicted tags for {len(r)} "
                "words; predict a tag (e.g. 'O') for every word, truncated ones too"
            )
    if mode == "strict" and scheme is None:
        from seqeval.scheme import IOB2

        scheme = IOB2
    kwargs = {"mode": mode, "scheme": scheme} if mode else {}
    preds, refs = [list(p) for p in predictions], [list(r) for r in references]
    instance, tp, n_pred, n_gold = [], 0, 0, 0
    for p, r in zip(preds, refs):
        pe, ge = _entities(p, mode, scheme), _entities(r, mode, scheme)
        hit = len(pe & ge)
        tp, n_pred, n_gold = tp + hit, n_pred + len(pe), n_gold + len(ge)
        instance.append(100.0 if not pe and not ge else 200.0 * hit / (len(pe) + len(ge)))
    import warnings

    with warnings.catch_warnings():  # seqeval warns when a split has no entity at all
        warnings.simplefilter("ignore")
        f1 = float(f1_score(refs, preds, zero_division=0, **kwargs))
        details = {
            "precision": 100.0 * float(precision_score(refs, preds, zero_division=0, **kwargs)),
            "recall": 100.0 * float(recall_score(refs, preds, zero_division=0, **kwargs)),
            "true_positives": tp,
            "predicted_entities": n_pred,
            "gold_entities": n_gold,
            "mode": mode or "default",
        }
    return MetricResult("seqeval_f1", 100.0 * f1, tuple(instance), tuple(range(len(instance))), details)


# ------------------------------------------------------------------------------------ QA

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """Official SQuAD normalisation: lower, no ASCII punctuation, no articles, single spaces."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def token_f1_v1(prediction: str, gold: str) -> float:
    """SQuAD v1.1 / ReCoRD F1: 0 when nothing is shared (also when either side is empty)."""
    pred, ref = normalize_answer(prediction).split(), normalize_answer(gold).split()
    same = sum((Counter(pred) & Counter(ref)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(ref)
    return 2 * precision * recall / (precision + recall)


def token_f1_v2(prediction: str, gold: str) -> float:
    """SQuAD v2.0 F1: if either side is empty, 1 only when both are."""
    pred, ref = normalize_answer(prediction).split(), normalize_answer(gold).split()
    if not pred or not ref:
        return float(pred == ref)
    return token_f1_v1(prediction, gold)


def _gold_list(answers) -> list[str]:
    """Gold answer strings from `{"text": [...], ...}` (SQuAD), a list of strings or a string."""
    if isinstance(answers, Mapping):
        answers = answers["text"]
    if isinstance(answers, str):
        return [answers]
    return list(answers)


def _qa_v1(name: str, predictions: Mapping[Hashable, str], references: Mapping[Hashable, object]) -> MetricResult:
    f1s, ems, missing = [], [], 0
    for key, answers in references.items():
        gold = _gold_list(answers)
        if not gold:
            raise ValueError(
                f"{name}: reference {key!r} has no gold answer (a hidden-label split? "
                "unanswerable questions need squad_v2)"
            )
        if key not in predictions:
            missing += 1
            f1s.append(0.0)
            ems.append(0.0)
            continue
        pred = predictions[key]
        f1s.append(max(token_f1_v1(pred, g) for g in gold))
        ems.append(max(exact_match(pred, g) for g in gold))
    return MetricResult(
        name,
        _mean100(f1s),
        tuple(100.0 * f for f in f1s),
        tuple(references),
        {"f1": _mean100(f1s), "exact_match": _mean100(ems), "missing_predictions": missing},
    )


def squad_v1(predictions: Mapping[Hashable, str], references: Mapping[Hashable, object]) -> MetricResult:
    """references: id -> gold answers (SQuAD `answers` dict, or a list of strings)."""
    return _qa_v1("squad_f1", predictions, references)


def record_f1(predictions: Mapping[Hashable, str], references: Mapping[Hashable, object]) -> MetricResult:
    """ReCoRD: max F1 over the gold answers with SQuAD v1.1 normalisation."""
    return _qa_v1("record_f1", predictions, references)


def squad_v2(
    predictions: Mapping[Hashable, str],
    references: Mapping[Hashable, object],
    no_answer_probability: Mapping[Hashable, float] | None = None,
    no_answer_threshold: float = 1.0,
) -> MetricResult:
    """SQuAD v2.0; an empty prediction (or one whose no-answer probability exceeds the
    threshold) means "no answer"."""
    f1s, ems, has_ans, missing = [], [], [], 0
    probs = no_answer_probability or {}
    for key, answers in references.items():
        gold = [a for a in _gold_list(answers) if normalize_answer(a)] or [""]
        answerable = gold != [""]
        has_ans.append(answerable)
        if key not in predictions:
            missing += 1
            f1s.append(0.0)
            ems.append(0.0)
            continue
        if probs.get(key, 0.0) > no_answer_threshold:
            f1s.append(float(not answerable))
            ems.append(float(not answerable))
            continue
        pred = predictions[key]
        f1s.append(max(token_f1_v2(pred, g) for g in gold))
        ems.append(max(exact_match(pred, g) for g in gold))
    has = [f for f, h in zip(f1s, has_ans) if h]
    no = [f for f, h in zip(f1s, has_ans) if not h]
    return MetricResult(
        "squad_v2_f1",
        _mean100(f1s),
        tuple(100.0 * f for f in f1s),
        tuple(references),
        {
            "f1": _mean100(f1s),
            "exact": _mean100(ems),
            "HasAns_f1": _mean100(has),
            "HasAns_total": len(has),
            "NoAns_f1": _mean100(no),
            "NoAns_total": len(no),
            "no_answer_threshold": no_answer_threshold,
            "missing_predictions": missing,
        },
    )


# ------------------------------------------------------------------------------------ IR


def relevant_queries(qrels: Mapping[str, Mapping[str, int]]) -> list[str]:
    """Query ids with at least one document of grade >= 1 (the evaluated queries), sorted."""
    return sorted(q for q, docs in qrels.items() if any(g >= 1 for g in docs.values()))


def pooled_doc_ids(qrels: Mapping[str, Mapping[str, int]]) -> set[str]:
    """The `qrels_pool` candidate set: every document judged for these queries (any grade)."""
    return {d for docs in qrels.values() for d in docs}


def rank_documents(scores: Mapping[str, float], top_k: int | None = None) -> list[tuple[str, float]]:
    """Documents by decreasing score, ties by doc id descending (pytrec_eval/trec_eval order)."""
    ranked = sorted(((float(s), d) for d, s in scores.items()), reverse=True)
    return [(d, s) for s, d in ranked[:top_k]]


def run_from_scores(
    query_ids: Sequence[str], doc_ids: Sequence[str], scores, top_k: int | None = 100
) -> dict[str, dict[str, float]]:
    """A pytrec_eval run from a (queries x documents) score matrix, keeping each query's `top_k`
    documents in pytrec_eval's own order (so truncation cannot change NDCG@k for k <= top_k)."""
    import numpy as np

    matrix = np.asarray(scores, dtype=np.float64)
    if matrix.shape != (len(query_ids), len(doc_ids)):
        raise ValueError(f"scores have shape {matrix.shape}, expected ({len(query_ids)}, {len(doc_ids)})")
    run = {}
    for qid, row in zip(query_ids, matrix):
        if top_k is not None and top_k < len(doc_ids):
            threshold = np.partition(row, -top_k)[-top_k]
            keep = np.flatnonzero(row >= threshold)  # ties at the boundary kept, then sorted
        else:
            keep = np.arange(len(doc_ids))
        ranked = rank_documents({str(doc_ids[j]): row[j] for j in keep}, top_k)
        run[str(qid)] = dict(ranked)
    return run


def ndcg_at_10(
    run: Mapping[str, Mapping[str, float]],
    qrels: Mapping[str, Mapping[str, int]],
    relevance: Literal["binary", "graded"] = "binary",
    k: int = 10,
) -> MetricResult:
    """Mean NDCG@k (x100) over the queries of `qrels` that have a relevant document."""
    import pytrec_eval

    if relevance not in ("binary", "graded"):
        raise ValueError(f"relevance must be 'binary' or 'graded', got {relevance!r}")
    gains = {
        str(q): {str(d): (int(g >= 1) if relevance == "binary" else int(g)) for d, g in docs.items()}
        for q, docs in qrels.items()
    }
    queries = relevant_queries(gains)
    judged = {q: gains[q] for q in queries}
    trec_run = {
        str(q): {str(d): float(s) for d, s in docs.items()} for q, docs in run.items() if str(q) in judged and docs
    }
    measure = f"ndcg_cut.{k}"
    per_query = pytrec_eval.RelevanceEvaluator(judged, {measure}).evaluate(trec_run) if trec_run else {}
    key = f"ndcg_cut_{k}"
    values = [float(per_query.get(q, {}).get(key, 0.0)) for q in queries]
    if any(math.isnan(v) for v in values):
        raise ValueError("ndcg: pytrec_eval returned NaN")
    missing = sum(q not in per_query for q in queries)
    return MetricResult(
        f"ndcg@{k}",
        _mean100(values),
        tuple(100.0 * v for v in values),
        tuple(queries),
        {"relevance": relevance, "queries_without_run": missing, "queries_without_relevant": len(qrels) - len(queries)},
    )


# ------------------------------------------------------------------------------ paper protocol


def _require_same_length(name: str, predictions: Sequence, references: Sequence, what: str) -> None:
    if len(predictions) != len(references):
        raise ValueError(f"{name}: {len(predictions)} predicted {what} for {len(references)} references")


def sentence_macro_f1(predictions: Sequence[Sequence], references: Sequence[Sequence]) -> MetricResult:
    """Mean over sentences of scikit-learn's macro F1 of the sentence's word tags (strings or ids).

    The labels averaged over are those present in the sentence's gold or predicted tags, as
    `f1_score` picks them; a tag only predicted counts with F1 0. An all-"O" sentence predicted
    all "O" scores 100.
    """
    import warnings

    from sklearn import config_context
    from sklearn.exceptions import UndefinedMetricWarning
    from sklearn.metrics import f1_score

    _require_same_length("sentence_macro_f1", predictions, references, "sentences")
    values = []
    # One f1_score call per sentence: skip scikit-learn's own argument validation (a third of each
    # call; the lengths are checked here), not its arithmetic.
    with warnings.catch_warnings(), config_context(skip_parameter_validation=True, assume_finite=True):
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        for i, (pred, gold) in enumerate(zip(predictions, references)):
            if len(pred) != len(gold) or not gold:
                raise ValueError(
                    f"sentence_macro_f1: sentence {i} has {len(pred)} predicted tags for "
                    f"{len(gold)} gold tags; give one tag per word of a non-empty sentence"
                )
            values.append(float(f1_score(list(gold), list(pred), average="macro", zero_division=0.0)))
    return MetricResult(
        "sentence_macro_f1", _mean100(values), tuple(100.0 * v for v in values), tuple(range(len(values)))
    )


def answer_token_f1(
    predictions: Mapping[Hashable, Sequence[int]], references: Mapping[Hashable, Sequence[int]]
) -> MetricResult:
    """Mean over examples of the F1 between predicted and gold answer-token position sets.

    Positions are indices into the model input; an empty set (no answer, or none predicted)
    counts as {0}, so "no answer" predicted for an unanswerable question scores 100.
    """
    missing = [key for key in references if key not in predictions]
    if missing:
        raise ValueError(f"answer_token_f1: no prediction for reference {missing[0]!r}")
    values = []
    for key, gold in references.items():
        pred_set, gold_set = set(predictions[key]) or {0}, set(gold) or {0}
        shared = len(pred_set & gold_set)
        values.append(2.0 * shared / (len(pred_set) + len(gold_set)))  # = 2PR / (P + R)
    return MetricResult("answer_token_f1", _mean100(values), tuple(100.0 * v for v in values), tuple(references))


def retrieved_ndcg_at_10(
    run: Mapping[str, Mapping[str, float]], qrels: Mapping[str, Mapping[str, int]], k: int = 10
) -> MetricResult:
    """Mean over the queries of `qrels` with a relevant document (grade >= 1) of scikit-learn's
    `ndcg_score` on the query's `k` best-scored documents of `run` (binary relevance).

    The ideal DCG is that of those `k` documents, so the score is 0 when none of them is relevant
    and 100 when every relevant one retrieved is ranked above the others. A query absent from the
    run scores 0; one with a single retrieved document scores its relevance (`ndcg_score` needs
    two documents, and NDCG of one document is its relevance).
    """
    from sklearn import config_context
    from sklearn.metrics import ndcg_score

    queries = relevant_queries(qrels)
    values = []
    with config_context(skip_parameter_validation=True, assume_finite=True):  # one call per query
        for qid in queries:
            top = rank_documents(run.get(qid) or {}, k)
            gains = [int(qrels[qid].get(doc, 0) >= 1) for doc, _ in top]
            if len(top) < 2:
                values.append(float(sum(gains)))
            else:
                values.append(float(ndcg_score([gains], [[score for _, score in top]])))
    return MetricResult(
        f"retrieved_ndcg@{k}",
        _mean100(values),
        tuple(100.0 * v for v in values),
        tuple(queries),
        {
            "queries_without_run": sum(not run.get(q) for q in queries),
            "queries_without_relevant": len(qrels) - len(queries),
        },
    )


# Metric names (TaskSpec.metric, TaskSpec.metric_under) -> function.
METRICS = {
    "accuracy": accuracy,
    "seqeval_f1": seqeval_f1,
    "squad_f1": squad_v1,
    "squad_v2_f1": squad_v2,
    "record_f1": record_f1,
    "ndcg@10": ndcg_at_10,
    "sentence_macro_f1": sentence_macro_f1,
    "answer_token_f1": answer_token_f1,
    "retrieved_ndcg@10": retrieved_ndcg_at_10,
}
