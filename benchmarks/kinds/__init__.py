"""The four task kinds (SC, TC, QA, IR): preprocessing, head + loss, predictions for evaluation.

Every kind module offers the same three functions, so the run code has no per-task branches:
  build_module(backbone, data, settings) -> nn.Module whose forward(batch) is the training loss
  training_features(data, tokenizer, settings) -> (features, collate)
  metric_inputs(module, data, role, tokenizer, settings, ctx) -> {protocol: (predictions,
      references)} for one split role ("validation" | "test"): the inputs of the task's metric
      under `settings.protocol` (TaskSpec.metric_under), and, where the same predictions serve
      it, under the other protocol too (SC, TC, IR; docs/protocol.md)
`data` is a benchmarks.datasets.TaskData; `settings` carries max_length, the evaluation protocol
and the kind options (KindSettings). The protocol is an option of a kind: `paper` = the released
harness's heads, inputs and labels, `standard` = the community ones.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType

KINDS = {"SC": "sc", "TC": "tc", "QA": "qa", "IR": "ir"}  # task type -> module (imported on use)


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


def get_kind(task_type: str) -> ModuleType:
    if task_type not in KINDS:
        raise ValueError(f"unknown task kind {task_type!r}; use one of {sorted(KINDS)}")
    return importlib.import_module(f"benchmarks.kinds.{KINDS[task_type]}")
