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
    role: str = "test",
    **settings,
) -> float:
    """The chance level of `task` (0-100) on its `role` split, loaded from `data_root`. `tokenizer`
    and `max_length` (the run's effective length, record provenance `max_length`) are needed under
    the `paper` protocol for TC and QA (truncation decides what is scored); `settings`:
    `whitespace` (TC), `past_window` (QA, the release quirks), `pool` (IR candidate pool)."""
    from benchmarks.datasets.loading import load_task_data

    spec = get_task(task)
    pool = settings.pop("pool", None)
    kwargs = {"pool": pool} if pool is not None and spec.task_type == "IR" else {}
    data = load_task_data(
        spec,
        Path(data_root) if data_root else None,
        roles=(role,),
        query_split_seed=seed if task == "nq" else None,
        **kwargs,
    )
    return chance_of_split(spec, data, role, protocol, tokenizer, max_length, draws=draws, seed=seed, **settings)


def chance_of_split(
    spec,
    data,
    role: str,
    protocol: str,
    tokenizer=None,
    max_length: int | None = None,
    draws: int = IR_DRAWS,
    whitespace: str | None = None,
    past_window: bool = False,
    seed: int = 0,
) -> float:
    """The chance level of `data`'s `role` split (a loaded TaskData: a run's own, with its pool and
    query split) under `protocol`, the run's tokenizer and effective length; `seed` seeds the IR
    rankings (a run's level uses 0, as chance.csv)."""
    metric = METRICS[spec.metric_under(protocol)]
    needs_tokens = protocol == "paper" and spec.task_type in ("TC", "QA")
    if needs_tokens and (tokenizer is None or max_length is None):
        raise ValueError(
            f"{spec.name}: the paper protocol's chance level needs the tokenizer and max_length of the runs"
        )
    split = data.split(role)
    if spec.task_type == "SC":
        labels = list(split["label"])
        majority = Counter(labels).most_common(1)[0][0]
        return metric([majority] * len(labels), labels).score
    if spec.task_type == "TC":
        names = data.label_names or spec.label_names
        return _all_outside(split, names, metric, protocol, tokenizer, max_length, whitespace)
    if spec.task_type == "QA":
        return _no_answer(split, metric, protocol, tokenizer, max_length, past_window)
    return _random_ranking(split, metric, draws, seed)


def _all_outside(test, names, metric, protocol, tokenizer, max_length, whitespace=None) -> float:
    gold = [[names[i] for i in row] for row in test["tags"]]
    if protocol == "paper":
        from benchmarks.kinds.tc import encode

        features = encode(test["tokens"], None, tokenizer, max_length, protocol=protocol, whitespace=whitespace)
        seen = [sorted({w for w in f["word_of_token"] if w is not None}) for f in features]
        gold = [[tags[w] for w in words] for tags, words in zip(gold, seen)]
    return metric([["O"] * len(tags) for tags in gold], gold).score


def _no_answer(test, metric, protocol, tokenizer, max_length, past_window=False) -> float:
    from benchmarks.kinds.qa import examples_of, paper_features

    examples = examples_of(test)
    if protocol == "paper":
        features = paper_features(examples, tokenizer, max_length, past_window=past_window)
        gold = {e.id: f["answer"] for e, f in zip(examples, features)}  # as the run's metric inputs
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


# --- a run at its chance level (issue 67) ----------------------------------------------------------
CHANCE_BAND = 1.0  # points on the records' 0-100 scale: a score this close to chance is "at chance"
PRIOR_LOSS_SHARE = 0.95  # SC: a final training loss >= 95% of the label prior's entropy is "at the prior"
LOSS_TAIL = 0.1  # the share of the last steps whose mean loss is compared (at least one step)
_CACHE: dict = {}


