"""Composer glue: the run config -> composer.Trainer. The training loop, checkpointing and
autoresume are Composer's; this module only plugs the objective, schedule and logging into it.

The run directory (`run_dir`) is laid out as contracts.layout states: config.yaml, loss.jsonl,
checkpoints/ (Composer full-state, autoresume: latest-rank0.pt -> the newest complete one, as
pretraining.resume removes incomplete ones before resuming), hf/step-<N>/ (weights exported as Hugging
Face directories at train.checkpoint_steps and at the last step: the released checkpoints are these)
and FINISHED.json (written when the run completed; a finished run is never overwritten).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
from composer import Algorithm, Callback, Event, State, Trainer
from composer.algorithms import GradientClipping
from composer.core import DataSpec
from composer.loggers import Logger
from composer.models import ComposerModel
from composer.utils import dist
from composer.utils.checkpoint import save_checkpoint
from torch.nn.parallel import DistributedDataParallel

from contracts.config import ConfigError, config_to_dict, save_resolved_config
from contracts.layout import (
    CHECKPOINT_PATTERN,
    CHECKPOINTS_DIR,
    EXPORTS_DIR,
    FINISHED_FILE,
    LATEST_CHECKPOINT_PATTERN,
    LOSS_LOG_FILE,
    RUN_CONFIG_FILE,
    branch_state,
    export_dir,
    latest_checkpoint,
)
from contracts.locks import folder_lock
from contracts.provenance import atomic_write_json, atomic_write_text, disk_full_cause, git_sha, stable_hash, utc_now
from pretraining.compiling import compile_blocks
from pretraining.config import (
    PretrainConfig,
    TrainConfig,
    check_callbacks,
    describe_differences,
    field_differences,
    flat_fields,
    identity_of,
    run_identity,
)
from pretraining.data.config import PreparedDataError
from pretraining.data.windows import attention_segments
from pretraining.export import (
    check_checkpoint_fits,
    check_complete_checkpoint,
    guard_composer_loads,
    save_hf_directory,
)
from pretraining.flops import flop_shape, model_flops, needed_flops
from pretraining.kernels import KernelError, ResolvedKernels, apply_block_kernels, lm_loss, resolve
from pretraining.modeling import Block, MlmClmForLM
from pretraining.monitoring import LoggerSetupError, composer_loggers, monitor_callbacks
from pretraining.objectives import (
    IGNORE_INDEX,
    SAMPLE_INDEX,
    WINDOW_IDS,
    TokenIds,
    clm_labels,
    mask_for_mlm,
    phase_at,
    sample_generators,
)
from pretraining.presets import PRESETS
from pretraining.resume import newest_complete_checkpoint
from pretraining.schedule import AtStepEnd, WSDScheduler


class PretrainError(RuntimeError):
    """A run that cannot start as configured (finished already, different config, bad inputs)."""


def token_ids_from_tokenizer(tokenizer) -> TokenIds:
    from pretraining.tokenizer import special_token_ids

    st = special_token_ids(tokenizer)
    special = {st.bos, st.eos, st.pad, st.mask} | set(getattr(tokenizer, "all_special_ids", ()))
    special |= {i for i, tok in getattr(tokenizer, "added_tokens_decoder", {}).items() if tok.special}
    return TokenIds(mask=st.mask, special=tuple(sorted(i for i in special if i is not None)), vocab_size=st.vocab_size)


class ComposerLM(ComposerModel):
    """Wraps MlmClmForLM; `is_causal` is flipped per step by ObjectiveAlgorithm."""

    def __init__(self, model: MlmClmForLM, loss_kernel: str = "reference"):
        super().__init__()
        self.model = model
        self.is_causal = bool(model.config.is_causal)
        self.loss_kernel = loss_kernel  # a resolved name (pretraining.kernels.resolve)
        self._flop_shape = flop_shape(model.config)

    def flops_per_batch(self, batch: dict) -> float:
        """Needed FLOPs of this rank's batch as trained (Composer's SpeedMonitor reads it for
        FLOP/s and MFU): attention over the batch's segments, the LM head at its labels."""
        return needed_flops(self._flop_shape, batch[SEGMENT_IDS], batch["labels"])

    def model_flops_per_batch(self, batch: dict) -> float:
        """Model FLOPs (6N + attention, the head at every position) of the same batch: the MFU other
        trainers usually report (pretraining.monitoring.model_flops_monitor)."""
        return model_flops(self._flop_shape, batch[SEGMENT_IDS])

    def forward(self, batch: dict) -> Any:
        inputs = {"input_ids": batch["input_ids"], "segment_ids": batch.get(SEGMENT_IDS), "labels": batch["labels"]}
        return lm_loss(self.model, inputs, self.is_causal, self.loss_kernel)

    def loss(self, outputs, batch) -> torch.Tensor:
        return outputs  # lm_loss: the loss tensor itself

    def fsdp_wrap_fn(self, module: torch.nn.Module) -> bool:
        return isinstance(module, Block)


