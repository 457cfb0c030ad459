"""The four task kinds (SC, TC, QA, IR): preprocessing, head + loss, predictions for evaluation.

Every kind module offers the same functions, so the run code has no per-task branches:
  build_module(backbone, data, settings) -> nn.Module whose forward(batch) is the training loss
  training_features(data, tokenizer, settings) -> (features, collate)
  metric_inputs(module, data, role, tokenizer, settings, ctx) -> {protocol: (predictions,
      references)} for one split role ("validation" | "test"): the inputs of the task's metric
      under `settings.protocol` (TaskSpec.metric_under), and, where the same predictions serve
      it, under the other protocol too (SC, TC, IR; docs/protocol.md)
  num_labels(data, protocol) -> int (SC, TC, QA): the labels of the task head
`data` is a benchmarks.datasets.TaskData; `settings` carries max_length, the evaluation protocol
and the kind options (KindSettings). The protocol is an option of a kind: `paper` = the released
harness's heads, inputs and labels, `standard` = the community ones.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType

KINDS = {"SC": "sc", "TC": "tc", "QA": "qa", "IR": "ir"}  # task type -> module (imported on use)

# The settings where the released harness and the better-known convention part (docs/protocol.md,
# "Choices" 18-23): each protocol's choice, taken where a run config leaves the field null.
# `own_if_shipped`: the checkpoint's own head class where its config.json names one, else ours.
PROTOCOL_CHOICES = {
    "paper": {
        "ir_eval_encoding": "sentence_transformers",
        "tc_whitespace_tokens": "next_word",
        "head": "own_if_shipped",
        "release_quirks": True,
        "weight_decay_exempt": "layernorm_and_bias",
    },
    "standard": {
        "ir_eval_encoding": "as_training",
        "tc_whitespace_tokens": "ignore",
        "head": "package",
        "release_quirks": False,
        "weight_decay_exempt": "one_dim",
    },
}


def protocol_choice(name: str, protocol: str, value: str | None = None) -> str:
    """`value`, or the protocol's choice of setting `name` when it is None."""
    return PROTOCOL_CHOICES[protocol][name] if value is None else value


def own_head_class(task_type: str, protocol: str) -> str | None:
    """The transformers Auto class of a task's own head, as the released configs name it
    (`model_class`; QA is a 2-label token classification under `paper`); None for IR."""
    qa = "AutoModelForTokenClassification" if protocol == "paper" else "AutoModelForQuestionAnswering"
    return {"SC": "AutoModelForSequenceClassification", "TC": "AutoModelForTokenClassification", "QA": qa}.get(
        task_type
    )


@dataclass(frozen=True)
class KindSettings:
    max_length: int  # already the protocol's (benchmarks.kinds.common.protocol_max_length)
    protocol: str = "paper"  # paper | standard (docs/protocol.md)
    doc_stride: int = 128  # QA standard: overlap of consecutive windows, in tokens
    n_best: int = 20  # QA standard: start/end candidates per window
    max_answer_length: int = 30  # QA standard: longest answer span, in tokens
    null_score_diff_threshold: float = 0.0  # SQuAD-v2 standard: answer "" when null - best span > this
    ir_scale: float = 20.0  # IR: cosine similarity scale of the InfoNCE loss (1 / temperature)
    ir_top_k: int = 100  # IR: documents kept per query for NDCG@10
    device_microbatch_size: int | None = None  # IR: gradient-caching chunk (None: whole batch)
    # IR evaluation inputs: sentence_transformers (SentenceTransformer.encode, as released) |
    # as_training (the training inputs); None: the protocol's choice
    ir_eval_encoding: str | None = None
    ir_eval_max_length: int | None = None  # sentence_transformers: max_seq_length (None: max_length)
    ir_model_dir: str | None = None  # sentence_transformers: the saved retriever it loads
    trust_remote_code: bool = False  # sentence_transformers: how it loads ir_model_dir
    tc_whitespace_tokens: str | None = None  # TC: next_word | ignore; None: the protocol's choice
    head: str = "package"  # SC/TC/QA: package (ours) | own (the backbone is the checkpoint's task model)
    # The release's known quirks (docs/protocol.md, "Choices" 22); QA `paper`: argmax over every
    # position of batches of 4, a cut answer's gold one position past the window. None: the protocol's
    release_quirks: bool | None = None

    def __post_init__(self):
        for name in ("ir_eval_encoding", "tc_whitespace_tokens", "release_quirks"):
            object.__setattr__(self, name, protocol_choice(name, self.protocol, getattr(self, name)))


def get_kind(task_type: str) -> ModuleType:
    if task_type not in KINDS:
        raise ValueError(f"unknown task kind {task_type!r}; use one of {sorted(KINDS)}")
    return importlib.import_module(f"benchmarks.kinds.{KINDS[task_type]}")
