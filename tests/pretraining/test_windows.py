"""Windows and attention scope as released (docs/pretraining.md, "Windows and attention scope"):
the random split of each block, attention and positions per window or per document, CLM targets
that cross EOS inside a window but never a window boundary, the three attention paths agreeing,
and weight decay on every parameter."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats

from pretraining.config import OptimizerConfig
from pretraining.data.loader import PackedCollator
from pretraining.data.packing import document_tokens, pack_documents
from pretraining.data.windows import attention_segments, first_window_length, split_point, window_ids
from pretraining.modeling import MlmClmConfig, MlmClmModel
from pretraining.objectives import IGNORE_INDEX, clm_labels
from tests.pretraining.conftest import TOY_IDS, toy_run_config

SEQ_LEN, MIN_WINDOW = 2048, 12


def test_split_points_of_10000_blocks_are_uniform_on_12_to_2036():
    first = np.array([split_point(17, index, SEQ_LEN) for index in range(10_000)])
    lengths = np.concatenate([first, SEQ_LEN - first])  # both windows of every block
    assert lengths.min() >= MIN_WINDOW and lengths.max() <= SEQ_LEN - MIN_WINDOW
    assert abs(lengths.mean() - 1024) <= 5
    # chi-square over 25 equal-width bins of the 2,025 possible first-window lengths
    edges = np.linspace(MIN_WINDOW, SEQ_LEN - MIN_WINDOW + 1, 26)
    observed, _ = np.histogram(first, bins=edges)
    assert stats.chisquare(observed).pvalue > 0.001
    # every length is possible: the extremes are drawn too, over more blocks
    many = {split_point(17, index, 64) for index in range(2_000)}
    assert many == set(range(MIN_WINDOW, 64 - MIN_WINDOW + 1))


def test_a_block_split_depends_only_on_the_seed_and_its_index():
    assert split_point(17, 123_456, SEQ_LEN) == split_point(17, 123_456, SEQ_LEN)
    assert len({split_point(17, index, SEQ_LEN) for index in range(50)}) > 40
    assert [split_point(18, i, SEQ_LEN) for i in range(20)] != [split_point(17, i, SEQ_LEN) for i in range(20)]
    # a batch of any composition gives each block the same windows
    alone = window_ids([7], 128, "random_split", 17)[0]
    assert (window_ids([3, 7, 11], 128, "random_split", 17)[1] == alone).all()
    assert alone[: split_point(17, 7, 128)].sum() == 0 and (alone[split_point(17, 7, 128) :] == 1).all()
    assert not window_ids([3, 7], 128, "fixed", 17).any()
    with pytest.raises(ValueError, match="cannot hold two windows"):
        split_point(17, 0, 20)


def test_first_window_ends_at_a_document_end_within_12_tokens_before_the_split():
    # split 30: document ends at 18..30 end the window there (the first of them), others do not
    assert first_window_length(30, [10, 7, 23]) == 30  # ends at 10, 17, 40: 17 is 13 tokens early
    assert first_window_length(30, [18, 22]) == 18  # exactly 12 tokens early
    assert first_window_length(30, [25, 4, 11]) == 25  # the first end in reach, not the last (29)
    assert first_window_length(30, [30, 10]) == 30 and first_window_length(30, [40]) == 30
    assert first_window_length(12, [5, 35]) == 5  # a window shorter than 12, as released
    assert first_window_length(30, [18, 22], early_end=0) == 30 and first_window_length(30, None) == 30
    split = split_point(17, 3, 64)
    ends_early = window_ids([3], 64, "random_split", 17, doc_lengths=[[split - 5, 64 - split + 5]])[0]
    assert ends_early.tolist() == [0] * (split - 5) + [1] * (64 - split + 5)
    one_document = window_ids([3], 64, "random_split", 17, doc_lengths=[[64]])[0]
    assert (one_document == window_ids([3], 64, "random_split", 17)[0]).all()


def _released_first_window(pieces: list[int], split: int, early_end: int = 12) -> int:
    """The release's packer as it fills a window of `split` tokens from the start of a block: it
    appends one document (piece) at a time, and after each append closes the window once it holds
    at least split - early_end tokens (a document that does not fit is cut at the split)."""
    filled = 0
    for piece in pieces:
        filled += min(piece, split - filled)
        if filled >= split - early_end:
            return filled
    raise AssertionError("a block holds at least `split` tokens")


def test_early_end_matches_the_released_rule_on_document_streams():
    rng = np.random.default_rng(0)
    seq_len, changed = 256, 0
    for mean_length in (6, 20, 90):  # short documents end near most splits, long ones near few
        documents = [document_tokens(rng.integers(5, 50, rng.geometric(1 / mean_length)), eos_id=1) for _ in range(600)]
        blocks, _ = pack_documents(documents, seq_len)
        ids = window_ids(range(len(blocks)), seq_len, "random_split", 17, 12, [b.doc_lengths for b in blocks])
        for index, block in enumerate(blocks):
            split = split_point(17, index, seq_len)
            first = int((ids[index] == 0).sum())
            assert first == _released_first_window(block.doc_lengths.tolist(), split), (mean_length, index)
            assert first == split or block.input_ids[first - 1] == 1  # an early end is a document end
            changed += first != split
    assert changed > 20  # the streams exercise the early end


def test_the_loader_ends_windows_early_from_the_stored_document_lengths():
    split = split_point(17, 5, 32)
    lengths = np.array([split - 3, 32 - split + 3], dtype=np.uint32)
    sample = {"input_ids": np.arange(32, dtype=np.uint32), "doc_lengths": lengths, "sample_index": 5}
    early = PackedCollator(32, "random_split", 17, 12)([sample])["window_ids"][0]
    exact = PackedCollator(32, "random_split", 17, 12, early_end=0)([sample])["window_ids"][0]
    assert int((early == 0).sum()) == split - 3 and int((exact == 0).sum()) == split


def test_segments_follow_the_scope():
    windows = np.array([[0] * 6 + [1] * 6])
    documents = np.array([[0] * 4 + [1] * 5 + [2] * 3])
    assert attention_segments(windows, documents, "window").tolist() == [[0] * 6 + [1] * 6]
    # documents, also cut where the window ends (document 1 spans the split)
    assert attention_segments(windows, documents, "document").tolist() == [[0] * 4 + [1] * 2 + [2] * 3 + [3] * 3]
    torch_segments = attention_segments(torch.tensor(windows), torch.tensor(documents), "document")
    assert torch_segments.tolist() == attention_segments(windows, documents, "document").tolist()


EOS = TOY_IDS.special[1]


def test_clm_targets_cross_eos_inside_a_window_and_never_a_window_boundary():
    # window 0: doc "5 6 EOS" + "7 8"; window 1: "9 EOS" + "10 11"
    ids = torch.tensor([[5, 6, EOS, 7, 8, 9, EOS, 10, 11]])
    windows = torch.tensor([[0] * 5 + [1] * 4])
    documents = torch.tensor([[0, 0, 0, 1, 1, 1, 1, 2, 2]])
    by_window = clm_labels(ids, attention_segments(windows, documents, "window"))
    assert by_window.tolist() == [[6, EOS, 7, 8, IGNORE_INDEX, EOS, 10, 11, IGNORE_INDEX]]
    by_document = clm_labels(ids, attention_segments(windows, documents, "document"))
    assert by_document.tolist() == [[6, EOS, IGNORE_INDEX, 8, IGNORE_INDEX, EOS, IGNORE_INDEX, 11, IGNORE_INDEX]]


def _model(backend: str = "sdpa", kv_heads: int = 2) -> MlmClmModel:
    torch.manual_seed(0)
    config = MlmClmConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=kv_heads,
        attention_backend=backend,
    )
    return MlmClmModel(config).eval()


def _batch():
    """Two rows of 24 tokens: three documents, split into windows at 10 and at 15."""
    ids = torch.randint(4, 64, (2, 24), generator=torch.Generator().manual_seed(1))
    documents = torch.tensor([[0] * 7 + [1] * 9 + [2] * 8, [0] * 12 + [1] * 12])
    windows = torch.tensor([[0] * 10 + [1] * 14, [0] * 15 + [1] * 9])
    return ids, documents, windows


@pytest.mark.parametrize("scope", ["window", "document"])
@pytest.mark.parametrize("is_causal", [False, True])
def test_a_token_attends_to_exactly_its_segment(scope, is_causal):
    """Perturbing a token moves the outputs of its own segment (later tokens only, when causal) and
    nothing outside it: row 0 position 12 lies in window 1 and in document 1's second piece."""
    model = _model()
    ids, documents, windows = _batch()
    segments = attention_segments(windows, documents, scope)
    changed = ids.clone()
    changed[0, 12] = (ids[0, 12] + 1 - 4) % 60 + 4
    with torch.no_grad():
        before = model(ids, segment_ids=segments, is_causal=is_causal).last_hidden_state
        after = model(changed, segment_ids=segments, is_causal=is_causal).last_hidden_state
    moved = (before - after).abs().amax(-1) > 1e-6
    own = segments[0] == segments[0, 12]
    expected = own & (torch.arange(24) >= 12) if is_causal else own
    assert moved[0].tolist() == expected.tolist()
    assert not moved[1].any()
    # the segment is the window (10..23) or the document piece inside it (10..15)
    assert own.nonzero().flatten().tolist() == (list(range(10, 24)) if scope == "window" else list(range(10, 16)))


