"""From a claim's selectors to its components: matched groups of cells, the linear contrasts the
sentence constrains (per level of `across`, per step, per curve), the margins the design resolves,
and which cells a claim needs and used (docs/claims.md, "The claims", "Cells used and cells needed").
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.claims.definitions import CURVE_TESTS, Claim
from analysis.claims.hypothesis_tests import (
    CellTerm,
    ComponentStats,
)
from analysis.claims.inputs import (
    NotTestable,
    design_cells,
    release_order,
)


# --- selecting cells and building components ------------------------------------------------------
def _describe_selector(selector: dict) -> str:
    return ", ".join(f"{k}={'|'.join(map(str, v)) if isinstance(v, tuple) else v}" for k, v in selector.items())


def select_cells(cells: pd.DataFrame, selector: dict, task_types: tuple[str, ...]) -> pd.DataFrame:
    """The cells of these task types whose columns take the selector's values (a tuple: any of
    them; floats compared with a tolerance)."""
    mask = cells["task_type"].isin(task_types).to_numpy().copy()
    for column, wanted in selector.items():
        values = cells[column].to_numpy()
        hit = np.zeros(len(cells), dtype=bool)
        for option in wanted if isinstance(wanted, tuple) else (wanted,):
            if isinstance(option, float):
                hit |= np.isclose(pd.to_numeric(values, errors="coerce").astype(float), option)
            else:
                hit |= values == option
        mask &= hit
    return cells[mask]


def _keyed_rows(cells: pd.DataFrame, columns: tuple[str, ...]) -> dict[tuple, list[int]]:
    """Rows of `cells` by their values of `columns`; rows with a missing value are left out."""
    keyed: dict[tuple, list[int]] = {}
    for row, key in zip(cells.index, zip(*(cells[c].tolist() for c in columns))):
        if not any(v is None or (isinstance(v, float) and math.isnan(v)) for v in key):
            keyed.setdefault(key, []).append(int(row))
    return keyed


def _matched_groups(claim: Claim, cells: pd.DataFrame) -> dict[tuple, dict[int, float]]:
    """Matched groups -> {cell row: weight} of (mean of treatment) - (mean of control) there. A
    group's key is its `pair_on` values, then its values of the `across` columns that only the
    treatment has (e.g. the CLM share of a biphasic model)."""
    treatment = select_cells(cells, claim.treatment, claim.task_types)
    split = tuple(c for c in claim.across if c not in claim.pair_on)
    control_groups = None
    if claim.control is not None:  # keyed by pair_on, then by the control's own split (control_across)
        control_groups = _keyed_rows(
            select_cells(cells, claim.control, claim.task_types), claim.pair_on + claim.control_across
        )
    paired = len(claim.pair_on)
    groups = {}
    for key, mine in sorted(_keyed_rows(treatment, claim.pair_on + split).items()):
        weights = {i: 1.0 / len(mine) for i in mine}
        if control_groups is None:
            groups[key] = weights
            continue
        for control_key, theirs in control_groups.items():
            if control_key[:paired] == key[:paired]:
                groups[key + control_key[paired:]] = {**weights, **{i: -1.0 / len(theirs) for i in theirs}}
    return groups


def level_columns(claim: Claim) -> tuple[str, ...]:
    """The columns naming a component's level: `across`, then the control's split ("vs:<column>")."""
    return claim.across + tuple(f"vs:{c}" for c in claim.control_across)


@dataclass(frozen=True)
class Component:
    """One tested contrast of a claim: weights on cell rows, the claimed side of `boundary`."""

    label: str
    curve: str  # what is counted as qualifying (a size, a Figure 3 curve)
    weights: dict[int, float]
    direction: str  # greater | less | equivalent
    boundary: float = 0.0  # 0, -margin (noninferiority), margin (equivalence: |theta| < margin)
    groups: tuple[dict[int, float], ...] = ()  # its matched groups (rliable metrics)
    shape: tuple[dict[int, float], dict[int, float]] | None = None  # u_shape: weights of b and c


def _level_label(columns: tuple[str, ...], values: tuple) -> str:
    parts = []
    for column, value in zip(columns, values):
        if column.startswith("vs:"):
            parts.append("vs " + _level_label((column[3:],), (value,)))
        elif column in ("checkpoint_step", "schedule_steps", "cpt_steps"):
            parts.append(f"{value / 1000:g}k" + (" budget" if column == "schedule_steps" else " steps"))
        elif column == "clm_share":
            parts.append(f"{value * 100:g}% CLM")
        else:
            parts.append(str(value))
    return " ".join(parts) or "all"


def _mean_weights(groups: list[dict[int, float]]) -> dict[int, float]:
    """The weights of the mean of these contrasts (each group counts the same)."""
    weights: dict[int, float] = {}
    for group in groups:
        for cell, w in group.items():
            weights[cell] = weights.get(cell, 0.0) + w / len(groups)
    return weights


def _add(*terms: tuple[float, dict[int, float]]) -> dict[int, float]:
    """sum of scale x weights over (scale, weights) terms."""
    out: dict[int, float] = {}
    for scale, weights in terms:
        for cell, w in weights.items():
            out[cell] = out.get(cell, 0.0) + scale * w
    return out


def claim_components(claim: Claim, cells: pd.DataFrame) -> list[Component]:
    """The claim's components on these cells (empty when none can be formed)."""
    groups = _matched_groups(claim, cells)
    keys = claim.pair_on + tuple(c for c in claim.across if c not in claim.pair_on)
    by_level: dict[tuple, list[tuple[tuple, dict[int, float]]]] = {}
    for key, weights in groups.items():
        level = tuple(key[keys.index(c)] for c in claim.across) + key[len(keys) :]  # + the control's split
        if all(c not in claim.levels or _is_level(v, claim.levels[c]) for c, v in zip(claim.across, level)):
            by_level.setdefault(level, []).append((key, weights))
    if claim.test in CURVE_TESTS:
        build = {"u_shape": _u_components, "monotone": _monotone_components, "trend": _trend_components}[claim.test]
        return [c for level, members in sorted(by_level.items()) for c in build(claim, level, members)]
    components = [
        Component(
            _level_label(level_columns(claim), level),
            _level_label(level_columns(claim), level),
            _mean_weights([w for _, w in members]),
            *_side(claim, level),
            groups=tuple(w for _, w in members),
        )
        for level, members in sorted(by_level.items())
    ]
    if claim.test != "steps":
        return components
    order = sorted(
        range(len(components)),
        key=lambda i: float(cells.loc[next(iter(components[i].groups[0])), claim.covariate]),
    )
    ordered = [components[i] for i in order]
    return [
        Component(
            f"{a.label} to {b.label}",
            f"{a.label} to {b.label}",
            _add((1.0, b.weights), (-1.0, a.weights)),
            claim.direction,
        )
        for a, b in zip(ordered, ordered[1:])
    ]


