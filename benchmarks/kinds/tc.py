"""Token classification: token cross-entropy over the sub-tokens of words, one tag per word.

Words are joined with single spaces and tokenised as running text; each token is mapped to the
word under its first non-space character (offset mapping). This works for every fast tokenizer,
also byte-level BPE ones that mis-handle pre-split input, and gives the same sub-tokens as plain
text. Tokens that cover no word (special tokens, the appended EOS) get -100. A token of joining
spaces only (Llama-3 splits " 1996" into " ", "199", "6") belongs to the next word with
`tc_whitespace_tokens: next_word`, as the released alignment gives it, and to none with `ignore`.

The two protocols (docs/protocol.md):
- `paper` (the released harness's TokenClassificationEval): the sentence + EOS without special
  tokens; EVERY sub-token is labelled with its word's tag, whitespace-only ones with the next
  word's; a word's prediction is the majority vote of its sub-tokens' predictions
  (`majority_vote`).
- `standard` (Hugging Face `run_ner`): the tokenizer's special tokens; only the first sub-token
  of a word with a character of it is labelled (continuations and whitespace-only tokens get
  -100) and predicts the word's tag.
Words cut off by truncation get no prediction (None): the paper metric leaves them out, as the
release does, and the standard metric (seqeval) counts them as "O".
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

import torch
from torch import nn

from benchmarks.kinds import protocol_choice
from benchmarks.kinds.common import Backbone, EvalContext, batches, pad_batch, to_device, tokenize

IGNORE = -100


class TokenClassifier(nn.Module):
    """A linear layer on the token states (`head: package`), or the checkpoint's own
    AutoModelForTokenClassification, whose logits the backbone then gives (`head: own`)."""

    def __init__(self, backbone: Backbone, num_labels: int, own_head: bool = False):
        super().__init__()
        self.backbone = backbone
        self.head = None if own_head else nn.Linear(backbone.hidden_size, num_labels)

    def logits(self, batch: dict) -> torch.Tensor:
        if self.head is None:
            return self.backbone.outputs(batch["input_ids"], batch["attention_mask"]).logits
        return self.head(self.backbone(batch["input_ids"], batch["attention_mask"]))

    def forward(self, batch: dict) -> torch.Tensor:
        logits = self.logits(batch).float()
        return nn.functional.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten(), ignore_index=IGNORE)


def token_word_ids(
    words: Sequence[str], offsets: Sequence[tuple[int, int]], whitespace: str = "ignore"
) -> list[int | None]:
    """For each token: index of the word under its first non-space character, or None.

    `whitespace="next_word"`: a token inside the sentence that covers no character of a word
    (joining spaces only; a special token's (0, 0) excepted) belongs to the first word ending after
    its start, i.e. the next word: the released TokenClassificationEval.tokenize walks the offsets
    so (docs/protocol.md, "Choices" 20)."""
    owner, ends = [], []
    for i, word in enumerate(words):
        owner.extend([i] * len(word))
        ends.append(len(owner))
        owner.append(None)  # the joining space
    text_length = len(owner) - 1
    result = []
    for start, end in offsets:
        word = next((owner[c] for c in range(start, end) if c < len(owner) and owner[c] is not None), None)
        if word is None and whitespace == "next_word" and (start, end) != (0, 0) and start < text_length:
            word = bisect.bisect_right(ends, start)
        result.append(word)
    return result


def first_subtoken_word_ids(
    words: Sequence[str], offsets: Sequence[tuple[int, int]], whitespace: str = "ignore"
) -> list[int | None]:
    """For each token: index of the word it starts, or None (special token / continuation)."""
    result, seen = [], set()
    for word in token_word_ids(words, offsets, whitespace):
        result.append(None if word in seen else word)
        seen.add(word)
    return result


def majority_vote(votes: Sequence[int]) -> int:
    """The most frequent label id among a word's sub-token predictions.

    Ties are broken as the released harness breaks them (`max(set(votes), key=votes.count)`):
    the tied label met first when iterating over a Python set of the votes (ordered by hash
    slot: often the smallest id, but {1, 8} iterates 8 first, so a 1-8 tie goes to 8).
    """
    return max(set(votes), key=list(votes).count)


def encode(
    sentences: Sequence[Sequence[str]],
    tags: Sequence[Sequence[int]] | None,
    tokenizer,
    max_length: int,
    *,
    protocol: str,
    whitespace: str | None = None,
) -> list[dict]:
    """Features of sentences (lists of words); `whitespace`: next_word | ignore, None: the protocol's."""
    # Plain lists first: indexing a `datasets` column row by row costs ~0.2 ms a row (the loop
    # below reads tags[i][w] for every token), iterating it once is cheap.
    sentences = list(sentences)
    tags = None if tags is None else list(tags)
    texts = [" ".join(words) for words in sentences]
    enc = tokenize(tokenizer, texts, max_length, protocol=protocol, return_offsets_mapping=True)
    align = token_word_ids if protocol == "paper" else first_subtoken_word_ids
    whitespace = protocol_choice("tc_whitespace_tokens", protocol, whitespace)
    features = []
    for i, words in enumerate(sentences):
        word_of_token = align(words, enc["offset_mapping"][i], whitespace)
        feat = {"input_ids": enc["input_ids"][i], "word_of_token": word_of_token, "n_words": len(words)}
        if tags is not None:
            feat["labels"] = [IGNORE if w is None else int(tags[i][w]) for w in word_of_token]
        features.append(feat)
    return features


class Collator:
    def __init__(self, pad_id: int):
        self.pad_id = pad_id

    def __call__(self, features: Sequence[dict]) -> dict:
        slim = [{k: f[k] for k in ("input_ids", "labels") if k in f} for f in features]
        has_labels = "labels" in features[0]
        return pad_batch(slim, self.pad_id, {"labels": IGNORE} if has_labels else None)


@torch.no_grad()
def predict(
    model: TokenClassifier,
    sentences: Sequence[Sequence[str]],
    tokenizer,
    max_length: int,
    ctx: EvalContext,
    *,
    protocol: str,
    whitespace: str | None = None,
) -> list[list[int | None]]:
    """One label id per word (None for words lost to truncation): the majority vote of the word's
    sub-tokens (`paper`) or its first sub-token's prediction (`standard`)."""
    features = encode(sentences, None, tokenizer, max_length, protocol=protocol, whitespace=whitespace)
    collate = Collator(tokenizer.pad_token_id)
    predictions = []
    for chunk in batches(features, ctx.batch_size):
        with ctx.autocast():
            ids = model.logits(to_device(collate(chunk), ctx.device)).argmax(-1).cpu().tolist()
        for feat, row in zip(chunk, ids):
            votes: list[list[int]] = [[] for _ in range(feat["n_words"])]
            for position, word in enumerate(feat["word_of_token"]):
                if word is not None:
                    votes[word].append(row[position])
            predictions.append([majority_vote(v) if v else None for v in votes])
    return predictions


# --- the task-kind interface (benchmarks.kinds) ---------------------------------------------------


def _names(data) -> tuple[str, ...]:
    return tuple(data.label_names or data.spec.label_names)


def num_labels(data, protocol: str) -> int:
    return len(_names(data))


def build_module(backbone: Backbone, data, settings) -> TokenClassifier:
    return TokenClassifier(backbone, num_labels(data, settings.protocol), own_head=settings.head == "own")


def training_features(data, tokenizer, settings) -> tuple[list[dict], Collator]:
    train = data.train
    features = encode(
        train["tokens"],
        train["tags"],
        tokenizer,
        settings.max_length,
        protocol=settings.protocol,
        whitespace=settings.tc_whitespace_tokens,
    )
    return features, Collator(tokenizer.pad_token_id)


def metric_inputs(module, data, role: str, tokenizer, settings, ctx: EvalContext) -> dict:
    """Word tag strings per sentence under both protocols: `paper` (sentence macro-F1) over the
    words the model saw, `standard` (seqeval) over all words, unseen ones tagged "O"."""
    names = _names(data)
    split = data.split(role)
    predicted = predict(
        module,
        split["tokens"],
        tokenizer,
        settings.max_length,
        ctx,
        protocol=settings.protocol,
        whitespace=settings.tc_whitespace_tokens,
    )
    gold = [[names[i] for i in row] for row in split["tags"]]
    seen = [[(names[p], g) for p, g in zip(row, tags) if p is not None] for row, tags in zip(predicted, gold)]
    paper = ([[p for p, _ in pairs] for pairs in seen], [[g for _, g in pairs] for pairs in seen])
    standard = ([["O" if p is None else names[p] for p in row] for row in predicted], gold)
    return {"paper": paper, "standard": standard}