@pytest.mark.parametrize("scope", ["window", "document"])
@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("kv_heads", [4, 2])
def test_flex_attention_equals_sdpa(scope, is_causal, kv_heads):
    ids, documents, windows = _batch()
    segments = attention_segments(windows, documents, scope)
    sdpa, flex = _model("sdpa", kv_heads), _model("flex_attention", kv_heads)
    flex.load_state_dict(sdpa.state_dict())
    with torch.no_grad():
        expected = sdpa(ids, segment_ids=segments, is_causal=is_causal).last_hidden_state
        got = flex(ids, segment_ids=segments, is_causal=is_causal).last_hidden_state
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="flash-attn's varlen kernel needs a CUDA GPU")
@pytest.mark.parametrize("scope", ["window", "document"])
@pytest.mark.parametrize("is_causal", [False, True])
def test_flash_attention_varlen_equals_sdpa_on_gpu(scope, is_causal):  # pragma: no cover - GPU only
    from transformers.utils import is_flash_attn_2_available

    if not is_flash_attn_2_available():
        pytest.skip("the flash-attn package is not installed")
    ids, documents, windows = (t.cuda() for t in _batch())
    segments = attention_segments(windows, documents, scope)
    sdpa, flash = _model("sdpa").cuda(), _model("flash_attention_2").cuda()
    flash.load_state_dict(sdpa.state_dict())
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        expected = sdpa(ids, segment_ids=segments, is_causal=is_causal).last_hidden_state
        got = flash(ids, segment_ids=segments, is_causal=is_causal).last_hidden_state
    torch.testing.assert_close(got.float(), expected.float(), rtol=2e-2, atol=2e-2)


