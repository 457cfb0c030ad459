"""The paper's EuroBERT-style transformer as a Hugging Face model.

Llama-style blocks (pre-RMSNorm eps 1e-5, SwiGLU, RoPE theta 10,000, grouped-query attention,
no biases) with an untied LM head. One model serves both objectives: `is_causal` (config default,
overridable per forward call) picks causal or bidirectional attention, so a biphasic CLM -> MLM
run keeps the same weights and only flips the switch.

Packed sequences: `segment_ids[b, t]` is the attention segment that position t of row b belongs
to (a window of a pretraining block, or a document; docs/pretraining.md, "Windows and attention
scope"). Attention is block-diagonal over segments and position ids restart at 0 in each
segment. Negative segment ids mark padding (never attended to). Three attention implementations
compute the same function: SDPA with a dense block-diagonal mask (any device), FlexAttention with
a block mask (torch >= 2.5; compiled on GPU, eager elsewhere) and flash-attn's varlen kernel
(`cu_seqlens`; CUDA and the flash-attn package).

This file imports only the standard library, torch and transformers: every exported checkpoint
carries a verbatim copy of it as its remote code (`modeling_mlmclm.py` + `auto_map` in
config.json, docs/export.md), so it loads with `trust_remote_code=True` where this package is not
installed. Importing `pretraining` calls `register_auto_classes()`, after which the Auto classes
load model_type "mlmclm_llama" without remote code.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForCausalLM,
    AutoModelForMaskedLM,
    AutoModelForQuestionAnswering,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
    PretrainedConfig,
    PreTrainedModel,
)
from transformers.modeling_outputs import (
    BaseModelOutput,
    MaskedLMOutput,
    QuestionAnsweringModelOutput,
    SequenceClassifierOutput,
    TokenClassifierOutput,
)

MODEL_TYPE = "mlmclm_llama"
IGNORE_INDEX = -100
ATTENTION_BACKENDS = ("sdpa", "flex_attention", "flash_attention_2")


class MlmClmConfig(PretrainedConfig):
    model_type = MODEL_TYPE

    def __init__(
        self,
        vocab_size: int = 128256,
        hidden_size: int = 768,
        intermediate_size: int = 3072,
        num_hidden_layers: int = 12,
        num_attention_heads: int = 12,
        num_key_value_heads: int = 12,
        max_position_embeddings: int = 2048,
        rms_norm_eps: float = 1e-5,
        rope_theta: float = 10000.0,
        initializer_range: float = 0.02,
        is_causal: bool = False,
        attention_backend: str = "sdpa",
        **kwargs,
    ):
        if hidden_size % num_attention_heads or num_attention_heads % num_key_value_heads:
            raise ValueError(
                f"hidden {hidden_size} / heads {num_attention_heads} / kv heads "
                f"{num_key_value_heads}: heads must divide hidden, kv heads divide heads"
            )
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.num_key_value_heads = num_key_value_heads
        self.max_position_embeddings = max_position_embeddings
        self.rms_norm_eps = rms_norm_eps
        self.rope_theta = rope_theta
        self.initializer_range = initializer_range
        self.is_causal = is_causal
        if attention_backend not in ATTENTION_BACKENDS:
            raise ValueError(f"attention_backend {attention_backend!r}: use one of {', '.join(ATTENTION_BACKENDS)}")
        self.attention_backend = attention_backend
        kwargs.setdefault("tie_word_embeddings", False)
        super().__init__(**kwargs)

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads


def position_ids_from_segment_ids(segment_ids: torch.Tensor) -> torch.Tensor:
    """Position of each token inside its segment (restarts at 0 where the segment id changes)."""
    batch, length = segment_ids.shape
    index = torch.arange(length, device=segment_ids.device).expand(batch, length)
    starts = torch.ones_like(segment_ids, dtype=torch.bool)
    starts[:, 1:] = segment_ids[:, 1:] != segment_ids[:, :-1]
    start_index = torch.where(starts, index, torch.zeros_like(index)).cummax(dim=1).values
    return index - start_index


def build_attention_mask(
    segment_ids: torch.Tensor | None, padding_mask: torch.Tensor | None, is_causal: bool, length: int, device
) -> torch.Tensor | None:
    """Boolean [B, 1, L, L] mask (True = may attend) or None when plain SDPA flags suffice."""
    if segment_ids is None and padding_mask is None:
        return None
    allowed = None
    if segment_ids is not None:
        allowed = segment_ids[:, :, None] == segment_ids[:, None, :]
        allowed &= (segment_ids >= 0)[:, None, :]
    if padding_mask is not None:
        keys = padding_mask.bool()[:, None, :].expand(-1, length, -1)
        allowed = keys if allowed is None else allowed & keys
    if is_causal:
        allowed = allowed & torch.ones(length, length, dtype=torch.bool, device=device).tril()
    # A query row with nothing to attend to (padding) would give NaN: let it see itself.
    allowed = allowed | torch.eye(length, dtype=torch.bool, device=device)
    return allowed[:, None]


def flex_block_mask(segment_ids: torch.Tensor, is_causal: bool):
    """FlexAttention's BlockMask of the same function as build_attention_mask (no padding rows)."""
    from torch.nn.attention.flex_attention import create_block_mask

    batch, length = segment_ids.shape

    def same_segment(b, h, q, k):
        allowed = segment_ids[b, q] == segment_ids[b, k]
        return allowed & (k <= q) if is_causal else allowed

    return create_block_mask(same_segment, batch, None, length, length, device=segment_ids.device)