def _unwrap(model) -> ComposerLM:
    return model.module if isinstance(model, DistributedDataParallel) else model


SEGMENT_IDS = "segment_ids"
# Seconds a rank waits for the others in a collective (Composer's default dist_timeout).
DIST_TIMEOUT_S = 300.0


class ObjectiveAlgorithm(Algorithm):
    """At AFTER_DATALOADER: turn a packed batch into a CLM or MLM batch for the current step.

    The phase is a function of the step, each row's mask of (seed, the row's global sample index):
    autoresume (on any number of ranks) lands in the right phase with the same masks. Attention
    segments (and so RoPE positions and where CLM targets stop) follow `attention_scope`: the
    batch's windows, or the documents inside them (pretraining/data/windows.py); a batch without
    window_ids is one window per row.
    """

    def __init__(
        self,
        kind: str,
        switch_at: int | None,
        mlm_ratio: float,
        replace,
        ids: TokenIds,
        seed: int,
        attention_scope: str = "window",
    ):
        self.kind, self.switch_at, self.mlm_ratio = kind, switch_at, mlm_ratio
        self.replace, self.ids, self.seed = tuple(replace), ids, seed
        self.attention_scope = attention_scope

    def match(self, event: Event, state: State) -> bool:
        return event == Event.AFTER_DATALOADER

    def apply(self, event: Event, state: State, logger: Logger) -> None:
        step = int(state.timestamp.batch.value)
        phase = phase_at(step, self.kind, self.switch_at)
        batch = state.batch
        input_ids = batch["input_ids"]
        windows = batch.get(WINDOW_IDS)
        segments = attention_segments(
            torch.zeros_like(input_ids) if windows is None else windows, batch.get("document_ids"), self.attention_scope
        )
        if phase.objective == "mlm":
            if SAMPLE_INDEX not in batch:
                raise PretrainError(
                    f"an MLM batch without {SAMPLE_INDEX!r}: masks are drawn per global "
                    "sample index; the data loader must provide it (pretraining/data/loader.py)"
                )
            generators = sample_generators(self.seed, batch[SAMPLE_INDEX])
            input_ids, labels = mask_for_mlm(
                input_ids,
                generators,
                self.mlm_ratio,
                self.ids.mask,
                self.ids.special,
                self.ids.vocab_size,
                self.replace,
            )
        else:
            labels = clm_labels(input_ids, segments)
        state.batch = {"input_ids": input_ids, "labels": labels, SEGMENT_IDS: segments}
        if SAMPLE_INDEX in batch:  # per-row metadata for callbacks; the model ignores it
            state.batch[SAMPLE_INDEX] = batch[SAMPLE_INDEX]
        _unwrap(state.model).is_causal = phase.is_causal
        logger.log_metrics({"objective/is_mlm": int(phase.objective == "mlm")})


class LossLog(Callback):
    """Appends one JSON line per optimizer step to run_dir/loss.jsonl (rank 0).

    On resume, lines after the resumed step (written before the interruption) are dropped first,
    so the file always describes one uninterrupted run.
    """

    def __init__(self, path: Path, kind: str, switch_at: int | None):
        self.path, self.kind, self.switch_at = Path(path), kind, switch_at
        self._lr = None
        self._start = time.monotonic()

    def fit_start(self, state: State, logger: Logger) -> None:
        if dist.get_global_rank() != 0 or not self.path.exists():
            return
        resumed_at = int(state.timestamp.batch.value)
        keep = [
            line
            for line in self.path.read_text().splitlines()
            if line.strip() and json.loads(line)["step"] <= resumed_at
        ]
        atomic_write_text(self.path, "".join(line + "\n" for line in keep))

    def batch_start(self, state: State, logger: Logger) -> None:
        self._lr = state.optimizers[0].param_groups[0]["lr"]

    def batch_end(self, state: State, logger: Logger) -> None:
        if dist.get_global_rank() != 0:
            return
        step = int(state.timestamp.batch.value)
        row = {
            "step": step,
            "loss": state.total_loss_dict.get("loss/train/total"),
            "lr": self._lr,
            "objective": phase_at(step - 1, self.kind, self.switch_at).objective,
            "tokens": int(state.timestamp.token.value),
            "seconds": round(time.monotonic() - self._start, 3),
        }
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(row) + "\n")


