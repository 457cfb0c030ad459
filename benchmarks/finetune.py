"""Composer glue: one fine-tuning run of a task module through `composer.Trainer`.

Paper protocol (docs/protocol.md): AdamW (0.9, 0.95), eps 1e-5, weight decay 0.1; 10% linear
warmup then linear decay to 0 (Composer's LinearWithWarmupScheduler, evaluated at the end of
each step: step n of N runs at its value at n, so the first step is above 0 and the last at 0;
pretraining.schedule.AtStepEnd); batch 32; up to 1,000 steps or one epoch; bf16 autocast on GPU
(fp32 on CPU, where Composer refuses amp_bf16; the `paper`
protocol also casts the weights to bf16 first, benchmarks/run.py). The weights at
the end of training are the ones evaluated (no checkpoint selection). SC/TC/QA split a batch into
device micro-batches with Composer's `device_train_microbatch_size` (gradient accumulation); IR
keeps the batch whole for Composer and micro-batches inside the loss with gradient caching
(benchmarks/kinds/ir.py), so every query still sees the 31 other documents as negatives.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import nn


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
    """Number of optimizer steps: max_steps, capped at one epoch when `one_epoch`."""
    per_epoch = max(1, math.ceil(n_examples / settings.batch_size))
    if settings.one_epoch:
        return per_epoch if settings.max_steps is None else min(per_epoch, settings.max_steps)
    if settings.max_steps is None:
        raise ValueError("max_steps is required unless one_epoch is set")
    return settings.max_steps


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
    module: nn.Module, features: Sequence[dict], collate: Callable, settings: TrainSettings, callbacks: Sequence = ()
) -> dict:
    """Train `module` in place with Composer; returns what was run (steps, precision, device, ...)."""
    from composer.utils import dist, reproducibility
    from torch.utils.data import DataLoader

    if not features:
        raise ValueError("no training examples")
    device = resolve_device(settings.device)
    precision = resolve_precision(settings.precision, device)
    steps = training_steps(settings, len(features))
    reproducibility.seed_all(settings.seed)
    loader = DataLoader(
        list(features),
        batch_size=settings.batch_size,
        collate_fn=collate,
        num_workers=0,
        sampler=dist.get_sampler(list(features), shuffle=True, seed=settings.seed),
        drop_last=False,
    )
    microbatch = (
        settings.batch_size
        if settings.accumulate_inside_loss
        else (settings.device_microbatch_size or settings.batch_size)
    )
    decay, no_decay = [], []
    for param in module.parameters():  # no weight decay on biases and norm weights
        (no_decay if param.ndim < 2 else decay).append(param)
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": settings.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=settings.lr,
        betas=settings.betas,
        eps=settings.eps,
    )
    with warnings.catch_warnings():  # a few-step smoke run has a 0-step warmup, on purpose
        warnings.filterwarnings("ignore", message="The warmup duration is 0")
        return _fit(module, loader, optimizer, steps, microbatch, device, precision, settings, callbacks)


def _fit(module, loader, optimizer, steps, microbatch, device, precision, settings, callbacks) -> dict:
    from composer import Trainer
    from composer.optim import LinearWithWarmupScheduler

    from pretraining.schedule import AtStepEnd
    from pretraining.train import close_trainer

    trainer = Trainer(
        model=composer_model(module),
        train_dataloader=loader,
        max_duration=f"{steps}ba",
        optimizers=optimizer,
        schedulers=AtStepEnd(LinearWithWarmupScheduler(t_warmup=f"{settings.warmup_fraction}dur", alpha_f=0.0)),
        step_schedulers_every_batch=True,
        device=device,
        precision=precision,
        seed=settings.seed,
        device_train_microbatch_size=min(microbatch, settings.batch_size),
        progress_bar=False,
        log_to_console=False,
        loggers=[],
        callbacks=list(callbacks),
        save_folder=None,
        python_log_level=None,
    )
    try:
        trainer.fit()
        final_loss = trainer.state.loss
        final_loss = float(final_loss.detach().float().mean()) if isinstance(final_loss, torch.Tensor) else None
    finally:
        close_trainer(trainer)  # frees the model and optimizer state (a long-lived process runs many)
    return {
        "steps": steps,
        "device": device,
        "precision": precision,
        "device_microbatch_size": microbatch,
        "final_train_loss": final_loss,
    }