def _is_level(value, values: tuple) -> bool:
    """`value` is one of `values` (numbers compared with a tolerance, names exactly)."""
    if isinstance(value, str):
        return value in values
    return bool(np.isclose(value, values).any())


def _side(claim: Claim, level: tuple = ()) -> tuple[str, float]:
    """(direction, boundary) of a component: -margin where the claim (or, for a claim with
    `noninferior` levels, this level) is a non-inferiority statement."""
    at = dict(zip(level_columns(claim), level))
    margin = claim.margins.get(at.get("task_type"), claim.margin)  # a task type's own margin (issue 63)
    if claim.test == "noninferiority" or any(
        c in at and _is_level(at[c], values) for c, values in claim.noninferior.items()
    ):
        return "greater", -margin
    if claim.test == "equivalence":
        return "equivalent", margin
    return claim.direction, 0.0


DESIGN_POWER = 0.60  # of the whole claim (every sized component), at equality (docs/claims.md, "Margins")


def design_margin(claim: Claim, cells: pd.DataFrame, labels: tuple[str, ...] | None = None) -> float:
    """The non-inferiority margin the paper's design resolves for `claim`: the smallest margin at
    which, were every compared pair truly equal, the claim's non-inferiority components (those
    labelled `labels`, default all) would all clear it with probability DESIGN_POWER (before Holm;
    analysis.claims.power.claim_power at 5 seeds with the cells' seed SDs). Bisection to 0.005 points."""
    from dataclasses import replace

    from analysis.claims.power import claim_power

    sized = [_component_stats(c, cells) for c in claim_components(claim, cells) if labels is None or c.label in labels]
    if not sized:
        raise ValueError(f"{claim.id}: no component to size a margin on")
    seeds = int(cells["n_seeds"].max())

    def power(margin: float) -> float:
        return claim_power([replace(s, estimate=0.0, null=-margin, direction="greater") for s in sized], seeds)

    low, high = 0.0, 1.0
    while power(high) < DESIGN_POWER:
        high *= 2
    while high - low > 0.005:
        low, high = (low, (low + high) / 2) if power((low + high) / 2) >= DESIGN_POWER else ((low + high) / 2, high)
    return high