def flash_cu_seqlens(segment_ids: torch.Tensor) -> tuple[torch.Tensor, int]:
    """(cumulative segment starts over the flattened batch, longest segment) for flash-attn varlen;
    each row's segments are contiguous runs of one id."""
    batch, length = segment_ids.shape
    starts = torch.ones_like(segment_ids, dtype=torch.bool)
    starts[:, 1:] = segment_ids[:, 1:] != segment_ids[:, :-1]
    start_positions = torch.nonzero(starts.flatten()).flatten()
    cu = torch.cat([start_positions, start_positions.new_tensor([batch * length])]).to(torch.int32)
    return cu, int((cu[1:] - cu[:-1]).max())


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


def rotary_cos_sin(position_ids: torch.Tensor, head_dim: int, theta: float, dtype):
    inv_freq = 1.0 / (
        theta ** (torch.arange(0, head_dim, 2, device=position_ids.device, dtype=torch.float32) / head_dim)
    )
    freqs = position_ids.float()[..., None] * inv_freq  # [B, L, hd/2]
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos().to(dtype)[:, None], emb.sin().to(dtype)[:, None]  # [B, 1, L, hd]


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    return x * cos + _rotate_half(x) * sin


def _flash_varlen(q, k, v, cu_seqlens, max_len, is_causal):  # pragma: no cover - needs CUDA + flash-attn
    """Segments as varlen sequences; q/k/v are [B, L, H, hd]. No padding allowed."""
    try:  # inside `try`, transformers' remote-code loader does not require flash-attn everywhere
        from flash_attn import flash_attn_varlen_func
    except ImportError:
        raise ImportError("attention_backend flash_attention_2 needs the flash-attn package") from None

    batch, length = q.shape[:2]
    out = flash_attn_varlen_func(
        q.flatten(0, 1), k.flatten(0, 1), v.flatten(0, 1), cu_seqlens, cu_seqlens, max_len, max_len, causal=is_causal
    )
    return out.view(batch, length, *out.shape[1:])


class AttentionPlan:
    """What every layer's attention needs for one forward, computed once: the implementation and
    its mask (SDPA: dense bool [B, 1, L, L] or None; flex: BlockMask; flash: cu_seqlens).
    flash-attn 2 is optional (CUDA only, not installable on CPU machines): an exported model
    trained with it uses SDPA where flash-attn is missing (training refuses instead,
    pretraining.train.check_attention_backend). Padding (an HF attention_mask) always uses SDPA."""

    def __init__(self, config, segment_ids, padding_mask, is_causal: bool, length: int, device, on_cuda: bool):
        self.is_causal = is_causal
        backend = config.attention_backend
        if segment_ids is not None and padding_mask is None and backend == "flash_attention_2" and on_cuda:
            from transformers.utils import is_flash_attn_2_available

            if is_flash_attn_2_available():
                self.kind = "flash"
                self.cu_seqlens, self.max_len = flash_cu_seqlens(segment_ids)
                return
        if segment_ids is not None and padding_mask is None and backend == "flex_attention":
            self.kind, self.block_mask = "flex", flex_block_mask(segment_ids, is_causal)
            return
        self.kind = "sdpa"
        self.mask = build_attention_mask(segment_ids, padding_mask, is_causal, length, device)


