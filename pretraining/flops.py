"""FLOPs of one pretraining step from the model's shape and the batch as trained (pure torch), in
the two counts every MFU of the package is given in (issue 82; docs/watching.md, docs/timings.md):

- **needed FLOPs** (`needed_flops`): the work the step must do. What Composer's SpeedMonitor turns
  into the live FLOP/s and `throughput/device/mfu`, and what the GPU goals are stated in.
- **model FLOPs** (`model_flops`): the usual 6N + attention convention, the LM head counted at every
  position; what other trainers' MFU figures usually mean. Under MLM-40 it credits the step with
  the head's work at the 60% of positions it never computes (0.854 of 6N for 610m).

Forward + backward = 3 x forward, a multiply-add = 2 FLOPs:
  body:      6 x N_body x tokens, N_body = the transformer's parameters (no embedding: a lookup)
  LM head:   needed: 6 x vocab x hidden x labelled tokens (the head runs at labelled positions
             only, pretraining/modeling.py: the masked ones under MLM, every target under CLM);
             model: 6 x vocab x hidden x tokens
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


def counted_flops(shape: FlopShape, tokens: int, head_tokens: int, pairs: int) -> float:
    """Forward + backward FLOPs of `tokens` through the body, `head_tokens` through the LM head and
    `pairs` attended (query, key) pairs: the one formula both counts use."""
    return float(
        6 * shape.body_parameters * tokens
        + 6 * shape.head_parameters * head_tokens
        + 12 * shape.layers * shape.attention_width * pairs
    )


def needed_flops(shape: FlopShape, segment_ids: torch.Tensor, labels: torch.Tensor) -> float:
    """Needed FLOPs of a batch with these attention segments and labels: the head at labelled positions."""
    tokens = segment_ids.numel()
    return counted_flops(shape, tokens, int((labels != IGNORE_INDEX).sum()), attention_pairs(segment_ids))


def model_flops(shape: FlopShape, segment_ids: torch.Tensor) -> float:
    """Model FLOPs of a batch (6N + attention): the head counted at every position."""
    tokens = segment_ids.numel()
    return counted_flops(shape, tokens, tokens, attention_pairs(segment_ids))
