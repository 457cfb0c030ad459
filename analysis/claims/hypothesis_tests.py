"""The tests behind a claim's verdict (docs/claims.md, "Verdicts"): a claim is one or more
components (linear contrasts of cell means, e.g. the MLM-CLM gap at one size), each tested
against the boundary the paper's sentence puts on it.

- A component's variance is the fine-tuning seed variance of its cells, sum_k w_k^2 s_k^2 / n_k
  (what statsmodels' OLS with one mean per cell and HC2 covariance gives, docs/claims.md), with
  Welch-Satterthwaite degrees of freedom; plus, for the sensitivity to pretraining variance, tau^2
  per pretraining run: a model's effect shifts all its datasets alike (the conservative case for
  category averages), so a component gains tau^2 * sum over models of (sum of that model's
  weights)^2, known (infinite df).
- "At every level" is the intersection of the components: supported when every component is
  (intersection-union test, Berger 1982: each at level alpha, no adjustment), so the claim's
  p-value is the largest component p-value. Contradicted when some component is on the wrong
  side: the smallest such p-value times the number of components (Bonferroni).
- p-values follow the two-sided convention of the 95% intervals: twice the one-sided p-value
  (a directional component is supported when its 95% interval clears the boundary); an
  equivalence component (TOST) is at 5% per side, its interval is 90%.
- Holm across the confirmatory claims (primary and secondary: one family, so false support is
  controlled at 5% report-wide), separately for support and for contradiction; a sensitivity claim
  is adjusted as if it alone were added to the family.
- Neither: "leans against" when some component's estimate is on the wrong side of its boundary
  (below it for "greater", above for "less", outside the margin for "equivalent"), else
  "inconclusive" (every estimate on the claimed side: more seeds could decide it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy import stats

ALPHA = 0.05
SUPPORTED, CONTRADICTED, INCONCLUSIVE = "supported", "contradicted", "inconclusive"
# Neither supported nor contradicted, and some component's estimate lies on the wrong side of its
# boundary: the data point against the sentence without significance (issue 63, item 4), where
# "inconclusive" is kept for estimates on the claimed side that the design cannot yet resolve.
LEANS_AGAINST = "leans against"
DIRECTIONS = ("greater", "less", "equivalent")


@dataclass(frozen=True)
class CellTerm:
    """One cell of a component: its model (pretraining run), weight, seed sd and seed count."""

    model: str
    weight: float
    sd: float
    n: int
    task_type: str = ""  # which pretraining SD applies when it is given per task type
    cell: int = -1  # the cell's row in the claims' cells frame: components sharing it share its noise (-1: its own)


def tau_for(pretraining_sd, task_type: str) -> float:
    """The pretraining SD of a task type: per task type (a mapping) or one for all."""
    return float(pretraining_sd.get(task_type, 0.0)) if isinstance(pretraining_sd, Mapping) else float(pretraining_sd)


def pretraining_variance(terms: Sequence[CellTerm], tau) -> float:
    """The variance a pretraining SD adds to a contrast: each model's run effect shifts its cells
    alike, so per model (sum of its weights x tau)^2, with tau per cell's task type when `tau` is a
    {task type: SD} mapping (the effects of one run on its task types taken as fully correlated:
    the conservative case, as for category averages)."""
    by_model: dict[str, float] = {}
    for t in terms:
        sd = tau.get(t.task_type, 0.0) if isinstance(tau, Mapping) else tau
        by_model[t.model] = by_model.get(t.model, 0.0) + t.weight * sd
    return float(sum(v * v for v in by_model.values()))


def pretraining_df(terms: Sequence[CellTerm], tau) -> float:
    """The df of the pretraining variance a contrast gets from a {task type: SD} profile with
    estimated SDs (`tau.dfs`, analysis.claims.pretraining_variance.PretrainingProfile): the smallest df of
    the task types it draws on (conservative); infinite when every SD it uses is assumed."""
    dfs = getattr(tau, "dfs", {})
    used = {t.task_type for t in terms if tau.get(t.task_type, 0.0) > 0}
    return min((dfs.get(task_type, math.inf) for task_type in used), default=math.inf)


@dataclass(frozen=True)
class ComponentStats:
    """One tested contrast. `null` is the boundary the claim must clear: 0, or -margin for a
    non-inferiority component; for an equivalence component, the margin m (the claim: |theta| < m).
    `terms` (its cells) give the seed variance and the pretraining sensitivity; without terms
    (spread claims) the estimate's own se and df are used and pretraining variance does not apply."""

    label: str
    curve: str  # what is counted as qualifying (a size, a Figure 3 curve)
    estimate: float
    direction: str
    null: float = 0.0
    terms: tuple[CellTerm, ...] | None = None
    fixed_se: float = float("nan")
    fixed_df: float = float("nan")

    def __post_init__(self):
        if self.direction not in DIRECTIONS:
            raise ValueError(f"component {self.label}: direction {self.direction!r} is not one of {DIRECTIONS}")

    @property
    def pretraining_weight(self) -> float:
        """sum over models of (sum of the model's weights)^2: the component's variance per tau^2."""
        if self.terms is None:
            return 0.0
        by_model: dict[str, float] = {}
        for t in self.terms:
            by_model[t.model] = by_model.get(t.model, 0.0) + t.weight
        return float(sum(w * w for w in by_model.values()))

    def seed_variance(self) -> float:
        if self.terms is None:
            return self.fixed_se**2
        return float(sum(t.weight**2 * t.sd**2 / t.n for t in self.terms))

    def se_df(self, pretraining_sd=0.0):
        """Standard error and Welch-Satterthwaite df with pretraining sd tau (a number or an array;
        tau is known: its part has infinite df)."""
        added_df = math.inf  # the pretraining part's df: infinite for an SD taken as known
        if isinstance(pretraining_sd, Mapping):  # one SD per task type: a single value
            added, tau = (pretraining_variance(self.terms, pretraining_sd) if self.terms else 0.0), np.asarray(0.0)
            added_df = pretraining_df(self.terms or (), pretraining_sd)
        else:
            tau = np.asarray(pretraining_sd, dtype=float)
            added = tau**2 * self.pretraining_weight
        if self.terms is None:
            return np.full(tau.shape, self.fixed_se)[()], np.full(tau.shape, self.fixed_df)[()]
        parts = np.array([t.weight**2 * t.sd**2 / t.n for t in self.terms])
        dfs = np.array([t.n - 1 for t in self.terms], dtype=float)
        total = parts.sum() + added
        # Welch-Satterthwaite over the seed parts and, where estimated, the pretraining part
        denominator = float(np.sum(parts**2 / dfs)) + (float(added) ** 2 / added_df if added_df < math.inf else 0.0)
        df = total**2 / denominator if denominator > 0 else np.full(tau.shape, np.inf)[()]
        return np.sqrt(total), df