class Attention(nn.Module):
    def __init__(self, config: MlmClmConfig):
        super().__init__()
        self.config = config
        d, hd = config.hidden_size, config.head_dim
        self.heads, self.kv_heads = config.num_attention_heads, config.num_key_value_heads
        self.q_proj = nn.Linear(d, self.heads * hd, bias=False)
        self.k_proj = nn.Linear(d, self.kv_heads * hd, bias=False)
        self.v_proj = nn.Linear(d, self.kv_heads * hd, bias=False)
        self.o_proj = nn.Linear(self.heads * hd, d, bias=False)

    def rotate(self, q, k, cos, sin):
        """RoPE on queries and keys [B, H, L, hd] (a separate method so a fused kernel can replace it)."""
        return apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)

    def forward(self, x, cos, sin, plan: AttentionPlan):
        batch, length, _ = x.shape
        hd = self.config.head_dim
        q = self.q_proj(x).view(batch, length, self.heads, hd).transpose(1, 2)
        k = self.k_proj(x).view(batch, length, self.kv_heads, hd).transpose(1, 2)
        v = self.v_proj(x).view(batch, length, self.kv_heads, hd).transpose(1, 2)
        q, k = self.rotate(q, k, cos, sin)
        if plan.kind == "flash":  # pragma: no cover - needs CUDA + flash-attn
            half = torch.bfloat16 if v.dtype == torch.float32 else v.dtype  # flash-attn needs 16 bits
            qkv = (t.transpose(1, 2).to(half) for t in (q, k, v))
            out = _flash_varlen(*qkv, plan.cu_seqlens, plan.max_len, plan.is_causal).to(v.dtype)
            return self.o_proj(out.reshape(batch, length, -1))
        if plan.kind == "flex":
            from torch.nn.attention.flex_attention import flex_attention

            out = flex_attention(q, k, v, block_mask=plan.block_mask, enable_gqa=self.heads != self.kv_heads)
            return self.o_proj(out.transpose(1, 2).reshape(batch, length, -1))
        groups = self.heads // self.kv_heads
        if groups > 1:  # grouped-query attention: share each KV head across `groups` query heads
            k = k.repeat_interleave(groups, dim=1)
            v = v.repeat_interleave(groups, dim=1)
        mask = plan.mask
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=plan.is_causal and mask is None)
        return self.o_proj(out.transpose(1, 2).reshape(batch, length, -1))


class SwiGLU(nn.Module):
    def __init__(self, config: MlmClmConfig):
        super().__init__()
        d, f = config.hidden_size, config.intermediate_size
        self.gate_proj = nn.Linear(d, f, bias=False)
        self.up_proj = nn.Linear(d, f, bias=False)
        self.down_proj = nn.Linear(f, d, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    def __init__(self, config: MlmClmConfig):
        super().__init__()
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.self_attn = Attention(config)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.mlp = SwiGLU(config)

    def forward(self, x, cos, sin, plan: AttentionPlan):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, plan)
        return x + self.mlp(self.post_attention_layernorm(x))


class MlmClmPreTrainedModel(PreTrainedModel):
    config_class = MlmClmConfig
    base_model_prefix = "model"
    _no_split_modules = ["Block"]
    _supports_sdpa = True
    supports_gradient_checkpointing = False

    def _init_weights(self, module):
        std = self.config.initializer_range
        if isinstance(module, (nn.Linear, nn.Embedding)):
            module.weight.data.normal_(mean=0.0, std=std)
            if getattr(module, "bias", None) is not None:  # the task heads' (the body has none)
                module.bias.data.zero_()
        elif isinstance(module, RMSNorm):
            module.weight.data.fill_(1.0)


class MlmClmModel(MlmClmPreTrainedModel):
    """The transformer body: embeddings, blocks, final norm -> hidden states [B, L, d]."""

    def __init__(self, config: MlmClmConfig):
        super().__init__(config)
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(Block(config) for _ in range(config.num_hidden_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_init()

    def get_input_embeddings(self):
        return self.embed_tokens

    def set_input_embeddings(self, value):
        self.embed_tokens = value

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        segment_ids: torch.Tensor | None = None,
        is_causal: bool | None = None,
        return_dict: bool = True,
        **kwargs,
    ) -> BaseModelOutput:
        """`attention_mask`: HF-style 1/0 padding mask [B, L]; `segment_ids`: packed segments."""
        is_causal = self.config.is_causal if is_causal is None else is_causal
        batch, length = input_ids.shape
        x = self.embed_tokens(input_ids)
        if segment_ids is not None:
            positions = position_ids_from_segment_ids(segment_ids)
        else:
            positions = torch.arange(length, device=input_ids.device).expand(batch, length)
        cos, sin = rotary_cos_sin(positions, self.config.head_dim, self.config.rope_theta, x.dtype)
        if attention_mask is not None and bool(attention_mask.all()):
            attention_mask = None
        plan = AttentionPlan(self.config, segment_ids, attention_mask, is_causal, length, x.device, x.is_cuda)
        for layer in self.layers:
            x = layer(x, cos, sin, plan)
        x = self.norm(x)
        return BaseModelOutput(last_hidden_state=x) if return_dict else (x,)


class MlmClmForLM(MlmClmPreTrainedModel):
    """Body + untied LM head, for both MLM and CLM.

    `labels` are aligned with positions (a CLM caller passes already shifted labels, see
    `pretraining.objectives.clm_labels`); -100 = no loss. With labels, the head runs only at
    labelled positions (a large speed-up for MLM) and `logits` is [n_labelled, vocab] in row-major
    position order; without labels, `logits` is the full [B, L, vocab].
    """

    def __init__(self, config: MlmClmConfig):
        super().__init__(config)
        self.model = MlmClmModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.post_init()

    def get_output_embeddings(self):
        return self.lm_head

    def set_output_embeddings(self, value):
        self.lm_head = value

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        segment_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        is_causal: bool | None = None,
        return_dict: bool = True,
        **kwargs,
    ) -> MaskedLMOutput:
        hidden = self.model(
            input_ids, attention_mask=attention_mask, segment_ids=segment_ids, is_causal=is_causal
        ).last_hidden_state
        if labels is None:
            return MaskedLMOutput(logits=self.lm_head(hidden), hidden_states=None)
        selected = labels != IGNORE_INDEX
        logits = self.lm_head(hidden[selected])
        if logits.shape[0] == 0:  # no labelled position: a zero loss that keeps the graph
            loss = logits.sum() * 0.0
        else:
            loss = F.cross_entropy(logits.float(), labels[selected])
        return MaskedLMOutput(loss=loss, logits=logits)


