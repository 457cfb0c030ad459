"""Model FLOPs of one pretraining step from the model's shape and the batch as trained (pure torch):
what Composer's SpeedMonitor turns into FLOP/s and MFU (docs/watching.md).

Forward + backward = 3 x forward, a multiply-add = 2 FLOPs:
  body:      6 x N_body x tokens, N_body = the transformer's parameters (no embedding: a lookup)
  LM head:   6 x vocab x hidden x labelled tokens (the head runs at labelled positions only,
             pretraining/modeling.py: the masked ones under MLM, every target under CLM)
  attention: 12 x layers x (heads x head_dim) x sum over segments of length^2 (QK^T and AV over
             the attention segments actually used: the windows of each block, or their documents,
             docs/pretraining.md "Windows and attention scope"; the whole square of a segment is
             counted, also under causal attention, as in the PaLM appendix B convention)
A block of 2,048 tokens split into two windows has about 2/3 of the attention FLOPs of the whole
block (E[a^2 + (L-a)^2] = 2L^2/3 for a uniform split), which a dense count would overstate.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from pretraining.objectives import IGNORE_INDEX


@dataclass(frozen=True)
class FlopShape:
    layers: int
    attention_width: int  # query heads x head dim
    body_parameters: int
    head_parameters: int  # vocab x hidden


def flop_shape(config) -> FlopShape:
    """From an MlmClmConfig (pretraining.presets.closed_form_parameter_count: the shapes alone)."""
    from pretraining.presets import closed_form_parameter_count

    counts = closed_form_parameter_count(config)
    return FlopShape(
        layers=config.num_hidden_layers,
        attention_width=config.num_attention_heads * config.head_dim,
        body_parameters=counts["body"],
        head_parameters=counts["lm_head"],
    )


def attention_pairs(segment_ids: torch.Tensor) -> int:
    """Sum over rows and segments of segment length squared; segment_ids LongTensor[B, L] (ids >= 0)."""
    rows, length = segment_ids.shape
    span = int(segment_ids.max()) + 1 if segment_ids.numel() else 1
    keys = segment_ids.long() + span * torch.arange(rows, device=segment_ids.device).unsqueeze(1)
    counts = torch.bincount(keys.flatten().cpu(), minlength=rows * span)
    return int((counts * counts).sum())


def step_flops(shape: FlopShape, segment_ids: torch.Tensor, labels: torch.Tensor) -> float:
    """Model FLOPs (forward + backward) of a batch with these attention segments and labels."""
    tokens = segment_ids.numel()
    labelled = int((labels != IGNORE_INDEX).sum())
    return float(
        6 * shape.body_parameters * tokens
        + 6 * shape.head_parameters * labelled
        + 12 * shape.layers * shape.attention_width * attention_pairs(segment_ids)
    )