class ExportWeights(Callback):
    """Saves the weights as a Hugging Face directory at chosen steps (and the last one)."""

    def __init__(self, run_dir: Path, steps: Iterable[int], tokenizer, metadata: dict):
        self.run_dir, self.steps = Path(run_dir), set(steps)
        self.tokenizer, self.metadata = tokenizer, metadata

    def batch_end(self, state: State, logger: Logger) -> None:
        step = int(state.timestamp.batch.value)
        if step not in self.steps:
            return
        target = export_dir(self.run_dir, step)
        if (target / "config.json").exists():
            return
        state_dict = state.get_model_state_dict()  # collective under FSDP: every rank calls it
        if dist.get_global_rank() == 0:
            model = _unwrap(state.model).model
            weights = {k.removeprefix("model."): v for k, v in state_dict.items()}
            save_hf_directory(model, weights, target, self.tokenizer, {**self.metadata, "step": step})
        dist.barrier()


class ContinueOptimizerState(Callback):
    """init.kind weights_and_optimizer: Composer's load gives the base's AdamW moments and step
    counts, but with them its param groups' settings (its last LR: 0 after the decay). When this run
    starts (step 0; never on its own autoresume), the groups take this run's settings back and the
    LR its schedule sets for step 1; the moments stay the base's (docs/pretraining.md, "CPT readings")."""

    def __init__(self, settings: list[dict]):
        self.settings = settings

    def fit_start(self, state: State, logger: Logger) -> None:
        if int(state.timestamp.batch) != 0:
            return
        for group, mine in zip(state.optimizers[0].param_groups, self.settings, strict=True):
            group.update(mine)
        for scheduler in state.schedulers:  # torch LambdaLRs over our Composer schedule
            for group, base_lr, factor in zip(
                scheduler.optimizer.param_groups, scheduler.base_lrs, scheduler.lr_lambdas
            ):
                group["initial_lr"], group["lr"] = base_lr, base_lr * factor(scheduler.last_epoch)


class KeepBranchStates(Callback):
    """Keeps the full state (weights, optimizer, schedule and data position) at chosen steps in
    <run_dir>/branches/, out of reach of the resume checkpoints' pruning: the decay branches of a
    run start there (`init.kind: full_state`; the CPT branches, pretraining/registry.py). Written
    with Composer's own save_checkpoint at the step's checkpoint event, as the resume checkpoints."""

    def __init__(self, run_dir: Path, steps: Iterable[int]):
        self.run_dir, self.steps = Path(run_dir), set(steps)

    def batch_checkpoint(self, state: State, logger: Logger) -> None:
        step = int(state.timestamp.batch.value)
        target = branch_state(self.run_dir, step)
        if step not in self.steps or target.exists():
            return
        partial = target.with_name(f"{target.stem}.partial-rank{{rank}}.pt")  # .pt: Composer reads the suffix
        written = save_checkpoint(state, str(partial))  # collective: every rank calls it
        if written and dist.get_global_rank() == 0:
            Path(written).replace(target)
        dist.barrier()


def _resume_checkpoint_interval(every: int, last: int):
    def should_save(state: State, event: Event) -> bool:
        step = int(state.timestamp.batch.value)
        return event == Event.BATCH_CHECKPOINT and (step % every == 0 or step >= last)

    return should_save


def _num_tokens(batch: dict) -> dict[str, int]:
    total = int(batch["input_ids"].numel())
    labels = batch.get("labels")
    labelled = total if labels is None else int((labels != IGNORE_INDEX).sum())
    return {"total": total, "loss_generating": labelled}


# init kinds Composer loads from a checkpoint of ours (the others load weights into the model)
STATE_INITS = ("full_state", "weights_and_optimizer")
# weights_and_optimizer: everything of the checkpoint but the model and the optimizer state is left
# out, so the run starts at step 0 with its own schedule, data position, seeds and callbacks
# (Composer applies load_ignore_keys to this first load only, never to an autoresume)
OPTIMIZER_ONLY_IGNORED = [
    "state/timestamp",
    "state/schedulers",
    "state/dataset_state",
    "state/algorithms",
    "state/callbacks",
    "state/run_name",
    "state/rank_zero_seed",
    "state/scaler",
    "rng",
]  # the keys of our checkpoints (Composer 0.32) but model and optimizers; integrations and metadata it never loads


