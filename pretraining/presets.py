"""Model presets (the paper's Table 1 shapes and the toy shapes, stated in contracts.paper) as
model configs, and their parameter counts.

Kept apart from pretraining/modeling.py, which holds only the model code (it is copied verbatim
into every exported checkpoint as its remote code, docs/export.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from contracts.paper import PAPER_SHAPES, TOY_SHAPES, ModelShape

if TYPE_CHECKING:  # torch and the model code load only where a config or model is built (issue 77)
    from pretraining.modeling import MlmClmConfig

# The paper's Table 1 sizes and the CPU-sized toy sizes that stand in for them (contracts.paper).
PRESETS: dict[str, ModelShape] = {**PAPER_SHAPES, **TOY_SHAPES}


class PresetError(ValueError):
    pass


def config_from_preset(name: str, vocab_size: int | None = None, **overrides) -> MlmClmConfig:
    """Model config of a preset; `vocab_size` is required for toy presets (the tokenizer's)."""
    if name not in PRESETS:
        raise PresetError(f"unknown model preset {name!r}; choose one of {sorted(PRESETS)}")
    shape = PRESETS[name]
    vocab = vocab_size if vocab_size is not None else shape.vocab
    if vocab is None:
        raise ValueError(f"preset {name!r} takes its vocabulary size from the tokenizer: pass vocab_size")
    from pretraining.modeling import MlmClmConfig

    return MlmClmConfig(
        vocab_size=vocab,
        hidden_size=shape.hidden,
        intermediate_size=shape.ffn,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.kv_heads,
        max_position_embeddings=shape.context,
        **overrides,
    )


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
    import torch

    from pretraining.modeling import MlmClmForLM

    with torch.device("meta"):
        model = MlmClmForLM(cfg)
    counts = {"embedding": model.model.embed_tokens.weight.numel(), "lm_head": model.lm_head.weight.numel()}
    counts["total"] = sum(p.numel() for p in model.parameters())
    counts["body"] = counts["total"] - counts["embedding"] - counts["lm_head"]
    return counts