def test_the_objective_gives_the_model_the_segments_of_the_scope():
    """ObjectiveAlgorithm (the Composer glue) turns a loader batch into segment_ids and CLM labels."""
    from types import SimpleNamespace

    from composer.core import Event

    from pretraining.train import SEGMENT_IDS, ObjectiveAlgorithm

    ids, documents, windows = _batch()
    for scope in ("window", "document"):
        algorithm = ObjectiveAlgorithm("clm", None, 0.4, (1.0, 0.0, 0.0), TOY_IDS, 0, scope)
        model = SimpleNamespace(is_causal=None)
        batch = {"input_ids": ids, "document_ids": documents, "window_ids": windows}
        state = SimpleNamespace(batch=batch, model=model, timestamp=SimpleNamespace(batch=SimpleNamespace(value=0)))
        algorithm.apply(Event.AFTER_DATALOADER, state, SimpleNamespace(log_metrics=lambda metrics: None))
        segments = attention_segments(windows, documents, scope)
        assert state.batch[SEGMENT_IDS].tolist() == segments.tolist()
        assert state.batch["labels"].tolist() == clm_labels(ids, segments).tolist()
        assert model.is_causal is True


@pytest.mark.parametrize("no_decay, norm_after", [("none", 1.0 - 0.5 * 0.1), ("norm_gains", 1.0)])
def test_weight_decay_reaches_the_norm_gains_by_default(tmp_path, no_decay, norm_after):
    from pretraining.train import build_model, build_optimizer

    assert OptimizerConfig().no_decay == "none"
    cfg = toy_run_config(tmp_path, optimizer={"lr": 0.5, "weight_decay": 0.1, "no_decay": no_decay})
    model = build_model(cfg, TOY_IDS.vocab_size)
    optimizer = build_optimizer(model, cfg)
    embedding_before = model.model.embed_tokens.weight.detach().clone()
    for parameter in model.parameters():
        parameter.grad = torch.zeros_like(parameter)
    optimizer.step()  # no gradient: only the decoupled decay moves a weight, by lr x weight_decay
    gains = [m.weight for name, m in model.named_modules() if type(m).__name__ == "RMSNorm"]
    assert len(gains) == 2 * 2 + 1 and all(torch.allclose(g, torch.full_like(g, norm_after)) for g in gains)
    torch.testing.assert_close(model.model.embed_tokens.weight, embedding_before * (1 - 0.5 * 0.1))


@pytest.mark.parametrize(
    "sections, message",
    [
        ({"model": {"attn_implementation": "flash_attention_2"}}, "flash-attn's varlen kernel needs a CUDA device"),
        (
            {"model": {"attn_implementation": "flex_attention"}, "train": {"compile": True}},
            "does not compile FlexAttention's CPU kernel",
        ),
    ],
)
def test_an_attention_implementation_that_cannot_run_here_is_refused_before_training(tmp_path, sections, message):
    from pretraining.train import PretrainError, train
    from tests.pretraining.conftest import toy_dataloader

    cfg = toy_run_config(tmp_path, train={"device": "cpu", **sections.pop("train", {})}, **sections)
    with pytest.raises(
        PretrainError, match=f"model.attn_implementation .* cannot run document attention on cpu.*{message}"
    ):
        train(cfg, dataloader=toy_dataloader(), token_ids=TOY_IDS)
    assert not cfg.run_dir.exists()


def test_flex_attention_trains_eagerly_on_cpu_with_the_losses_of_sdpa(tmp_path):
    import json

    from pretraining.train import train
    from tests.pretraining.conftest import toy_dataloader

    losses = {}
    for backend in ("sdpa", "flex_attention"):
        cfg = toy_run_config(tmp_path, backend, model={"attn_implementation": backend}, train={"max_steps": 8})
        run_dir = train(cfg, dataloader=toy_dataloader(), token_ids=TOY_IDS)
        losses[backend] = [json.loads(line)["loss"] for line in (run_dir / "loss.jsonl").read_text().splitlines()]
    assert losses["flex_attention"] == pytest.approx(losses["sdpa"], rel=1e-4)
