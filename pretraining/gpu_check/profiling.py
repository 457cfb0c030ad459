"""Where a pretraining step's time goes: torch.profiler's events put into the regions of
plan.PROFILE_REGIONS (pure: the classification takes names and shapes, not a profiler).

On a GPU each kernel is attributed: by its own name first (Inductor names its fused kernels after
the operations they hold, e.g. `triton_red_fused_..._rsqrt_...`; FlexAttention's kernels hold
`flex_attention`; Liger's hold `rms_norm`, `swiglu`, `rope`, `cross_entropy`), then by the operator
chain that launched it (the optimizer step, the embedding, the loss), and a matrix product by the
shapes of the operator that launched it: the vocabulary as one dimension is the LM head, the MLP's
width the MLP, the model width the attention projections. On a CPU (the check's CPU mode) each
operator's own CPU time is attributed the same way. What fits no rule is `other_kernels`; `idle`
is the wall time no kernel covers (the host: batches, masking, launches).
"""

from __future__ import annotations

from dataclasses import dataclass

MATMUL_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::matmul", "aten::linear", "aten::_scaled_mm")
MATMUL_KERNEL_HINTS = ("gemm", "gemv", "nvjet", "cutlass", "xmma", "cublas", "sm90_", "sm80_", "triton_tem_fused_mm")
ATTENTION_HINTS = ("flex_attention", "flash", "fmha", "scaled_dot_product", "attention_kernel", "_efficient_attention")
LOSS_HINTS = ("cross_entropy", "log_softmax", "nll_loss", "logsumexp", "chunkedlinearcrossentropy")
OPTIMIZER_HINTS = ("optimizer.step", "adam", "clip_grad", "_foreach_norm", "multi_tensor_apply")
ELEMENTWISE_HINTS = ("rsqrt", "rms_norm", "silu", "swiglu", "rope", "rotary", "triton_")
# the operators of the eager blocks' normalisation, RoPE, SwiGLU and residuals (the optimizer's and
# the loss's own are claimed first, by their chains)
EAGER_ELEMENTWISE_OPS = frozenset(
    f"aten::{op}"
    for op in ("rsqrt", "silu", "rms_norm", "pow", "mean", "mul", "add", "cat", "neg", "to", "_to_copy", "copy_")
)


@dataclass(frozen=True)
class ModelDims:
    hidden: int
    intermediate: int
    vocab: int


def classify(kernel: str, chain: list[str], matmul_shapes: list[list[int]] | None, dims: ModelDims) -> str:
    """The region of one kernel (or CPU op) `kernel`, launched under the operator `chain`
    (innermost first); `matmul_shapes`: the input shapes of the nearest matrix-product operator
    of the chain, if any."""
    name = kernel.lower()
    context = " ".join(chain).lower()
    if any(h in name or h in context for h in OPTIMIZER_HINTS):
        return "optimizer_and_clipping"
    if any(h in name for h in ATTENTION_HINTS) or any(h in context for h in ATTENTION_HINTS):
        return "attention_kernel"
    if name.startswith("triton_tem_") and "mm" not in name:  # Inductor's templates: without autotuning, FlexAttention's
        return "attention_kernel"
    if "embedding" in name or "embedding" in context:
        return "embedding"
    if any(h in name or h in context for h in LOSS_HINTS):
        return "lm_head_and_loss"
    if matmul_shapes is not None and (any(h in name for h in MATMUL_KERNEL_HINTS) or name in MATMUL_OPS):
        return matmul_region(matmul_shapes, dims)
    if "memcpy" in name or "memset" in name:  # batches to the device, buffers zeroed
        return "other_kernels"
    if any(h in name for h in ELEMENTWISE_HINTS):
        return "norms_rope_swiglu_elementwise"
    if chain and chain[0] in EAGER_ELEMENTWISE_OPS:  # eager blocks (their multiplies, adds, concatenations)
        return "norms_rope_swiglu_elementwise"
    return "other_kernels"


def matmul_region(shapes: list[list[int]], dims: ModelDims) -> str:
    sizes = {size for shape in shapes for size in shape}
    if dims.vocab in sizes:
        return "lm_head_and_loss"
    if dims.intermediate in sizes:
        return "mlp_matmuls"
    if dims.hidden in sizes:
        return "attention_matmuls"
    return "other_kernels"


def _chain(event) -> list[str]:
    names = []
    while event is not None:
        names.append(event.name)
        event = event.cpu_parent
    return names


def _matmul_shapes(event):
    while event is not None:
        if event.name in MATMUL_OPS and event.input_shapes:
            return [list(s) for s in event.input_shapes if isinstance(s, (list, tuple))]
        event = event.cpu_parent
    return None


def region_microseconds(events, dims: ModelDims, device: bool) -> dict[str, float]:
    """Microseconds per region over `events` (torch.profiler's prof.events()): each GPU kernel's
    duration (device=True), or each CPU op's own CPU time (device=False)."""
    totals: dict[str, float] = {}
    for event in events:
        if device:
            pieces = [(kernel.name, kernel.duration) for kernel in getattr(event, "kernels", [])]
        else:
            pieces = [(event.name, event.self_cpu_time_total)] if event.self_cpu_time_total > 0 else []
        for name, microseconds in pieces:
            region = classify(name, _chain(event), _matmul_shapes(event), dims)
            totals[region] = totals.get(region, 0.0) + microseconds
    return totals


def region_rows(totals_us: dict[str, float], wall_s: float, steps: int, regions) -> dict[str, dict]:
    """Per region: milliseconds per step and share of the step's wall time; `idle` is the wall time
    the attributed time does not cover (never below 0: on a CPU ops may overlap across threads)."""
    step_ms = wall_s * 1000 / steps
    rows = {}
    busy = 0.0
    for region in regions:
        if region == "idle":
            continue
        ms = totals_us.get(region, 0.0) / 1000 / steps
        busy += ms
        rows[region] = {"ms_per_step": round(ms, 3), "share_of_step": round(ms / step_ms, 4)}
    idle = max(step_ms - busy, 0.0)
    rows["idle"] = {"ms_per_step": round(idle, 3), "share_of_step": round(idle / step_ms, 4)}
    return rows