def _check_run_dir(cfg: PretrainConfig) -> None:
    run_dir = Path(cfg.run_dir)
    if cfg.init.kind in STATE_INITS and not (cfg.init.path and Path(cfg.init.path).is_file()):
        raise PretrainError(
            f"init.path {cfg.init.path!r}: init.kind {cfg.init.kind} needs an existing Composer "
            "checkpoint file (<run>/checkpoints/ba<N>-rank0.pt)"
        )
    if cfg.init.kind in STATE_INITS:
        check_complete_checkpoint(Path(cfg.init.path))
    if (run_dir / FINISHED_FILE).exists():
        raise PretrainError(
            f"{run_dir} holds a finished run ({FINISHED_FILE}); refusing to overwrite it. "
            "Choose another run_dir (or delete that directory yourself)."
        )
    saved = run_dir / RUN_CONFIG_FILE
    if saved.exists():
        from contracts.bounded import BoundedReadError, read_yaml
        from contracts.config import CONFIG_BYTES_LIMIT

        try:
            document = read_yaml(saved, CONFIG_BYTES_LIMIT)
        except BoundedReadError as exc:
            raise PretrainError(f"{run_dir}: the config of an earlier attempt is unreadable ({exc})") from None
        # loggers and monitor may differ: they change what a run shows, not what it computes
        saved_identity = run_identity(document.get("config") or {})
        old, new = stable_hash(saved_identity), stable_hash(identity_of(cfg))
        state = saved_state(run_dir)
        if old != new and state:
            raise PretrainError(
                f"{run_dir} holds an unfinished run of another config ({_first_difference(saved_identity, cfg)}; "
                f"hash {old}, this one {new}) with {state[0].relative_to(run_dir)}; resuming needs the same "
                "config. Choose another run_dir."
            )
        if old != new and dist.get_global_rank() == 0:
            print(
                f"train: {run_dir}: an earlier attempt of another config (hash {old}) saved no checkpoint "
                "or weights; starting this config afresh (docs/reliability.md)",
                flush=True,
            )


def _first_difference(saved_identity: dict, cfg: PretrainConfig) -> str:
    """`field 'a' there, 'b' here (and N more)` between a saved run identity and `cfg`'s."""
    # through JSON, as the config hash (stable_hash) sees them: tuples and lists alike
    there, here = (
        json.loads(json.dumps(flat_fields(body), default=str)) for body in (saved_identity, identity_of(cfg))
    )
    differences = field_differences(there, here)
    return describe_differences(differences) if differences else "the same fields, hashed differently"


def saved_state(run_dir: Path) -> list[Path]:
    """What a run saved that a later start would build on: resume checkpoints and weight exports.
    A run directory without them (an attempt that failed before its first checkpoint, e.g. on a
    setting found wrong at the first step) holds nothing another config could clash with."""
    return sorted((run_dir / CHECKPOINTS_DIR).glob("*.pt")) + sorted(run_dir.glob(f"{EXPORTS_DIR}/step-*"))


def per_rank_batch_size(global_batch_size: int, world_size: int) -> int:
    """The per-rank batch: the global batch (and so every step) stays the same on any number of
    ranks that divides it (docs/pretraining.md, "Several ranks and nodes")."""
    if global_batch_size % world_size:
        fits = [n for n in range(1, min(global_batch_size, 256) + 1) if global_batch_size % n == 0]
        raise PretrainError(
            f"train.global_batch_size {global_batch_size} is not divisible by the world size "
            f"{world_size} (ranks launched): launch a number of ranks that divides it "
            f"({', '.join(map(str, fits[-8:]))}, ...), or change train.global_batch_size "
            "(a different run)"
        )
    return global_batch_size // world_size


def check_virtual_ranks_fit(t: TrainConfig, world_size: int) -> None:
    """`loss_average: rank` with microbatches (virtual ranks, TrainConfig): every rank must hold a
    whole number of them, or Composer's last microbatch would be smaller and weigh less than the
    release's ranks did; that is, the world size divides train.release_ranks."""
    if t.loss_average != "rank" or t.device_microbatch_size is None or t.release_ranks % world_size == 0:
        return
    fits = [n for n in range(1, min(t.release_ranks, 256) + 1) if t.release_ranks % n == 0]
    raise PretrainError(
        f"train.loss_average: rank with train.device_microbatch_size {t.device_microbatch_size} (one of the "
        f"release's {t.release_ranks} ranks per microbatch) needs a world size that divides {t.release_ranks}, "
        f"got {world_size} ranks: launch {', '.join(map(str, fits))} ranks, or set train.loss_average: tokens"
    )


