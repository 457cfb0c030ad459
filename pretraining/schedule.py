"""Warmup-stable-decay (WSD) learning-rate schedule: a pure multiplier and a Composer adapter.

The paper: 2,000 warmup steps, constant 5e-4 until step 40,000, 2,000 linear decay steps (42k).
All times are optimizer steps (Composer batches). One schedule spans a whole biphasic run: the
CLM -> MLM switch does not touch it. `stable_end == total` gives a stable-only run (no decay), from
which pre-decay checkpoints can be branched. This module imports nothing from Composer: the
adapter only reads `state.timestamp.batch` and `state.max_duration`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

DECAY_SHAPES = ("linear", "1-sqrt")


def wsd_multiplier(step: int, warmup: int, stable_end: int, total: int, decay_shape: str = "linear",
                   alpha_f: float = 0.0, warmup_start: float = 0.0) -> float:
    """LR multiplier at 0-based optimizer step `step` (the batch about to be trained).

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
    """Composer scheduler (a callable `(state, ssr) -> multiplier`) over batches."""

    warmup: int
    stable_end: int
    total: int
    decay_shape: str = "linear"
    alpha_f: float = 0.0
    warmup_start: float = 0.0

    def __post_init__(self):
        wsd_multiplier(0, self.warmup, self.stable_end, self.total, self.decay_shape,
                       self.alpha_f, self.warmup_start)  # validates the arguments

    def __call__(self, state, ssr: float = 1.0) -> float:
        unit = getattr(getattr(state.max_duration, "unit", None), "value", "ba")
        if unit != "ba":
            raise ValueError(f"WSDScheduler counts batches, but max_duration is in {unit!r}: "
                             "give max_duration in batches (e.g. '42000ba')")
        step = int(state.timestamp.batch.value)
        # Composer steps schedulers after the optimizer step but before it advances the timestamp,
        # so a call made after an optimizer step sets the LR of the *next* batch: count it. (Without
        # this, the LR of batch k would be the multiplier of k - 1, Composer's usual one-step lag.)
        if state.previous_timestamp is not None or any(opt.state for opt in state.optimizers):
            step += 1
        return wsd_multiplier(step, round(self.warmup * ssr), round(self.stable_end * ssr),
                              round(self.total * ssr), self.decay_shape, self.alpha_f,
                              self.warmup_start)
