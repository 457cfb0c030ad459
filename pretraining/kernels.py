"""Faster kernels for a pretraining step, each an option with a reference path and a CPU fallback
(issue 68; docs/pretraining.md, "Kernels").

`train.loss_kernel` — the LM head and its cross-entropy at the labelled positions:
  reference  logits = hidden @ W^T (bf16 under autocast), then F.cross_entropy on fp32 logits:
             materialises [labelled, vocab] in bf16 and fp32 (8.4 GB fp32 for a CLM step of
             8 x 2,048 tokens at the paper's 128,256-token vocabulary)
  chunked    torch only, any device: the same loss over chunks of rows, gradients computed in the
             forward pass, so at most [chunk, vocab] logits exist at a time
  liger      Liger Kernel's fused linear cross-entropy (Triton, CUDA only); on a CPU, `chunked`

`model.block_kernels` — the transformer blocks' normalisation and elementwise work:
  reference  modeling.py's RMSNorm, SwiGLU and RoPE (what Inductor fuses under train.compile)
  torch      torch's own rms_norm (torch.nn.functional.rms_norm) for RMSNorm, any device
  liger      Liger Kernel's RMSNorm ("llama" casting, as modeling.RMSNorm), SwiGLU and RoPE
             (CUDA only); on a CPU, `torch`

The swaps change the class of each module in place, never its parameters: checkpoints, exports
and their names are those of the reference model. `resolve` says what a run will actually use on
its device; the run records that in config.yaml's provenance (train.resolved_kernels).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn

from pretraining.modeling import IGNORE_INDEX, Attention, RMSNorm, SwiGLU
from pretraining.options import BLOCK_KERNELS, LOSS_KERNELS

CHUNK_ROWS = 4096  # rows of logits at a time under `chunked`: 4,096 x 128,256 fp32 = 2.1 GB


class KernelError(RuntimeError):
    """A kernel asked for that this machine cannot run (one line, names the setting and the fix)."""


@dataclass(frozen=True)
class ResolvedKernels:
    loss: str
    blocks: str
    notes: tuple[str, ...] = ()  # why a choice differs from what was asked

    def as_dict(self) -> dict:
        return {**asdict(self), "notes": list(self.notes)}


def liger_importable() -> str | None:
    """None when liger_kernel imports, else why not (one line)."""
    try:
        import liger_kernel.transformers.functional  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - any import failure is the answer
        return f"{type(exc).__name__}: {exc}"[:200]
    return None


def resolve(loss_kernel: str, block_kernels: str, device: str) -> ResolvedKernels:
    """What runs on `device` ("cpu" | "cuda"/"gpu"): Liger needs CUDA and falls back on a CPU; on
    CUDA a Liger that does not import is an error, never a silent fallback."""
    if loss_kernel not in LOSS_KERNELS:
        raise KernelError(f"train.loss_kernel {loss_kernel!r}: use one of {', '.join(LOSS_KERNELS)}")
    if block_kernels not in BLOCK_KERNELS:
        raise KernelError(f"model.block_kernels {block_kernels!r}: use one of {', '.join(BLOCK_KERNELS)}")
    cuda = device in ("cuda", "gpu")
    notes = []
    loss, blocks = loss_kernel, block_kernels
    if "liger" in (loss_kernel, block_kernels):
        if not cuda:
            if loss == "liger":
                loss = "chunked"
                notes.append("train.loss_kernel liger needs CUDA: chunked on this CPU")
            if blocks == "liger":
                blocks = "torch"
                notes.append("model.block_kernels liger needs CUDA: torch on this CPU")
        else:
            why = liger_importable()
            if why:
                setting = "train.loss_kernel" if loss == "liger" else "model.block_kernels"
                raise KernelError(
                    f"{setting} liger: liger_kernel does not import ({why}); pip install liger-kernel "
                    "(the container has it) or set it to reference"
                )
    return ResolvedKernels(loss=loss, blocks=blocks, notes=tuple(notes))


# --------------------------------------------------------------------------------- the LM loss
def reference_loss(hidden: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """modeling.MlmClmForLM's loss at the labelled rows: mean cross-entropy of hidden @ W^T."""
    return F.cross_entropy(F.linear(hidden, weight).float(), labels)


def _compute_dtype(hidden: torch.Tensor) -> torch.dtype:
    if torch.is_autocast_enabled(hidden.device.type):
        return torch.get_autocast_dtype(hidden.device.type)
    return hidden.dtype


class _ChunkedLinearCrossEntropy(torch.autograd.Function):
    """Mean cross-entropy of (hidden @ weight^T) against labels, chunk by chunk of rows; the
    gradients are computed in the forward pass (softmax - one-hot), as Liger's kernel does."""

    @staticmethod
    def forward(ctx, hidden, weight, labels, chunk_rows: int):
        rows = hidden.shape[0]
        grad_hidden = torch.empty_like(hidden)
        grad_weight = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device)
        total = torch.zeros((), dtype=torch.float32, device=hidden.device)
        for start in range(0, rows, chunk_rows):
            h = hidden[start : start + chunk_rows]
            y = labels[start : start + chunk_rows]
            logits = (h @ weight.t()).float()
            lse = torch.logsumexp(logits, dim=-1)
            total += (lse - logits.gather(1, y[:, None]).squeeze(1)).sum()
            probs = logits.sub_(lse[:, None]).exp_()  # softmax, in place of the logits
            probs[torch.arange(len(y), device=y.device), y] -= 1.0
            grad_logits = probs.div_(rows).to(h.dtype)
            grad_hidden[start : start + chunk_rows] = grad_logits @ weight
            grad_weight += (grad_logits.t() @ h).float()
        ctx.save_for_backward(grad_hidden, grad_weight.to(weight.dtype))
        return total / rows

    @staticmethod
    def backward(ctx, grad_loss):
        grad_hidden, grad_weight = ctx.saved_tensors
        return grad_hidden * grad_loss, grad_weight * grad_loss, None, None


