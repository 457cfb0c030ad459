"""Composer glue: one fine-tuning run of a task module through `composer.Trainer`.

Paper protocol (docs/protocol.md): AdamW (0.9, 0.95), eps 1e-5, weight decay 0.1; the gradient
norm clipped at `max_grad_norm` (1.0, the Hugging Face Trainer's default, which the release kept:
Composer's GradientClipping algorithm, after the last micro-batch and the all-reduce, before the
optimizer step); 10% linear
warmup then linear decay to 0 (Composer's LinearWithWarmupScheduler, evaluated at the end of
each step: step n of N runs at its value at n, so the first step is above 0 and the last at 0;
pretraining.schedule.AtStepEnd); batch 32; up to 1,000 steps or one epoch; bf16 autocast on GPU
(fp32 on CPU, where Composer refuses amp_bf16; the `paper`
protocol also casts the weights to bf16 first, benchmarks/run.py). The weights at
the end of training are the ones evaluated (no checkpoint selection). SC/TC/QA split a batch into
device micro-batches with Composer's `device_train_microbatch_size` (gradient accumulation); IR
keeps the batch whole for Composer and micro-batches inside the loss with gradient caching
(benchmarks/kinds/ir.py), so every query still sees the 31 other documents as negatives.

Several ranks (docs/benchmarks.md, "Several ranks"): `batch_size` is the global batch. Every rank
takes its contiguous share of each single-process batch (`GlobalBatches`), so step k trains on the
same examples on any number of ranks. The loss of a step is the mean over all its loss terms
(labelled tokens for TC and QA `paper`, one per sequence or query otherwise, `loss_terms`):
Composer weighs each micro-batch by its loss terms over their count summed over ranks
(`accumulate_train_batch_on_tokens`) and averages the ranks' gradients, which gives the gradient
of that global mean; IR gathers the documents of all ranks (benchmarks/kinds/ir.py).
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import torch
from torch import nn
from torch.utils.data import DistributedSampler


@dataclass(frozen=True)
class TrainSettings:
    lr: float
    seed: int
    batch_size: int = 32
    device_microbatch_size: int | None = None  # None: the whole batch at once
    max_steps: int | None = 1000  # None: no step cap (one_epoch must be set)
    one_epoch: bool = False  # stop after one pass over the training set (and at max_steps)
    warmup_fraction: float = 0.1
    betas: tuple[float, float] = (0.9, 0.95)
    eps: float = 1e-5
    weight_decay: float = 0.1
    precision: str = "auto"  # auto | fp32 | amp_bf16
    device: str = "auto"  # auto | cpu | gpu
    accumulate_inside_loss: bool = False  # IR: micro-batching is done by the loss (GradCache)
    max_grad_norm: float | None = 1.0  # clip the global gradient norm to this before a step; None: no clipping
    # The release's Hugging Face Trainer schedule (docs/protocol.md, "Choices" 22): steps per epoch
    # of micro-batches of RELEASE_DEVICE_BATCH accumulated to batch_size, rounded down; warmup
    # ceil(fraction x steps); LambdaLR timing (update n at the schedule's value at n - 1).
    hf_schedule: bool = False
    # Which parameters skip weight decay (docs/protocol.md, "Choices" 23): one_dim, every 1-D
    # parameter (biases, every norm gain); layernorm_and_bias, the Trainer of transformers 4.48.3
    # that the release pins (nn.LayerNorm parameters and names containing "bias": RMSNorm gains decay)
    weight_decay_exempt: str = "one_dim"


WEIGHT_DECAY_EXEMPT = ("one_dim", "layernorm_and_bias")


def weight_decay_groups(module: nn.Module, exempt: str) -> tuple[list[nn.Parameter], list[nn.Parameter]]:
    """(decayed, exempt) parameters of `module` under the rule `exempt` (TrainSettings).
    layernorm_and_bias follows `Trainer.get_decay_parameter_names` of transformers 4.48.3: the
    parameters of `nn.LayerNorm` modules (by class, not name) and every name containing "bias"
    skip decay; an RMSNorm's gain and the embeddings decay."""
    if exempt not in WEIGHT_DECAY_EXEMPT:
        raise ValueError(f"weight_decay_exempt must be one of {', '.join(WEIGHT_DECAY_EXEMPT)}, got {exempt!r}")
    if exempt == "one_dim":
        params = list(module.parameters())
        return [p for p in params if p.ndim >= 2], [p for p in params if p.ndim < 2]
    in_layernorm = {id(p) for m in module.modules() if isinstance(m, nn.LayerNorm) for p in m.parameters()}
    decay, no_decay = [], []
    for name, param in module.named_parameters():
        (no_decay if id(param) in in_layernorm or "bias" in name else decay).append(param)
    return decay, no_decay