def run_chance_levels(spec, data, protocols, tokenizer, max_length, whitespace=None, past_window=False) -> dict:
    """{protocol: {"validation": level, "test": level}} of a run's own data, tokenizer and length;
    computed once per load of the data in a process (an IR level is 50 rankings: seconds)."""
    token = getattr(data, "reuse_token", None)
    fingerprint = None
    if spec.task_type in ("TC", "QA"):
        from benchmarks.reuse import tokenizer_fingerprint

        fingerprint = tokenizer_fingerprint(tokenizer)
    levels = {}
    for protocol in protocols:
        levels[protocol] = {}
        for role in ("validation", "test"):
            key = (token, role, protocol, fingerprint, max_length, whitespace, past_window)
            cacheable = token is not None and (spec.task_type in ("SC", "IR") or fingerprint is not None)
            if cacheable and key in _CACHE:
                levels[protocol][role] = _CACHE[key]
                continue
            level = chance_of_split(
                spec, data, role, protocol, tokenizer, max_length, whitespace=whitespace, past_window=past_window
            )
            if cacheable:
                _CACHE[key] = level
            levels[protocol][role] = level
    return levels


def label_prior_entropy(labels) -> float:
    """The cross-entropy (nats) of always predicting the training labels' frequencies: where the
    training loss of an SC head that ignores its input ends."""
    import math

    counts = Counter(labels)
    total = sum(counts.values())
    return -sum(c / total * math.log(c / total) for c in counts.values() if c)


def tail_loss(step_losses) -> float | None:
    """The mean training loss of the last LOSS_TAIL share of the steps (one step at least)."""
    losses = [float(x) for x in step_losses or [] if x is not None]
    if not losses:
        return None
    tail = losses[-max(1, round(LOSS_TAIL * len(losses))) :]
    return sum(tail) / len(tail)


def at_chance(scores: dict, levels: dict, loss: float | None = None, prior: float | None = None) -> list[str]:
    """Why a run is at its chance level (empty: it is not): 'test' / 'validation' when that score is
    within CHANCE_BAND points of the role's chance level (or below it), 'train_loss' when the final
    training loss is at least PRIOR_LOSS_SHARE of the label prior's entropy. A description of what
    the run scored, not a test of what the model could learn: a flagged run is worth a look (its LR,
    its steps), not dropped."""
    reasons = [role for role in ("test", "validation") if scores[role] <= levels[role] + CHANCE_BAND]
    if loss is not None and prior is not None and prior > 0 and loss >= PRIOR_LOSS_SHARE * prior:
        reasons.append("train_loss")
    return reasons


def describe(reasons: list[str], scores: dict, levels: dict, loss=None, prior=None) -> str:
    """One clause for a warning line: what is at chance, with the numbers."""
    parts = [
        f"{role} {scores[role]:.2f} vs chance {levels[role]:.2f}" for role in ("test", "validation") if role in reasons
    ]
    if "train_loss" in reasons:
        parts.append(f"training loss {loss:.3f} at the label prior's {prior:.3f}")
    return "; ".join(parts)


def chance_flag(provenance) -> dict | None:
    """A record's `provenance.chance` when the record is flagged at its chance level; None when it
    is not, or predates the flag (the one reader of the flag: run, matrix, status, analysis)."""
    chance = provenance.get("chance") if isinstance(provenance, dict) else None
    return chance if isinstance(chance, dict) and chance.get("at_chance") else None


def chance_warning(record, where: str) -> str | None:
    """The one warning line of a record flagged at its chance level (None: not flagged, or a record
    from before the flag existed)."""
    chance = chance_flag(record.provenance)
    if chance is None:
        return None
    reinitialised = reinitialised_weights(record.provenance)
    if reinitialised:  # the likelier cause first: the checkpoint lacked these weights (issue 90)
        from benchmarks.kinds.loading import describe_reinitialised

        cause = (
            f"its checkpoint lacked {describe_reinitialised(reinitialised)}, re-initialised at random "
            "(provenance.loading_report): check the checkpoint, then its LR"
        )
    else:
        cause = "a collapsed run: check its LR"
    see = '(docs/benchmarks.md, "Runs at chance")'
    return f"warning: {where}: at its chance level ({chance.get('why')}); {cause} {see}"


def reinitialised_weights(provenance) -> list[str]:
    """The backbone weights a run's checkpoint lacked (`provenance.loading_report`; [] for a complete
    checkpoint or a record from before the report existed)."""
    report = provenance.get("loading_report") if isinstance(provenance, dict) else None
    names = report.get("reinitialised_backbone") if isinstance(report, dict) else None
    return [str(name) for name in names] if isinstance(names, list) else []