def _curve_points(claim: Claim, members: list) -> tuple[np.ndarray, list[dict[int, float]]]:
    """A curve's x values (sorted) and, per x, the weights of the mean of its datasets."""
    position = claim.pair_on.index(claim.covariate)
    by_x: dict[float, list[dict[int, float]]] = {}
    for key, weights in members:
        by_x.setdefault(float(key[position]), []).append(weights)
    xs = np.array(sorted(by_x))
    return xs, [_mean_weights(by_x[x]) for x in xs]


def _u_components(claim: Claim, level: tuple, members: list) -> list[Component]:
    """The fitted quadratic's slope at the curve's lowest x (claimed < 0) and highest x (> 0):
    both hold exactly when the quadratic has its minimum strictly inside the range (a U)."""
    curve = _level_label(claim.across, level)
    xs, means = _curve_points(claim, members)
    if len(xs) < 3:
        return []
    fit = np.linalg.pinv(np.vander(xs, 3, increasing=True))  # rows: intercept, b, c of a + b x + c x^2
    b = _add(*((fit[1, j], means[j]) for j in range(len(xs))))
    c = _add(*((fit[2, j], means[j]) for j in range(len(xs))))
    low, high = xs[0], xs[-1]
    return [
        Component(
            f"{curve} slope at {low * 10:g}%", curve, _add((1.0, b), (2 * low, c)), "less", shape=(b, c), groups=()
        ),
        Component(
            f"{curve} slope at {high * 10:g}%", curve, _add((1.0, b), (2 * high, c)), "greater", shape=(b, c), groups=()
        ),
    ]


def _monotone_components(claim: Claim, level: tuple, members: list) -> list[Component]:
    """Each step between consecutive x of the curve (mean of its datasets) in the claimed
    direction: all hold exactly when the curve is strictly monotone ("prefers higher ratios")."""
    curve = _level_label(claim.across, level)
    xs, means = _curve_points(claim, members)
    return [
        Component(f"{curve} {a * 10:g}% to {b * 10:g}%", curve, _add((1.0, wb), (-1.0, wa)), claim.direction)
        for a, b, wa, wb in zip(xs, xs[1:], means, means[1:])
    ]


def _trend_components(claim: Claim, level: tuple, members: list) -> list[Component]:
    """The least-squares slope of the curve (mean of its datasets) over its x, per unit of x (a
    masking step of 10 pp): one component per curve, on the claimed side of 0 (the opposite side
    for the curves of `claim.reverse`)."""
    curve = _level_label(claim.across, level)
    xs, means = _curve_points(claim, members)
    if len(xs) < 2:
        return []
    centred = xs - xs.mean()
    slope = centred / float(centred @ centred)
    at = dict(zip(claim.across, level))
    reversed_ = any(c in at and _is_level(at[c], values) for c, values in claim.reverse.items())
    direction = {"greater": "less", "less": "greater"}[claim.direction] if reversed_ else claim.direction
    return [Component(curve, curve, _add(*((slope[j], means[j]) for j in range(len(xs)))), direction)]


def _spread_pairs(claim: Claim, cells: pd.DataFrame) -> dict[tuple, tuple[list[int], list[int]]]:
    """Matched groups -> (treatment cells, control cells) of a spread claim."""
    return {
        key: ([c for c, w in g.items() if w > 0], [c for c, w in g.items() if w < 0])
        for key, g in _matched_groups(claim, cells).items()
    }


# --- coverage: the cells a claim needs and the cells it used --------------------------------------
def _cell_keys(cells: pd.DataFrame, rows) -> set[tuple[str, str]]:
    rows = sorted(rows)  # cell rows are positions: every cells frame has a 0..n-1 index
    return set(zip(cells["model"].to_numpy()[rows], cells["dataset"].to_numpy()[rows]))


def _parts(claim: Claim, cells: pd.DataFrame) -> dict[str, set[tuple[str, str]]]:
    """{component (or matched group) label: its (model, dataset) cells}."""
    if claim.test == "spread":
        return {
            "/".join(map(str, key)): _cell_keys(cells, t + c)
            for key, (t, c) in _spread_pairs(claim, cells).items()
            if len(t) and len(c)
        }
    return {c.label: _cell_keys(cells, c.weights) for c in claim_components(claim, cells)}