RELEASE_DEVICE_BATCH = 4  # the release's per_device_train_batch_size (accumulated to 32)


def resolve_device(device: str) -> str:
    if device == "auto":
        return "gpu" if torch.cuda.is_available() else "cpu"
    if device == "gpu" and not torch.cuda.is_available():
        raise ValueError("device 'gpu' requested but no CUDA device is available")
    return device


def resolve_precision(precision: str, device: str) -> str:
    if precision == "auto":
        return "amp_bf16" if device == "gpu" else "fp32"
    if precision == "amp_bf16" and device == "cpu":
        raise ValueError("amp_bf16 needs a GPU (Composer runs fp32 on CPU)")
    return precision


def training_steps(settings: TrainSettings, n_examples: int) -> int:
    """Number of optimizer steps: max_steps, capped at one epoch when `one_epoch`. An epoch is
    ceil(n / batch_size) steps, or under `hf_schedule` the Hugging Face Trainer's count: its
    dataloader's micro-batches of RELEASE_DEVICE_BATCH over the accumulation steps, rounded down
    (at least 1; at most one step fewer)."""
    per_epoch = max(1, math.ceil(n_examples / settings.batch_size))
    if settings.hf_schedule:
        accumulation = max(1, settings.batch_size // RELEASE_DEVICE_BATCH)
        per_epoch = max(1, math.ceil(n_examples / RELEASE_DEVICE_BATCH) // accumulation)
    if settings.one_epoch:
        return per_epoch if settings.max_steps is None else min(per_epoch, settings.max_steps)
    if settings.max_steps is None:
        raise ValueError("max_steps is required unless one_epoch is set")
    return settings.max_steps


def rank_share(batch: Sequence[int], rank: int, world_size: int) -> list[int]:
    """The contiguous part of a global batch that `rank` trains on; shares differ by at most one
    example (only a last, shorter batch of an epoch does not split evenly)."""
    size, extra = divmod(len(batch), world_size)
    start = rank * size + min(rank, extra)
    return list(batch[start : start + size + (rank < extra)])


def check_last_batch(n_examples: int, settings: TrainSettings, world_size: int) -> None:
    """Every rank needs an example of every step: refuse a last batch of an epoch, when trained,
    that has fewer examples than there are ranks (ValueError)."""
    last = n_examples % settings.batch_size
    trained = training_steps(settings, n_examples) >= math.ceil(n_examples / settings.batch_size)
    if trained and 0 < last < world_size:
        raise ValueError(
            f"{n_examples} training examples leave {last} for the last batch of an epoch, fewer than the "
            f"{world_size} ranks launched: launch at most {last} ranks (a divisor of batch_size "
            f"{settings.batch_size})"
        )


class GlobalBatches(DistributedSampler):
    """A batch sampler: this rank's share (`rank_share`) of the single-process batches, i.e. of an
    epoch's permutation seeded by (seed, epoch), as DistributedSampler draws it, cut into
    `batch_size` runs. A DistributedSampler, so Composer sets its epoch."""

    def __init__(self, n_examples: int, batch_size: int, seed: int, rank: int, world_size: int):
        super().__init__(range(n_examples), num_replicas=world_size, rank=rank, shuffle=True, seed=seed)
        self.batch_size = batch_size

    def __len__(self) -> int:
        return math.ceil(len(self.dataset) / self.batch_size)

    def __iter__(self) -> Iterator[list[int]]:
        generator = torch.Generator().manual_seed(self.seed + self.epoch)
        order = torch.randperm(len(self.dataset), generator=generator).tolist()
        for start in range(0, len(order), self.batch_size):
            yield rank_share(order[start : start + self.batch_size], self.rank, self.num_replicas)


def loss_terms(batch: dict) -> int:
    """How many terms a task module's mean loss averages over: the labelled tokens (TC, QA `paper`;
    SC has one label per sequence), else one per sequence (QA `standard`) or query (IR)."""
    from benchmarks.kinds.tc import IGNORE

    labels = batch.get("labels")
    if labels is not None:
        return int((labels != IGNORE).sum())
    return len(next(iter(batch.values())))


def token_counts(batch: dict) -> dict[str, int]:
    """Composer's token counts of a batch: `total` for its clock (padded input tokens, as its
    default), `loss_generating` to weigh micro-batches and ranks (`loss_terms`)."""
    total = int(batch["input_ids"].numel()) if "input_ids" in batch else 0
    return {"total": total, "loss_generating": loss_terms(batch)}


def composer_model(module: nn.Module):
    """Wrap a task module whose forward(batch) returns the training loss."""
    from composer.models import ComposerModel

    class TaskModel(ComposerModel):
        def __init__(self, inner: nn.Module):
            super().__init__()
            self.module = inner

        def forward(self, batch):
            return self.module(batch)

        def loss(self, outputs, batch):
            return outputs

    return TaskModel(module)


def fit(
    module: nn.Module,
    features: Sequence[dict],
    collate: Callable,
    settings: TrainSettings,
    callbacks: Sequence = (),
    loggers: Sequence = (),
    run_name: str | None = None,
    params: dict | None = None,
    after_fit: Callable[[], dict[str, float]] | None = None,
) -> dict:
    """Train `module` in place with Composer on the ranks launched (`batch_size` is the batch over
    all of them); returns what was run (steps, precision, device, per-step losses, ...). With
    `loggers` (Composer logger destinations), Composer's monitors log to them too (docs/watching.md),
    under `run_name` with `params` as hyperparameters; `after_fit` (the evaluation) runs before the
    loggers close and its metrics are logged at the last step, into the same run."""
    from composer.core import DataSpec
    from composer.utils import dist, reproducibility
    from torch.utils.data import DataLoader

    if not features:
        raise ValueError("no training examples")
    device = resolve_device(settings.device)
    precision = resolve_precision(settings.precision, device)
    steps = training_steps(settings, len(features))
    world_size = dist.get_world_size()
    check_last_batch(len(features), settings, world_size)
    reproducibility.seed_all(settings.seed)
    batches = GlobalBatches(len(features), settings.batch_size, settings.seed, dist.get_global_rank(), world_size)
    loader = DataSpec(
        DataLoader(list(features), batch_sampler=batches, collate_fn=collate, num_workers=0),
        get_num_tokens_in_batch=token_counts,
    )
    microbatch = math.ceil(settings.batch_size / world_size)  # this rank's share of a batch
    if settings.device_microbatch_size and not settings.accumulate_inside_loss:
        microbatch = min(settings.device_microbatch_size, microbatch)
    decay, no_decay = weight_decay_groups(module, settings.weight_decay_exempt)
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": settings.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=settings.lr,
        betas=settings.betas,
        eps=settings.eps,
    )
    with warnings.catch_warnings():  # a few-step smoke run has a 0-step warmup, on purpose
        warnings.filterwarnings("ignore", message="The warmup duration is 0")
        tracking = (run_name, params or {}, after_fit)
        info = _fit(
            module, loader, optimizer, steps, microbatch, device, precision, settings, callbacks, loggers, tracking
        )
    return {**info, "ranks": world_size}


# Composer's SpeedMonitor averages throughput over this many steps (half the run when it is shorter)
MONITOR_WINDOW = 100


def _fit(
    module, loader, optimizer, steps, microbatch, device, precision, settings, callbacks, loggers, tracking
) -> dict:
    from composer import Callback, Trainer
    from composer.algorithms import GradientClipping
    from composer.optim import LinearWithWarmupScheduler

    from pretraining.monitoring import monitor_callbacks
    from pretraining.schedule import AtStepEnd, AtStepStart
    from pretraining.train import close_trainer

    losses: list[float] = []

    class StepLosses(Callback):
        """The loss of every step: the mean over the global batch, all-reduced by Composer."""

        def batch_end(self, state, logger):
            losses.append(state.total_loss_dict["loss/train/total"])

    run_name, params, after_fit = tracking

    class EvaluateAtFitEnd(Callback):
        """The evaluation at the end of training, logged at the last step: on FIT_END Composer runs
        this callback before its logger destinations flush (TensorBoard's writer then closes), so
        the metrics land in the run's one event file and its MLflow run."""

        def fit_end(self, state, logger):
            logger.log_metrics(after_fit(), step=steps)

    if settings.hf_schedule:  # TrainingArguments.get_warmup_steps rounds up; LambdaLR's timing
        schedule, warmup = AtStepStart, f"{math.ceil(settings.warmup_fraction * steps)}ba"
    else:
        schedule, warmup = AtStepEnd, f"{settings.warmup_fraction}dur"
    trainer = Trainer(
        model=composer_model(module),
        train_dataloader=loader,
        max_duration=f"{steps}ba",
        optimizers=optimizer,
        schedulers=schedule(LinearWithWarmupScheduler(t_warmup=warmup, alpha_f=0.0)),
        step_schedulers_every_batch=True,
        device=device,
        precision=precision,
        seed=settings.seed,
        algorithms=[GradientClipping("norm", settings.max_grad_norm)] if settings.max_grad_norm else [],
        device_train_microbatch_size=microbatch,
        accumulate_train_batch_on_tokens=True,  # weights = loss terms (`loss_terms`), exact means
        # Several ranks: gradients are all-reduced after the backward pass, not by DDP's hooks
        # during it: IR's gradient caching back-propagates each cached micro-batch inside
        # backward (the hooks would fire once per micro-batch), and some parameters get no
        # gradient at all (BERT's pooler), which DDP's hooks wait for
        ddp_sync_strategy="forced_sync",
        progress_bar=False,
        log_to_console=False,
        loggers=list(loggers),
        callbacks=[
            StepLosses(),
            *callbacks,
            *([EvaluateAtFitEnd()] if after_fit is not None else []),
            *(monitor_callbacks(min(MONITOR_WINDOW, max(1, steps // 2))) if loggers else []),
        ],
        save_folder=None,
        python_log_level=None,
        run_name=run_name,
    )
    if loggers and params:
        trainer.logger.log_hyperparameters(params)
    if device == "gpu":
        torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    try:
        trainer.fit()
        tokens = int(trainer.state.timestamp.token.value)
    finally:
        close_trainer(trainer)  # frees the model and optimizer state (a long-lived process runs many)
    # the losses were read back every step, so the device has finished its work here
    fit_seconds = time.perf_counter() - started
    return {
        "steps": steps,
        "batch_size": settings.batch_size,
        "tokens": tokens,  # input tokens over the run, padding included (token_counts)
        "fit_seconds": round(fit_seconds, 3),  # Composer's fit, the first step's warm-up included
        "peak_gpu_memory_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if device == "gpu" else None,
        "device": device,
        "precision": precision,
        "device_microbatch_size": microbatch,
        "max_grad_norm": settings.max_grad_norm,
        "final_train_loss": losses[-1] if losses else None,
        "step_losses": losses,  # for callers; benchmarks.run keeps only the final one in the record
    }
