"""Extractive QA under two protocols (docs/protocol.md).

`paper` (the released harness's QuestionAnsweringEval): a token-classification head with two
labels, 1 = the token lies inside the answer. The input is "Question: {question}\nContext: "
followed by the context + EOS, no special tokens added, one window truncated in the context only.
Every token of the window is labelled (the question's too); an unanswerable question, or an
answer the truncation cut away, labels no token. The first gold answer (its first offset) is the
one labelled. Predicted answer = the positions whose argmax is 1, scored against the labelled
positions (benchmarks.metrics.answer_token_f1).

`standard`: start/end token cross-entropy over windows of long contexts, span post-processing.
Follows the Hugging Face `run_qa` recipe (docs/benchmarks.md): the question is the
first segment, only the context is truncated, windows of `max_length` tokens overlap by
`doc_stride` tokens; a window that does not contain the whole answer (or an unanswerable
question) is labelled start = end = 0 (CLS/BOS). Predictions: the n-best start and end logits of
every window, spans inside the context and at most `max_answer_length` tokens, best score over all
windows. SQuAD-v2: answer "" when the null score (start + end logit at index 0, minimum over
windows) exceeds the best span score by more than `null_score_diff_threshold`.

ReCoRD is cast to extractive QA (`record_to_squad`): question = the query with "@placeholder"
kept verbatim, context = the passage verbatim ("@highlight" lines included, so entity offsets stay
valid), answer = the first mention (in passage order) of any gold entity; fallback: the first exact
substring match; training rows without a match are dropped. Evaluation scores the predicted span
text against all gold answers (max F1), with no snapping to entity mentions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from benchmarks.kinds import tc
from benchmarks.kinds.common import Backbone, EvalContext, batches, eos_token, pad_batch, to_device


@dataclass(frozen=True)
class QAExample:
    id: str
    question: str
    context: str
    answer_texts: tuple[str, ...]  # gold answers ([] = unanswerable)
    answer_starts: tuple[int, ...]  # character offsets in context, aligned with answer_texts


class SpanExtractor(nn.Module):
    """A linear layer to start/end logits (`head: package`), or the checkpoint's own
    AutoModelForQuestionAnswering, whose start/end logits the backbone then gives (`head: own`)."""

    def __init__(self, backbone: Backbone, own_head: bool = False):
        super().__init__()
        self.backbone = backbone
        self.head = None if own_head else nn.Linear(backbone.hidden_size, 2)

    def logits(self, batch: dict) -> torch.Tensor:
        """(batch, length, 2): start and end logits; padding positions get a large negative."""
        if self.head is None:
            out = self.backbone.outputs(batch["input_ids"], batch["attention_mask"])
            logits = torch.stack([out.start_logits, out.end_logits], dim=-1).float()
        else:
            logits = self.head(self.backbone(batch["input_ids"], batch["attention_mask"])).float()
        return logits.masked_fill(batch["attention_mask"][..., None] == 0, -1e4)

    def forward(self, batch: dict) -> torch.Tensor:
        logits = self.logits(batch)
        start = nn.functional.cross_entropy(logits[..., 0], batch["start_positions"])
        end = nn.functional.cross_entropy(logits[..., 1], batch["end_positions"])
        return (start + end) / 2


def _clip_question(question: str, tokenizer, max_tokens: int, strip: bool = True) -> str:
    if strip:
        question = question.lstrip()  # leading spaces make some tokenizers emit empty tokens (run_qa)
    enc = tokenizer(question, add_special_tokens=False, return_offsets_mapping=True)
    if len(enc["input_ids"]) <= max_tokens:
        return question
    return question[: enc["offset_mapping"][max_tokens - 1][1]]


def _windows(examples: Sequence[QAExample], tokenizer, max_length: int, doc_stride: int):
    questions = [_clip_question(e.question, tokenizer, max(1, max_length // 2)) for e in examples]
    # the overlap must be shorter than the context room of a window (questions take at most half)
    room = max_length - max_length // 2 - tokenizer.num_special_tokens_to_add(pair=True)
    stride = max(0, min(doc_stride, room - 1))
    return tokenizer(
        questions,
        [e.context for e in examples],
        truncation="only_second",
        max_length=max_length,
        stride=stride,
        return_overflowing_tokens=True,
        return_offsets_mapping=True,
        padding=False,
    )


def _context_range(sequence_ids: Sequence[int | None]) -> tuple[int, int]:
    first = sequence_ids.index(1)
    last = len(sequence_ids) - 1 - sequence_ids[::-1].index(1)
    return first, last


def train_features(examples: Sequence[QAExample], tokenizer, max_length: int, doc_stride: int) -> list[dict]:
    enc = _windows(examples, tokenizer, max_length, doc_stride)
    features = []
    for i, ids in enumerate(enc["input_ids"]):
        example = examples[enc["overflow_to_sample_mapping"][i]]
        offsets = enc["offset_mapping"][i]
        start_token = end_token = 0
        if example.answer_texts:
            start_char = example.answer_starts[0]
            end_char = start_char + len(example.answer_texts[0])
            first, last = _context_range(enc.sequence_ids(i))
            if offsets[first][0] <= start_char and offsets[last][1] >= end_char:
                start_token = first
                while start_token <= last and offsets[start_token][1] <= start_char:
                    start_token += 1
                end_token = last
                while end_token >= first and offsets[end_token][0] >= end_char:
                    end_token -= 1
        features.append({"input_ids": ids, "start_positions": start_token, "end_positions": end_token})
    return features


def eval_features(examples: Sequence[QAExample], tokenizer, max_length: int, doc_stride: int) -> list[dict]:
    enc = _windows(examples, tokenizer, max_length, doc_stride)
    features = []
    for i, ids in enumerate(enc["input_ids"]):
        sequence_ids = enc.sequence_ids(i)
        offsets = [tuple(o) if s == 1 else None for o, s in zip(enc["offset_mapping"][i], sequence_ids)]
        features.append({"input_ids": ids, "example_index": enc["overflow_to_sample_mapping"][i], "offsets": offsets})
    return features


class Collator:
    def __init__(self, pad_id: int):
        self.pad_id = pad_id

    def __call__(self, features: Sequence[dict]) -> dict:
        keys = ("input_ids", "start_positions", "end_positions")
        return pad_batch([{k: f[k] for k in keys if k in f} for f in features], self.pad_id)


# --- paper protocol: answer tokens as a 2-label token classification ---------------------------


RELEASE_EVAL_BATCH = 4  # the release's evaluation batches (padded to their longest input)


def answer_token_positions(
    example: QAExample,
    sequence_ids: Sequence[int | None],
    offsets: Sequence[tuple[int, int]],
    past_window: bool = False,
) -> list[int]:
    """Positions of the tokens of the first gold answer inside the window's context ([] = none).

    As the released labelling: the answer starts at the last context token starting at or before
    its first character and ends at the first one ending at or after its last character; an
    answer wholly outside the kept context labels nothing. An answer cut by the truncation: the
    release labels it up to one position past the window (`past_window`, its quirk), else the span
    stops at the last kept token.
    """
    if not example.answer_texts or not example.answer_starts:
        return []
    start_char = example.answer_starts[0]
    end_char = start_char + len(example.answer_texts[0])
    first, last = _context_range(sequence_ids)
    if offsets[first][0] > end_char or offsets[last][1] < start_char:
        return []
    start = first
    while start < last and offsets[start + 1][0] <= start_char:
        start += 1
    end = last
    while end > first and offsets[end - 1][1] >= end_char:
        end -= 1
    if past_window and offsets[last][1] < end_char:
        end = last + 1
    return list(range(start, end + 1))


def paper_features(examples: Sequence[QAExample], tokenizer, max_length: int, past_window: bool = False) -> list[dict]:
    """One window per example: "Question: {q}\nContext: " + context + EOS, no special tokens,
    truncated in the context; `labels` = 1 on the answer's tokens, 0 elsewhere; `answer` = the
    gold positions (`past_window`: a cut answer also holds the position after the window)."""
    eos = eos_token(tokenizer)
    questions = [
        f"Question: {_clip_question(e.question, tokenizer, max(1, max_length // 2), strip=False)}\nContext: "
        for e in examples
    ]
    enc = tokenizer(
        questions,
        [e.context + eos for e in examples],
        truncation="only_second",
        max_length=max_length,
        add_special_tokens=False,
        return_offsets_mapping=True,
    )
    features = []
    for i, (example, ids) in enumerate(zip(examples, enc["input_ids"])):
        answer = answer_token_positions(example, enc.sequence_ids(i), enc["offset_mapping"][i], past_window)
        inside = set(answer)
        labels = [int(j in inside) for j in range(len(ids))]
        features.append({"input_ids": ids, "labels": labels, "answer": answer})
    return features


@torch.no_grad()
def predict_positions(
    model: tc.TokenClassifier, features: Sequence[dict], pad_id: int, ctx: EvalContext, all_positions: bool = False
) -> list[list[int]]:
    """The input positions labelled 1 (inside the answer) by the model, per feature.

    Padding positions are not answers, unless `all_positions` (the release's quirk): then, as the
    release, the argmax runs over every position of batches of RELEASE_EVAL_BATCH examples padded
    to their longest, and padding labelled 1 counts (docs/protocol.md, "Choices" 11 and 22).
    """
    collate = tc.Collator(pad_id)
    positions = []
    for chunk in batches(features, RELEASE_EVAL_BATCH if all_positions else ctx.batch_size):
        with ctx.autocast():
            labels = model.logits(to_device(collate(chunk), ctx.device)).argmax(-1).cpu().tolist()
        kept = [row if all_positions else row[: len(f["input_ids"])] for f, row in zip(chunk, labels)]
        positions += [[j for j, y in enumerate(row) if y == 1] for row in kept]
    return positions


# --- standard protocol: start/end spans over windows ------------------------------------------


def postprocess(
    examples: Sequence[QAExample],
    features: Sequence[dict],
    start_logits: Sequence[np.ndarray],
    end_logits: Sequence[np.ndarray],
    n_best: int = 20,
    max_answer_length: int = 30,
    version_2: bool = False,
    null_score_diff_threshold: float = 0.0,
) -> list[str]:
    """The predicted answer text of every example ("" = no answer, SQuAD-v2 only)."""
    by_example: dict[int, list[int]] = {}
    for f, feat in enumerate(features):
        by_example.setdefault(feat["example_index"], []).append(f)
    predictions = []
    for e, example in enumerate(examples):
        best_text, best_score, min_null = "", -np.inf, np.inf
        for f in by_example.get(e, []):
            starts, ends, offsets = start_logits[f], end_logits[f], features[f]["offsets"]
            min_null = min(min_null, float(starts[0] + ends[0]))
            top_starts = np.argsort(starts)[::-1][:n_best]
            top_ends = np.argsort(ends)[::-1][:n_best]
            for s in top_starts:
                for t in top_ends:
                    if s >= len(offsets) or t >= len(offsets) or offsets[s] is None or offsets[t] is None:
                        continue
                    if t < s or t - s + 1 > max_answer_length:
                        continue
                    score = float(starts[s] + ends[t])
                    if score > best_score:
                        best_score = score
                        best_text = example.context[offsets[s][0] : offsets[t][1]]
        if version_2 and (best_score == -np.inf or min_null > best_score + null_score_diff_threshold):
            best_text = ""
        predictions.append(best_text)
    return predictions


@torch.no_grad()
def predict(
    model: SpanExtractor,
    examples: Sequence[QAExample],
    tokenizer,
    max_length: int,
    doc_stride: int,
    ctx: EvalContext,
    n_best: int,
    max_answer_length: int,
    version_2: bool,
    null_score_diff_threshold: float,
) -> list[str]:
    features = eval_features(examples, tokenizer, max_length, doc_stride)
    collate = Collator(tokenizer.pad_token_id)
    starts, ends = [], []
    for chunk in batches(features, ctx.batch_size):
        with ctx.autocast():
            logits = model.logits(to_device(collate(chunk), ctx.device)).float().cpu().numpy()
        for feat, row in zip(chunk, logits):
            n = len(feat["input_ids"])
            starts.append(row[:n, 0])
            ends.append(row[:n, 1])
    return postprocess(
        examples, features, starts, ends, n_best, max_answer_length, version_2, null_score_diff_threshold
    )


def squad_to_examples(rows) -> list[QAExample]:
    """SQuAD / SQuAD-v2 rows (answers = dict of lists) -> examples."""
    return [
        QAExample(
            str(r["id"]),
            r["question"],
            r["context"],
            tuple(r["answers"]["text"]),
            tuple(int(x) for x in r["answers"]["answer_start"]),
        )
        for r in rows
    ]


def record_to_example(row, index: int) -> QAExample:
    """ReCoRD row -> extractive example; answer_starts point at the first gold mention (see module doc)."""
    answers = tuple(row["answers"])
    spans = row["entity_spans"]
    mentions = sorted(zip(spans["start"], spans["text"]))
    first = next(((start, text) for start, text in mentions if text in answers), None)
    if first is None:
        found = [(row["passage"].find(a), a) for a in answers if row["passage"].find(a) >= 0]
        first = min(found) if found else None
    idx = row.get("idx") or {}
    qid = f"{idx.get('passage', index)}-{idx.get('query', index)}" if isinstance(idx, dict) else str(index)
    if first is None:
        return QAExample(qid, row["query"], row["passage"], answers, ())
    # the training span first, then the other gold strings (scored at evaluation, no offsets needed)
    ordered = (first[1],) + tuple(a for a in answers if a != first[1])
    return QAExample(qid, row["query"], row["passage"], ordered, (int(first[0]),))


# --- the task-kind interface (benchmarks.kinds) ---------------------------------------------------


def examples_of(rows) -> list[QAExample]:
    """Rows of a normalised QA split (SQuAD shape) or raw ReCoRD rows -> examples."""
    if "passage" in rows.column_names:
        return [record_to_example(row, i) for i, row in enumerate(rows)]
    return squad_to_examples(rows)


def training_example(example: QAExample) -> QAExample | None:
    """The span trained on: the earliest gold answer in the context (ReCoRD: the first mention of
    a gold entity); None when no answer has an offset (dropped)."""
    if not example.answer_texts:
        return example  # unanswerable (SQuAD-v2): trained towards index 0
    located = [(s, t) for s, t in zip(example.answer_starts, example.answer_texts)]
    if not located:
        return None
    start, text = min(located)
    return QAExample(example.id, example.question, example.context, (text,), (start,))


def num_labels(data, protocol: str) -> int:
    return 2  # paper: outside / inside the answer; standard: start / end


def build_module(backbone: Backbone, data, settings) -> nn.Module:
    own = settings.head == "own"
    if settings.protocol == "paper":
        return tc.TokenClassifier(backbone, num_labels(data, settings.protocol), own_head=own)
    return SpanExtractor(backbone, own_head=own)


def training_features(data, tokenizer, settings) -> tuple[list[dict], object]:
    if settings.protocol == "paper":  # every training row, unanswerable or cut answers label nothing
        features = paper_features(examples_of(data.train), tokenizer, settings.max_length)
        return features, tc.Collator(tokenizer.pad_token_id)
    examples = [e for e in map(training_example, examples_of(data.train)) if e is not None]
    features = train_features(examples, tokenizer, settings.max_length, settings.doc_stride)
    return features, Collator(tokenizer.pad_token_id)


def metric_inputs(module, data, role: str, tokenizer, settings, ctx: EvalContext) -> dict:
    """The run's own protocol only (a span and a set of positions are different predictions):
    `paper`: {id: predicted positions} and {id: gold positions} (both [] = no answer);
    `standard`: {id: answer string ("" = no answer)} and {id: gold answers ([] = unanswerable)}."""
    examples = examples_of(data.split(role))
    if len({e.id for e in examples}) != len(examples):
        raise ValueError(f"{data.spec.name} {role}: example ids are not unique")
    ids = [e.id for e in examples]
    if settings.protocol == "paper":
        quirks = settings.release_quirks
        features = paper_features(examples, tokenizer, settings.max_length, past_window=quirks)
        predicted = predict_positions(module, features, tokenizer.pad_token_id, ctx, all_positions=quirks)
        gold = [f["answer"] for f in features]
        return {"paper": (dict(zip(ids, predicted)), dict(zip(ids, gold)))}
    predictions = predict(
        module,
        examples,
        tokenizer,
        settings.max_length,
        settings.doc_stride,
        ctx,
        settings.n_best,
        settings.max_answer_length,
        data.spec.metric == "squad_v2_f1",
        settings.null_score_diff_threshold,
    )
    return {"standard": (dict(zip(ids, predictions)), {e.id: list(e.answer_texts) for e in examples})}
