"""The experiment that would settle a claim (docs/claims.md, "Next experiment"): how many
fine-tuning seeds per cell, and how many pretraining runs per configuration, give 80% power to
support the claim at its observed effect.

A component (analysis.claims.hypothesis_tests.ComponentStats) with `runs` pretraining runs per model and
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
from scipy import sparse, stats

from analysis.claims.hypothesis_tests import ALPHA, ComponentStats, p_for_claim, pretraining_variance, tau_for
from analysis.small_sample import welch_df

TARGET_POWER = 0.8
MAX_SEEDS = 100
MAX_RUNS = 10


def design_se_df(component: ComponentStats, seeds: int, runs: int = 1, pretraining_sd=0.0) -> tuple[float, float]:
    """Standard error and Welch-Satterthwaite df of the component with `seeds` seeds per run and
    `runs` pretraining runs per model (module doc)."""
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
    return math.sqrt(variance), df


def component_power(component: ComponentStats, seeds: int, runs: int = 1, pretraining_sd=0.0) -> float:
    """Power of the component's t test (level ALPHA two-sided, in the claimed direction) with
    `seeds` seeds per run and `runs` pretraining runs per model, at its observed estimate."""
    return _t_power(component, *design_se_df(component, seeds, runs, pretraining_sd))


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


SENTENCE_POWER_TARGET = 0.5  # issue 52: each sentence's test, alone, at the observed effects with 5 seeds


def sentence_power(components: Sequence[ComponentStats], seeds: int) -> tuple[float, str]:
    """The claim's own test (no Holm) at the observed effects with `seeds` seeds per cell, and why it
    is below SENTENCE_POWER_TARGET ("" when it is not): a component observed on the wrong side of
    its boundary (the sentence is false at these effects, so no design supports it), or effects too
    small for this many seeds (with the seeds that reach 80%)."""
    power = claim_power(components, seeds)
    if power >= SENTENCE_POWER_TARGET:
        return power, ""
    wrong = [c.label for c in components if not _on_claimed_side(c)]
    if wrong:
        where = "its boundary" if len(wrong) == 1 else "their boundaries"
        return power, (
            f"{', '.join(wrong)} observed on the wrong side of {where}: at these effects the sentence is false, "
            "and no number of seeds supports it"
        )
    design = plan(components)
    weakest = min(components, key=lambda c: component_power(c, seeds))
    needs = f"{design.describe()} reach {TARGET_POWER:.0%}" if design.seeds else design.describe()
    return power, f"the effect of {weakest.label} is small for {seeds} seeds ({needs})"


# --- the whole decision: every claim re-run at one design, Holm and intersection-union included ---
SEED_GRID = (2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 50, 100)
RUN_GRID = (2, 3, 4, 5, 6, 8, 10)
DECISION_SIMS = 1000


@dataclass(frozen=True)
class _Layout:
    """Every tested component of the family as weights on shared cells (issue 63, item 5): components
    that use the same cell (the two end slopes of one curve, a model compared in several claims)
    share its simulated noise, as they share it in the data."""

    claim_of: np.ndarray  # (K,) the claim of each component
    components: tuple[ComponentStats, ...]  # (K,)
    weights: np.ndarray  # (K, C)
    sd: np.ndarray  # (C,) each cell's seed SD
    n: np.ndarray  # (C,) its seed count
    model: np.ndarray  # (C,) index of its model (pretraining run)
    tau: np.ndarray  # (C,) its pretraining SD (of its task type; a cell in several claims: its first claim's)
    row: np.ndarray  # (C,) its row in the claims' cells frame (CellTerm.cell; -1: a cell of its own)


def _layout(claims: Sequence[Sequence[ComponentStats] | None], simulated: Sequence[bool], taus) -> _Layout:
    cells: dict[tuple, int] = {}
    sd, n, model, tau, row, entries, claim_of, components = [], [], [], [], [], [], [], []
    models: dict[str, int] = {}
    for i, comps in enumerate(claims):
        if not simulated[i]:
            continue
        for j, c in enumerate(comps):
            k = len(components)
            components.append(c)
            claim_of.append(i)
            for position, t in enumerate(c.terms):
                key = ("row", t.cell) if t.cell >= 0 else ("own", i, j, position)
                if key not in cells:
                    cells[key] = len(sd)
                    sd.append(t.sd)
                    n.append(t.n)
                    model.append(models.setdefault(t.model, len(models)))
                    tau.append(tau_for(taus[i], t.task_type))
                    row.append(t.cell)
                entries.append((k, cells[key], t.weight))
    weights = np.zeros((len(components), len(sd)))
    for k, cell, w in entries:
        weights[k, cell] += w
    return _Layout(
        np.array(claim_of, dtype=int),
        tuple(components),
        weights,
        np.array(sd, dtype=float),
        np.array(n, dtype=float),
        np.array(model, dtype=int),
        np.array(tau, dtype=float),
        np.array(row, dtype=int),
    )


def _simulated_tests(
    layout: _Layout, seeds, runs: int, rng: np.random.Generator, sims: int, assumed_pretraining_sd: bool = False
):
    """(estimate, se, df), each (sims x components), of every component in simulated experiments
    whose truth is the observed estimates: the cells are drawn, then each component is tested as
    the report tests it. One run per model (`seeds` None: each cell's own seed count): a cell's
    mean has error sd / sqrt(n), its SD is estimated with n - 1 df, and a component's variance is
    sum w^2 s^2 / n with Welch-Satterthwaite df (ComponentStats.se_df). `runs` > 1: per run, every
    cell of a model moves by tau (of the cell's task type) times the run's one effect, and its mean
    over `seeds` seeds has error sd / sqrt(seeds); a component's variance is the sum over models of
    the variance of the model's part across runs / runs, Welch df with runs - 1 per model
    (design_se_df). `assumed_pretraining_sd` (one run per model, issue 91): each model's run moves all
    its cells by tau times one effect, and the analysis adds the assumed tau to each component's
    variance as `analysis claims --pretraining-sd` does (ComponentStats.se_df: per model (sum of its
    weights x tau)^2, known, so infinite df)."""
    truth = np.array([c.estimate for c in layout.components])
    n = layout.n if seeds is None else np.full(layout.n.shape, float(seeds))
    if runs <= 1:
        error = layout.sd / np.sqrt(n) * rng.standard_normal((sims, len(n)))
        chi2 = rng.chisquare(np.broadcast_to(n - 1, (sims, len(n))))
        part = layout.sd**2 * chi2 / (n - 1) / n  # s^2 / n per cell
        assumed = assumed_pretraining_sd and bool((layout.tau > 0).any())
        if assumed:
            n_models = int(layout.model.max()) + 1
            error = error + rng.standard_normal((sims, n_models))[:, layout.model] * layout.tau
        return _one_run_tests(layout, n, error, part, assumed)
    else:
        # per (component, model) pair, in component then model order: the model's part of the
        # component, run by run
        n_models = int(layout.model.max()) + 1
        component, cell = np.nonzero(layout.weights)
        pairs, pair_of = np.unique(component * n_models + layout.model[cell], return_inverse=True)
        by_pair = sparse.csc_matrix((layout.weights[component, cell], (cell, pair_of)), shape=(len(n), len(pairs)))
        of_component = sparse.csc_matrix(
            (np.ones(len(pairs)), (np.arange(len(pairs)), pairs // n_models)), shape=(len(pairs), len(truth))
        )
        runs_of = rng.standard_normal((sims * runs, n_models))[:, layout.model] * layout.tau
        cell_means = runs_of + layout.sd / np.sqrt(n) * rng.standard_normal((sims * runs, len(n)))
        parts = (cell_means @ by_pair).reshape(sims, runs, len(pairs))
        part = parts.var(axis=1, ddof=1) / runs
        estimate = truth + parts.mean(axis=1) @ of_component
        variance = part @ of_component
        denominator = (part**2 / (runs - 1)) @ of_component
    with np.errstate(divide="ignore", invalid="ignore"):
        df = np.where(denominator > 0, variance**2 / denominator, np.inf)
    return estimate, np.sqrt(variance), df


@dataclass(frozen=True)
class ReplicatedFrame:
    """Every cell of the claims' cells frame a replicated design runs (issue 91): its seed SD,
    task type and model (configuration), by row (CellTerm.cell). With replicated runs `analysis
    claims` estimates the pretraining SD per task type from all of them (pretraining_variance), so
    the simulation draws them all."""

    sd: np.ndarray
    task_type: np.ndarray
    model: np.ndarray


def _pooled_replicate_tests(
    layout: _Layout, frame: ReplicatedFrame, taus, seeds: int, runs: int, rng: np.random.Generator, sims: int
):
    """(estimate, se, df) of every component as `analysis claims` tests it on `runs` replicated
    pretraining runs per configuration (`-rep<k>` models), `seeds` seeds each: per task type the
    pretraining SD is estimated from every configuration's run means by the method of moments
    (analysis.claims.pretraining_variance.estimate_pretraining_sd: MS - V clipped at 0, df the
    configurations x (runs - 1)); a component's variance is its cells' seed parts, each replicate's
    cell a term of weight w / runs (df seeds - 1), plus the estimated SDs' part, per replicate model
    (sum of its weights x tau)^2, whose df is the estimate's (hypothesis_tests.pretraining_df).
    `taus`: the true SD per frame cell."""
    n = float(seeds)
    configs, config_of = np.unique(frame.model, return_inverse=True)
    types, type_of = np.unique(frame.task_type, return_inverse=True)
    n_cells = len(frame.sd)
    effect = rng.standard_normal((sims, runs, len(configs)))[:, :, config_of] * taus
    error = effect + frame.sd / np.sqrt(n) * rng.standard_normal((sims, runs, n_cells))
    part = frame.sd**2 * rng.chisquare(n - 1, (sims, runs, n_cells)) / (n - 1) / n  # s^2 / n per run's cell
    # run means per (task type, configuration): the mean over its datasets
    group = type_of * len(configs) + config_of
    groups, group_of = np.unique(group, return_inverse=True)
    size = np.bincount(group_of).astype(float)
    to_group = sparse.csc_matrix((np.ones(n_cells), (np.arange(n_cells), group_of)), shape=(n_cells, len(groups)))
    run_mean = (error.reshape(-1, n_cells) @ to_group).reshape(sims, runs, -1) / size
    seed_part = (part.reshape(-1, n_cells) @ to_group).reshape(sims, runs, -1) / size**2
    squares = ((run_mean - run_mean.mean(axis=1, keepdims=True)) ** 2).sum(axis=1)  # (sims, groups)
    group_type = groups // len(configs)
    df_type = np.bincount(group_type, minlength=len(types)) * (runs - 1.0)
    ms = np.stack([squares[:, group_type == t].sum(axis=1) for t in range(len(types))], axis=1) / df_type
    v = np.stack([seed_part[:, :, group_type == t].mean(axis=(1, 2)) for t in range(len(types))], axis=1)
    tau_hat = np.sqrt(np.maximum(ms - v, 0.0))  # (sims, task types)
    # the components, on the frame's cells
    truth = np.array([c.estimate for c in layout.components])
    weights = np.zeros((len(truth), n_cells))
    np.add.at(weights.T, layout.row, layout.weights.T)
    w = sparse.csc_matrix(weights.T)
    estimate = truth + error.mean(axis=1) @ w
    seed_variance = part.mean(axis=1) @ w.power(2) / runs
    denominator = ((part**2).reshape(-1, n_cells) @ w.power(4)).reshape(sims, runs, -1).sum(axis=1) / runs**4 / (n - 1)
    by = np.zeros((len(truth), len(configs), len(types)))  # W[k, model, task type]
    np.add.at(by, (slice(None), config_of, type_of), weights)
    added = (np.einsum("kmt,st->skm", by, tau_hat) ** 2).sum(axis=2) / runs
    uses = np.abs(by).sum(axis=1) > 0  # (components, task types)
    added_df = np.where((uses[None] & (tau_hat[:, None, :] > 0)), df_type, np.inf).min(axis=2)
    variance = seed_variance + added
    with np.errstate(divide="ignore", invalid="ignore"):
        denominator = denominator + np.where(np.isfinite(added_df), added**2 / added_df, 0.0)
        df = np.where(denominator > 0, variance**2 / denominator, np.inf)
    return estimate, np.sqrt(variance), df


def _one_run_tests(layout: _Layout, n: np.ndarray, error: np.ndarray, part: np.ndarray, assumed: bool, base=None):
    """(estimate, se, df) of every component from its cells' errors (simulated mean - truth, run
    effect included; with `base` 0: the simulated means themselves) and s^2 / n, each (sims x
    cells): the report's test with one run per model
    (ComponentStats.se_df): variance sum w^2 s^2 / n, Welch-Satterthwaite df, and with `assumed`
    the planning SDs added as known (per model (sum of its weights x tau)^2, infinite df)."""
    truth = np.array([c.estimate for c in layout.components]) if base is None else base
    w = sparse.csc_matrix(layout.weights.T)  # (cells, components): each component uses few cells
    estimate = truth + error @ w
    variance = part @ w.power(2)
    denominator = (part**2 / (n - 1)) @ w.power(4)
    if assumed:
        n_models = int(layout.model.max()) + 1
        by_model = np.zeros((len(layout.components), n_models))
        np.add.at(by_model.T, layout.model, (layout.weights * layout.tau).T)
        variance = variance + (by_model**2).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = np.where(denominator > 0, variance**2 / denominator, np.inf)
    return estimate, np.sqrt(variance), df


def decision_on_draws(
    claims: Sequence[Sequence[ComponentStats] | None],
    primary,
    cell_draws,
    pretraining_sd=(),
    assumed_pretraining_sd: bool = False,
    observed_p=None,
) -> np.ndarray:
    """(sims x claims) whether the report would call each claim supported, by the planner's own
    test (`_one_run_tests`, the test `decision_power` simulates with one run per model), on given
    draws: `cell_draws(row)` -> (means, sds, n) over the sims of the cell at that row of the claims'
    cells frame (CellTerm.cell). The budget's whole-pipeline check (tests/reproduce) feeds it the
    cells `analysis claims` computed from simulated run records, so both decide on the same data.
    Claims without cell terms keep `observed_p`, as in `decision_power`."""
    from analysis.claims.hypothesis_tests import family_holm

    taus = list(pretraining_sd) or [0.0] * len(claims)
    simulated = [bool(comps) and all(c.terms is not None for c in comps) for comps in claims]
    layout = _layout(claims, simulated, taus)
    if not layout.components or (layout.row < 0).any():
        raise ValueError("decision_on_draws: every component's cells must be rows of the claims' cells frame")
    means, sds, n = zip(*(cell_draws(int(r)) for r in layout.row))
    means, sds, n = np.column_stack(means), np.column_stack(sds), np.asarray(n, dtype=float)
    assumed = assumed_pretraining_sd and bool((layout.tau > 0).any())
    estimate, se, df = _one_run_tests(layout, n, means, sds**2 / n, assumed, base=0.0)
    component_p = _p_for(layout.components, estimate, se, df)
    return family_holm(_claims_p(claims, simulated, means.shape[0], observed_p, layout, component_p), primary) < ALPHA


def _claims_p(claims, simulated, sims: int, observed_p, layout=None, component_p=None) -> np.ndarray:
    """(sims x claims) each claim's p: the largest of its components' (intersection-union), its fixed
    `observed_p` where it has no cell terms (spread claims), NaN where not testable."""
    p = np.full((sims, len(claims)), np.nan)
    for i, comps in enumerate(claims):
        if comps and not simulated[i]:
            p[:, i] = observed_p[i] if observed_p is not None else np.nan
    if layout is not None:
        for i in np.unique(layout.claim_of):
            p[:, i] = component_p[:, layout.claim_of == i].max(axis=1)
    return p


def _p_for(components: Sequence[ComponentStats], estimate, se, df) -> np.ndarray:
    """(sims x components) p for the claim of each component from simulated estimates, standard
    errors and df: the report's own test (hypothesis_tests.p_for_claim), column by column."""
    p = np.empty_like(estimate)
    with np.errstate(divide="ignore", invalid="ignore"):
        for j, c in enumerate(components):
            p[:, j] = p_for_claim(estimate[:, j], c.null, c.direction, se[:, j], df[:, j])
    return p


def decision_power(
    claims: Sequence[Sequence[ComponentStats] | None],
    seeds: int | None,
    runs: int = 1,
    pretraining_sd=(),
    primary=None,
    sims: int = DECISION_SIMS,
    rng: np.random.Generator | None = None,
    observed_p=None,
    assumed_pretraining_sd: bool = False,
    replicated: ReplicatedFrame | None = None,
) -> np.ndarray:
    """Per claim, the chance that the report calls it `supported` when EVERY claim is re-run with
    `seeds` seeds per run and `runs` pretraining runs per model, each at its observed estimates:
    the cells simulated (shared by the components and claims that use them, _simulated_tests), each
    component's t test as the report makes it, the claim's p the largest (intersection-union), Holm
    across the claims (analysis.claims.hypothesis_tests.family_holm). `pretraining_sd`: one value
    per claim (its planning SD; () = 0); a cell shared by claims with different planning SDs takes
    the first claim's. Claims without cell terms (spread claims) keep `observed_p`; NaN for claims
    that are not testable. seeds=None: the design as it is (each cell's own seed count, no
    pretraining variance). `assumed_pretraining_sd` with runs 1: the models' runs vary by the
    planning SDs and the analysis is told them (`--pretraining-sd`), _simulated_tests.
    `replicated` with runs > 1: the SD is estimated from the replicates as `analysis claims` does
    (_pooled_replicate_tests; without it, each model's runs give its own spread, runs - 1 df)."""
    from analysis.claims.hypothesis_tests import family_holm

    rng = np.random.default_rng(0) if rng is None else rng
    taus = list(pretraining_sd) or [0.0] * len(claims)
    simulated = [bool(comps) and all(c.terms is not None for c in comps) for comps in claims]
    layout = component_p = None
    if any(simulated):
        layout = _layout(claims, simulated, taus)
        if replicated is not None and runs > 1:
            frame_tau = np.array([tau_for(taus[0], t) for t in replicated.task_type])
            estimate, se, df = _pooled_replicate_tests(layout, replicated, frame_tau, seeds, runs, rng, sims)
        else:
            estimate, se, df = _simulated_tests(layout, seeds, runs, rng, sims, assumed_pretraining_sd)
        component_p = _p_for(layout.components, estimate, se, df)
    p = _claims_p(claims, simulated, sims, observed_p, layout, component_p)
    supported = family_holm(p, primary) < ALPHA
    power = supported.mean(axis=0)
    power[np.isnan(p).all(axis=0)] = np.nan
    return power


def _z_power_bound(components: Sequence[ComponentStats], seeds: int, runs: int, pretraining_sd) -> float:
    """Every component's one-sided z-test power at 2.5% (above its t-test power), multiplied."""
    power = 1.0
    for c in components:
        se, _ = design_se_df(c, seeds, runs, pretraining_sd)
        shift = abs(c.estimate) - c.null if c.direction == "equivalent" else c.estimate - c.null
        shift = -shift if c.direction == "less" else shift
        power *= float(stats.norm.cdf(shift / se - stats.norm.isf(ALPHA / 2))) if se > 0 else float(shift > 0)
    return power


def plan_decision(
    claims: Sequence[Sequence[ComponentStats] | None],
    planning_sd: Sequence[float],
    primary=None,
    sims: int = DECISION_SIMS,
    rng_seed: int = 0,
    observed_p=None,
) -> tuple[list[float], list[str], list[str]]:
    """Per claim: the fewest seeds per cell of SEED_GRID with TARGET_POWER for the whole decision
    (one pretraining run), and the fewest runs x seeds of RUN_GRID x SEED_GRID at the planning SDs.
    Every claim is re-run at the same design; common random numbers across designs (one generator
    seed)."""
    n = len(claims)
    wrong = [
        next((c.label for c in comps if comps and c.terms is not None and not _on_claimed_side(c)), None)
        if comps
        else None
        for comps in claims
    ]
    plannable = [bool(comps) and all(c.terms is not None for c in comps) for comps in claims]

    def power_at(seeds, runs, taus):
        return decision_power(
            claims, seeds, runs, taus, primary, sims, np.random.default_rng(rng_seed), observed_p=observed_p
        )

    def worth_simulating(seeds, runs, taus, found) -> bool:
        # The whole decision is never more likely than every component's own test passing (Holm only
        # raises p): simulate only where some claim still searching reaches the target alone.
        # The z test's power bounds the t test's from above: a cheap, safe filter.
        return any(
            plannable[i]
            and not found[i]
            and wrong[i] is None
            and _z_power_bound(claims[i], seeds, runs, taus[i] if taus else 0.0) >= TARGET_POWER
            for i in range(n)
        )

    def search(runs, taus, label, done=()) -> list[str]:
        # Power grows with seeds: the claims that miss the target at the most seeds are not searched
        # at fewer (one simulation instead of a column of the grid for a claim no design reaches).
        out = [""] * n
        searching = [plannable[i] and wrong[i] is None and not (done and done[i]) for i in range(n)]
        if not worth_simulating(SEED_GRID[-1], runs, taus, [not s for s in searching]):
            return out
        most = power_at(SEED_GRID[-1], runs, taus)
        searching = [searching[i] and most[i] >= TARGET_POWER for i in range(n)]
        for seeds in SEED_GRID:
            if not any(searching):
                break
            if not worth_simulating(seeds, runs, taus, [not s for s in searching]):
                continue
            power = most if seeds == SEED_GRID[-1] else power_at(seeds, runs, taus)
            for i in range(n):
                if searching[i] and power[i] >= TARGET_POWER:
                    out[i], searching[i] = label(seeds), False
        return out

    seeds_for = search(1, (), lambda seeds: f"{seeds} seeds")
    design_for = [""] * n
    for runs in RUN_GRID:
        if all(design_for[i] or not plannable[i] or wrong[i] for i in range(n)):
            break
        found = search(runs, planning_sd, lambda seeds, runs=runs: f"{runs} runs x {seeds} seeds", design_for)
        design_for = [d or f for d, f in zip(design_for, found)]
    for i in range(n):
        if not plannable[i]:
            continue
        if wrong[i] is not None:
            seeds_for[i] = design_for[i] = f"none: {wrong[i]} observed on the wrong side"
            continue
        seeds_for[i] = seeds_for[i] or f"more than {SEED_GRID[-1]} seeds"
        design_for[i] = design_for[i] or f"more than {RUN_GRID[-1]} runs x {SEED_GRID[-1]} seeds"
    return seeds_for, design_for