# Task heads, shaped as EuroBERT's public remote code (its ForSequenceClassification: pooling ->
# dense -> GELU -> classifier; ForTokenClassification: a linear layer): what the paper's released
# checkpoints most likely shipped (docs/protocol.md, Choice 21). The released harness fine-tunes
# QA as a 2-label token classification (ForTokenClassification); ForQuestionAnswering is the span
# head of the standard protocol. Attention follows `is_causal` as the body's (benchmarks set it off).


class MlmClmForSequenceClassification(MlmClmPreTrainedModel):
    """Body -> pooling (`config.clf_pooling`: "mean" over the real tokens, the paper's, or "bos":
    the first token) -> dense -> GELU -> classifier."""

    def __init__(self, config: MlmClmConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.model = MlmClmModel(config)
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = nn.GELU()
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    def forward(self, input_ids, attention_mask=None, labels=None, **kwargs) -> SequenceClassifierOutput:
        hidden = self.model(input_ids, attention_mask=attention_mask, **kwargs).last_hidden_state
        if getattr(self.config, "clf_pooling", "mean") == "bos":
            pooled = hidden[:, 0]
        else:
            mask = torch.ones_like(input_ids) if attention_mask is None else attention_mask
            mask = mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp_min(1.0)
        logits = self.classifier(self.activation(self.dense(pooled)))
        loss = None if labels is None else F.cross_entropy(logits.float(), labels)
        return SequenceClassifierOutput(loss=loss, logits=logits)


class MlmClmForTokenClassification(MlmClmPreTrainedModel):
    """Body -> a linear layer per token (the release's QA: 2 labels, inside / outside the answer)."""

    def __init__(self, config: MlmClmConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.model = MlmClmModel(config)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    def forward(self, input_ids, attention_mask=None, labels=None, **kwargs) -> TokenClassifierOutput:
        hidden = self.model(input_ids, attention_mask=attention_mask, **kwargs).last_hidden_state
        logits = self.classifier(hidden)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.float().flatten(0, 1), labels.flatten(), ignore_index=IGNORE_INDEX)
        return TokenClassifierOutput(loss=loss, logits=logits)


class MlmClmForQuestionAnswering(MlmClmPreTrainedModel):
    """Body -> a linear layer giving start and end logits per token (span extraction)."""

    def __init__(self, config: MlmClmConfig):
        super().__init__(config)
        self.model = MlmClmModel(config)
        self.qa_outputs = nn.Linear(config.hidden_size, 2)
        self.post_init()

    def forward(self, input_ids, attention_mask=None, **kwargs) -> QuestionAnsweringModelOutput:
        hidden = self.model(input_ids, attention_mask=attention_mask, **kwargs).last_hidden_state
        start, end = self.qa_outputs(hidden).unbind(-1)
        return QuestionAnsweringModelOutput(start_logits=start, end_logits=end)


HEAD_CLASSES = {
    AutoModelForSequenceClassification: MlmClmForSequenceClassification,
    AutoModelForTokenClassification: MlmClmForTokenClassification,
    AutoModelForQuestionAnswering: MlmClmForQuestionAnswering,
}


def register_auto_classes() -> None:
    """Make the Auto classes load model_type "mlmclm_llama" with the classes of this module."""
    AutoConfig.register(MODEL_TYPE, MlmClmConfig, exist_ok=True)
    AutoModel.register(MlmClmConfig, MlmClmModel, exist_ok=True)
    AutoModelForMaskedLM.register(MlmClmConfig, MlmClmForLM, exist_ok=True)
    AutoModelForCausalLM.register(MlmClmConfig, MlmClmForLM, exist_ok=True)
    for auto, head in HEAD_CLASSES.items():
        auto.register(MlmClmConfig, head, exist_ok=True)