def _checkpoint_to_load(cfg: PretrainConfig) -> Path | None:
    """The Composer checkpoint this run will start from: autoresume's latest, else init.path."""
    latest = latest_checkpoint(cfg.run_dir)
    if latest.exists():
        return latest
    return Path(cfg.init.path) if cfg.init.kind in STATE_INITS else None


def build_model(cfg: PretrainConfig, vocab_size: int, *, trust_checkpoints: bool = False) -> MlmClmForLM:
    from pretraining.export import load_initial_weights, untrained_model

    preset_vocab = PRESETS[cfg.model.preset].vocab  # None: the tokenizer's size (toy presets)
    if preset_vocab is not None and vocab_size > preset_vocab:
        raise PretrainError(
            f"tokenizer {cfg.tokenizer!r} has {vocab_size} ids but model.preset "
            f"{cfg.model.preset} has {preset_vocab} embedding rows; use a matching tokenizer"
        )
    model = untrained_model(
        cfg.model.preset,
        vocab_size,
        cfg.train.seed,
        is_causal=cfg.objective.kind != "mlm",
        attention_backend=cfg.model.attn_implementation,
    )
    if cfg.init.path is not None and cfg.init.kind == "weights":
        load_initial_weights(model, cfg.init.path, trust=trust_checkpoints)
    return model


def build_optimizer(model: torch.nn.Module, cfg: PretrainConfig) -> torch.optim.Optimizer:
    """torch AdamW; weight decay on every parameter (the release), or on matrices only with
    optimizer.no_decay=norm_gains (the RMSNorm gains, the only 1-D parameters, exempt)."""
    o = cfg.optimizer
    exempt = o.no_decay == "norm_gains"
    decay = [p for p in model.parameters() if p.ndim >= 2 or not exempt]
    no_decay = [p for p in model.parameters() if p.ndim < 2 and exempt]
    groups = [{"params": decay, "weight_decay": o.weight_decay}]
    if no_decay:
        groups.append({"params": no_decay, "weight_decay": 0.0})
    return torch.optim.AdamW(groups, lr=o.lr, betas=tuple(o.betas), eps=o.eps, fused=True if o.fused else None)


def build_scheduler(cfg: PretrainConfig) -> AtStepEnd:
    """WSD over the run; step n (1-based) runs at lr x wsd(n) (docs/pretraining.md)."""
    s, total = cfg.schedule, cfg.train.max_steps
    return AtStepEnd(
        WSDScheduler(
            warmup=s.warmup, stable_end=total - s.decay, total=total, decay_shape=s.decay_shape, alpha_f=s.alpha_f
        )
    )


def check_attention_backend(cfg: PretrainConfig) -> None:
    """PretrainError, before anything is built, when model.attn_implementation cannot run this run's
    attention segments (windows or documents) on its device (docs/pretraining.md)."""
    device, _ = _device_and_precision(cfg)
    m = cfg.model
    scope = f"model.attn_implementation {m.attn_implementation} cannot run {m.attention_scope} attention on {device}"
    if m.attn_implementation == "flash_attention_2":
        from transformers.utils import is_flash_attn_2_available

        if device != "gpu" or not is_flash_attn_2_available():
            raise PretrainError(
                f"{scope}: flash-attn's varlen kernel needs a CUDA device and the flash-attn package "
                "(pip install -e .[gpu], or the container); use model.attn_implementation=sdpa here"
            )
    if m.attn_implementation == "flex_attention" and device == "cpu" and cfg.train.compile:
        raise PretrainError(
            f"{scope} compiled: torch 2.7's inductor does not compile FlexAttention's CPU kernel; set "
            "train.compile=false (eager FlexAttention, a dense reference) or use model.attn_implementation=sdpa"
        )


def resolved_kernels(cfg: PretrainConfig) -> ResolvedKernels:
    """The loss and block kernels this run's device runs (PretrainError: Liger asked for on a GPU
    where it does not import), found before anything is written."""
    device, _ = _device_and_precision(cfg)
    try:
        return resolve(cfg.train.loss_kernel, cfg.model.block_kernels, device)
    except KernelError as exc:
        raise PretrainError(str(exc)) from None


def _device_and_precision(cfg: PretrainConfig) -> tuple[str, str]:
    device = cfg.train.device
    if device == "auto":
        device = "gpu" if torch.cuda.is_available() else "cpu"
    precision = cfg.train.precision
    if precision == "auto":
        precision = "amp_bf16" if device == "gpu" else "fp32"
    return device, precision


