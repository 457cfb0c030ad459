"""Parameter counts from the paper's Table 1 shapes, checked by hand, and 6*N*D FLOPs."""

import pytest

from contracts.paper import PAPER_SHAPES, TOKENS_PER_STEP_TABLE1, TOKENS_PER_STEP_TEXT, ModelShape
from paper_figures.flops import count_parameters, training_flops


def test_610m_parameter_count_by_hand():
    counts = count_parameters(PAPER_SHAPES["610m"])
    # head_dim = 1152 / 18 = 64; k and v project to 6 * 64 = 384.
    attention = 1152 * 1152 * 2 + 1152 * 384 * 2  # q, o + k, v = 3,538,944
    mlp = 3 * 1152 * 4096  # gate, up, down = 14,155,776
    assert counts["per_layer"] == attention + mlp + 2 * 1152 == 17_697_024
    assert counts["non_embedding"] == 26 * 17_697_024 + 1152 == 460_123_776
    assert counts["embedding"] == counts["lm_head"] == 128_256 * 1152 == 147_750_912
    assert counts["total"] == 755_625_600  # untied: embedding and LM head both counted
    # FLOPs count matmul weights: no input embedding (a lookup), the LM head included.
    assert counts["matmul"] == 607_874_688


@pytest.mark.parametrize("size, nominal", [("210m", 210e6), ("610m", 610e6)])
def test_matmul_count_matches_the_release_names(size, nominal):
    assert abs(count_parameters(PAPER_SHAPES[size])["matmul"] / nominal - 1) < 0.01


def test_tied_embeddings_drop_the_head_but_keep_its_matmul():
    tied = ModelShape(layers=1, hidden=8, ffn=16, heads=2, kv_heads=1, vocab=10, tied_embeddings=True)
    counts = count_parameters(tied)
    assert counts["lm_head"] == 0
    assert counts["total"] == counts["non_embedding"] + 80
    assert counts["matmul"] == counts["non_embedding"] + 80
    # per layer: q,o 2*64, k,v 2*8*4, mlp 3*8*16, norms 16
    assert counts["per_layer"] == 128 + 64 + 384 + 16


def test_training_flops():
    assert training_flops(1000, 2e8, 1000) == 6 * 2e8 * 1000 * 1000
    assert training_flops(42000, 1.0) == 6 * 42000 * TOKENS_PER_STEP_TABLE1
    assert TOKENS_PER_STEP_TABLE1 == 2304 * 1024 and TOKENS_PER_STEP_TEXT == 2_373_120
