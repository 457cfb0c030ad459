"""How much of a token's attention lies in its own document (pure numpy; docs/data.md, "Context
inside a window").

With the release's recipe (blocks split into two windows, attention over the whole window,
docs/pretraining.md) a token attends to every token of its window, its own document's and the
other documents' that the window holds. The share of its keys in its own document says how much
of that context is informative: near 1 when documents are long next to windows, low when a window
holds many short unrelated documents. For a window of W tokens whose document pieces have lengths
p_1..p_k, the mean over its tokens of (own-document keys / W) is sum(p_i^2) / W^2 (bidirectional
attention, as MLM sees it; CLM sees a prefix of the same window).

`WindowContext` accumulates it over windows (prepare-data and verify-data report it for prepared
shards); `simulate_window_context` estimates it for a document-length distribution packed into
blocks (the FineWeb-Edu estimate printed beside the toy world's).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pretraining.data.windows import EARLY_END, MIN_WINDOW, WindowMode, first_window_length, split_point

# FineWeb-Edu at the paper's 2,048-token blocks, estimated: documents lognormal with a mean of
# 1,000 tokens (the sample-10BT subset holds 9.67M documents for 10B GPT-2 tokens, about 1,034 a
# document) and a log-SD of 1.0 (ASSUMED: a heavy tail, median about 600 tokens).
FINEWEB_EDU_MEAN_DOC_TOKENS = 1000.0
FINEWEB_EDU_LOG_SD = 1.0  # assumed
FINEWEB_EDU_ASSUMPTION = (
    "documents lognormal with mean 1,000 tokens (FineWeb-Edu sample-10BT: 9.67M documents, 10B GPT-2 "
    "tokens) and log-SD 1.0 (assumed), packed into 2,048-token blocks split as in pretraining"
)


def window_pieces(doc_lengths: Sequence[int], boundaries: Sequence[int]) -> list[np.ndarray]:
    """The document pieces of each window of one block: `doc_lengths` tile the block (sum = its
    length), `boundaries` are the positions where a new window starts (e.g. [split])."""
    lengths = np.asarray(doc_lengths, dtype=np.int64)
    ends = np.cumsum(lengths)
    starts = ends - lengths
    edges = [0, *sorted(int(b) for b in boundaries), int(ends[-1]) if len(ends) else 0]
    pieces = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        if hi <= lo:
            continue
        overlap = np.minimum(ends, hi) - np.maximum(starts, lo)
        pieces.append(overlap[overlap > 0])
    return pieces


@dataclass
class WindowContext:
    """Running sums over windows: tokens, own-document keys (bidirectional), documents."""

    windows: int = 0
    tokens: int = 0
    own_document_keys: float = 0.0  # sum over tokens of the share of their window in their document
    document_pieces: int = 0

    def add_block(self, doc_lengths: Sequence[int], boundaries: Sequence[int]) -> None:
        for pieces in window_pieces(doc_lengths, boundaries):
            width = int(pieces.sum())
            self.windows += 1
            self.tokens += width
            self.own_document_keys += float((pieces.astype(np.float64) ** 2).sum()) / width
            self.document_pieces += len(pieces)

    def add_sample(
        self,
        doc_lengths: Sequence[int],
        sample_index: int,
        mode: WindowMode,
        seed: int,
        min_window: int = MIN_WINDOW,
        early_end: int = EARLY_END,
    ) -> None:
        """One prepared block, split as training splits it (pretraining/data/windows.py: the drawn
        split, moved to a document end at most `early_end` tokens before it)."""
        seq_len = int(np.sum(doc_lengths))
        if mode == "fixed":
            boundaries = []
        else:
            split = split_point(seed, sample_index, seq_len, min_window)
            boundaries = [first_window_length(split, doc_lengths, early_end)]
        self.add_block(doc_lengths, boundaries)

    def summary(self) -> dict:
        """`own_document_key_share`: mean over tokens of the share of their attention keys in their
        own document; `documents_per_window`: mean document pieces a window holds."""
        if not self.windows:
            return {"windows": 0, "own_document_key_share": None, "documents_per_window": None, "mean_window": None}
        return {
            "windows": self.windows,
            "own_document_key_share": round(self.own_document_keys / self.tokens, 4),
            "documents_per_window": round(self.document_pieces / self.windows, 3),
            "mean_window": round(self.tokens / self.windows, 1),
        }


def describe(summary: dict) -> str:
    """One phrase for logs: 'own-document share of attention keys 74.1% (1.6 documents a window of
    1,024 tokens on average)'."""
    if not summary.get("windows"):
        return "own-document share of attention keys: no window"
    return (
        f"own-document share of attention keys {100 * summary['own_document_key_share']:.1f}% "
        f"({summary['documents_per_window']:.1f} documents a window of {summary['mean_window']:,.0f} tokens on average)"
    )


def simulate_window_context(
    doc_lengths: Sequence[int], seq_len: int, mode: WindowMode = "random_split", seed: int = 0
) -> dict:
    """Pack documents of these lengths (in order) into blocks of `seq_len` and measure their windows."""
    context = WindowContext()
    block: list[int] = []
    filled = 0
    index = 0
    for length in doc_lengths:
        length = int(length)
        while length:
            take = min(length, seq_len - filled)
            block.append(take)
            filled += take
            length -= take
            if filled == seq_len:
                context.add_sample(block, index, mode, seed)
                block, filled, index = [], 0, index + 1
    return context.summary()


def fineweb_edu_estimate(seq_len: int = 2048, blocks: int = 2000, seed: int = 0) -> dict:
    """The statistic for FineWeb-Edu at `seq_len` under FINEWEB_EDU_ASSUMPTION (a simulation)."""
    rng = np.random.default_rng(seed)
    sigma = FINEWEB_EDU_LOG_SD
    mu = np.log(FINEWEB_EDU_MEAN_DOC_TOKENS) - sigma**2 / 2
    count = int(blocks * seq_len / FINEWEB_EDU_MEAN_DOC_TOKENS) + 1
    lengths = np.maximum(1, np.rint(rng.lognormal(mu, sigma, size=count))).astype(np.int64)
    return simulate_window_context(lengths, seq_len, seed=seed)
