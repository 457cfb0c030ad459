"""The own-document share of attention keys (pretraining.data.context): the formula on crafted
blocks, the simulation, and what prepare-data and verify-data report (docs/data.md, "Context
inside a window")."""

import json

import numpy as np
import pytest

from pretraining.data.context import (
    WindowContext,
    fineweb_edu_estimate,
    simulate_window_context,
    window_pieces,
)
from pretraining.data.prepare import PrepareConfig, prepare_data
from pretraining.data.verify import measure_context, verify_prepared
from pretraining.data.windows import split_point, window_ids


def _brute_force_share(doc_lengths, boundaries):
    """Per token: keys in its window that belong to its document / keys in its window."""
    doc = np.repeat(np.arange(len(doc_lengths)), doc_lengths)
    window = np.zeros(len(doc), dtype=int)
    for b in boundaries:
        window[b:] += 1
    shares = [np.mean(doc[window == window[t]] == doc[t]) for t in range(len(doc))]
    return float(np.mean(shares))


@pytest.mark.parametrize(
    "doc_lengths, boundaries",
    [([10, 6], [10]), ([16], [5]), ([3, 3, 3, 7], [8]), ([1, 15], []), ([4, 4, 4, 4], [2])],
)
def test_the_share_is_sum_of_squared_pieces_over_the_window_squared(doc_lengths, boundaries):
    context = WindowContext()
    context.add_block(doc_lengths, boundaries)
    assert context.summary()["own_document_key_share"] == pytest.approx(
        _brute_force_share(doc_lengths, boundaries), abs=1e-4
    )
    assert context.tokens == sum(doc_lengths)


def test_window_pieces_cut_documents_at_window_boundaries():
    assert [p.tolist() for p in window_pieces([10, 6], [4])] == [[4], [6, 6]]
    assert [p.tolist() for p in window_pieces([3, 3, 3, 7], [8])] == [[3, 3, 2], [1, 7]]


def test_add_sample_splits_like_training():
    """The windows measured are the windows the loader builds (pretraining.data.windows.window_ids,
    the release's early end at a document end included), on random document streams."""
    rng = np.random.default_rng(3)
    early_ends = 0
    for index in range(300):
        cuts = np.sort(rng.choice(np.arange(1, 80), size=rng.integers(0, 5), replace=False))
        doc_lengths = np.diff(np.concatenate([[0], cuts, [80]])).tolist()
        context = WindowContext()
        context.add_sample(doc_lengths, index, "random_split", seed=17)
        (ids,) = window_ids([index], 80, "random_split", 17, doc_lengths=[doc_lengths])
        boundary = int(np.argmax(ids == 1))
        reference = WindowContext()
        reference.add_block(doc_lengths, [boundary])
        assert context.summary() == reference.summary(), (doc_lengths, index)
        early_ends += boundary != split_point(17, index, 80)
    assert early_ends > 20  # the early end is exercised, not only the drawn split
    whole = WindowContext()
    whole.add_sample([64, 64], 7, "fixed", seed=17)
    assert whole.summary()["own_document_key_share"] == 0.5 and whole.windows == 1


def test_one_document_per_window_gives_one_and_short_documents_give_little():
    assert simulate_window_context([10_000], 128)["own_document_key_share"] == 1.0
    short = simulate_window_context([4] * 4000, 128)
    assert short["own_document_key_share"] < 0.15 and short["documents_per_window"] > 10


def test_the_fineweb_edu_estimate_is_between_half_and_four_fifths():
    """Documents of ~1,000 tokens in 1,024-token windows on average: about two documents a window."""
    estimate = fineweb_edu_estimate()
    assert 0.6 < estimate["own_document_key_share"] < 0.75
    assert 1.5 < estimate["documents_per_window"] < 2.5 and estimate["mean_window"] == pytest.approx(1024, rel=0.02)
    assert fineweb_edu_estimate() == estimate  # seeded


def test_prepare_and_verify_report_the_share_of_the_data(tmp_path):
    texts = [" ".join(["word"] * n) for n in (5, 40, 3, 60, 12, 80, 30, 7, 90, 20) * 6]
    source = tmp_path / "docs.jsonl"
    source.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    out = tmp_path / "out"
    manifest = prepare_data(PrepareConfig(out=str(out), inputs=(str(source),), seq_len=32), progress=False)
    context = manifest["context"]
    assert context == measure_context(out) == verify_prepared(out).context
    assert context["samples"] == manifest["counts"]["samples"] and 0 < context["own_document_key_share"] < 1
    assert context["windows"] == 2 * context["samples"]  # random_split: two windows a block


class _TouchOnLoad:
    """Pickles to `Path.touch(marker)`: unpickling it creates the marker file."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        from pathlib import Path

        return (Path.touch, (Path(self.marker),))


def test_verify_data_refuses_shards_that_declare_other_columns_without_decoding_them(tmp_path):
    """A shared data folder whose index.json declares `pkl` columns would run code when decoded
    (issue 35, item 1): verify-data and measure_context refuse it before reading a sample."""
    from streaming import MDSWriter

    from pretraining.data.cli import main as data_cli
    from pretraining.data.verify import DataVerificationError

    source = tmp_path / "docs.jsonl"
    source.write_text("".join(json.dumps({"text": "word " * n}) + "\n" for n in (30, 50, 70) * 4))
    out = tmp_path / "out"
    prepare_data(PrepareConfig(out=str(out), inputs=(str(source),), seq_len=32), progress=False)
    marker = tmp_path / "code-ran"
    hostile = tmp_path / "hostile"
    with MDSWriter(out=str(hostile), columns={"input_ids": "pkl", "doc_lengths": "pkl"}, compression="zstd") as w:
        for _ in range(3):
            w.write({"input_ids": _TouchOnLoad(marker), "doc_lengths": _TouchOnLoad(marker)})
    for path in out.glob("shard.*"):
        path.unlink()
    for path in hostile.iterdir():
        (out / path.name).write_bytes(path.read_bytes())
    with pytest.raises(DataVerificationError, match=r"declares columns .*pkl.*; prepare-data writes only"):
        verify_prepared(out)
    with pytest.raises(DataVerificationError, match="declares columns"):
        measure_context(out)
    assert data_cli(["verify-data", str(out), "--no-decode"]) == 1
    assert not marker.exists()
