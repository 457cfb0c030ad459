"""Parameter counts and training FLOPs of the paper's models (for Figure 10).

Shapes are the paper's Table 1 (contracts.paper: EuroBERT / Llama-style, no biases, SwiGLU, RMSNorm,
untied LM head).
Training compute uses the usual C = 6 * N * D estimate, with N the parameters that take part in
matrix multiplications: every weight except the input embedding table (a lookup costs no FLOPs),
but including the untied LM head (a vocab x hidden matmul per token). For 610M this N is
607.9M, which is also why the release calls the model "610M".
"""

from __future__ import annotations

from contracts.paper import TOKENS_PER_STEP_TABLE1, ModelShape

# The figures use Table 1's tokens per step unless told otherwise (the text prints another count,
# docs/choices.md).
DEFAULT_TOKENS_PER_STEP = TOKENS_PER_STEP_TABLE1


def count_parameters(shape: ModelShape) -> dict[str, int]:
    """Parameter counts by part; `matmul` is the N used for 6*N*D training FLOPs.

    Per layer: q and o projections hidden x hidden, k and v hidden x (kv_heads * head_dim),
    SwiGLU gate/up/down 3 x hidden x ffn, two RMSNorm weight vectors; then a final RMSNorm.
    """
    kv_dim = shape.kv_heads * shape.head_dim
    attention = 2 * shape.hidden * shape.hidden + 2 * shape.hidden * kv_dim
    mlp = 3 * shape.hidden * shape.ffn
    norms = 2 * shape.hidden
    per_layer = attention + mlp + norms
    embedding = shape.vocab * shape.hidden
    lm_head = 0 if shape.tied_embeddings else shape.vocab * shape.hidden
    non_embedding = shape.layers * per_layer + shape.hidden  # + final norm
    return {
        "per_layer": per_layer,
        "non_embedding": non_embedding,
        "embedding": embedding,
        "lm_head": lm_head,
        "total": non_embedding + embedding + lm_head,
        # The LM head is a matmul even when tied (then it reuses the embedding weights).
        "matmul": non_embedding + shape.vocab * shape.hidden,
    }


def training_flops(steps: float, n_params: float, tokens_per_step: float = DEFAULT_TOKENS_PER_STEP) -> float:
    """C = 6 * N * tokens, tokens = steps * tokens_per_step."""
    return 6.0 * float(n_params) * float(steps) * float(tokens_per_step)