def parallelism_config(cfg: PretrainConfig) -> dict | None:
    """FSDP (FULL_SHARD, full state dicts) when asked for and more than one rank runs."""
    if not cfg.train.fsdp or dist.get_world_size() == 1:
        return None
    if _device_and_precision(cfg)[0] == "cpu":  # docs/pretraining.md, "Several ranks and nodes"
        raise PretrainError(
            "train.fsdp needs GPUs: Composer 0.32's FSDP calls torch.cuda.current_device() "
            "('Found no NVIDIA driver' on CPU); set train.fsdp=false to train with DDP on CPU"
        )
    return {
        "fsdp": {
            "sharding_strategy": "FULL_SHARD",
            "mixed_precision": "DEFAULT",
            "state_dict_type": "full",
            "use_orig_params": True,
        }
    }


def _check_callbacks(specs, trust: bool) -> None:
    try:
        check_callbacks(specs, trust)
    except ConfigError as exc:
        raise PretrainError(str(exc)) from None


def configured_callbacks(specs, trust: bool = False) -> list[Callback]:
    """The Composer callbacks named by `train.callbacks` (imported and called with their kwargs);
    outside Composer and this package only with `trust` (pretraining.config.check_callbacks)."""
    import importlib
    import inspect

    _check_callbacks(specs, trust)
    callbacks = []
    for spec in specs:
        module, _, attribute = spec.factory.partition(":")
        try:
            factory = getattr(importlib.import_module(module), attribute)
        except (ImportError, AttributeError) as exc:
            raise PretrainError(f"train.callbacks factory {spec.factory!r} cannot be imported ({exc})") from None
        if not trust and not (isinstance(factory, type) and issubclass(factory, Callback)):
            # checked before the call: a trusted module's function could do anything with the kwargs
            raise PretrainError(
                f"train.callbacks factory {spec.factory!r} is not a Callback class; calling it would run its "
                "code with the config's kwargs: pass --trust-callbacks if you trust it (docs/pretraining.md)"
            )
        try:  # arguments the class does not take: one line naming them (issue 66: a 26-line TypeError)
            inspect.signature(factory).bind(**spec.kwargs)
        except TypeError as exc:
            raise PretrainError(
                f"train.callbacks factory {spec.factory!r}: kwargs {sorted(spec.kwargs)} do not fit its arguments "
                f"{inspect.signature(factory)} ({exc})"
            ) from None
        except ValueError:  # no signature to read (a builtin): the call below says what is wrong
            pass
        try:
            callback = factory(**spec.kwargs)
        except (TypeError, ValueError) as exc:  # a value of the wrong type or range
            raise PretrainError(f"train.callbacks factory {spec.factory!r} refused its kwargs: {exc}") from None
        if not isinstance(callback, Callback):
            raise PretrainError(f"train.callbacks factory {spec.factory!r} returned {callback!r}, not a Callback")
        callbacks.append(callback)
    return callbacks


def memoise_composer_commit_hash() -> None:
    """Composer puts its commit hash into every checkpoint's metadata and finds it by listing its
    installed files, one stat each, at every save: 2% of a toy pretraining run (docs/timings.md).
    The answer cannot change inside a process, so it is looked up once."""
    from composer.utils import collect_env

    lookup = getattr(collect_env, "get_composer_commit_hash", None)
    if lookup is not None and not hasattr(lookup, "cache_info"):
        collect_env.get_composer_commit_hash = functools.lru_cache(maxsize=1)(lookup)


