"""Chance level of a task: the test score of a predictor that ignores its input, under the same
protocol, metric, tokenizer and truncation as a run (docs/benchmarks.md, "Chance levels").

What "ignores its input" means per task type (each is the strongest such predictor we know, so the
chance level is not set artificially low):
- SC: the best constant label on the test split (its majority class).
- TC: every word tagged "O" (under `paper`, the words a model of this tokenizer and length sees).
- QA: "no answer" for every question; under `paper` the gold answer positions come from the same
  windows as a run's (benchmarks.kinds.qa.paper_features), so answers truncated away count as
  "no answer", which a constant empty prediction gets right.
- IR: a uniformly random ranking of the candidate pool, averaged over `draws` draws (only the 10
  best documents count for both NDCG@10 metrics, so each draw samples 10 documents).

The scores go through the same metric functions as a run's (benchmarks.metrics.METRICS).
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

from benchmarks.metrics import METRICS
from benchmarks.tasks import get_task

IR_DRAWS = 50


def chance_score(
    task: str,
    data_root: str | Path | None,
    protocol: str,
    tokenizer=None,
    max_length: int | None = None,
    draws: int = IR_DRAWS,
    seed: int = 0,
) -> float:
    """The chance level of `task` (0-100) on its test split. `tokenizer` and `max_length` are
    needed under the `paper` protocol for TC and QA (truncation decides what is scored)."""
    from benchmarks.datasets.loading import load_task_data

    spec = get_task(task)
    metric = METRICS[spec.metric_under(protocol)]
    needs_tokens = protocol == "paper" and spec.task_type in ("TC", "QA")
    if needs_tokens and (tokenizer is None or max_length is None):
        raise ValueError(f"{task}: the paper protocol's chance level needs the tokenizer and max_length of the runs")
    data = load_task_data(
        spec, Path(data_root) if data_root else None, roles=("test",), query_split_seed=seed if task == "nq" else None
    )
    test = data.test
    if spec.task_type == "SC":
        labels = list(test["label"])
        majority = Counter(labels).most_common(1)[0][0]
        return metric([majority] * len(labels), labels).score
    if spec.task_type == "TC":
        return _all_outside(test, data.label_names or spec.label_names, metric, protocol, tokenizer, max_length)
    if spec.task_type == "QA":
        return _no_answer(test, metric, protocol, tokenizer, max_length)
    return _random_ranking(test, metric, draws, seed)


def _all_outside(test, names, metric, protocol, tokenizer, max_length) -> float:
    gold = [[names[i] for i in row] for row in test["tags"]]
    if protocol == "paper":
        from benchmarks.kinds.tc import encode

        features = encode(test["tokens"], None, tokenizer, max_length, protocol=protocol)
        seen = [sorted({w for w in f["word_of_token"] if w is not None}) for f in features]
        gold = [[tags[w] for w in words] for tags, words in zip(gold, seen)]
    return metric([["O"] * len(tags) for tags in gold], gold).score


def _no_answer(test, metric, protocol, tokenizer, max_length) -> float:
    from benchmarks.kinds.qa import examples_of, paper_features

    examples = examples_of(test)
    if protocol == "paper":
        features = paper_features(examples, tokenizer, max_length)
        gold = {e.id: [j for j, y in enumerate(f["labels"]) if y == 1] for e, f in zip(examples, features)}
        return metric({key: [] for key in gold}, gold).score
    gold = {e.id: list(e.answer_texts) for e in examples}
    return metric({key: "" for key in gold}, gold).score


def _random_ranking(split, metric, draws: int, seed: int) -> float:
    rng = random.Random(seed)
    docs = sorted(split.corpus)
    top = min(10, len(docs))
    total = 0.0
    for _ in range(draws):
        run = {q: {d: float(top - i) for i, d in enumerate(rng.sample(docs, top))} for q in sorted(split.queries)}
        total += metric(run, split.qrels).score
    return total / draws
