"""Token classification: token cross-entropy with the label on the first sub-token of each word.

Words are joined with single spaces and tokenised as running text; each token is mapped to the
word under its first non-space character (offset mapping). This works for every fast tokenizer,
also byte-level BPE ones that mis-handle pre-split input, and gives the same sub-tokens as plain
text. Continuation sub-tokens and special tokens get -100. At evaluation every word gets the tag
predicted at its first sub-token; words cut off by truncation are predicted "O" so that the
sequence lengths match the gold tags for seqeval.
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import nn

from benchmarks.kinds.common import Backbone, EvalContext, batches, pad_batch, to_device

IGNORE = -100


class TokenClassifier(nn.Module):
    def __init__(self, backbone: Backbone, num_labels: int):
        super().__init__()
        self.backbone = backbone
        self.head = nn.Linear(backbone.hidden_size, num_labels)

    def logits(self, batch: dict) -> torch.Tensor:
        return self.head(self.backbone(batch["input_ids"], batch["attention_mask"]))

    def forward(self, batch: dict) -> torch.Tensor:
        logits = self.logits(batch).float()
        return nn.functional.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten(), ignore_index=IGNORE)


def first_subtoken_word_ids(words: Sequence[str], offsets: Sequence[tuple[int, int]]) -> list[int | None]:
    """For each token: index of the word it starts, or None (special token / continuation)."""
    owner = []
    for i, word in enumerate(words):
        owner.extend([i] * len(word))
        owner.append(None)  # the joining space
    result, seen = [], set()
    for start, end in offsets:
        word = next((owner[c] for c in range(start, end) if c < len(owner) and owner[c] is not None), None)
        if word is None or word in seen:
            result.append(None)
        else:
            seen.add(word)
            result.append(word)
    return result


def encode(sentences: Sequence[Sequence[str]], tags: Sequence[Sequence[int]] | None, tokenizer,
           max_length: int) -> list[dict]:
    texts = [" ".join(words) for words in sentences]
    enc = tokenizer(texts, truncation=True, max_length=max_length, return_offsets_mapping=True)
    features = []
    for i, words in enumerate(sentences):
        word_of_token = first_subtoken_word_ids(words, enc["offset_mapping"][i])
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
def predict(model: TokenClassifier, sentences: Sequence[Sequence[str]], tokenizer, max_length: int,
            ctx: EvalContext, outside: int) -> list[list[int]]:
    """One label id per word; `outside` (the id of "O") for words lost to truncation."""
    features = encode(sentences, None, tokenizer, max_length)
    collate = Collator(tokenizer.pad_token_id)
    predictions = []
    for chunk in batches(features, ctx.batch_size):
        with ctx.autocast():
            ids = model.logits(to_device(collate(chunk), ctx.device)).argmax(-1).cpu().tolist()
        for feat, row in zip(chunk, ids):
            words = [outside] * feat["n_words"]
            for position, word in enumerate(feat["word_of_token"]):
                if word is not None:
                    words[word] = row[position]
            predictions.append(words)
    return predictions


# --- the task-kind interface (benchmarks.kinds) ---------------------------------------------------

def _names(data) -> tuple[str, ...]:
    return tuple(data.label_names or data.spec.label_names)


def build_module(backbone: Backbone, data, settings) -> TokenClassifier:
    return TokenClassifier(backbone, len(_names(data)))


def training_features(data, tokenizer, settings) -> tuple[list[dict], Collator]:
    train = data.train
    return encode(train["tokens"], train["tags"], tokenizer, settings.max_length), Collator(tokenizer.pad_token_id)


def predictions_and_references(module, data, role: str, tokenizer, settings, ctx: EvalContext):
    """Tag strings per word (seqeval input)."""
    names = _names(data)
    split = data.split(role)
    ids = predict(module, split["tokens"], tokenizer, settings.max_length, ctx, outside=names.index("O"))
    return [[names[i] for i in row] for row in ids], [[names[i] for i in row] for row in split["tags"]]
