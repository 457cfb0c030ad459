"""Warmup-stable-decay (WSD) learning-rate schedule: a pure multiplier, a Composer adapter, and
`AtStepEnd`, which removes Composer's one-step scheduler lag (also used by fine-tuning).

The paper: 2,000 warmup steps, constant 5e-4 until step 40,000, 2,000 linear decay steps (42k).
All times are optimizer steps (Composer batches). One schedule spans a whole biphasic run: the
CLM -> MLM switch does not touch it. `stable_end == total` gives a stable-only run (no decay), from
which pre-decay checkpoints can be branched. Under `AtStepEnd`, optimizer step n (1-based) runs at
the multiplier of time n: the first step at 1/warmup of the peak, step `warmup` at the peak, the
last step at `alpha_f` (docs/pretraining.md, "Schedule and optimizer"). This module imports
nothing from Composer: the adapters only read the Composer state's attributes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

DECAY_SHAPES = ("linear", "1-sqrt")


def wsd_multiplier(
    step: int,
    warmup: int,
    stable_end: int,
    total: int,
    decay_shape: str = "linear",
    alpha_f: float = 0.0,
    warmup_start: float = 0.0,
) -> float:
    """LR multiplier at time `step` (optimizer steps done; the step that ends there runs at it).

    [0, warmup): linear from `warmup_start` to 1; [warmup, stable_end): 1; [stable_end, total]:
    decay to `alpha_f` (linear, or 1-sqrt as in Hagele et al. 2024); after total: alpha_f.
    """
    if not 0 <= warmup <= stable_end <= total:
        raise ValueError(f"need 0 <= warmup ({warmup}) <= stable_end ({stable_end}) <= total ({total})")
    if decay_shape not in DECAY_SHAPES:
        raise ValueError(f"decay_shape {decay_shape!r} is not one of {DECAY_SHAPES}")
    if step < 0:
        raise ValueError(f"step {step} < 0")
    if step < warmup:
        return warmup_start + (1.0 - warmup_start) * step / warmup
    if step < stable_end:
        return 1.0
    if stable_end == total or step >= total:
        return 1.0 if stable_end == total else alpha_f
    frac = (step - stable_end) / (total - stable_end)
    shape = frac if decay_shape == "linear" else math.sqrt(frac)
    return alpha_f + (1.0 - alpha_f) * (1.0 - shape)


@dataclass(frozen=True)
class WSDScheduler:
    """Composer scheduler (a callable `(state, ssr) -> multiplier`) over batches, evaluated at
    `state.timestamp` like Composer's own schedulers; wrap it in `AtStepEnd` to train with it."""

    warmup: int
    stable_end: int
    total: int
    decay_shape: str = "linear"
    alpha_f: float = 0.0
    warmup_start: float = 0.0

    def __post_init__(self):
        wsd_multiplier(
            0, self.warmup, self.stable_end, self.total, self.decay_shape, self.alpha_f, self.warmup_start
        )  # validates the arguments

    def __call__(self, state, ssr: float = 1.0) -> float:
        unit = getattr(getattr(state.max_duration, "unit", None), "value", "ba")
        if unit != "ba":
            raise ValueError(
                f"WSDScheduler counts batches, but max_duration is in {unit!r}: "
                "give max_duration in batches (e.g. '42000ba')"
            )
        return wsd_multiplier(
            int(state.timestamp.batch.value),
            round(self.warmup * ssr),
            round(self.stable_end * ssr),
            round(self.total * ssr),
            self.decay_shape,
            self.alpha_f,
            self.warmup_start,
        )


@dataclass(frozen=True)
class AtStepEnd:
    """Composer scheduler: `inner` (any Composer scheduler) evaluated at the end of the optimizer
    step whose learning rate is being set, so step n (1-based) runs at `inner` at batch n.

    Composer asks a scheduler for the LR once when the Trainer is built (the LR of batch 0) and
    then after each optimizer step, before its clock counts that step. Evaluated at the clock as
    is, batches 0 and 1 would both run at the value of time 0 and batch k at that of k - 1: a
    warmup from 0 would spend two steps at LR 0 and reach its peak one step late. Here the value
    is taken at the number of steps done once the next step is done. `state.batch` tells the two
    kinds of call apart: Composer leaves it None until the first batch and never clears it. After
    a resume the first batch runs at the LR saved with the optimizer state (set by the call that
    followed the last step before the checkpoint), so the LRs equal an uninterrupted run's.
    """

    inner: Callable
    steps_ahead: ClassVar[int] = 1  # step n runs at inner(n)

    def __call__(self, state, ssr: float = 1.0) -> float:
        trained = int(state.timestamp.batch.value) + (state.batch is not None)
        at = _WithTimestamp(state, state.timestamp.copy(batch=trained + self.steps_ahead))
        return self.inner(at, ssr)


@dataclass(frozen=True)
class AtStepStart(AtStepEnd):
    """As AtStepEnd, but step n (1-based) runs at `inner` at batch n - 1: the timing of a PyTorch
    LambdaLR stepped after each optimizer step (the Hugging Face Trainer's), whose first update
    runs at the schedule's value at 0 (LR 0 under a warmup from 0) and whose last update runs one
    step before the end of the decay (docs/protocol.md, "Choices", the release's quirks)."""

    steps_ahead: ClassVar[int] = 0


class _WithTimestamp:
    """A read-only view of a Composer State with another timestamp."""

    def __init__(self, state, timestamp):
        self._state, self.timestamp = state, timestamp

    def __getattr__(self, name):
        return getattr(self._state, name)
