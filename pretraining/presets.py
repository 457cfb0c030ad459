"""Model sizes: the paper's Table 1 shapes and CPU-sized toy shapes, and their parameter counts.

Kept apart from pretraining/modeling.py, which holds only the model code (it is copied verbatim
into every exported checkpoint as its remote code, docs/export.md).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from pretraining.modeling import MlmClmConfig, MlmClmForLM


@dataclass(frozen=True)
class Shape:
    layers: int
    hidden: int
    ffn: int
    heads: int
    kv_heads: int
    vocab: int | None = 128256  # None: take the tokenizer's vocabulary size
    context: int = 2048


# Table 1 sizes; toy_* are CPU-sized for tests and the embedded default run.
PRESETS: dict[str, Shape] = {
    "210m": Shape(layers=12, hidden=768, ffn=3072, heads=12, kv_heads=12),
    "610m": Shape(layers=26, hidden=1152, ffn=4096, heads=18, kv_heads=6),
    "1b": Shape(layers=28, hidden=1728, ffn=5120, heads=18, kv_heads=6),
    "toy_s": Shape(layers=2, hidden=64, ffn=128, heads=4, kv_heads=2, vocab=None, context=256),
    "toy_m": Shape(layers=3, hidden=128, ffn=256, heads=4, kv_heads=2, vocab=None, context=256),
    "toy_l": Shape(layers=4, hidden=192, ffn=512, heads=6, kv_heads=2, vocab=None, context=256),
}


def config_from_preset(name: str, vocab_size: int | None = None, **overrides) -> MlmClmConfig:
    """Model config of a preset; `vocab_size` is required for toy presets (the tokenizer's)."""
    if name not in PRESETS:
        raise ValueError(f"unknown model preset {name!r}; choose one of {sorted(PRESETS)}")
    shape = PRESETS[name]
    vocab = vocab_size if vocab_size is not None else shape.vocab
    if vocab is None:
        raise ValueError(f"preset {name!r} takes its vocabulary size from the tokenizer: pass vocab_size")
    return MlmClmConfig(vocab_size=vocab, hidden_size=shape.hidden, intermediate_size=shape.ffn,
                        num_hidden_layers=shape.layers, num_attention_heads=shape.heads,
                        num_key_value_heads=shape.kv_heads, max_position_embeddings=shape.context,
                        **overrides)


def closed_form_parameter_count(cfg: MlmClmConfig) -> dict[str, int]:
    """Parameters from the shapes alone: embedding, transformer body, LM head, total."""
    d, f, v = cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size
    q = cfg.num_attention_heads * cfg.head_dim
    kv = cfg.num_key_value_heads * cfg.head_dim
    per_layer = d * q + 2 * d * kv + q * d + 3 * d * f + 2 * d  # q,k,v,o + gate,up,down + 2 norms
    body = cfg.num_hidden_layers * per_layer + d  # + final norm
    return {"embedding": v * d, "body": body, "lm_head": v * d, "total": 2 * v * d + body}


def count_parameters_on_meta(cfg: MlmClmConfig) -> dict[str, int]:
    """Actual parameter count of the module, built on the meta device (no memory)."""
    with torch.device("meta"):
        model = MlmClmForLM(cfg)
    counts = {"embedding": model.model.embed_tokens.weight.numel(),
              "lm_head": model.lm_head.weight.numel()}
    counts["total"] = sum(p.numel() for p in model.parameters())
    counts["body"] = counts["total"] - counts["embedding"] - counts["lm_head"]
    return counts
