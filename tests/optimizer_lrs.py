"""A Composer callback recording the learning rate each optimizer step actually used."""

from __future__ import annotations


def record_step_lrs(lrs: list):
    """Appends `param_groups[0]["lr"]` to `lrs` at every `optimizer.step()` (a step pre-hook, so the
    value is the one the update uses, whatever set it)."""
    from composer import Callback

    class StepLRs(Callback):
        def fit_start(self, state, logger):
            state.optimizers[0].register_step_pre_hook(
                lambda optimizer, args, kwargs: lrs.append(optimizer.param_groups[0]["lr"])
            )

    return StepLRs()