def _t_scores(estimate: float, boundary: float, se):
    """(estimate - boundary) / se, +-inf where se = 0 and the estimate is off the boundary."""
    se = np.asarray(se, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = (estimate - boundary) / se
    return np.where(se > 0, t, np.sign(estimate - boundary) * np.inf)


def p_for_claim(estimate, null: float, direction: str, se, df):
    """The p for the claim of a component with this estimate, standard error and df (arrays
    broadcast): two-sided for a directional component, TOST (the larger one-sided p) for an
    equivalence one. component_p uses it on the data, analysis.claims.power on simulated experiments."""
    if direction == "equivalent":
        return np.maximum(
            stats.t.sf(_t_scores(estimate, -null, se), df), stats.t.cdf(_t_scores(estimate, null, se), df)
        )
    t = _t_scores(estimate, null, se)
    return np.minimum(1.0, 2 * stats.t.sf(-t if direction == "less" else t, df))


def component_p(component: ComponentStats, pretraining_sd=0.0):
    """(p for the claim, p against it) of one component on the two-sided scale (module doc): p for,
    the boundary is cleared on the claimed side; p against, it is crossed the other way.
    Vectorised over an array of pretraining sds."""
    se, df = component.se_df(pretraining_sd)
    est, null = component.estimate, component.null
    p_for = p_for_claim(est, null, component.direction, se, df)
    if component.direction == "equivalent":
        outside = np.minimum(stats.t.sf(_t_scores(est, null, se), df), stats.t.cdf(_t_scores(est, -null, se), df))
        return p_for, np.minimum(1.0, 2 * outside)
    t = _t_scores(est, null, se)
    if component.direction == "less":
        t = -t
    return p_for, np.minimum(1.0, 2 * stats.t.cdf(t, df))


def interval(component: ComponentStats, pretraining_sd: float = 0.0) -> tuple[float, float, float]:
    """(low, high, confidence): 95% for directional components, 90% for equivalence (TOST)."""
    confidence = 0.90 if component.direction == "equivalent" else 0.95
    se, df = component.se_df(pretraining_sd)
    q = float(stats.t.ppf(0.5 + confidence / 2, df))
    return component.estimate - q * float(se), component.estimate + q * float(se), confidence


@dataclass(frozen=True)
class ClaimP:
    p_for: float  # intersection-union: the largest component p
    p_against: float  # Bonferroni over components of the smallest p against
    deciding: int  # the component with the largest p for: the one shown as the claim's estimate
    passing: tuple[bool, ...]  # per component: its own test passes (unadjusted, level ALPHA)


def claim_p(components: Sequence[ComponentStats], pretraining_sd=0.0) -> ClaimP:
    """`pretraining_sd`: points, or {task type: points} (SDs estimated from replicates)."""
    grid = pretraining_sd if isinstance(pretraining_sd, Mapping) else np.asarray([pretraining_sd], dtype=float)
    p_for, p_against = _claim_p_grid(components, grid)
    each = [float(np.ravel(component_p(c, pretraining_sd)[0])[0]) for c in components]
    return ClaimP(float(p_for[0]), float(p_against[0]), int(np.argmax(each)), tuple(p < ALPHA for p in each))


def _claim_p_grid(components: Sequence[ComponentStats], taus: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The claim's (p for, p against) at each pretraining sd of `taus` (or at one {task type: sd})."""
    ps = [component_p(c, taus) for c in components]
    shape = (1,) if isinstance(taus, Mapping) else taus.shape
    p_for = np.max([np.broadcast_to(p, shape) for p, _ in ps], axis=0)
    p_against = np.minimum(1.0, len(ps) * np.min([np.broadcast_to(q, shape) for _, q in ps], axis=0))
    return p_for, p_against


def holm(p_values) -> np.ndarray:
    """Holm-adjusted p-values along the last axis (rows of a matrix are separate families); NaN
    (an untestable claim) is left out of the family. Equals statsmodels' multipletests(method="holm")."""
    p = np.atleast_2d(np.asarray(p_values, dtype=float))
    out = np.full(p.shape, np.nan)
    missing = np.isnan(p)
    if (missing == missing[:1]).all():  # one family of claims in every row: all rows at once
        columns = np.flatnonzero(~missing[0])
        if len(columns):
            values = p[:, columns]
            order = np.argsort(values, axis=1, kind="stable")
            ranked = np.take_along_axis(values, order, axis=1) * (len(columns) - np.arange(len(columns)))
            adjusted = np.empty_like(values)
            np.put_along_axis(adjusted, order, np.minimum(1.0, np.maximum.accumulate(ranked, axis=1)), axis=1)
            out[:, columns] = adjusted
        return out if np.ndim(p_values) == 2 else out[0]
    for row, values in enumerate(p):
        finite = np.flatnonzero(~np.isnan(values))
        if not len(finite):
            continue
        order = finite[np.argsort(values[finite], kind="stable")]
        scaled = (len(order) - np.arange(len(order))) * values[order]
        out[row, order] = np.minimum(1.0, np.maximum.accumulate(scaled))
    return out if np.ndim(p_values) == 2 else out[0]


def confirmatory(roles) -> np.ndarray:
    """The Holm family (issue 63, item 6): every primary and secondary claim; sensitivity claims
    (second readings of a sentence) are adjusted as if each alone were added to it."""
    return np.array([r != "sensitivity" for r in roles], dtype=bool)


def family_holm(p_values, primary=None) -> np.ndarray:
    """Holm along the last axis over the family (`primary`: the confirmatory claims); each claim
    outside it (sensitivity) is adjusted as if it alone were added to the family, so that a second
    reading of one sentence neither enlarges the family of the others nor escapes adjustment itself."""
    p = np.asarray(p_values, dtype=float)
    primary = np.ones(p.shape[-1], dtype=bool) if primary is None else np.asarray(primary, dtype=bool)
    out = holm(np.where(primary, p, np.nan))
    for j in np.flatnonzero(~primary):
        alone = primary.copy()
        alone[j] = True
        out[..., j] = holm(np.where(alone, p, np.nan))[..., j]
    return out


def wrong_side(components: Sequence[ComponentStats]) -> bool:
    """Some component's estimate lies on the wrong side of its boundary (or on it)."""
    for c in components:
        if c.direction == "greater" and c.estimate <= c.null:
            return True
        if c.direction == "less" and c.estimate >= c.null:
            return True
        if c.direction == "equivalent" and abs(c.estimate) >= c.null:
            return True
    return False


def decide(p_for_holm, p_against_holm, against=None):
    """The verdict from the Holm-adjusted p-values (arrays give an array of verdicts). `against`
    (booleans, `wrong_side` per claim) turns an undecided claim whose estimate is on the wrong side
    into LEANS_AGAINST; without it undecided claims are INCONCLUSIVE."""
    undecided = (
        INCONCLUSIVE if against is None else np.where(np.asarray(against, dtype=bool), LEANS_AGAINST, INCONCLUSIVE)
    )
    return np.where(
        np.asarray(p_for_holm) < ALPHA,
        SUPPORTED,
        np.where(np.asarray(p_against_holm) < ALPHA, CONTRADICTED, undecided),
    )


def _verdict_grid(claims: Sequence[Sequence[ComponentStats] | None], taus: np.ndarray, primary=None) -> np.ndarray:
    """(taus x claims) verdicts, every claim re-tested at each pretraining sd ("" = not testable)."""
    p_for = np.full((len(taus), len(claims)), np.nan)
    p_against = np.full((len(taus), len(claims)), np.nan)
    for i, components in enumerate(claims):
        if components:
            p_for[:, i], p_against[:, i] = _claim_p_grid(components, taus)
    verdicts = decide(family_holm(p_for, primary), family_holm(p_against, primary)).astype(object)
    verdicts[np.isnan(p_for)] = ""
    return verdicts


def verdicts_at(
    claims: Sequence[Sequence[ComponentStats] | None], pretraining_sd: float = 0.0, primary=None
) -> list[str]:
    """Every claim's verdict with pretraining sd tau, Holm across the testable ones ("" for None)."""
    return list(_verdict_grid(claims, np.asarray([pretraining_sd], dtype=float), primary)[0])


def tipping_pretraining_sd(
    claims: Sequence[Sequence[ComponentStats] | None], pretraining_sd: float = 0.0, upper: float = 50.0, primary=None
) -> list[float]:
    """Per claim: the largest pretraining sd (points) up to which its verdict at `pretraining_sd`
    still holds, every claim re-tested and re-adjusted at each value (to 0.1% of the value); inf
    when it holds up to `upper`; NaN where it does not apply (not testable, inconclusive: more
    variance cannot make a claim conclusive, or no cell terms)."""
    if isinstance(pretraining_sd, Mapping):  # SDs estimated per task type: no single SD to tip
        return [float("nan")] * len(claims)
    grid = pretraining_sd + np.concatenate([[0.0], np.geomspace(1e-3, upper, 400)])
    at = _verdict_grid(claims, grid, primary)
    out = []
    for i, components in enumerate(claims):
        verdict = at[0, i]
        if verdict in ("", INCONCLUSIVE) or all(c.terms is None for c in components):
            out.append(float("nan"))
            continue
        changed = np.flatnonzero(at[:, i] != verdict)
        if not len(changed):
            out.append(math.inf)
            continue
        # The coarse values are 2.7% apart; 64 between the last that holds and the first that does not.
        fine = np.linspace(grid[changed[0] - 1], grid[changed[0]], 64)
        holds = _verdict_grid(claims, fine, primary)[:, i] == verdict
        out.append(float(fine[np.argmin(holds) - 1]))
    return out


def flip_margin(
    claims: Sequence[Sequence[ComponentStats] | None],
    index: int,
    margin: float,
    pretraining_sd: float = 0.0,
    primary=None,
    upper_factor: float = 100.0,
) -> float:
    """The non-inferiority margin at which claim `index` turns `supported`: supported exactly when
    its margin exceeds the returned value, every other claim's p fixed and Holm re-applied (its
    margin components, those with boundary -margin, moved to -m). 0 when it is supported even
    with no margin (a superiority result), inf when not up to upper_factor x margin."""
    others = [claim_p(c, pretraining_sd).p_for if c else np.nan for c in claims]
    moving = [c.null == -margin and c.direction == "greater" for c in claims[index]]

    def supported(m: float) -> bool:
        moved = [replace(c, null=-m) if move else c for c, move in zip(claims[index], moving)]
        p = list(others)
        p[index] = claim_p(moved, pretraining_sd).p_for
        return bool(family_holm(np.asarray(p), primary)[index] < ALPHA)

    if supported(0.0):
        return 0.0
    high = upper_factor * margin
    if not supported(high):
        return math.inf
    low = 0.0
    for _ in range(60):  # p is monotone in the margin: bisection to well below 0.001 points
        middle = (low + high) / 2
        low, high = (low, middle) if supported(middle) else (middle, high)
    return high
