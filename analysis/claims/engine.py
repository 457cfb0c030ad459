"""Evaluating the claims: each claim's components tested (analysis.claims.hypothesis_tests), its
row of the report, Holm across the pre-registered family, the verdicts, the tipping pretraining SD
and the designs for 80% power (analysis.claims.power).

Every verdict is conditional on the paper's one pretraining run per configuration; the report
says so, and gives per claim the largest pretraining sd at which its verdict still holds and the
design (seeds, pretraining runs) that would give the whole decision 80% power. With replicated
pretraining runs (`<name>-rep<k>`) the pretraining sd is estimated per task type
(analysis.claims.pretraining_variance) and applied to every claim, --pretraining-sd the fallback.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from analysis.claims.components import (
    Component,
    _component_stats,
    _floor_warning,
    _matched_groups,
    _spread_pairs,
    claim_components,
    claim_coverage,
)
from analysis.claims.definitions import CLAIMS, CURVE_TESTS, Claim
from analysis.claims.hypothesis_tests import (
    CONTRADICTED,
    SUPPORTED,
    ComponentStats,
    claim_p,
    confirmatory,
    decide,
    family_holm,
    flip_margin,
    interval,
    tau_for,
    tipping_pretraining_sd,
    wrong_side,
)
from analysis.claims.inputs import (
    NOT_TESTABLE,
    PUBLISHED_SEEDS,
    ClaimInputs,
    NotTestable,
)
from analysis.claims.power import TARGET_POWER, decision_power, plan, plan_decision, sentence_power
from analysis.claims.pretraining_variance import estimate_pretraining_sd, pretraining_sd_profile
from analysis.intervals import keyed_rng, percentile_bounds
from analysis.rliable_metrics import rliable_summary
from analysis.small_sample import (
    design_bootstrap_calibration,
    fieller_ratio,
    level_variance,
    lr_variance,
    sd_ratio,
    seed_bootstrap_calibration,
    shared_level_variance,
    stretch,
)

LR_SENSITIVITY_RANGE = (1e-5, 1e-4)  # Figure 5: LRs in [1e-5, 1e-4], inclusive
ONE_PRETRAINING_RUN = (
    "One pretraining run per configuration (as the paper pretrained each once): every verdict is about "
    "those pretraining runs "
    "(intervals carry fine-tuning seed noise only); the tipping pretraining SD is the largest SD of "
    "a pretraining run's effect (points, shared by a model's datasets) at which the verdict still holds."
)
WEAKEST_CAVEAT = (
    "The estimate shown is the claim's pre-registered headline component; the weakest component (the "
    "largest p, which decides the verdict) is selected after seeing the data, so its interval is not a 95% "
    "interval for it: in simulations of the published design it covered 94-98% depending on the claim "
    '(docs/claims.md, "Headline component").'
)
CSV_COLUMNS = ["claim", "estimate", "ci_low", "ci_high", "p_value", "p_holm", "verdict", "n_runs", "source"]
_BOUNDS = ("low", "high", "low_mcse", "high_mcse")
DETAIL_COLUMNS = [
    "sentence",
    "quote",
    "verbatim",
    "location",
    "role",
    "test",
    "scope",
    "direction",
    "boundary",
    "unit",
    "margin",
    "margins",
    "margin_source",
    "flip_margin",
    "ci_level",
    "shown",
    "headline",
    "weakest",
    "weakest_estimate",
    "weakest_ci_low",
    "weakest_ci_high",
    "qualifying",
    "components",
    "p_against",
    "p_against_holm",
    "cells_used",
    "cells_needed",
    "missing_cells",
    "warning",
    "pretraining_sd",
    "tipping_pretraining_sd",
    "planning_pretraining_sd",
    "fragile",
    "seeds_for_80",
    "design_for_80",
    "decision_power",
    "seeds_for_80_alone",
    "design_for_80_alone",
    "power_alone",
    "power_note",
    "model",
    "boot_reps",
    *(f"seed_boot_{b}" for b in _BOUNDS),
    *(f"instance_boot_{b}" for b in _BOUNDS),
    "iqm_difference",
    "prob_improvement",
    "crossover",
    "reason",
]


def _interval_text(estimate: float, low: float, high: float) -> str:
    return f"{estimate:.2f} [{low:.2f}, {high:.2f}]"


def _vertex(component: Component, cells: pd.DataFrame) -> str:
    means = cells["mean"]
    b = sum(w * means[c] for c, w in component.shape[0].items())
    c = sum(w * means[k] for k, w in component.shape[1].items())
    return f"vertex {-b / (2 * c) * 10:.0f}%" if c > 0 else "no minimum (concave)"


def _components_text(components: list[Component], stats: list[ComponentStats], cells, pretraining_sd) -> str:
    parts = []
    for component, s in zip(components, stats):
        low, high, _ = interval(s, pretraining_sd)
        text = f"{s.label}: {_interval_text(s.estimate, low, high)}"
        if component.shape is not None and component.direction == "greater":  # once per curve
            text += f" ({_vertex(component, cells)})"
        parts.append(text)
    return "; ".join(parts)


def _qualifying(stats: list[ComponentStats], passing: tuple[bool, ...]) -> str:
    curves: dict[str, bool] = {}
    for s, ok in zip(stats, passing):
        curves[s.curve] = curves.get(s.curve, True) and ok
    return f"{sum(curves.values())} of {len(curves)}"


def _bootstrap(replicates: np.ndarray | None, estimate: float, calibration, prefix: str) -> dict:
    nan = float("nan")
    if replicates is None:
        return {f"{prefix}_{b}": nan for b in _BOUNDS}
    bounds = percentile_bounds(replicates)
    low, high = stretch(estimate, float(bounds.low[0]), float(bounds.high[0]), calibration.factor)
    return {
        f"{prefix}_low": low,
        f"{prefix}_high": high,
        f"{prefix}_low_mcse": float(bounds.low_mcse[0]) * calibration.factor,
        f"{prefix}_high_mcse": float(bounds.high_mcse[0]) * calibration.factor,
    }


def _bootstrap_intervals(inputs: ClaimInputs, component: Component, s: ComponentStats) -> dict:
    """Seed and seeds x instances bootstrap of the shown component, t-calibrated
    (analysis.small_sample): the percentile interval widened for 5-seed resampling."""
    rows = sorted(component.weights)
    w = np.array([component.weights[r] for r in rows])
    seed_reps = inputs.seed_replicates[:, rows].astype(np.float64) @ w
    terms = s.terms
    seed_cal = seed_bootstrap_calibration([t.weight for t in terms], [t.sd for t in terms], [t.n for t in terms])
    out = _bootstrap(seed_reps, s.estimate, seed_cal, "seed_boot")
    design = None
    if inputs.hierarchical[rows].all():
        design_reps = inputs.design_replicates[:, rows].astype(np.float64) @ w
        design_cal = design_bootstrap_calibration(
            seed_cal, s.seed_variance(), float(seed_reps.var()), float(design_reps.var())
        )
        design = _bootstrap(design_reps, s.estimate, design_cal, "instance_boot")
    out.update(design or _bootstrap(None, 0.0, None, "instance_boot"))
    out["boot_reps"] = inputs.seed_replicates.shape[0]
    return out


def _rliable(claim: Claim, component: Component, inputs: ClaimInputs) -> dict:
    """IQM difference and probability of improvement over the component's matched groups, as
    point values: with 5 runs per group no stratified-bootstrap interval of them reaches its
    nominal coverage (docs/claims.md, "Intervals"), so none is printed."""
    by_cell = inputs.scores_by_cell
    groups = component.groups
    treatment = [np.concatenate([by_cell[c] for c, w in g.items() if w > 0]) for g in groups]
    control = [np.concatenate([by_cell[c] for c, w in g.items() if w < 0]) for g in groups]
    summary = rliable_summary(treatment, control, 0, keyed_rng(0, ("rliable", claim.id)))
    return {"iqm_difference": summary.iqm_difference, "prob_improvement": summary.probability_of_improvement}


def _contrast_claim(claim: Claim, inputs: ClaimInputs, pretraining_sd: float):
    components = claim_components(claim, inputs.cells)
    if claim.test in CURVE_TESTS and not components:
        raise NotTestable(f"no curve has enough values of {claim.covariate} (3 for a quadratic, 2 for a step)")
    stats = [_component_stats(c, inputs.cells) for c in components]
    tested = claim_p(stats, pretraining_sd)
    labels = [c.label for c in components]
    # The pre-registered headline (claim_definitions.HEADLINE_RULE); the deciding (weakest)
    # component is reported beside it, with its coverage caveat (docs/claims.md).
    at = labels.index(claim.headline) if claim.headline in labels else tested.deciding
    shown, shown_stats = components[at], stats[at]
    low, high, level = interval(shown_stats, pretraining_sd)
    weakest = stats[tested.deciding]
    weakest_low, weakest_high, _ = interval(weakest, pretraining_sd)
    rows = sorted({r for c in components for r in c.weights})
    row = {
        "estimate": shown_stats.estimate,
        "ci_low": low,
        "ci_high": high,
        "ci_level": level,
        "shown": shown.label,
        "headline": bool(claim.headline) and claim.headline in labels,
        "weakest": weakest.label,
        "weakest_estimate": weakest.estimate,
        "weakest_ci_low": weakest_low,
        "weakest_ci_high": weakest_high,
        "boundary": shown.boundary,
        "qualifying": _qualifying(stats, tested.passing),
        "components": _components_text(components, stats, inputs.cells, pretraining_sd),
        "n_runs": int(inputs.cells.loc[rows, "n_seeds"].sum()),
        "model": (
            f"{len(components)} component(s), each a contrast of cell means: variance sum w^2 s^2 / n "
            f"(= OLS score ~ 0 + C(cell) with HC2), t with Welch-Satterthwaite df"
            + (f" ({shown.label}: df {shown_stats.se_df(pretraining_sd)[1]:.0f})" if len(components) else "")
        ),
    }
    if inputs.seed_replicates is not None:
        row.update(_bootstrap_intervals(inputs, shown, shown_stats))
        if shown.groups and claim.test in ("difference", "noninferiority", "equivalence"):
            row.update(_rliable(claim, shown, inputs))
    if claim.crossover_on:
        row["crossover"] = crossover_summary(claim, inputs)
    return row, stats


def _lr_table(inputs: ClaimInputs, cell: int) -> np.ndarray:
    """(seeds x LRs) test scores of the cell's runs with an LR in Figure 5's range, keeping the
    seeds that have every LR."""
    low, high = LR_SENSITIVITY_RANGE
    runs = inputs.runs
    chosen = runs[(runs["cell"] == cell) & (runs["lr"] >= low * (1 - 1e-9)) & (runs["lr"] <= high * (1 + 1e-9))]
    seeds, seed_at = np.unique(chosen["seed"].to_numpy(), return_inverse=True)
    lrs, lr_at = np.unique(chosen["lr"].to_numpy(), return_inverse=True)
    table = np.full((len(seeds), len(lrs)), np.nan)
    table[seed_at, lr_at] = chosen["score"].to_numpy()
    table = table[~np.isnan(table).any(axis=1)]
    if table.shape[0] < 2 or table.shape[1] < 2:
        row = inputs.cells.loc[cell]
        raise NotTestable(
            f"{row.model}/{row.dataset} has fewer than 2 seeds with 2 or more LRs in [{low:g}, {high:g}] "
            "(every LR of a seed is needed)"
        )
    return table


def _spread_claim(claim: Claim, inputs: ClaimInputs, pretraining_sd: float):
    """Variance components (analysis.small_sample) per matched group, treatment and control; the
    claim is their ratio over groups (Fieller interval), tested by the paired t of the differences."""
    pairs = [(t, c) for t, c in _spread_pairs(claim, inputs.cells).values() if t and c]
    cells = inputs.cells
    extra = (0.0, 0.0)
    if claim.covariate == "lr":  # an LR spread is within one model: no pretraining run crossed
        if len(pairs) < 2:
            raise NotTestable("fewer than 2 groups with a treatment and a control cell")
        # A group's side may hold several pretraining runs of its configuration (-rep<k>): each
        # run's cell has its own LR variance component; the side's is their mean (issue 52: such
        # groups were dropped, and the claim was not testable with replicates)
        tables = [([_lr_table(inputs, x) for x in t], [_lr_table(inputs, x) for x in c]) for t, c in pairs]
        treatment = [float(np.mean([lr_variance(x) for x in t])) for t, _ in tables]
        control = [float(np.mean([lr_variance(x) for x in c])) for _, c in tables]
        n_runs = sum(x.size for t, c in tables for x in t + c)
        what = "LR variance component per cell (two-way seeds x LRs, method of moments; mean over a side's runs)"
    else:
        pairs = [(t, c) for t, c in pairs if len(t) > 1 and len(c) > 1]
        if len(pairs) < 2:
            raise NotTestable(f"fewer than 2 groups with 2 or more values of {claim.covariate} on both sides")
        if (cells.loc[[x for t, c in pairs for x in t + c], "n_seeds"] < 2).any():
            raise NotTestable("a cell of the claim has fewer than 2 seeds")

        # Each level is its own pretraining run (Figure 7: eight models), shared by the groups: a
        # pretraining SD inflates every group's spread alike (subtracted) and moves the sums over
        # groups together (added to the Fieller variances; analysis.small_sample).
        tau = np.array([tau_for(pretraining_sd, cells.loc[t[0], "task_type"]) for t, _ in pairs])

        def component(rows, tau_g):
            chosen = cells.loc[rows]
            return level_variance(chosen["mean"], chosen["sd"], chosen["n_seeds"]) - tau_g**2

        def shared(side: int) -> float:
            rows = [sorted(pair[side], key=lambda r: cells.loc[r, "model"]) for pair in pairs]
            if len({len(r) for r in rows}) > 1:
                raise NotTestable(f"groups differ in their number of {claim.covariate} levels")
            means = cells["mean"].to_numpy(float)[np.array(rows)]
            return shared_level_variance(means, tau) / len(pairs) ** 2 if tau.any() else 0.0

        treatment = [component(t, g) for (t, _), g in zip(pairs, tau)]
        control = [component(c, g) for (_, c), g in zip(pairs, tau)]
        extra = (shared(0), shared(1))
        n_runs = int(cells.loc[[x for t, c in pairs for x in t + c], "n_seeds"].sum())
        what = f"variance of the true means over {claim.covariate} per group (method of moments)"
        if tau.any():
            what += f", pretraining SD {'/'.join(f'{v:g}' for v in sorted(set(tau)))} per run shared by the groups"
    fit = fieller_ratio(treatment, control, extra_variance=extra)
    stats = ComponentStats(
        "all groups", "all groups", fit.difference, claim.direction, 0.0, fixed_se=fit.se, fixed_df=fit.df
    )
    tested = claim_p([stats])
    row = {
        "estimate": sd_ratio(fit.ratio),
        "ci_low": sd_ratio(fit.low),
        "ci_high": sd_ratio(fit.high),
        "ci_level": 0.95,
        "shown": f"{len(pairs)} groups",
        "boundary": 1.0,
        "qualifying": _qualifying([stats], tested.passing),
        "components": (
            f"variance ratio {fit.ratio:.3f}; mean difference of components {fit.difference:.3g} "
            f"(se {fit.se:.3g}) points^2"
        ),
        "n_runs": n_runs,
        "model": f"{what}; ratio of sums over {len(pairs)} groups, Fieller 95% interval, paired t (df {fit.df:.0f})",
    }
    return row, [stats]


@dataclass(frozen=True)
class Crossover:
    """Where treatment - control first reaches 0 along the steps, with its 95% interval."""

    task_type: str  # or "all"
    steps: tuple[float, ...]
    point: float
    low: float
    high: float

    def describe(self) -> str:
        steps = list(self.steps)
        return (
            f"{self.task_type}: {_fmt_step(self.point, steps)} "
            f"[{_fmt_step(self.low, steps)}, {_fmt_step(self.high, steps)}]"
        )


def crossover_intervals(claim: Claim, inputs: ClaimInputs, grid: int = 400) -> list[Crossover]:
    """Where treatment - control first reaches 0 along `crossover_on`, per task type and overall,
    interpolated linearly in log10(step) between the checkpoints around it, with a 95% confidence
    interval by test inversion: the steps x at which the interpolated difference D(x) (a linear
    contrast of cell means) is not significantly different from 0 (Welch t, as every component),
    and its hull. Below the first step (D already <= 0 there) stays in the set unless D at the
    first step is significantly > 0; past the last step (no crossing) unless D is significantly
    < 0 somewhere. At the true crossover D = 0, so the set covers it in 95% of experiments."""
    groups = _matched_groups(claim, inputs.cells)
    position = claim.pair_on.index(claim.crossover_on)
    used = sorted({c for g in groups.values() for c in g})  # the claim's cells, renumbered 0..n-1
    renumber = {c: i for i, c in enumerate(used)}
    groups = {k: {renumber[c]: w for c, w in g.items()} for k, g in groups.items()}
    chosen = inputs.cells.loc[used]
    means = chosen["mean"].to_numpy(dtype=float)
    variances = (chosen["sd"].fillna(0.0) ** 2 / chosen["n_seeds"]).to_numpy(dtype=float)
    dfs = chosen["n_seeds"].to_numpy(dtype=float) - 1
    task_types = chosen["task_type"].to_numpy()
    found = []
    for task_type in (*claim.task_types, "all"):
        of_type = {k: g for k, g in groups.items() if task_type in ("all", task_types[next(iter(g))])}
        steps = sorted({k[position] for k in of_type})
        if len(steps) < 2:
            continue
        weights = np.zeros((len(steps), len(means)))
        for key, group in of_type.items():
            n_at_step = sum(k[position] == key[position] for k in of_type)
            for cell, w in group.items():
                weights[steps.index(key[position]), cell] += w / n_at_step
        logs = np.log10(np.array(steps, dtype=float))
        point = crossovers(10**logs, weights @ means)[0]
        # D(x) on a grid of log10 steps: weights interpolated between the checkpoints around x.
        xs = np.linspace(logs[0], logs[-1], grid)
        upper = np.clip(np.searchsorted(logs, xs, side="right"), 1, len(logs) - 1)
        share = (xs - logs[upper - 1]) / (logs[upper] - logs[upper - 1])
        at = weights[upper - 1] * (1 - share)[:, None] + weights[upper] * share[:, None]
        parts = at**2 * variances
        se = np.sqrt(parts.sum(axis=1))
        df = parts.sum(axis=1) ** 2 / np.maximum(np.sum(parts**2 / np.maximum(dfs, 1), axis=1), 1e-300)
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.where(se > 0, (at @ means) / se, np.sign(at @ means) * np.inf)
        critical = stats.t.ppf(0.975, df)
        kept = np.abs(t) <= critical
        low = -math.inf if t[0] <= critical[0] else (10 ** xs[kept].min() if kept.any() else point)
        high = math.inf if not (t < -critical).any() else (10 ** xs[kept].max() if kept.any() else point)
        found.append(Crossover(task_type, tuple(float(s) for s in steps), float(point), float(low), float(high)))
    return found


def crossover_summary(claim: Claim, inputs: ClaimInputs) -> str:
    return "; ".join(c.describe() for c in crossover_intervals(claim, inputs))


def crossovers(steps: np.ndarray, differences: np.ndarray) -> np.ndarray:
    """Per row of (replicates x steps) differences: the first step where the difference is <= 0,
    interpolated linearly in log10(step) from the step before; -inf if it already is at the
    first step, +inf if it never is."""
    differences = np.atleast_2d(differences)
    below = differences <= 0
    k = below.argmax(axis=1)
    out = np.full(len(differences), math.inf)
    out[below[:, 0]] = -math.inf
    inside = below.any(axis=1) & (k > 0)
    rows, k = np.flatnonzero(inside), k[inside]
    logs = np.log10(steps)
    d0, d1 = differences[rows, k - 1], differences[rows, k]
    out[rows] = 10 ** (logs[k - 1] + d0 / (d0 - d1) * (logs[k] - logs[k - 1]))
    return out


def _fmt_step(value: float, steps: list) -> str:
    if value == math.inf:
        return f">{steps[-1] / 1000:g}k"
    if value == -math.inf:
        return f"<={steps[0] / 1000:g}k"
    return f"{value / 1000:.1f}k"


def evaluate_claim(
    claim: Claim, inputs: ClaimInputs, reps: int = 10000, rng_seed: int = 0, pretraining_sd: float = 0.0
) -> tuple[dict, list[ComponentStats] | None]:
    """One report row (verdict filled in by `with_verdicts`) and the claim's tested components;
    never raises on data a source lacks: the claim is then NOT_TESTABLE with the reason."""
    row = {
        "claim": claim.id,
        "sentence": claim.sentence,
        "location": claim.location,
        "test": claim.test,
        "scope": claim.scope,
        "direction": claim.direction,
        "unit": claim.unit,
        "margin": claim.margin,
        "margins": ", ".join(f"{t} {m:g}" for t, m in claim.margins.items()),
        "margin_source": claim.margin_source,
        "quote": claim.quote,
        "verbatim": claim.verbatim,
        "role": claim.role,
        "source": inputs.source,
        "pretraining_sd": pretraining_sd,
        "verdict": "",
        "reason": "",
        "warning": "",
    }
    try:
        if claim.needs_runs and not inputs.from_runs:
            raise NotTestable(claim.needs_runs)
        coverage = claim_coverage(claim, inputs.cells)
        row.update(cells_used=coverage.used, cells_needed=coverage.needed, missing_cells=coverage.missing)
        row["warning"] = "; ".join(w for w in (coverage.warning, _floor_warning(claim, inputs.cells)) if w)
        if claim.test == "spread":
            evaluated, stats = _spread_claim(claim, inputs, pretraining_sd)
        else:
            evaluated, stats = _contrast_claim(claim, inputs, pretraining_sd)
        row.update(evaluated)
        return row, stats
    except NotTestable as exc:
        row.update(verdict=NOT_TESTABLE, reason=str(exc), n_runs=0)
        return row, None


def verdicts(rows: list[dict], components: list[list[ComponentStats] | None], pretraining_sd=0.0) -> pd.DataFrame:
    """The report's rows with p values, Holm across the testable claims (support and contradiction
    separately) and each verdict: the decision alone (`with_verdicts` adds the rest; the budget's
    whole-pipeline check, analysis.claims.simulation.pipeline_verdicts, runs this)."""
    report = pd.DataFrame(rows).reindex(columns=CSV_COLUMNS + DETAIL_COLUMNS)
    tested = [claim_p(c, pretraining_sd) if c else None for c in components]
    report["p_value"] = [t.p_for if t else np.nan for t in tested]
    report["p_against"] = [t.p_against if t else np.nan for t in tested]
    primary = confirmatory(report["role"])
    report["p_holm"] = family_holm(report["p_value"], primary)
    report["p_against_holm"] = family_holm(report["p_against"], primary)
    testable = np.array([t is not None for t in tested])
    report.loc[testable, "verdict"] = decide(
        report.loc[testable, "p_holm"].to_numpy(),
        report.loc[testable, "p_against_holm"].to_numpy(),
        [wrong_side(c) for c in components if c],
    )
    return report


def with_verdicts(
    rows: list[dict], components: list[list[ComponentStats] | None], pretraining_sd: float = 0.0
) -> pd.DataFrame:
    """`verdicts`, then the tipping pretraining sd, the flip margins and the designs for 80% power
    (analysis.claims.power)."""
    report = verdicts(rows, components, pretraining_sd)
    primary = confirmatory(report["role"])
    report["tipping_pretraining_sd"] = tipping_pretraining_sd(components, pretraining_sd, primary=primary)
    # Non-inferiority: the margin at which the verdict would flip (docs/claims.md, "Margins").
    report["flip_margin"] = [
        flip_margin(components, i, float(m), pretraining_sd, primary) if c and pd.notna(m) else np.nan
        for i, (c, m) in enumerate(zip(components, report["margin"]))
    ]
    planning, seeds_only, with_runs = [], [], []
    for tested_components in components:
        if not tested_components or any(s.terms is None for s in tested_components):
            planning.append(np.nan)
            seeds_only.append("" if not tested_components else "— (groups, not seeds, are its units)")
            with_runs.append("")
            continue
        # Planning value: the claim's median seed sd (pretraining runs assumed to vary as much as
        # fine-tuning seeds) unless --pretraining-sd gives one, or replicates estimate it per task type.
        tau = pretraining_sd or float(np.median([t.sd for s in tested_components for t in s.terms]))
        planning.append(np.nan if isinstance(tau, Mapping) else tau)
        seeds_only.append(plan(tested_components).describe())
        with_runs.append(plan(tested_components, tau).describe())
    report["planning_pretraining_sd"] = planning
    # A verdict that a pretraining SD below the planning value would overturn (docs/claims.md).
    report["fragile"] = report["verdict"].isin([SUPPORTED, CONTRADICTED]) & (
        report["tipping_pretraining_sd"] < report["planning_pretraining_sd"]
    )
    # The claim's own tests alone (no Holm), then the whole decision by simulation (docs/claims.md,
    # "Next experiment"): every claim re-run at one design, intersection-union and Holm included.
    report["seeds_for_80_alone"] = seeds_only
    # Issue 52: each sentence's own test (no Holm) at the observed effects with the paper's 5 seeds,
    # and why it is below 50% where it is (analysis.claims.power.sentence_power).
    alone = [
        sentence_power(c, PUBLISHED_SEEDS) if c and all(s.terms is not None for s in c) else (np.nan, "")
        for c in components
    ]
    report["power_alone"] = [p for p, _ in alone]
    report["power_note"] = [n for _, n in alone]
    report["design_for_80_alone"] = with_runs
    plannable = [c if c and all(s.terms is not None for s in c) else None for c in components]
    observed = report["p_value"].to_numpy(float)
    report["decision_power"] = decision_power(
        components, None, primary=primary, rng=np.random.default_rng(0), observed_p=observed
    )
    taus = [0.0 if isinstance(t, float) and math.isnan(t) else t for t in planning]
    if isinstance(pretraining_sd, Mapping):  # estimated per task type: plan at the estimates
        taus = [pretraining_sd] * len(taus)
    seeds_for, design_for = plan_decision(components, taus, primary, observed_p=observed)
    report["seeds_for_80"] = [s if p is not None else "" for s, p in zip(seeds_for, plannable)]
    report["design_for_80"] = [d if p is not None else w for d, p, w in zip(design_for, plannable, with_runs)]
    report["n_runs"] = report["n_runs"].fillna(0).astype(int)
    return report


def evaluate_claims(
    inputs: ClaimInputs,
    claims: tuple[Claim, ...] = CLAIMS,
    reps: int = 10000,
    rng_seed: int = 0,
    pretraining_sd: float = 0.0,
) -> pd.DataFrame:
    """The report: one row per claim, CSV_COLUMNS then DETAIL_COLUMNS. With replicated pretraining
    runs (`-rep<k>` names) the pretraining SD is estimated per task type (analysis.claims.pretraining_variance)
    and applied to every claim; `pretraining_sd` (--pretraining-sd) is the fallback for task types
    without replicates. The estimates are in `report.attrs["pretraining_sd_estimates"]`."""
    if not (pretraining_sd >= 0 and math.isfinite(pretraining_sd)):
        raise ValueError(f"--pretraining-sd must be a finite number >= 0 (points), got {pretraining_sd}")
    estimates, tau = pretraining_sd_in_use(inputs, pretraining_sd)
    evaluated = [evaluate_claim(c, inputs, reps, rng_seed, tau) for c in claims]
    report = with_verdicts([r for r, _ in evaluated], [s for _, s in evaluated], tau)
    if estimates:
        report["pretraining_sd"] = describe_pretraining_sd(tau, estimates)
    report.attrs["pretraining_sd_estimates"] = list(estimates.values())
    return report


def pretraining_sd_in_use(inputs: ClaimInputs, pretraining_sd: float):
    """(estimates, the SD every claim is tested at): with replicated runs (`-rep<k>`) the SD is
    estimated per task type (a PretrainingProfile, `pretraining_sd` the fallback), else the given SD."""
    estimates = estimate_pretraining_sd(inputs.cells) if (inputs.cells["replicate"] > 1).any() else {}
    return estimates, (pretraining_sd_profile(estimates, pretraining_sd) if estimates else pretraining_sd)


def describe_pretraining_sd(tau: dict[str, float], estimates: dict) -> str:
    """'SC 0.31 (estimated), TC 0 (--pretraining-sd)': the SD used per task type and its source."""
    return ", ".join(
        f"{t} {v:.2f} ({'estimated from replicates' if t in estimates else '--pretraining-sd'})" for t, v in tau.items()
    )


POWER_NOTE = (
    f"Next experiment: fine-tuning seeds per cell for {TARGET_POWER:.0%} power at the observed effects "
    "with the released pretraining runs; and, at the planning pretraining SD, pretraining runs per "
    "configuration x seeds per run (the cheapest: fewest runs). Power of the whole decision: every claim "
    "re-run at that design, each component's t test simulated at its observed estimate, every component "
    "needed and Holm across the claims, as the verdicts are made (power at the observed effects: the same "
    "at the design as it is; post hoc, biased upward for a claim that has just passed); the claim's own "
    "tests alone (no Holm) need the 'alone' designs of the CSV."
)