def build_trainer(
    cfg: PretrainConfig,
    *,
    dataloader=None,
    tokenizer=None,
    token_ids: TokenIds | None = None,
    extra_callbacks=(),
    trust_checkpoints: bool = False,
    trust_callbacks: bool = False,
) -> Trainer:
    """Everything but `fit`. `dataloader`/`token_ids` default to the config's data and tokenizer.
    Checkpoints are unpickled weights-only unless `trust_checkpoints` (pretraining.export);
    `train.callbacks` outside Composer and this package are imported only with `trust_callbacks`."""
    _check_callbacks(cfg.train.callbacks, trust_callbacks)  # before anything is read, imported or built
    _check_run_dir(cfg)
    check_attention_backend(cfg)
    kernels = resolved_kernels(cfg)
    try:  # built first: a bad name, argument or missing package stops the run before anything is written
        loggers = composer_loggers(cfg.loggers, cfg.run_dir)
    except LoggerSetupError as exc:
        raise PretrainError(str(exc)) from None
    guard_composer_loads(trust_checkpoints)
    memoise_composer_commit_hash()
    if dist.get_global_rank() == 0:  # before Composer autoresumes from the link it names
        newest_complete_checkpoint(Path(cfg.run_dir) / CHECKPOINTS_DIR)
    if tokenizer is None and token_ids is None:
        from pretraining.tokenizer import load_tokenizer

        tokenizer = load_tokenizer(cfg.tokenizer)
    if token_ids is None:
        token_ids = token_ids_from_tokenizer(tokenizer)
    device_batch_size = per_rank_batch_size(cfg.train.global_batch_size, dist.get_world_size())
    check_virtual_ranks_fit(cfg.train, dist.get_world_size())
    device, precision = _device_and_precision(cfg)
    # Composer's process group, before the data: a StreamingDataset built without one opens and
    # closes a group of its own on the same MASTER_PORT, and a rank that reaches the Trainer's
    # rendezvous while rank 0 still serves that closing group fails (docs/pretraining.md, "Several
    # ranks and nodes"). The Trainer then finds the group initialised and keeps it.
    dist.initialize_dist(device, timeout=DIST_TIMEOUT_S)
    if dataloader is None:
        from pretraining.data import build_train_dataloader
        from pretraining.data.config import DataBudgetError, PreparedDataError, data_budget

        try:  # which samples this run reads, in how many epochs (docs/data.md)
            dataloader, dataset = build_train_dataloader(cfg.data, device_batch_size, cfg.train.dataloader_workers)
            budget = data_budget(dataset.num_samples, cfg.data, cfg.train.max_steps, cfg.train.global_batch_size)
        except (DataBudgetError, PreparedDataError) as exc:
            raise PretrainError(str(exc)) from None
        if dist.get_global_rank() == 0:
            print(f"train: {budget}", flush=True)
    model = build_model(cfg, token_ids.vocab_size, trust_checkpoints=trust_checkpoints)
    resume_from = _checkpoint_to_load(cfg)
    if resume_from is not None and dist.get_global_rank() == 0:  # rank 0 checked it is complete, above
        check_checkpoint_fits(resume_from, model, config_to_dict(cfg.model), trust=trust_checkpoints)
    user_callbacks = configured_callbacks(cfg.train.callbacks, trust_callbacks)
    apply_block_kernels(model, kernels.blocks)  # before compiling: the compiled blocks hold the swapped modules
    if cfg.train.compile:
        compile_blocks(model.model)  # in place: parameter names (checkpoints, exports) are unchanged
    run_dir = Path(cfg.run_dir)  # created only once everything could be built
    run_dir.mkdir(parents=True, exist_ok=True)
    if dist.get_global_rank() == 0:  # with the kernels this device runs (a CPU runs Liger's fallbacks)
        save_resolved_config(cfg, run_dir, extra={"resolved_kernels": kernels.as_dict()})
    o, obj, t = cfg.optimizer, cfg.objective, cfg.train
    metadata = {
        "name": cfg.name,
        "config_hash": stable_hash(identity_of(cfg)),
        "objective": obj.kind,
        "switch_at": obj.switch_at,
        "mlm_ratio": obj.mlm_ratio,
        "max_steps": t.max_steps,
        "exported": utc_now(),
        "run_config": config_to_dict(cfg),
        "git_sha": git_sha(),
    }
    optimizer = build_optimizer(model, cfg)
    if cfg.init.kind == "weights_and_optimizer":  # this run's settings, before the load replaces them
        settings = [{k: v for k, v in group.items() if k != "params"} for group in optimizer.param_groups]
        extra_callbacks = [ContinueOptimizerState(settings), *extra_callbacks]
    callbacks = [
        LossLog(run_dir / LOSS_LOG_FILE, obj.kind, obj.switch_at),
        ExportWeights(run_dir, set(t.checkpoint_steps) | {t.max_steps}, tokenizer, metadata),
        KeepBranchStates(run_dir, t.branch_steps),
        *user_callbacks,
        *extra_callbacks,
        *(monitor_callbacks(cfg.monitor.window, cfg.monitor.peak_flops) if loggers else []),
    ]
    algorithms = [
        ObjectiveAlgorithm(
            obj.kind, obj.switch_at, obj.mlm_ratio, obj.replace, token_ids, t.seed, cfg.model.attention_scope
        )
    ]
    if o.grad_clip_norm > 0:
        algorithms.append(GradientClipping(clipping_type="norm", clipping_threshold=o.grad_clip_norm))
    return Trainer(
        model=ComposerLM(model, kernels.loss),
        train_dataloader=DataSpec(dataloader, get_num_tokens_in_batch=_num_tokens),
        max_duration=f"{t.max_steps}ba",
        optimizers=optimizer,
        schedulers=build_scheduler(cfg),
        step_schedulers_every_batch=True,
        algorithms=algorithms,
        callbacks=callbacks,
        loggers=loggers,
        run_name=cfg.name,
        save_folder=str(run_dir / CHECKPOINTS_DIR),
        save_filename=CHECKPOINT_PATTERN,
        save_latest_filename=LATEST_CHECKPOINT_PATTERN,
        save_interval=_resume_checkpoint_interval(t.resume_interval, t.max_steps),
        save_num_checkpoints_to_keep=t.keep_resume_checkpoints,
        autoresume=True,
        load_path=cfg.init.path if cfg.init.kind in STATE_INITS else None,
        load_ignore_keys=OPTIMIZER_ONLY_IGNORED if cfg.init.kind == "weights_and_optimizer" else None,
        device=device,
        precision=precision,
        device_train_microbatch_size=t.device_microbatch_size or device_batch_size,
        # tokens: loss = mean over the labelled tokens of the whole step; rank: each microbatch's mean,
        # weighted by its samples (TrainConfig: the whole per-rank batch, or one release rank's batch),
        # the ranks' gradients averaged: the release's per-rank rule
        accumulate_train_batch_on_tokens=t.loss_average == "tokens",
        seed=t.seed,
        progress_bar=t.progress_bar,
        log_to_console=False,
        parallelism_config=parallelism_config(cfg),
        python_log_level=None,
        dist_timeout=DIST_TIMEOUT_S,
    )


