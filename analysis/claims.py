"""The paper's claims as tested hypotheses: declarative specs, their evaluation, verdicts.

Each claim is one entry of CLAIMS (analysis/claim_definitions.py: the paper's words, section,
scope, margin, test and direction) and is tested as what its sentence says (docs/claims.md, "The
claims"), not as a pooled average that can hold when the sentence is false; the tests are listed
there.
Components are linear contrasts of cell means; analysis.claim_tests tests them and combines
them (intersection-union across components, Holm across claims).

Sources (docs/claims.md): run records (released or your own): cells from the per-seed selected
runs; or the published tables: each cell's seed sd recovered from its printed half-width by the
paper's interval rule (hw = 1.96 sd / sqrt(5)). Each claim lists the cells it needs (those of the
paper's design that its selectors match) and the cells it used: a claim missing a whole
component, or every cell, is NOT_TESTABLE with the missing cells named; a claim missing some
cells is tested on the rest with a warning in every output. The report never stops on them.

Every verdict is conditional on the paper's one pretraining run per configuration; the report
says so, and gives per claim the largest pretraining sd at which its verdict still holds and the
design (seeds, pretraining runs) that would give the whole decision 80% power (analysis.power).
With replicated pretraining runs (`<name>-rep<k>`) the pretraining sd is estimated per task type
(analysis.pretraining_variance) and applied to every claim, --pretraining-sd the fallback.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property, lru_cache

import numpy as np
import pandas as pd
from scipy import stats

from analysis.aggregate import iter_cell_replicates, scan_runs
from analysis.bench import release_models
from analysis.cells import describe_models
from analysis.claim_definitions import CLAIMS, CURVE_TESTS, Claim
from analysis.claim_tests import (
    CONTRADICTED,
    SUPPORTED,
    CellTerm,
    ComponentStats,
    claim_p,
    decide,
    family_holm,
    flip_margin,
    interval,
    tipping_pretraining_sd,
)
from analysis.intervals import Z_95, keyed_rng, percentile_bounds
from analysis.models import pseudo_seeds
from analysis.power import TARGET_POWER, decision_power, plan, plan_decision, sentence_power
from analysis.pretraining_variance import estimate_pretraining_sd, pretraining_sd_profile
from analysis.published import load_published_cells
from analysis.rliable_metrics import rliable_summary
from analysis.small_sample import (
    design_bootstrap_calibration,
    equal_seeds_sd,
    fieller_ratio,
    level_variance,
    lr_variance,
    score_resolution,
    sd_ratio,
    seed_bootstrap_calibration,
    shared_level_variance,
    stretch,
)
from contracts.model_names import split_replicate
from contracts.paper import (
    AVERAGE,
    DATASET_BY_ID,
    DATASETS,
)
from contracts.run_record import RunRecord

NOT_TESTABLE = "not testable from this source"
PUBLISHED_SEEDS = 5  # every printed cell is a mean over 5 fine-tuning seeds
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


class NotTestable(Exception):
    """A claim this source cannot test; the message is the reason shown in the report."""


# --- inputs ---------------------------------------------------------------------------------------
@dataclass
class ClaimInputs:
    """What every claim is evaluated from. `cells` has one row per (model, task_type, dataset)
    with mean, sd and n_seeds; `seed_scores` one row per (cell, seed) with `cell` = its row in
    `cells`; `runs` every run (cell, lr, seed, score), None for published numbers; `seed_replicates` /
    `design_replicates` (reps x cells) the bootstrap of the cell means (seeds; seeds and, where
    `hierarchical`, test instances), None for published numbers."""

    source: str
    cells: pd.DataFrame
    seed_scores: pd.DataFrame
    runs: pd.DataFrame | None = None
    seed_replicates: np.ndarray | None = None
    design_replicates: np.ndarray | None = None
    hierarchical: np.ndarray | None = None
    published: bool = False  # cells are printed numbers: seed_scores are pseudo-seeds

    @property
    def from_runs(self) -> bool:
        return self.runs is not None

    @cached_property
    def scores_by_cell(self) -> dict[int, np.ndarray]:
        """Per cell: its per-seed scores."""
        ordered = self.seed_scores.sort_values("cell", kind="mergesort")
        cells, starts = np.unique(ordered["cell"].to_numpy(), return_index=True)
        return dict(zip(cells.tolist(), np.split(ordered["score"].to_numpy(), starts[1:])))


def _size_params(size) -> float:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([mb])", str(size or ""))
    return float(match[1]) * (1e6 if match[2] == "m" else 1e9) if match else float("nan")


def describe_cells(cells: pd.DataFrame) -> pd.DataFrame:
    """The model-description columns plus those the claims select on: configuration and replicate
    (contracts.model_names.split_replicate), final (the checkpoint is
    its schedule's last), clm_share (CLM share of the steps, to the nearest quarter: 3k of 12k,
    5k of 22k, 10k of 42k are all 25%), log2_params, masking_tenths (masking ratio x 10)."""
    out = pd.concat([cells.reset_index(drop=True), describe_models(cells["model"].reset_index(drop=True))], axis=1)
    # A repeated pretraining run of one configuration (`-rep<k>`, contracts.model_names) selects
    # like its configuration, so a claim's groups average over the replicates.
    split = [split_replicate(m) for m in out["model"]]
    out["configuration"] = [c for c, _ in split]
    out["replicate"] = [k for _, k in split]
    out["final"] = out["checkpoint_step"] == out["schedule_steps"]
    steps = (out["clm_steps"] + out["mlm_steps"]).astype(float)
    out["clm_share"] = np.round(4 * out["clm_steps"].astype(float) / steps.where(steps > 0)) / 4
    out["log2_params"] = np.log2([_size_params(s) for s in out["size"]])
    out["masking_tenths"] = np.round(out["masking_ratio"].astype(float) * 10, 6)
    return out


@lru_cache(maxsize=1)
def design_cells() -> pd.DataFrame:
    """Every cell of the paper's design: the 50 released checkpoints (Tables 2-17 and Figure 7)
    x the 12 datasets. A claim needs the design cells its selectors match."""
    rows = [(m, d.task_type, d.id) for m in _release_positions() for d in DATASETS]
    return describe_cells(pd.DataFrame(rows, columns=["model", "task_type", "dataset"]))


def inputs_from_published() -> ClaimInputs:
    """The printed Tables 2-17: dataset cells (once each), seed sd = hw * sqrt(5) / 1.96."""
    published = load_published_cells()
    cells = published[published["dataset"] != AVERAGE].drop_duplicates(["model", "task_type", "dataset"])
    cells = pd.DataFrame(
        {
            "model": cells["model"],
            "task_type": cells["task_type"],
            "dataset": cells["dataset"],
            "mean": cells["mean"],
            "sd": cells["ci_halfwidth"] * math.sqrt(PUBLISHED_SEEDS) / Z_95,
            "n_seeds": PUBLISHED_SEEDS,
        }
    )
    cells = describe_cells(cells)
    seed_scores = pd.DataFrame(
        {
            "cell": np.repeat(np.arange(len(cells)), PUBLISHED_SEEDS),
            "seed": np.tile(np.arange(PUBLISHED_SEEDS), len(cells)),
            "score": np.concatenate([pseudo_seeds(m, s, PUBLISHED_SEEDS) for m, s in zip(cells["mean"], cells["sd"])]),
        }
    )
    return ClaimInputs("published Tables 2-17 (arXiv 2507.00994 v4)", cells, seed_scores, published=True)


def inputs_from_records(records: Iterable[RunRecord], source: str, reps: int = 10000, rng_seed: int = 0) -> ClaimInputs:
    """Run records (every LR and seed; an iterator is read once): the best-validation LR per
    seed (the paper's selection, docs/claims.md) gives the per-seed scores; datasets the paper
    does not report are left out."""
    selected, runs = scan_runs(r for r in records if r.dataset in DATASET_BY_ID)
    return inputs_from_selected(selected, runs, source, reps, rng_seed)


def inputs_from_selected(
    selected: pd.DataFrame, runs: pd.DataFrame, source: str, reps: int = 10000, rng_seed: int = 0
) -> ClaimInputs:
    """ClaimInputs from analysis.aggregate.scan_runs' frames (selected runs, every run)."""
    if selected.empty:
        raise ValueError(f"{source}: no runs on a dataset of the paper's tables")
    train_sets = selected.drop_duplicates(["model", "task_type", "dataset", "train_set"])
    several = train_sets.duplicated(["model", "task_type", "dataset"])
    if several.any():
        row = train_sets[several].iloc[0]
        raise ValueError(
            f"{source}: runs of {row.model}/{row.dataset} with several train sets; "
            "pass one set of runs per model and dataset"
        )
    grouped = selected.groupby(["model", "task_type", "dataset"], sort=False)["test_score"]
    cells = _floor_equal_seeds(describe_cells(grouped.agg(mean="mean", sd="std", n_seeds="size").reset_index()), runs)
    index = {key: i for i, key in enumerate(zip(cells["model"], cells["task_type"], cells["dataset"]))}

    def cell_of(frame):
        return [index.get(k, -1) for k in zip(frame["model"], frame["task_type"], frame["dataset"])]

    seed_scores = pd.DataFrame(
        {"cell": cell_of(selected), "seed": selected["seed"].to_numpy(), "score": selected["test_score"].to_numpy()}
    )
    runs = pd.DataFrame({"cell": cell_of(runs), "lr": runs["lr"], "seed": runs["seed"], "score": runs["test_score"]})
    seed_reps = design_reps = hierarchical = None
    if reps > 0:
        seed_reps = np.empty((reps, len(cells)), dtype=np.float32)
        design_reps = np.empty((reps, len(cells)), dtype=np.float32)
        hierarchical = np.zeros(len(cells), dtype=bool)
        for group in iter_cell_replicates(selected, reps, rng_seed, averages=False):
            columns = [index[c.key[:3]] for c in group.cells]
            seed_reps[:, columns] = group.seeds
            design_reps[:, columns] = group.design
            hierarchical[columns] = [c.hierarchical for c in group.cells]
    return ClaimInputs(source, cells, seed_scores, runs, seed_reps, design_reps, hierarchical)


def _floor_equal_seeds(cells: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """A cell whose 2+ seeds all scored the same gets the seed SD its seed count allows
    (analysis.small_sample.equal_seeds_sd on the dataset's score step over every run), not 0, which
    would make its contrasts exact; `sd_floor` marks it."""
    cells = cells.copy()
    cells["sd_floor"] = (cells["n_seeds"] >= 2) & (cells["sd"] == 0)
    for row in np.flatnonzero(cells["sd_floor"].to_numpy()):
        dataset, n = cells.at[row, "dataset"], int(cells.at[row, "n_seeds"])
        step = score_resolution(runs.loc[runs["dataset"] == dataset, "test_score"])
        if not step > 0:  # every run of the dataset scored the same: 0.1% of the score as its step
            step = 1e-3 * max(abs(float(cells.at[row, "mean"])), 1.0)
        cells.at[row, "sd"] = equal_seeds_sd(step, n)
    return cells


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
    if claim.test == "noninferiority" or any(
        c in at and _is_level(at[c], values) for c, values in claim.noninferior.items()
    ):
        return "greater", -claim.margin
    if claim.test == "equivalence":
        return "equivalent", claim.margin
    return claim.direction, 0.0


DESIGN_POWER = 0.60  # of the whole claim (every sized component), at equality (docs/claims.md, "Margins")


def design_margin(claim: Claim, cells: pd.DataFrame, labels: tuple[str, ...] | None = None) -> float:
    """The non-inferiority margin the paper's design resolves for `claim`: the smallest margin at
    which, were every compared pair truly equal, the claim's non-inferiority components (those
    labelled `labels`, default all) would all clear it with probability DESIGN_POWER (before Holm;
    analysis.power.claim_power at 5 seeds with the cells' seed SDs). Bisection to 0.005 points."""
    from dataclasses import replace

    from analysis.power import claim_power

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


@lru_cache(maxsize=1)
def _release_positions() -> dict[str, int]:
    return {m: i for i, m in enumerate(release_models())}


def release_order(models: Iterable[str]) -> list[str]:
    """Models in the release's order (the order of Tables 2-17), others after them."""
    order = _release_positions()
    return sorted(models, key=lambda m: (order.get(m, len(order)), m))


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
        CellTerm(str(m), float(w), float(s), int(n), str(t))
        for m, w, s, n, t in zip(models, weights, sds, ns, task_types)
    )
    return ComponentStats(
        component.label, component.curve, float(weights @ means), component.direction, component.boundary, terms
    )


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


def _tau_for(pretraining_sd, task_type: str) -> float:
    """The pretraining SD of a task type: per task type (a mapping) or one for all."""
    return float(pretraining_sd.get(task_type, 0.0)) if isinstance(pretraining_sd, Mapping) else float(pretraining_sd)


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
        tau = np.array([_tau_for(pretraining_sd, cells.loc[t[0], "task_type"]) for t, _ in pairs])

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


def with_verdicts(
    rows: list[dict], components: list[list[ComponentStats] | None], pretraining_sd: float = 0.0
) -> pd.DataFrame:
    """Holm across the testable claims (support and contradiction separately), each verdict, the
    tipping pretraining sd, and the designs for 80% power (analysis.power)."""
    report = pd.DataFrame(rows).reindex(columns=CSV_COLUMNS + DETAIL_COLUMNS)
    tested = [claim_p(c, pretraining_sd) if c else None for c in components]
    report["p_value"] = [t.p_for if t else np.nan for t in tested]
    report["p_against"] = [t.p_against if t else np.nan for t in tested]
    primary = (report["role"] == "primary").to_numpy()
    report["p_holm"] = family_holm(report["p_value"], primary)
    report["p_against_holm"] = family_holm(report["p_against"], primary)
    testable = np.array([t is not None for t in tested])
    report.loc[testable, "verdict"] = decide(
        report.loc[testable, "p_holm"].to_numpy(), report.loc[testable, "p_against_holm"].to_numpy()
    )
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
    # and why it is below 50% where it is (analysis.power.sentence_power).
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
    runs (`-rep<k>` names) the pretraining SD is estimated per task type (analysis.pretraining_variance)
    and applied to every claim; `pretraining_sd` (--pretraining-sd) is the fallback for task types
    without replicates. The estimates are in `report.attrs["pretraining_sd_estimates"]`."""
    if not (pretraining_sd >= 0 and math.isfinite(pretraining_sd)):
        raise ValueError(f"--pretraining-sd must be a finite number >= 0 (points), got {pretraining_sd}")
    estimates = estimate_pretraining_sd(inputs.cells) if (inputs.cells["replicate"] > 1).any() else {}
    tau = pretraining_sd_profile(estimates, pretraining_sd) if estimates else pretraining_sd
    evaluated = [evaluate_claim(c, inputs, reps, rng_seed, tau) for c in claims]
    report = with_verdicts([r for r, _ in evaluated], [s for _, s in evaluated], tau)
    if estimates:
        report["pretraining_sd"] = describe_pretraining_sd(tau, estimates)
    report.attrs["pretraining_sd_estimates"] = list(estimates.values())
    return report


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
    "needed and Holm across the claims, as the verdicts are made (P(supported) now: the same at the "
    "design as it is); the claim's own tests alone (no Holm) need the 'alone' designs of the CSV."
)
