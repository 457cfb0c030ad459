"""Packing documents into fixed-length samples (pure numpy; no streaming or torch needed)."""

import numpy as np
import pytest

from pretraining.data.packing import (
    SamplePacker,
    check_sample,
    document_ids,
    document_tokens,
    pack_documents,
)

EOS, BOS = 1, 0


def docs_of(lengths, start=10):
    """Documents with distinct token values (doc i holds start+i), eos appended."""
    return [document_tokens([start + i] * n, EOS) for i, n in enumerate(lengths)]


def test_document_tokens_appends_eos_and_optional_bos():
    assert document_tokens([5, 6], EOS).tolist() == [5, 6, EOS]
    assert document_tokens([5, 6], EOS, BOS).tolist() == [BOS, 5, 6, EOS]
    assert document_tokens([], EOS).tolist() == [EOS]
    assert document_tokens([200_000], EOS).dtype == np.uint32  # Llama-3 ids need > 16 bits


def test_counts_and_leftover():
    docs = docs_of([3, 5, 2, 9])  # 4 + 6 + 3 + 10 = 23 tokens
    samples, leftover = pack_documents(docs, seq_len=8)
    assert len(samples) == 2 and leftover == 23 - 16
    stream = np.concatenate(docs)
    assert np.array_equal(np.concatenate([s.input_ids for s in samples]), stream[:16])


def test_boundaries_are_kept_and_crossing_documents_split():
    samples, _ = pack_documents(docs_of([3, 5, 2, 9]), seq_len=8)
    # sample 0: doc0 (4 tokens) + first 4 of doc1; sample 1: last 2 of doc1, doc2 (3), 3 of doc3
    assert [s.doc_lengths.tolist() for s in samples] == [[4, 4], [2, 3, 3]]
    for sample in samples:
        assert sample.input_ids.dtype == np.uint32 and sample.doc_lengths.dtype == np.uint32
        assert int(sample.doc_lengths.sum()) == 8
        check_sample(sample.input_ids, sample.doc_lengths, 8, EOS)


def test_long_document_spans_several_samples():
    samples, leftover = pack_documents(docs_of([20]), seq_len=8)  # 21 tokens with eos
    assert [s.doc_lengths.tolist() for s in samples] == [[8], [8]] and leftover == 5
    samples, leftover = pack_documents(docs_of([23]), seq_len=8)  # exactly 3 samples
    assert len(samples) == 3 and leftover == 0
    assert samples[-1].input_ids[-1] == EOS


def test_exact_fit_emits_immediately_and_packer_counts():
    packer = SamplePacker(seq_len=4)
    out = list(packer.add(document_tokens([7, 7, 7], EOS)))
    assert len(out) == 1 and packer.leftover_tokens == 0
    assert list(packer.add(document_tokens([8], EOS))) == []
    assert (packer.documents, packer.tokens, packer.samples, packer.leftover_tokens) == (2, 6, 1, 2)


def test_token_conservation_on_random_documents():
    rng = np.random.default_rng(0)
    lengths = rng.integers(0, 50, size=200)
    docs = docs_of(lengths.tolist())
    samples, leftover = pack_documents(docs, seq_len=32)
    total = sum(len(d) for d in docs)
    assert len(samples) * 32 + leftover == total and leftover < 32
    assert sum(len(s.doc_lengths) for s in samples) >= len(samples)
    for sample in samples:
        check_sample(sample.input_ids, sample.doc_lengths, 32, EOS)


def test_document_ids_from_lengths():
    assert document_ids([3, 2]).tolist() == [0, 0, 0, 1, 1]
    assert document_ids([4]).tolist() == [0, 0, 0, 0]
    assert document_ids(np.array([1, 1, 2], dtype=np.uint32)).dtype == np.int64


def test_check_sample_rejects_broken_samples():
    ids = np.array([5, EOS, 6, 6], dtype=np.uint32)
    check_sample(ids, np.array([2, 2], dtype=np.uint32), 4, EOS)
    with pytest.raises(ValueError, match="sum to"):
        check_sample(ids, np.array([2, 1], dtype=np.uint32), 4, EOS)
    with pytest.raises(ValueError, match="eos"):
        check_sample(ids, np.array([1, 3], dtype=np.uint32), 4, EOS)
    with pytest.raises(ValueError, match="vocabulary"):
        check_sample(ids, np.array([2, 2], dtype=np.uint32), 4, EOS, vocab_size=6)
    with pytest.raises(ValueError, match="seq_len|shape"):
        check_sample(ids, np.array([2, 2], dtype=np.uint32), 8, EOS)


def test_pure_modules_import_only_stdlib_and_numpy():
    """packing and config must stay importable without streaming, torch or Composer."""
    import ast

    import pretraining.data.config as config_module
    import pretraining.data.packing as packing_module

    for module in (packing_module, config_module):
        tree = ast.parse(open(module.__file__).read())
        names = {
            alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
        }
        names |= {
            node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
        }
        assert names <= {"__future__", "collections", "dataclasses", "typing", "numpy"}, (module.__name__, names)
