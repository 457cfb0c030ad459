"""Sequence classification: cross-entropy on mean-pooled (attention-masked) states + a linear head.

Under both protocols (docs/protocol.md) the metric (accuracy) is the same; they differ in the
input: `paper` appends EOS and adds no special tokens (the released harness's
SequenceClassificationEval.tokenize), `standard` uses the tokenizer's special tokens. The head is
ours (`head: package`) or the checkpoint's own AutoModelForSequenceClassification (`head: own`,
the backbone is then that task model and gives the logits).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from benchmarks.kinds.common import Backbone, EvalContext, mean_pool, pad_batch, run_in_batches, tokenize


class SequenceClassifier(nn.Module):
    def __init__(self, backbone: Backbone, num_labels: int, own_head: bool = False):
        super().__init__()
        self.backbone = backbone
        self.head = None if own_head else nn.Linear(backbone.hidden_size, num_labels)

    def logits(self, batch: dict) -> torch.Tensor:
        if self.head is None:  # the checkpoint's own task model
            return self.backbone.outputs(batch["input_ids"], batch["attention_mask"]).logits
        hidden = self.backbone(batch["input_ids"], batch["attention_mask"])
        return self.head(mean_pool(hidden, batch["attention_mask"]))

    def forward(self, batch: dict) -> torch.Tensor:
        """Training loss of a batch (mean cross-entropy)."""
        return nn.functional.cross_entropy(self.logits(batch).float(), batch["labels"])


def encode(
    texts: Sequence[str], labels: Sequence[int] | None, tokenizer, max_length: int, *, protocol: str
) -> list[dict]:
    enc = tokenize(tokenizer, texts, max_length, protocol=protocol)
    features = [{"input_ids": ids} for ids in enc["input_ids"]]
    if labels is not None:
        for feat, label in zip(features, labels):
            feat["labels"] = int(label)
    return features


class Collator:
    def __init__(self, pad_id: int):
        self.pad_id = pad_id

    def __call__(self, features: Sequence[dict]) -> dict:
        return pad_batch(features, self.pad_id)


def predict(
    model: SequenceClassifier, texts: Sequence[str], tokenizer, max_length: int, ctx: EvalContext, *, protocol: str
) -> list[int]:
    features = encode(texts, None, tokenizer, max_length, protocol=protocol)
    logits = run_in_batches(model.logits, features, Collator(tokenizer.pad_token_id), ctx)
    return torch.cat(logits).argmax(-1).tolist() if logits else []


# --- the task-kind interface (benchmarks.kinds) ---------------------------------------------------


def num_labels(data, protocol: str) -> int:
    return len(data.label_names) or data.spec.num_labels


def build_module(backbone: Backbone, data, settings) -> SequenceClassifier:
    return SequenceClassifier(backbone, num_labels(data, settings.protocol), own_head=settings.head == "own")


def training_features(data, tokenizer, settings) -> tuple[list[dict], Collator]:
    train = data.train
    features = encode(train["text"], train["label"], tokenizer, settings.max_length, protocol=settings.protocol)
    return features, Collator(tokenizer.pad_token_id)


def metric_inputs(module, data, role: str, tokenizer, settings, ctx: EvalContext) -> dict:
    """Accuracy under both protocols: {protocol: (predicted label ids, gold label ids)}."""
    split = data.split(role)
    predictions = predict(module, split["text"], tokenizer, settings.max_length, ctx, protocol=settings.protocol)
    inputs = (predictions, list(split["label"]))
    return {"paper": inputs, "standard": inputs}