_DESIGN_PARTS: dict[str, dict[str, set[tuple[str, str]]]] = {}


def _design_parts(claim: Claim) -> dict[str, set[tuple[str, str]]]:
    """_parts on the design cells, computed once per claim spec (the design never changes)."""
    key = repr(claim)
    if key not in _DESIGN_PARTS:
        _DESIGN_PARTS[key] = _parts(claim, design_cells())
    return _DESIGN_PARTS[key]


def describe_cells_list(keys: Iterable[tuple[str, str]]) -> str:
    """(model, dataset) cells in one line: models with the same datasets share them."""
    by_model: dict[str, list[str]] = {}
    for model, dataset in sorted(keys):
        by_model.setdefault(model, []).append(dataset)
    by_datasets: dict[tuple, list[str]] = {}
    for model in release_order(by_model):
        by_datasets.setdefault(tuple(by_model[model]), []).append(model)
    return "; ".join(f"{', '.join(models)} ({', '.join(datasets)})" for datasets, models in by_datasets.items())


@dataclass(frozen=True)
class Coverage:
    used: int
    needed: int
    missing: str  # the needed cells the source lacks, in one line ("" when none)
    warning: str  # what the verdict does not cover ("" when complete)


def claim_coverage(claim: Claim, cells: pd.DataFrame) -> Coverage:
    """The design cells the claim needs vs the cells of `cells` it can use. Raises NotTestable
    when it can use none, or when a whole component ("every size": a size) is missing."""
    needed_parts = _design_parts(claim)
    needed = set().union(*needed_parts.values())
    have_parts = _parts(claim, cells)
    used = set().union(*have_parts.values()) & needed if have_parts else set()
    present = set(zip(cells["model"], cells["dataset"])) & needed
    missing = needed - present
    unmatched = present - used
    if not used:
        raise NotTestable(
            f"needs {len(needed)} cells and can use none: missing {describe_cells_list(missing)}"
            + (f"; unmatched (their pair or curve is incomplete) {describe_cells_list(unmatched)}" if unmatched else "")
        )
    whole = [label for label in needed_parts if label not in have_parts]
    if whole and claim.test != "spread" and (claim.across or claim.test in ("steps", *CURVE_TESTS)):
        lacking = set().union(*(needed_parts[label] for label in whole)) - used
        raise NotTestable(
            f"no cells for {', '.join(whole)} (the claim needs every one): missing {describe_cells_list(lacking)}"
        )
    warning = ""
    if missing or unmatched:
        warning = f"tested on {len(used)} of {len(needed)} needed cells"
        if missing:
            warning += f"; missing {describe_cells_list(missing)}"
        if unmatched:
            warning += f"; unmatched (their pair or curve is incomplete) {describe_cells_list(unmatched)}"
    return Coverage(len(used), len(needed), describe_cells_list(missing), warning)


def _floor_warning(claim: Claim, cells: pd.DataFrame) -> str:
    """Names the claim's cells whose seeds all scored the same (their seed SD is a floor)."""
    if "sd_floor" not in cells or not cells["sd_floor"].any():
        return ""
    floored = set(zip(cells["model"][cells["sd_floor"]], cells["dataset"][cells["sd_floor"]]))
    used = set().union(*_parts(claim, cells).values()) & floored
    if not used:
        return ""
    return f"seeds all equal in {describe_cells_list(used)}: seed SD floored at what their seed count allows"


# --- evaluation -----------------------------------------------------------------------------------
def _component_stats(component: Component, cells: pd.DataFrame) -> ComponentStats:
    rows = sorted(component.weights)  # positions: every cells frame has a 0..n-1 index
    models, means = cells["model"].to_numpy()[rows], cells["mean"].to_numpy(dtype=float)[rows]
    sds, ns = cells["sd"].to_numpy(dtype=float)[rows], cells["n_seeds"].to_numpy()[rows]
    if (ns < 2).any():
        few = int(np.argmax(ns < 2))
        raise NotTestable(f"{models[few]}/{cells['dataset'].to_numpy()[rows][few]} has fewer than 2 seeds")
    weights = np.array([component.weights[r] for r in rows])
    task_types = cells["task_type"].to_numpy()[rows]
    terms = tuple(
        CellTerm(str(m), float(w), float(s), int(n), str(t), int(r))
        for m, w, s, n, t, r in zip(models, weights, sds, ns, task_types, rows)
    )
    return ComponentStats(
        component.label, component.curve, float(weights @ means), component.direction, component.boundary, terms
    )
