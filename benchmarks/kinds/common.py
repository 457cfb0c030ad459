"""Shared pieces of the four task kinds: loading a base model bidirectionally, pooling, batching.

Every base model is used with bidirectional attention (the paper's fine-tuning protocol,
docs/protocol.md), also CLM-pretrained decoders. Encoders (BERT-like) already are; for decoder
architectures (Llama-style) the attention modules' `is_causal` flag is switched off and an explicit
4-D padding mask is passed, which transformers uses as given (docs/benchmarks.md, "Protocol").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from benchmarks.kinds.checkpoint import (
    TOKENIZER_FILES,
    ModelLoadError,
    check_model_path,
    check_own_head,
    check_remote_code,
    register_own_model_types,
    remote_code_error,
)


def model_load_error(model: str, exc: Exception, trust_remote_code: bool) -> ModelLoadError:
    """One line: the remote-code switch when transformers refused custom code, the weights-only
    unpickler's refusal when it is anywhere in the chain (transformers wraps it in an OSError that
    speaks of TF checkpoints), else its message."""
    import pickle

    cause, seen = exc, 0
    while cause is not None and seen < 10:
        if isinstance(cause, pickle.UnpicklingError):
            return ModelLoadError(
                f"cannot load model {model}: its pickled weights (pytorch_model*.bin) were refused by torch's "
                "weights-only unpickler, so nothing in them ran: use safetensors weights, or convert the file where "
                "you trust it"
            )
        cause, seen = cause.__cause__ or cause.__context__, seen + 1
    message = str(exc)
    if not trust_remote_code and "trust_remote_code" in message:
        return remote_code_error(model)
    return ModelLoadError(f"cannot load model {model}: {message.splitlines()[0]}")


def load_tokenizer(model: str, trust_remote_code: bool = False):
    from transformers import AutoTokenizer

    check_remote_code(model, trust_remote_code)
    try:
        tokenizer = AutoTokenizer.from_pretrained(model, trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as exc:
        raise model_load_error(model, exc, trust_remote_code) from None
    except TypeError:  # no tokenizer file found: transformers passes None on as a path (issue 90)
        raise ModelLoadError(
            f"cannot load the tokenizer of model {model}: it has none of {', '.join(TOKENIZER_FILES)}; save the "
            "tokenizer the model was trained with beside its weights"
        ) from None
    if not tokenizer.is_fast:
        raise ModelLoadError(f"{model}: a fast tokenizer is needed (offset mappings for TC/QA)")
    if tokenizer.pad_token is None:  # Llama-3 style: eos doubles as pad
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def eos_token(tokenizer) -> str:
    """The end-of-sequence token the `paper` protocol appends to every input (docs/protocol.md);
    BERT-style tokenizers without one append their separator token instead."""
    token = tokenizer.eos_token or tokenizer.sep_token
    if token is None:
        raise ModelLoadError(
            f"{tokenizer.name_or_path}: the tokenizer has neither an EOS nor a SEP "
            "token to end the inputs with (protocol 'paper')"
        )
    return token


def tokenize(tokenizer, texts: Sequence[str], max_length: int, *, protocol: str, **kwargs):
    """Tokenise single texts, truncated to `max_length`, as the protocol builds model inputs.

    `paper`: the text + EOS, no special tokens added (the released harness's `tokenize` methods);
    `standard`: the tokenizer's own special tokens ([CLS] ... [SEP], <bos> ...).
    """
    if protocol == "paper":
        eos = eos_token(tokenizer)
        return tokenizer(
            [text + eos for text in texts], truncation=True, max_length=max_length, add_special_tokens=False, **kwargs
        )
    return tokenizer(list(texts), truncation=True, max_length=max_length, **kwargs)


def protocol_max_length(max_length: int, protocol: str) -> int:
    """The input length a protocol uses: `paper` keeps round(0.99 x) of it, as the released
    harness's EvalConfig does ("1% buffer", hgissbkh/EncodEval encodeval/eval_tasks/abstract_eval.py)."""
    return round(0.99 * max_length) if protocol == "paper" else max_length


def model_max_length(backbone: nn.Module, tokenizer) -> int:
    limits = [getattr(backbone.config, "max_position_embeddings", None), tokenizer.model_max_length]
    limits = [int(x) for x in limits if isinstance(x, int) and 0 < x < 1_000_000]
    return min(limits) if limits else 512


def make_bidirectional(model: nn.Module) -> bool:
    """Switch causal self-attention off everywhere.

    Returns True when attention modules carried a causal flag (transformers decoders such as
    Llama): those then need an explicit 4-D mask, because transformers builds a causal one from a
    2-D mask. Models that read a config flag (BERT's `is_decoder`, our `mlmclm_llama`'s
    `is_causal`) take the 2-D padding mask as usual.
    """
    config = getattr(model, "config", None)
    for flag in ("is_decoder", "is_causal"):
        if getattr(config, flag, False) is True:
            setattr(config, flag, False)
    needs_4d_mask = False
    for module in model.modules():
        if getattr(module, "is_causal", False) is True:
            module.is_causal = False
            needs_4d_mask = True
    return needs_4d_mask


class Backbone(nn.Module):
    """A Hugging Face base model used bidirectionally; returns last hidden states."""

    def __init__(self, model: nn.Module, needs_4d_mask: bool):
        super().__init__()
        self.model = model
        self.needs_4d_mask = needs_4d_mask
        self.loading_info: dict = {}  # transformers' loading report, set by load_backbone (loading.py)

    @property
    def config(self):
        return self.model.config

    @property
    def hidden_size(self) -> int:
        return int(self.model.config.hidden_size)

    def _mask(self, attention_mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        if not self.needs_4d_mask:
            return attention_mask
        impl = getattr(self.model.config, "_attn_implementation", "sdpa")
        if impl == "flash_attention_2":
            return attention_mask  # flash-attn reads module.is_causal and the 2-D padding mask
        keep = attention_mask[:, None, None, :].bool()  # (B, 1, 1, L): every query sees every real key
        keep = keep.expand(-1, 1, attention_mask.shape[1], -1)
        if impl == "sdpa":
            return keep
        return torch.zeros(keep.shape, dtype=dtype, device=keep.device).masked_fill(~keep, torch.finfo(dtype).min)

    def outputs(self, input_ids: torch.Tensor, attention_mask: torch.Tensor):
        """The model's own output (a task model's `logits`, a base model's hidden states)."""
        dtype = self.model.get_input_embeddings().weight.dtype
        if torch.is_autocast_enabled(input_ids.device.type):
            dtype = torch.get_autocast_dtype(input_ids.device.type)
        return self.model(input_ids=input_ids, attention_mask=self._mask(attention_mask, dtype))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        out = self.outputs(input_ids, attention_mask)
        return out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]

    def save_pretrained(self, path: str | Path) -> None:
        self.model.save_pretrained(path)


def load_backbone(
    model: str,
    attn_implementation: str | None = None,
    trust_remote_code: bool = False,
    task_class: str | None = None,
    num_labels: int | None = None,
) -> Backbone:
    """AutoModel (no task head) made bidirectional; our own model types are registered first.

    `trust_remote_code` lets a checkpoint's shipped model code run (the paper's released
    checkpoints, EuroBERT): off by default, a checkpoint that needs it is a one-line error.
    `task_class` (e.g. "AutoModelForSequenceClassification", with `num_labels`): the checkpoint's
    own task model instead, head included (`head: own`, docs/protocol.md); the checkpoint must
    ship that class (named in config.json's auto_map, or defined by its modeling code as the
    released harness resolved it: checkpoint.own_head_source), else a one-line error."""
    import transformers

    register_own_model_types()
    check_model_path(model)
    check_remote_code(model, trust_remote_code)
    kwargs = {"trust_remote_code": trust_remote_code}
    if attn_implementation:
        kwargs["attn_implementation"] = attn_implementation
    auto = transformers.AutoModel
    if task_class is not None:
        source = check_own_head(model, task_class)
        auto, kwargs["num_labels"] = getattr(transformers, task_class), num_labels
        if source.found_by == "modeling_code":  # defined but not in auto_map: the class itself
            if not trust_remote_code:
                raise remote_code_error(model)
            from transformers.dynamic_module_utils import get_class_from_dynamic_module

            auto = get_class_from_dynamic_module(f"{source.module}.{source.class_name}", model)
    import pickle

    try:
        hf_model, info = auto.from_pretrained(model, output_loading_info=True, **kwargs)
    except (OSError, ValueError, pickle.UnpicklingError) as exc:  # the last: a .bin that would run code (issue 78)
        raise model_load_error(model, exc, trust_remote_code) from None
    backbone = Backbone(hf_model, needs_4d_mask=make_bidirectional(hf_model))
    backbone.loading_info = info
    return backbone


def mean_pool(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Average of the hidden states of the real (non-padding) tokens."""
    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * mask).sum(1) / mask.sum(1).clamp_min(1.0)


def pad_batch(features: Sequence[dict], pad_id: int, label_pad: dict[str, int] | None = None) -> dict:
    """Right-pad `input_ids` (and any list-valued label fields) of a list of features to one length."""
    label_pad = label_pad or {}
    length = max(len(f["input_ids"]) for f in features)
    batch = {
        "input_ids": torch.full((len(features), length), pad_id, dtype=torch.long),
        "attention_mask": torch.zeros((len(features), length), dtype=torch.long),
    }
    for key, fill in label_pad.items():
        batch[key] = torch.full((len(features), length), fill, dtype=torch.long)
    for i, feat in enumerate(features):
        n = len(feat["input_ids"])
        batch["input_ids"][i, :n] = torch.tensor(feat["input_ids"])
        batch["attention_mask"][i, :n] = 1
        for key in label_pad:
            batch[key][i, :n] = torch.tensor(feat[key])
    for key, value in features[0].items():
        if key not in batch and isinstance(value, (int, float)):
            batch[key] = torch.tensor([f[key] for f in features])
    return batch


def batches(items: Sequence, size: int) -> Iterable[Sequence]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


@dataclass
class EvalContext:
    """How evaluation runs: device, autocast dtype (None = fp32) and batch size."""

    device: torch.device
    amp_dtype: torch.dtype | None = None
    batch_size: int = 64

    def autocast(self):
        if self.amp_dtype is None:
            return torch.autocast(self.device.type, enabled=False)
        return torch.autocast(self.device.type, dtype=self.amp_dtype)


def to_device(batch: dict, device: torch.device) -> dict:
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}


@torch.no_grad()
def run_in_batches(fn: Callable[[dict], torch.Tensor], features: Sequence[dict], collate, ctx: EvalContext) -> list:
    """Apply `fn` to collated batches of features; returns one CPU float32 tensor per batch."""
    outputs = []
    for chunk in batches(features, ctx.batch_size):
        with ctx.autocast():
            outputs.append(fn(to_device(collate(chunk), ctx.device)).float().cpu())
    return outputs
