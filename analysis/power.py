"""The experiment that would settle a claim (docs/claims.md, "Next experiment"): how many
fine-tuning seeds per cell, and how many pretraining runs per configuration, give 80% power to
support the claim at its observed effect.

A component (analysis.claim_tests.ComponentStats) with `runs` pretraining runs per model and
`seeds` fine-tuning seeds per run has variance, per model m,
    V_m = (sum of m's weights)^2 tau^2 / runs + sum over m's cells of w^2 s^2 / (seeds runs)
(tau: the pretraining sd, shared by a model's datasets as in the sensitivity analysis). The
planned test is the one the report makes: a t test of the component at the two-sided 5% level
(one-sided 2.5%), with Welch-Satterthwaite df from the cells' seeds (one run per model: tau is
then taken as 0, the analysis cannot see it) or from the models' runs (runs - 1 each). Its power
is the noncentral t probability of clearing the critical value (`component_power`; checked
against statsmodels' TTestPower and by simulation in the tests). A claim of several components
needs all of them (intersection-union): its power is the product of theirs (independent cells;
the two end slopes of one masking-ratio curve share cells, so there it is approximate).

The observed effect is a planning value, not a known truth: a claim whose observed effect is on
the wrong side of its boundary has no design with 80% power.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from analysis.claim_tests import ALPHA, ComponentStats, pretraining_variance
from analysis.small_sample import welch_df

TARGET_POWER = 0.8
MAX_SEEDS = 100
MAX_RUNS = 10


def component_power(component: ComponentStats, seeds: int, runs: int = 1, pretraining_sd: float = 0.0) -> float:
    """Power of the component's t test (level ALPHA two-sided, in the claimed direction) with
    `seeds` seeds per run and `runs` pretraining runs per model, at its observed estimate."""
    if component.terms is None:
        raise ValueError(f"component {component.label}: no cell terms to plan from")
    by_model: dict[str, list] = {}
    for t in component.terms:
        by_model.setdefault(t.model, []).append(t)
    tau = pretraining_sd if runs > 1 else 0.0  # one run per model: the analysis cannot see tau
    seed_parts = [t.weight**2 * t.sd**2 / (seeds * runs) for t in component.terms]
    model_parts = [
        pretraining_variance(cells, tau) / runs + sum(t.weight**2 * t.sd**2 for t in cells) / (seeds * runs)
        for cells in by_model.values()
    ]
    variance = float(sum(model_parts))
    if runs > 1:
        df = welch_df(model_parts, [runs - 1] * len(model_parts))
    else:
        df = welch_df(seed_parts, [seeds - 1] * len(seed_parts))
    return _t_power(component, math.sqrt(variance), df)


def _t_power(component: ComponentStats, se: float, df: float) -> float:
    if component.direction == "equivalent":  # TOST: both one-sided tests at ALPHA (a lower bound)
        low = _one_sided_power((component.estimate + component.null) / se, df, ALPHA)
        high = _one_sided_power((component.null - component.estimate) / se, df, ALPHA)
        return max(0.0, low + high - 1.0)
    shift = component.estimate - component.null
    if component.direction == "less":
        shift = -shift
    return _one_sided_power(shift / se if se > 0 else math.copysign(math.inf, shift), df, ALPHA / 2)


def _one_sided_power(noncentrality: float, df: float, level: float) -> float:
    if not math.isfinite(noncentrality):
        return 1.0 if noncentrality > 0 else 0.0
    if not math.isfinite(df):
        return float(stats.norm.sf(stats.norm.isf(level) - noncentrality))
    return float(stats.nct.sf(stats.t.isf(level, df), df, noncentrality))


def claim_power(components: Sequence[ComponentStats], seeds: int, runs: int = 1, pretraining_sd: float = 0.0) -> float:
    """Every component must pass: the product of their powers."""
    return float(np.prod([component_power(c, seeds, runs, pretraining_sd) for c in components]))


@dataclass(frozen=True)
class Design:
    """The cheapest design with TARGET_POWER: fewest pretraining runs, then fewest seeds.
    `seeds` is None when no design up to MAX_RUNS x MAX_SEEDS reaches it (`reason` says why)."""

    runs: int
    seeds: int | None
    power: float
    pretraining_sd: float
    reason: str = ""

    def describe(self) -> str:
        if self.seeds is None:
            return self.reason
        if self.runs == 1:
            return f"{self.seeds} seeds"
        return f"{self.runs} runs x {self.seeds} seeds"


def plan(components: Sequence[ComponentStats], pretraining_sd=0.0) -> Design:
    """Seeds per cell (and, when pretraining_sd > 0, pretraining runs per model: 2 or more, since
    one run cannot measure tau) for TARGET_POWER at the observed effects."""
    wrong = [c for c in components if not _on_claimed_side(c)]
    if wrong:
        return Design(
            0,
            None,
            0.0,
            pretraining_sd,
            f"none: {wrong[0].label} observed on the wrong side",
        )
    varies = any(v > 0 for v in pretraining_sd.values()) if isinstance(pretraining_sd, Mapping) else pretraining_sd > 0
    for runs in range(2, MAX_RUNS + 1) if varies else [1]:
        if claim_power(components, MAX_SEEDS, runs, pretraining_sd) < TARGET_POWER:
            continue
        low, high = 2, MAX_SEEDS  # power grows with seeds: the fewest that reach the target
        while low < high:
            middle = (low + high) // 2
            if claim_power(components, middle, runs, pretraining_sd) >= TARGET_POWER:
                high = middle
            else:
                low = middle + 1
        return Design(runs, low, claim_power(components, low, runs, pretraining_sd), pretraining_sd)
    most = MAX_RUNS if varies else 1
    return Design(
        most,
        None,
        claim_power(components, MAX_SEEDS, most, pretraining_sd),
        pretraining_sd,
        f"more than {most} runs x {MAX_SEEDS} seeds" if most > 1 else f"more than {MAX_SEEDS} seeds",
    )


def _on_claimed_side(component: ComponentStats) -> bool:
    if component.direction == "equivalent":
        return abs(component.estimate) < component.null
    shift = component.estimate - component.null
    return shift > 0 if component.direction == "greater" else shift < 0
