"""Training windows and attention segments (pure numpy; docs/pretraining.md, "Windows and
attention scope").

The released trainer cuts the EOS-separated document stream into blocks of `seq_len` tokens (what
prepare-data stores) and splits each block at a random point into two windows of
`min_window`..`seq_len - min_window` tokens (2,048-token blocks: 12..2,036, mean 1,024; the
paper's "sequences of 12 to 2,048 tokens"). As released, the first window ends early at a document
end that lies at most `early_end` (12) tokens before the drawn split (`data.window_early_end`; the
first such end, so a window can come out shorter than 12 tokens); the second window runs to the end
of the block. `data.windows: fixed` keeps the whole block as one window. The split of a block is a
function of (data seed, the block's global sample index) only, never of an RNG's state: the same
on any number of ranks and after a resume, and the same for every model trained on the data (MLM
and CLM see the same windows).

Attention segments follow `model.attention_scope`: "window" (the release: the documents inside a
window attend to each other, separated only by EOS) or "document" (ModernBERT-style: attention
and positions per document piece, also cut at the window boundary).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

WindowMode = Literal["random_split", "fixed"]
AttentionScope = Literal["window", "document"]
MIN_WINDOW = 12  # the paper's shortest sequence
EARLY_END = 12  # the release's packer ends a window at a document end this close before its split
# A constant that keeps the window stream apart from any other stream seeded from the same
# (seed, sample index), e.g. the MLM masks (pretraining/objectives.py).
_WINDOW_STREAM = 0x57494E44


def split_point(seed: int, sample_index: int, seq_len: int, min_window: int = MIN_WINDOW) -> int:
    """Length of the first window of block `sample_index`: uniform on [min_window, seq_len -
    min_window], from a generator seeded with (stream, seed, sample_index) alone."""
    if seq_len < 2 * min_window:
        raise ValueError(f"seq_len {seq_len} cannot hold two windows of at least {min_window} tokens")
    if sample_index < 0:
        raise ValueError(f"sample index {sample_index} is negative")
    generator = np.random.default_rng([_WINDOW_STREAM, seed, sample_index])
    return int(generator.integers(min_window, seq_len - min_window, endpoint=True))


def first_window_length(split: int, doc_lengths: Sequence[int] | None, early_end: int = EARLY_END) -> int:
    """Where a block's first window ends: the first document end at `split - early_end` or later,
    if one lies at or before `split`, else `split` (the release's early end; docs/pretraining.md).
    `doc_lengths` are the lengths of the document pieces of the block (their ends are EOS
    positions + 1, except the block end); None or `early_end` 0: always `split`."""
    if early_end < 0:
        raise ValueError(f"data.window_early_end {early_end} is negative")
    if doc_lengths is None or early_end == 0:
        return split
    ends = np.cumsum(np.asarray(doc_lengths, dtype=np.int64))
    near = ends[(ends >= split - early_end) & (ends <= split)]
    return int(near[0]) if near.size else split


def window_ids(
    sample_indices: Sequence[int],
    seq_len: int,
    mode: WindowMode,
    seed: int,
    min_window: int = MIN_WINDOW,
    doc_lengths: Sequence[Sequence[int]] | None = None,
    early_end: int = EARLY_END,
) -> np.ndarray:
    """int64[B, seq_len]: 0 in each block's first window, 1 in its second (all 0 when `fixed`).
    `doc_lengths` (one list per block) enables the early end at a document end; without it every
    block splits at its drawn point."""
    ids = np.zeros((len(sample_indices), seq_len), dtype=np.int64)
    if mode == "fixed":
        return ids
    if mode != "random_split":
        raise ValueError(f"data.windows {mode!r} is not one of random_split, fixed")
    for row, index in enumerate(sample_indices):
        split = split_point(seed, int(index), seq_len, min_window)
        lengths = None if doc_lengths is None else doc_lengths[row]
        ids[row, first_window_length(split, lengths, early_end) :] = 1
    return ids


def attention_segments(window_ids: np.ndarray, document_ids: np.ndarray | None, scope: AttentionScope):
    """[B, L] segment of each position, numbered 0, 1, ... along the row: the windows ("window"),
    or the document pieces inside them ("document"). Works on numpy arrays and torch tensors."""
    if scope == "window":
        return window_ids
    if scope != "document":
        raise ValueError(f"model.attention_scope {scope!r} is not one of window, document")
    if document_ids is None:
        raise ValueError("attention_scope document needs the batch's document_ids")
    starts = (window_ids[:, 1:] != window_ids[:, :-1]) | (document_ids[:, 1:] != document_ids[:, :-1])
    segments = window_ids * 0  # same type, dtype and device as the input
    segments[:, 1:] = starts.cumsum(1)  # numpy: axis 1, torch: dim 1
    return segments
