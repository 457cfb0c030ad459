"""Pretraining objectives as pure torch functions (no Composer): MLM masking, CLM labels, phases.

Masks are drawn row by row, each row from its own CPU `torch.Generator` seeded from (seed, the
sample's global index), never from the global RNG, the step or the rank: a sample gets the same
mask whatever the number of ranks, the micro-batch size or the batch it lands in, and a resumed run
(on any number of ranks) sees exactly the masks of an uninterrupted one (docs/pretraining.md).
Token ids always come from the tokenizer (pretraining.tokenizer.special_token_ids), never literals.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch

IGNORE_INDEX = -100
# The batch key holding each row's global sample index (LongTensor[B]; pretraining/data/loader.py).
SAMPLE_INDEX = "sample_index"
# The batch key holding each position's window of its block (LongTensor[B, L]; pretraining/data/windows.py).
WINDOW_IDS = "window_ids"


@dataclass(frozen=True)
class TokenIds:
    """What the objectives need from the tokenizer. `special` = ids never masked nor drawn."""

    mask: int
    special: tuple[int, ...]
    vocab_size: int


def sample_generator(seed: int, sample_index: int) -> torch.Generator:
    """A CPU generator that depends only on (seed, sample_index): one sample's mask stream."""
    if sample_index < 0:
        raise ValueError(f"sample index {sample_index} is negative")
    generator = torch.Generator()
    # Mix the two integers into one 63-bit seed (splitmix-style constants, deterministic).
    generator.manual_seed((seed * 0x9E3779B97F4A7C15 + sample_index * 0xBF58476D1CE4E5B9) % (2**63 - 1))
    return generator


def sample_generators(seed: int, sample_indices: Iterable[int] | torch.Tensor) -> list[torch.Generator]:
    """One generator per row of a batch, from the rows' global sample indices."""
    if isinstance(sample_indices, torch.Tensor):
        sample_indices = sample_indices.tolist()
    return [sample_generator(seed, int(index)) for index in sample_indices]


def _rows(draw, generators: Sequence[torch.Generator], length: int, device) -> torch.Tensor:
    """[len(generators), length] of `draw(length, generator)`, one row per generator, on `device`."""
    return torch.stack([draw(length, generator) for generator in generators]).to(device)


def mask_for_mlm(
    input_ids: torch.Tensor,
    generators: Sequence[torch.Generator],
    ratio: float,
    mask_id: int,
    special_ids: Iterable[int],
    vocab_size: int,
    replace: tuple[float, float, float] = (1.0, 0.0, 0.0),
) -> tuple[torch.Tensor, torch.Tensor]:
    """(masked inputs, labels) of a [B, L] batch; row b draws only from `generators[b]`.

    Each non-special position is selected independently with prob `ratio`.

    A selected position's label is its original token (else -100). `replace` = probabilities
    (mask token, random token, unchanged) for selected positions: the paper's (1, 0, 0) default,
    or BERT's (0.8, 0.1, 0.1). Random tokens come from the regular vocabulary only: ids in
    [0, vocab_size) minus `special_ids` (the specials and the mask token are never drawn).
    """
    if not 0.0 <= ratio <= 1.0:
        raise ValueError(f"masking ratio {ratio} is not in [0, 1]")
    if len(replace) != 3 or min(replace) < 0 or abs(sum(replace) - 1.0) > 1e-6:
        raise ValueError(f"replace={replace}: three probabilities (mask, random, keep) summing to 1")
    special = torch.tensor(sorted(set(special_ids) | {mask_id}), dtype=input_ids.dtype)
    special = special.to(input_ids.device)
    if input_ids.ndim != 2 or len(generators) != input_ids.shape[0]:
        raise ValueError(
            f"{len(generators)} generators for input_ids of shape {tuple(input_ids.shape)}: "
            "one per row of a [B, L] batch"
        )
    device, length = input_ids.device, input_ids.shape[1]

    def uniform(n, g):
        return torch.rand(n, generator=g)

    eligible = ~torch.isin(input_ids, special)
    draw = _rows(uniform, generators, length, device)
    selected = eligible & (draw < ratio)
    labels = torch.where(selected, input_ids, torch.full_like(input_ids, IGNORE_INDEX))
    masked = input_ids.clone()
    p_mask, p_random, _ = replace
    if p_mask >= 1.0:
        masked[selected] = mask_id
        return masked, labels
    band = _rows(uniform, generators, length, device)
    to_mask = selected & (band < p_mask)
    to_random = selected & (band >= p_mask) & (band < p_mask + p_random)
    regular = torch.ones(vocab_size, dtype=torch.bool)
    regular[special[special < vocab_size].cpu()] = False
    regular_ids = torch.nonzero(regular).flatten().to(device)
    picks = _rows(lambda n, g: torch.randint(len(regular_ids), (n,), generator=g), generators, length, device)
    masked[to_mask] = mask_id
    masked[to_random] = regular_ids[picks][to_random]
    return masked, labels


def clm_labels(
    input_ids: torch.Tensor, segment_ids: torch.Tensor | None = None, pad_id: int | None = None
) -> torch.Tensor:
    """Next-token labels aligned with positions: labels[:, t] = input_ids[:, t + 1].

    -100 at the last position, wherever t and t + 1 belong to different attention segments (the
    last token of a window, or of a document under attention_scope "document", never predicts the
    next one; inside a window the EOS predicts the next document's first token, as released), at
    padding (segment id < 0) and, when `pad_id` is given, wherever the target is the pad token.
    With Llama-3 specials pad == eos, so leave `pad_id` None when padding is marked by segment
    ids: otherwise EOS is never a target.
    """
    labels = torch.full_like(input_ids, IGNORE_INDEX)
    labels[:, :-1] = input_ids[:, 1:]
    if segment_ids is not None:
        crossing = segment_ids[:, 1:] != segment_ids[:, :-1]
        labels[:, :-1][crossing] = IGNORE_INDEX
        labels[segment_ids < 0] = IGNORE_INDEX
    if pad_id is not None:
        labels[labels == pad_id] = IGNORE_INDEX
    return labels


@dataclass(frozen=True)
class Phase:
    objective: str  # "clm" | "mlm"
    is_causal: bool


def phase_at(step: int, objective: str, switch_at: int | None) -> Phase:
    """The objective of the batch at 0-based `step`: a pure function of the step (resume-safe).

    objective "clm" / "mlm": one phase; "clm_then_mlm": CLM for steps < switch_at, then MLM with
    bidirectional attention.
    """
    if objective == "clm":
        return Phase("clm", True)
    if objective == "mlm":
        return Phase("mlm", False)
    if objective == "clm_then_mlm":
        if switch_at is None:
            raise ValueError("objective clm_then_mlm needs switch_at")
        return Phase("clm", True) if step < switch_at else Phase("mlm", False)
    raise ValueError(f"unknown objective {objective!r}; choose clm, mlm or clm_then_mlm")