def chunked_loss(
    hidden: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor, chunk_rows: int = CHUNK_ROWS
) -> torch.Tensor:
    """The reference loss without the full logits: the matrix products in autocast's dtype (as
    F.linear under autocast), softmax and sums in fp32."""
    dtype = _compute_dtype(hidden)
    with torch.autocast(hidden.device.type, enabled=False):
        return _ChunkedLinearCrossEntropy.apply(hidden.to(dtype), weight.to(dtype), labels, chunk_rows)


def liger_loss(hidden: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    from liger_kernel.transformers.functional import liger_fused_linear_cross_entropy

    # fp32 accumulation of the head's gradient over the chunks (Liger's advice for stable training)
    return liger_fused_linear_cross_entropy(hidden, weight, labels, accum_dtype=torch.float32)


LOSS_FUNCTIONS = {"reference": reference_loss, "chunked": chunked_loss, "liger": liger_loss}


def lm_loss(model, batch: dict, is_causal: bool, loss_kernel: str = "reference") -> torch.Tensor:
    """The training loss of MlmClmForLM on a batch {input_ids, segment_ids, labels}: the body, then
    the head and cross-entropy at the labelled positions with `loss_kernel` (a resolved name)."""
    if loss_kernel == "reference":  # the model's own forward: what an export computes
        return model(**batch, is_causal=is_causal).loss
    labels = batch["labels"]
    hidden = model.model(batch["input_ids"], segment_ids=batch.get("segment_ids"), is_causal=is_causal)
    selected = labels != IGNORE_INDEX
    rows = hidden.last_hidden_state[selected]
    if rows.shape[0] == 0:  # as the model: a zero that keeps the graph
        return model.lm_head(rows).sum() * 0.0
    return LOSS_FUNCTIONS[loss_kernel](rows, model.lm_head.weight, labels[selected])


# ------------------------------------------------------------------------------- block kernels
class TorchRMSNorm(nn.Module):
    """modeling.RMSNorm through torch.nn.functional.rms_norm: normalised in fp32, cast back, then
    the gain (the same rounding as the reference)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        normed = F.rms_norm(x.float(), (x.shape[-1],), None, self.eps)
        return self.weight * normed.to(dtype)


class LigerRMSNorm(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from liger_kernel.transformers.functional import liger_rms_norm

        # "llama" casting: fp32 statistics, cast to the input dtype, then the gain (modeling.RMSNorm);
        # Liger returns the input dtype where the reference's fp32 gain promotes: cast as it does
        out = liger_rms_norm(x, self.weight, self.eps, casting_mode="llama", in_place=False)
        return out.to(torch.promote_types(x.dtype, self.weight.dtype))


class LigerSwiGLU(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from liger_kernel.transformers.functional import liger_swiglu

        return self.down_proj(liger_swiglu(self.gate_proj(x), self.up_proj(x)))


class LigerRotaryAttention(nn.Module):
    def rotate(self, q, k, cos, sin):
        from liger_kernel.transformers.functional import liger_rope

        return liger_rope(q, k, cos, sin)


_SWAPPED: dict[tuple[type, type], type] = {}


def _swap(module: nn.Module, mixin: type) -> None:
    """Give `module` the forward of `mixin` (its parameters, buffers and names unchanged). One class
    per (mixin, base), shared by every block: regional compilation reuses one block's graph only
    when the blocks' modules have the same types."""
    base = type(module)
    if (mixin, base) not in _SWAPPED:
        _SWAPPED[mixin, base] = type(f"{mixin.__name__}_{base.__name__}", (mixin, base), {})
    module.__class__ = _SWAPPED[mixin, base]


def apply_block_kernels(model: nn.Module, kind: str) -> int:
    """Swap the blocks' modules of `model` to `kind` (a resolved name) in place, before any
    compile; returns how many modules were swapped."""
    if kind == "reference":  # back to the reference classes (a model swapped before)
        bases = {swapped: base for (_mixin, base), swapped in _SWAPPED.items()}
        swapped_modules = [module for module in model.modules() if type(module) in bases]
        for module in swapped_modules:
            module.__class__ = bases[type(module)]
        return len(swapped_modules)
    swaps = (
        {RMSNorm: TorchRMSNorm}
        if kind == "torch"
        else {
            RMSNorm: LigerRMSNorm,
            SwiGLU: LigerSwiGLU,
            Attention: LigerRotaryAttention,
        }
    )
    count = 0
    for module in model.modules():
        for base, mixin in swaps.items():
            if type(module) is base:
                _swap(module, mixin)
                count += 1
    return count
