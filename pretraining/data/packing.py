"""Document packing: token documents -> fixed-length samples that remember document boundaries.

Pure numpy (no streaming, torch or Composer). A sample is `input_ids` (uint32[seq_len]) plus
`doc_lengths` (uint32[k], sum == seq_len): the lengths of the document pieces it holds, in order. A
document that crosses a sample boundary is split; its pieces count as separate documents in each
sample (attention never crosses a sample). Tokens left after the last full sample are dropped and
reported as `leftover_tokens`: no padding, as in llm-foundry's ConcatTokensDataset.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

TOKEN_DTYPE = np.uint32  # Llama-3's 128,256 ids need more than 16 bits


@dataclass(frozen=True)
class PackedSample:
    input_ids: np.ndarray  # uint32[seq_len]
    doc_lengths: np.ndarray  # uint32[k], sum == seq_len


def document_tokens(ids: Sequence[int], eos_id: int, bos_id: int | None = None) -> np.ndarray:
    """One document as it enters the stream: [bos] + ids + [eos] (bos only when bos_id is given)."""
    head = [] if bos_id is None else [bos_id]
    return np.asarray(head + list(ids) + [eos_id], dtype=TOKEN_DTYPE)


@dataclass
class SamplePacker:
    """Feed documents with `add`; it yields every sample that becomes full."""

    seq_len: int
    documents: int = 0
    tokens: int = 0
    samples: int = 0
    _pieces: list[np.ndarray] = field(default_factory=list, repr=False)
    _filled: int = 0

    def __post_init__(self) -> None:
        if self.seq_len < 1:
            raise ValueError(f"seq_len must be >= 1, got {self.seq_len}")

    def add(self, tokens: np.ndarray) -> Iterator[PackedSample]:
        """Append one document's tokens (specials included) to the stream."""
        tokens = np.asarray(tokens, dtype=TOKEN_DTYPE)
        self.documents += 1
        self.tokens += len(tokens)
        start = 0
        while start < len(tokens):
            take = min(len(tokens) - start, self.seq_len - self._filled)
            self._pieces.append(tokens[start : start + take])
            self._filled += take
            start += take
            if self._filled == self.seq_len:
                yield self._emit()

    def _emit(self) -> PackedSample:
        sample = PackedSample(
            input_ids=np.concatenate(self._pieces),
            doc_lengths=np.fromiter((len(p) for p in self._pieces), dtype=TOKEN_DTYPE, count=len(self._pieces)),
        )
        self._pieces, self._filled = [], 0
        self.samples += 1
        return sample

    @property
    def leftover_tokens(self) -> int:
        """Tokens waiting for a sample that will never fill if no document follows."""
        return self._filled


def pack_documents(documents: Iterable[np.ndarray], seq_len: int) -> tuple[list[PackedSample], int]:
    """All full samples of `documents` packed in order, and the number of leftover tokens."""
    packer = SamplePacker(seq_len)
    samples = [sample for doc in documents for sample in packer.add(doc)]
    return samples, packer.leftover_tokens


def document_ids(doc_lengths: Sequence[int]) -> np.ndarray:
    """Per-position document index within one sample: lengths [3, 2] -> [0, 0, 0, 1, 1]."""
    lengths = np.asarray(doc_lengths, dtype=np.int64)
    return np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)


def check_sample(
    input_ids: np.ndarray, doc_lengths: np.ndarray, seq_len: int, eos_id: int, vocab_size: int | None = None
) -> None:
    """Raise ValueError when a stored sample breaks the packing invariants.

    Every document piece but the last of a sample ends with eos (only the last can be cut by the
    sample boundary).
    """
    if input_ids.shape != (seq_len,):
        raise ValueError(f"input_ids has shape {input_ids.shape}, expected ({seq_len},)")
    if doc_lengths.ndim != 1 or len(doc_lengths) == 0 or (doc_lengths == 0).any():
        raise ValueError(f"doc_lengths {doc_lengths.tolist()} must be a non-empty list of positive lengths")
    if int(doc_lengths.sum()) != seq_len:
        raise ValueError(f"doc_lengths sum to {int(doc_lengths.sum())}, expected {seq_len}")
    ends = np.cumsum(doc_lengths.astype(np.int64))[:-1] - 1
    if ends.size and (input_ids[ends] != eos_id).any():
        raise ValueError("a document inside the sample does not end with eos")
    if vocab_size is not None and int(input_ids.max()) >= vocab_size:
        raise ValueError(f"token id {int(input_ids.max())} is outside the vocabulary ({vocab_size})")
