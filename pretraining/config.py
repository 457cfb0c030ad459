"""The pretraining run config: YAML + `a.b=value` overrides -> frozen dataclasses (no Composer).

Every duration is in optimizer steps (Composer batches). Unknown keys and wrong types are errors
naming the field (contracts.config). The resolved config is saved beside the run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from contracts.config import ConfigError, config_from_dict, config_to_dict, load_config
from contracts.loggers import check_logger_section
from contracts.paper import (
    DECAY_STEPS,
    DEFAULT_MASKING_RATIO,
    PAPER_GPUS,
    PRETRAIN_BATCH_SEQUENCES,
    PRETRAIN_STEPS,
    WARMUP_STEPS,
)
from pretraining.data import DataConfig
from pretraining.presets import PRESETS


@dataclass(frozen=True)
class InitConfig:
    """Where the weights start. `path` None: random init (std 0.02).

    kind "weights": load weights only and start at step 0 with a fresh optimizer and schedule
    (CPT). `path` may be a Composer checkpoint (.pt) of ours, an exported HF directory of ours, or
    a Hugging Face Llama-architecture decoder directory (keys mapped by pretraining.export).
    kind "full_state": continue from a Composer checkpoint with its step, optimizer and schedule
    position (e.g. MLM branched from a pre-decay CLM checkpoint, as the paper's biphasic runs).
    kind "weights_and_optimizer": the weights and the AdamW state of a Composer checkpoint (the
    base run's last, `<run>/checkpoints/ba<N>-rank0.pt`), then step 0 with this run's schedule and
    data position: CPT that continues the base's optimizer (`configs --cpt-optimizer continued`).
    """

    path: str | None = None
    kind: Literal["weights", "full_state", "weights_and_optimizer"] = "weights"


@dataclass(frozen=True)
class ModelConfig:
    """`attention_scope`: attention and RoPE positions per window of the data (the release) or per
    document (ModernBERT-style); `attn_implementation`: sdpa (any device), flex_attention (FlexAttention;
    fast when compiled on GPU, train.compile) or flash_attention_2 (varlen kernel; CUDA + flash-attn)."""

    preset: str = "toy_s"
    attn_implementation: Literal["sdpa", "flex_attention", "flash_attention_2"] = "sdpa"
    attention_scope: Literal["window", "document"] = "window"
    # RMSNorm / SwiGLU / RoPE kernels (pretraining.kernels): reference, torch (rms_norm), liger (CUDA;
    # torch on a CPU). Parameters and exports are the reference model's whichever is chosen.
    block_kernels: Literal["reference", "torch", "liger"] = "reference"

    def __post_init__(self):
        if self.preset not in PRESETS:
            raise ValueError(f"model.preset {self.preset!r} is not one of {sorted(PRESETS)}")


@dataclass(frozen=True)
class ObjectiveConfig:
    """kind clm | mlm | clm_then_mlm (CLM for steps < switch_at, then MLM, bidirectional)."""

    kind: Literal["clm", "mlm", "clm_then_mlm"] = "mlm"
    mlm_ratio: float = DEFAULT_MASKING_RATIO
    replace: tuple[float, ...] = (1.0, 0.0, 0.0)  # (mask token, random token, unchanged)
    switch_at: int | None = None

    def __post_init__(self):
        if (self.kind == "clm_then_mlm") != (self.switch_at is not None):
            raise ValueError("objective.switch_at is required for clm_then_mlm and only for it")
        if not 0.0 < self.mlm_ratio < 1.0:
            raise ValueError(f"objective.mlm_ratio {self.mlm_ratio} is not in (0, 1)")


@dataclass(frozen=True)
class OptimizerConfig:
    """torch.optim.AdamW (decay = lr * weight_decay * w, as in PyTorch trainers such as EuroBERT's).
    `no_decay`: "none" decays every parameter (the release), "norm_gains" exempts the RMSNorm gains."""

    lr: float = 5e-4
    betas: tuple[float, ...] = (0.9, 0.95)
    eps: float = 1e-5
    weight_decay: float = 0.1
    no_decay: Literal["none", "norm_gains"] = "none"
    grad_clip_norm: float = 1.0
    fused: bool = False  # torch AdamW's fused implementation (one kernel for all parameters) instead of foreach

    def __post_init__(self):
        # Found here, before the run directory is touched (docs/reliability.md), not by torch.optim
        # or at the first step after config.yaml is written.
        if not self.lr > 0:
            raise ValueError(f"optimizer.lr must be > 0, got {self.lr}")
        if len(self.betas) != 2 or not all(0 <= b < 1 for b in self.betas):
            raise ValueError(f"optimizer.betas must be two numbers in [0, 1), got {list(self.betas)}")
        if not self.eps > 0:
            raise ValueError(f"optimizer.eps must be > 0, got {self.eps}")
        if self.weight_decay < 0:
            raise ValueError(f"optimizer.weight_decay must be >= 0, got {self.weight_decay}")
        if self.grad_clip_norm < 0:
            raise ValueError(f"optimizer.grad_clip_norm must be >= 0 (0: no clipping), got {self.grad_clip_norm}")


@dataclass(frozen=True)
class ScheduleConfig:
    """WSD over the run's `train.max_steps`: `warmup` steps up, constant, last `decay` steps down."""

    warmup: int = WARMUP_STEPS
    decay: int = DECAY_STEPS
    decay_shape: Literal["linear", "1-sqrt"] = "linear"
    alpha_f: float = 0.0

    def __post_init__(self):
        if self.warmup < 0 or self.decay < 0:
            raise ValueError(f"schedule.warmup and schedule.decay must be >= 0, got {self.warmup} and {self.decay}")
        if not 0 <= self.alpha_f <= 1:
            raise ValueError(f"schedule.alpha_f must lie in [0, 1], got {self.alpha_f}")


# The modules whose callbacks a config may name without --trust-callbacks: Composer's callbacks and
# our own callback modules, an explicit list (issue 56: "any module of our packages" let a config call
# contracts.provenance:atomic_write_text and write a module into the checkout). Naming any other
# module imports it, which runs its code (`os:system`); docs/pretraining.md, docs/reliability.md.
TRUSTED_CALLBACK_MODULES = ("composer.callbacks", "pretraining.gpu_check.hold", "pretraining.monitoring")


def _trusted_module(module: str) -> bool:
    return any(module == m or module.startswith(m + ".") for m in TRUSTED_CALLBACK_MODULES)


def untrusted_callbacks(specs) -> list[str]:
    """The `train.callbacks` factories outside TRUSTED_CALLBACK_MODULES (read, never imported)."""
    return [s.factory for s in specs if not _trusted_module(s.factory.partition(":")[0])]


def check_callbacks(specs, trust: bool, source: str = "train.callbacks") -> None:
    """ConfigError, before anything is imported, for a factory outside the trusted callback modules
    unless `trust` (--trust-callbacks). What a trusted module names must also be a Callback class:
    checked after its import, before it is called (pretraining.train.configured_callbacks)."""
    untrusted = untrusted_callbacks(specs)
    if untrusted and not trust:
        raise ConfigError(
            f"{source}: factory {untrusted[0]!r} is outside Composer's and this package's callback modules "
            f"({', '.join(TRUSTED_CALLBACK_MODULES)}); importing it would run its code: pass --trust-callbacks "
            "if you trust it (docs/pretraining.md)"
        )


@dataclass(frozen=True)
class CallbackConfig:
    """A Composer callback added to the run: `factory` is "module:attribute" (a Callback class or a
    function returning one), called with `kwargs`; e.g. composer.callbacks:SpeedMonitor. Only
    Composer's and this package's modules unless the run is trusted (check_callbacks)."""

    factory: str
    kwargs: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        module, _, attribute = self.factory.partition(":")
        if not module or not attribute:
            raise ValueError(f"callbacks factory {self.factory!r} is not 'module:attribute'")


def check_virtual_ranks(global_batch_size: int, release_ranks: int, microbatch: int) -> None:
    """Under `loss_average: rank` a microbatch is a virtual rank: Composer's per-sample accumulation
    weights each microbatch's mean loss alike, the release's per-rank rule, only if a microbatch
    holds exactly one release rank's batch."""
    rank_batch, rest = divmod(global_batch_size, release_ranks)
    if rest or rank_batch < 1:
        raise ValueError(
            f"train.loss_average: rank with train.device_microbatch_size {microbatch}: each microbatch stands for "
            f"one of train.release_ranks ({release_ranks}) ranks, but train.global_batch_size {global_batch_size} "
            "is not a multiple of it; set train.device_microbatch_size: null (each rank's whole batch) or "
            "train.loss_average: tokens"
        )
    if microbatch != rank_batch:
        raise ValueError(
            f"train.loss_average: rank averages the mean losses of the release's {release_ranks} ranks of "
            f"{rank_batch} samples (train.global_batch_size {global_batch_size} / train.release_ranks); a microbatch "
            f"is one of them: set train.device_microbatch_size: {rank_batch} (got {microbatch}), null (each rank's "
            "whole batch) or train.loss_average: tokens"
        )


@dataclass(frozen=True)
class TrainConfig:
    max_steps: int = PRETRAIN_STEPS
    global_batch_size: int = PRETRAIN_BATCH_SEQUENCES  # packed samples per optimizer step over all ranks
    device_microbatch_size: int | None = None  # None: the whole per-rank batch at once
    seed: int = 17
    checkpoint_steps: tuple[int, ...] = ()  # weights exported as HF dirs at these steps
    # full-state checkpoints kept at these steps in <run_dir>/branches/ (contracts.layout.branch_state):
    # a decay branch starts there with init.kind full_state (the CPT branches, pretraining/registry.py)
    branch_steps: tuple[int, ...] = ()
    resume_interval: int = 1000  # full-state Composer checkpoints for autoresume
    keep_resume_checkpoints: int = 2
    precision: Literal["auto", "fp32", "amp_bf16"] = "auto"  # auto: amp_bf16 on GPU, fp32 on CPU
    device: Literal["auto", "cpu", "gpu"] = "auto"
    fsdp: bool = False  # FULL_SHARD through Composer's parallelism config (multi-GPU)
    compile: bool = False  # torch.compile the transformer body in place (not the dynamic-shape head)
    # LM head + cross-entropy (pretraining.kernels): reference, chunked (torch, never the full
    # logits), liger (fused, CUDA; chunked on a CPU)
    loss_kernel: Literal["reference", "chunked", "liger"] = "reference"
    progress_bar: bool = True
    dataloader_workers: int = 0
    callbacks: tuple[CallbackConfig, ...] = ()  # more Composer callbacks (docs/pretraining.md)
    # A step's loss: `tokens`, the mean over all its labelled tokens (independent of the ranks);
    # `rank`, each rank's mean, then averaged over ranks, as the released trainer (docs/pretraining.md)
    loss_average: Literal["tokens", "rank"] = "tokens"
    # `rank` with microbatches: each microbatch stands for one of the release's ranks (a virtual
    # rank) and must hold its batch, global_batch_size / release_ranks samples (docs/pretraining.md)
    release_ranks: int = PAPER_GPUS

    def __post_init__(self):
        if self.loss_average not in ("tokens", "rank"):
            raise ValueError(f"train.loss_average must be tokens or rank, got {self.loss_average!r}")
        if self.release_ranks < 1:
            raise ValueError(
                f"train.release_ranks must be >= 1 (the release's number of ranks), got {self.release_ranks}"
            )
        if self.loss_average == "rank" and self.device_microbatch_size is not None:
            check_virtual_ranks(self.global_batch_size, self.release_ranks, self.device_microbatch_size)
        if self.global_batch_size < 1:
            raise ValueError(f"train.global_batch_size {self.global_batch_size} must be >= 1 (samples per step)")
        if self.max_steps < 1:
            raise ValueError(f"train.max_steps must be >= 1, got {self.max_steps}")
        if self.resume_interval < 1:
            raise ValueError(
                f"train.resume_interval must be >= 1 (steps between resume checkpoints), got {self.resume_interval}"
            )
        if self.keep_resume_checkpoints == 0 or self.keep_resume_checkpoints < -1:
            raise ValueError(
                f"train.keep_resume_checkpoints must be >= 1, or -1 to keep all, got {self.keep_resume_checkpoints} "
                "(0 keeps none: the run could not resume)"
            )
        if self.device_microbatch_size is not None and self.device_microbatch_size < 1:
            raise ValueError(f"train.device_microbatch_size must be >= 1, got {self.device_microbatch_size}")
        if self.dataloader_workers < 0:
            raise ValueError(f"train.dataloader_workers must be >= 0, got {self.dataloader_workers}")


@dataclass(frozen=True)
class MonitorConfig:
    """Composer's SpeedMonitor, LRMonitor (and MemoryMonitor on a GPU), added when `loggers` names a
    tracker: throughput over the last `window` steps; MFU against `peak_flops` per device (FLOP/s;
    None: Composer's table of known GPUs, no MFU elsewhere). docs/watching.md."""

    window: int = 100
    peak_flops: float | None = None

    def __post_init__(self):
        if self.window < 1:
            raise ValueError(f"monitor.window must be >= 1 step, got {self.window}")
        if self.peak_flops is not None and not self.peak_flops > 0:
            raise ValueError(
                f"monitor.peak_flops must be > 0 FLOP/s (null: Composer's GPU table), got {self.peak_flops}"
            )


# Sections that change what a run shows while it trains, never what it computes: left out of the
# run's identity, so a tracker can be added to (or removed from) a run that resumes.
WATCH_SECTIONS = ("loggers", "monitor")


@dataclass(frozen=True)
class PretrainConfig:
    name: str
    run_dir: Path
    tokenizer: str  # name or path, read by pretraining.tokenizer.load_tokenizer
    data: DataConfig
    model: ModelConfig = field(default_factory=ModelConfig)
    objective: ObjectiveConfig = field(default_factory=ObjectiveConfig)
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    init: InitConfig = field(default_factory=InitConfig)
    loggers: dict[str, Any] = field(default_factory=dict, hash=False)  # tracker name -> its Composer arguments
    monitor: MonitorConfig = field(default_factory=MonitorConfig)

    def __post_init__(self):
        check_logger_section(self.loggers)
        t, s = self.train, self.schedule
        if s.warmup + s.decay > t.max_steps:
            raise ValueError(
                f"schedule.warmup ({s.warmup}) + schedule.decay ({s.decay}) exceed train.max_steps ({t.max_steps})"
            )
        sw = self.objective.switch_at
        if sw is not None and not 0 < sw < t.max_steps:
            raise ValueError(f"objective.switch_at ({sw}) must lie inside (0, {t.max_steps})")
        bad = [c for c in t.checkpoint_steps if not 0 < c <= t.max_steps]
        if bad:
            raise ValueError(f"train.checkpoint_steps {bad} are outside (0, {t.max_steps}]")
        bad = [c for c in t.branch_steps if not 0 < c < t.max_steps]
        if bad:
            raise ValueError(f"train.branch_steps {bad} are outside (0, {t.max_steps}): a branch starts before the end")


def run_identity(body: dict) -> dict:
    """A resolved config (config_to_dict, or the body of a saved config.yaml) without WATCH_SECTIONS:
    what must be equal for a run to resume, and what its config hash covers."""
    return {key: value for key, value in body.items() if key not in WATCH_SECTIONS}


def identity_of(cfg: PretrainConfig) -> dict:
    return run_identity(config_to_dict(cfg))


# Fields that say where a run's inputs and outputs live or what it keeps, not what it computes: a
# finished run asked for again under another output folder, or with other exports, is the same run.
NOT_COMPUTING_FIELDS = frozenset(
    {
        "name",
        "run_dir",
        "tokenizer",
        "data.path",
        "data.cache_dir",
        "data.predownload",
        "data.cache_limit",
        "data.download_retry",
        "data.download_timeout",
        "init.path",
        "train.checkpoint_steps",
        "train.branch_steps",
        "train.resume_interval",
        "train.keep_resume_checkpoints",
        "train.progress_bar",
        "train.dataloader_workers",
    }
)


def flat_fields(body: dict, prefix: str = "") -> dict:
    """{"section.field": value} of a config body (WATCH_SECTIONS kept whole)."""
    flat = {}
    for key, value in body.items():
        if isinstance(value, dict) and key not in WATCH_SECTIONS:
            flat.update(flat_fields(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def computing_differences(saved: dict, wanted: dict) -> list[tuple[str, Any, Any]]:
    """(field, saved value, wanted value) for every setting that changes what a run computes and
    differs between two config bodies (a saved config.yaml's `config`, a resolved config); both are
    read through PretrainConfig first, so a field a saved config lacks counts with its default
    value (a run made before the field existed was computed with it)."""

    def normal(body: dict) -> dict:  # both sides through the dataclass: same types, defaults filled in
        return flat_fields(identity_of(config_from_dict(PretrainConfig, body, "pretraining config")))

    return field_differences(normal(saved), normal(wanted), ignore=NOT_COMPUTING_FIELDS)


def field_differences(old: dict, new: dict, ignore=frozenset()) -> list[tuple[str, Any, Any]]:
    """(field, old value, new value) for every field of two flat bodies (`flat_fields`) that differs."""
    return [
        (key, old.get(key), new.get(key))
        for key in sorted(set(old) | set(new))
        if key not in ignore and old.get(key) != new.get(key)
    ]


def describe_differences(differences: list[tuple[str, Any, Any]]) -> str:
    """`field 'a' there, 'b' here (and N more)` for a non-empty `field_differences` list."""
    field, old, new = differences[0]
    more = f" (and {len(differences) - 1} more)" if len(differences) > 1 else ""
    return f"{field} {old!r} there, {new!r} here{more}"


def load_pretrain_config(path, overrides=()) -> PretrainConfig:
    return load_config(PretrainConfig, path, list(overrides))


__all__ = [
    "CallbackConfig",
    "ConfigError",
    "InitConfig",
    "ModelConfig",
    "MonitorConfig",
    "ObjectiveConfig",
    "OptimizerConfig",
    "PretrainConfig",
    "ScheduleConfig",
    "TrainConfig",
    "check_callbacks",
    "computing_differences",
    "describe_differences",
    "field_differences",
    "identity_of",
    "load_pretrain_config",
    "run_identity",
]