def close_trainer(trainer: Trainer) -> None:
    """`trainer.close()`, then drop the atexit entry through which Composer keeps the closed
    Trainer's state (model, optimizer) alive: Composer 0.32 registers `Engine._close(state, logger)`
    with atexit per Trainer and never unregisters it after an explicit close (open upstream:
    mosaicml/composer#3943), so each run of a long-lived process would keep its model and optimizer
    state (about 20 MB per toy fine-tuning run). `_close` is one static function shared by every
    Engine, so this drops the entries of all Trainers: fine here, as every Trainer of this package
    is closed explicitly, never at exit."""
    trainer.close()
    atexit.unregister(type(trainer.engine)._close)


def run_dir_lock(cfg: PretrainConfig) -> contextlib.AbstractContextManager:
    """Rank 0 holds `<run_dir>/.lock` for the whole job (contracts.locks): a second `train` of the
    same run_dir refuses at once, naming the holder's pid, before it reads or writes anything of the
    run (docs/reliability.md). The other ranks follow rank 0 (the launcher stops them if it fails)."""
    if dist.get_global_rank() != 0:
        return contextlib.nullcontext()
    return folder_lock(
        cfg.run_dir,
        job="train",
        advice="wait for it to finish (a rerun then resumes or refuses a finished run), or choose another run_dir",
    )


def train(cfg: PretrainConfig, **kwargs) -> Path:
    """Train (or resume) the run of `cfg` under its run_dir lock; returns the run directory."""
    with run_dir_lock(cfg):
        return _train_locked(cfg, **kwargs)


def _train_locked(cfg: PretrainConfig, **kwargs) -> Path:
    trainer = build_trainer(cfg, **kwargs)
    # Autoresumed from the final checkpoint (killed before FINISHED.json): nothing is left to train,
    # and Composer's fit() would refuse to start.
    run_dir = Path(cfg.run_dir)
    if int(trainer.state.timestamp.batch.value) < cfg.train.max_steps:
        try:
            trainer.fit()
        except PreparedDataError as exc:
            raise PretrainError(
                f"{run_dir}: {exc}; the files written before are intact: rerun the same command once the "
                "data is fixed (docs/reliability.md)"
            ) from exc
        except Exception as exc:
            full = disk_full_cause(exc)
            if full is None:
                raise
            raise PretrainError(
                f"{run_dir}: no space left on the device while training ({full}); the files "
                "written before are intact: free space and rerun the same command, it resumes "
                "from the newest complete checkpoint"
            ) from exc
    if dist.get_global_rank() == 0:
        atomic_write_json(
            run_dir / FINISHED_FILE, {"name": cfg.name, "steps": cfg.train.max_steps, "finished": utc_now()}
        )
    close_trainer(trainer)
    return run_dir
