"""The paper's claims as tested hypotheses: declarative specs, their evaluation, verdicts.

Each claim is one row of CLAIMS: which cells are the treatment and the control (selectors on
the pretraining-description columns of the cells), which task types, what matches them
(`pair_on`), and what is estimated:
- difference   mean over matched groups of (treatment - control)
- equivalence  the same, tested for |difference| < margin (TOST)
- trend        slope of the difference along a covariate (e.g. log2 parameters), per stratum
- curvature    quadratic coefficient of the treatment along a covariate (masking ratio), per stratum
- spread       standard deviation over LRs and seeds, or over masking ratios: treatment - control
All but `spread` are linear contrasts of cell means, fitted by analysis.models.contrast_fit.

Sources (docs/claims.md): run records (released or your own): cells from the per-seed selected
runs; or the published tables: each cell's seed sd recovered from its printed half-width by the
paper's interval rule (hw = 1.96 sd / sqrt(5)) and its 5 seeds replaced by pseudo-seeds with that
mean and sd (exact for the contrast fit). Claims a source cannot test get the verdict
NOT_TESTABLE and the reason; the report never stops on them.

Verdict rule (docs/claims.md): Holm-adjusted p < 0.05 (across all testable claims) with the
estimate in the claimed direction -> supported; in the opposite direction -> contradicted;
equivalence: TOST p_holm < 0.05 -> supported, 95% CI entirely outside +-margin -> contradicted;
otherwise inconclusive.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pandas as pd
from statsmodels.stats.multitest import multipletests

from analysis.aggregate import iter_cell_replicates, scan_runs
from analysis.cells import describe_models
from analysis.intervals import Z_95, keyed_rng, percentile_bounds
from analysis.models import Fit, contrast_fit, equivalence_fit, paired_fit, pseudo_seeds
from analysis.published import load_published_cells
from analysis.rliable_metrics import rliable_summary
from contracts.paper import (
    AVERAGE,
    BIPHASIC_SPLITS,
    CLM_STEPS_BEFORE_MASKING,
    CPT_STEPS,
    DATASET_BY_ID,
    DEFAULT_MASKING_RATIO,
    INTERMEDIATE_STEPS,
    PRETRAIN_STEPS,
    TASK_TYPES,
)
from contracts.run_record import RunRecord

SUPPORTED, CONTRADICTED, INCONCLUSIVE = "supported", "contradicted", "inconclusive"
NOT_TESTABLE = "not testable from this source"
ALPHA = 0.05
PUBLISHED_SEEDS = 5  # every printed cell is a mean over 5 fine-tuning seeds
LR_SENSITIVITY_RANGE = (1e-5, 1e-4)  # Figure 5: LRs in [1e-5, 1e-4], inclusive
CSV_COLUMNS = ["claim", "estimate", "ci_low", "ci_high", "p_value", "p_holm", "verdict", "n_runs", "source"]
_BOUNDS = ("low", "high", "low_mcse", "high_mcse")
DETAIL_COLUMNS = [
    "sentence",
    "location",
    "test",
    "direction",
    "unit",
    "margin",
    "model",
    "n_groups",
    "paper_low",
    "paper_high",
    "boot_reps",
    *(f"seed_boot_{b}" for b in _BOUNDS),
    *(f"instance_boot_{b}" for b in _BOUNDS),
    "iqm_difference",
    "iqm_low",
    "iqm_high",
    "prob_improvement",
    "poi_low",
    "poi_high",
    "crossover",
    "reason",
]
DEGREE = {"difference": 0, "equivalence": 0, "trend": 1, "curvature": 2}

FINAL_42K = {"checkpoint_step": PRETRAIN_STEPS, "schedule_steps": PRETRAIN_STEPS}
MLM40 = {"objective": "mlm", "masking_ratio": DEFAULT_MASKING_RATIO}
CLM = {"objective": "clm"}
INTERMEDIATE_610M = {"size": "610m", "schedule_steps": PRETRAIN_STEPS, "final": False}
EARLY_STEPS = INTERMEDIATE_STEPS[:3]  # 1k, 2k, 5k: "early in pretraining" (Figure 4)
LONGEST_CPT = max(CPT_STEPS)  # 22k: Figure 8


@dataclass(frozen=True)
class Claim:
    id: str
    sentence: str  # what the paper concludes, in our words
    location: str  # where the paper says it
    test: str  # difference | equivalence | trend | curvature | spread
    treatment: dict
    control: dict | None
    pair_on: tuple[str, ...]  # columns matching treatment and control cells (a "group")
    direction: str  # greater | less | equivalent
    unit: str
    task_types: tuple[str, ...] = TASK_TYPES
    covariate: str | None = None  # trend/curvature: the x of the fit; spread: what it is over
    estimate_on: dict = field(default_factory=dict)  # extra filter of the estimated groups
    crossover_on: str | None = None  # also report where treatment - control changes sign
    margin: float | None = None  # equivalence margin, in `unit`
    needs_runs: str | None = None  # why published numbers cannot test it


CLAIMS: tuple[Claim, ...] = (
    Claim(
        "mlm_beats_clm_sc",
        "MLM beats CLM on sequence classification, at every model size",
        "Sec. 3, Fig. 2, Table 2",
        "difference",
        {**MLM40, **FINAL_42K},
        {**CLM, **FINAL_42K},
        ("size", "dataset"),
        "greater",
        "points",
        task_types=("SC",),
    ),
    Claim(
        "mlm_beats_clm_qa",
        "MLM beats CLM on question answering, at every model size",
        "Sec. 3, Fig. 2, Table 4",
        "difference",
        {**MLM40, **FINAL_42K},
        {**CLM, **FINAL_42K},
        ("size", "dataset"),
        "greater",
        "points",
        task_types=("QA",),
    ),
    Claim(
        "mlm_beats_clm_ir",
        "MLM beats CLM on information retrieval",
        "Sec. 3, Fig. 2, Table 5",
        "difference",
        {**MLM40, **FINAL_42K},
        {**CLM, **FINAL_42K},
        ("size", "dataset"),
        "greater",
        "points",
        task_types=("IR",),
    ),
    # Margin 0.5 F1 points: about twice the typical printed TC half-width (0.25) and well below
    # every MLM-CLM gap the paper reads as a win on SC, QA or IR (2 points and more).
    Claim(
        "clm_matches_mlm_tc",
        "CLM is competitive with MLM on token classification",
        "Sec. 3, Fig. 2, Table 3",
        "equivalence",
        {**CLM, **FINAL_42K},
        {**MLM40, **FINAL_42K},
        ("size", "dataset"),
        "equivalent",
        "points",
        task_types=("TC",),
        margin=0.5,
    ),
    Claim(
        "gap_widens_with_size_sc",
        "The MLM-over-CLM gap on sequence classification grows with model size",
        "Sec. 3, Fig. 2",
        "trend",
        {**MLM40, **FINAL_42K},
        {**CLM, **FINAL_42K},
        ("log2_params", "dataset"),
        "greater",
        "points per doubling of parameters",
        task_types=("SC",),
        covariate="log2_params",
    ),
    Claim(
        "gap_narrows_with_size_ir",
        "The MLM-over-CLM gap on information retrieval shrinks with model size",
        "Sec. 3, Fig. 2",
        "trend",
        {**MLM40, **FINAL_42K},
        {**CLM, **FINAL_42K},
        ("log2_params", "dataset"),
        "less",
        "points per doubling of parameters",
        task_types=("IR",),
        covariate="log2_params",
    ),
    Claim(
        "u_shape_masking_610m_1b",
        "610M and 1B models show U-shaped curves of score vs masking ratio",
        "Sec. 3, Fig. 3, Tables 2-5",
        "curvature",
        {"objective": "mlm", "size": ("610m", "1b"), **FINAL_42K},
        None,
        ("size", "dataset", "masking_tenths"),
        "greater",
        "points per (10 pp of masking)^2",
        covariate="masking_tenths",
    ),
    Claim(
        "clm_leads_early",
        "CLM is more data-efficient: it leads MLM early in pretraining (1k-5k steps)",
        "Sec. 4, Fig. 4, Tables 6-9",
        "difference",
        {**CLM, **INTERMEDIATE_610M},
        {**MLM40, **INTERMEDIATE_610M},
        ("checkpoint_step", "dataset"),
        "greater",
        "points",
        estimate_on={"checkpoint_step": EARLY_STEPS},
        crossover_on="checkpoint_step",
    ),
    Claim(
        "clm_less_lr_sensitive",
        "CLM models are less sensitive to the fine-tuning learning rate",
        "Sec. 4, Fig. 5",
        "spread",
        {**CLM, **FINAL_42K},
        {**MLM40, **FINAL_42K},
        ("size", "dataset"),
        "less",
        "points of standard deviation",
        covariate="lr",
        needs_runs="Figure 5 is the spread over every LR in [1e-5, 1e-4] and seed; the tables print "
        "only the best-LR mean per seed",
    ),
    Claim(
        "biphasic_beats_mlm",
        "At a fixed budget, CLM then MLM (25/75 and 50/50 splits) beats MLM only",
        "Sec. 5, Fig. 6, Tables 10-13",
        "difference",
        {
            "objective": "clm+mlm",
            "masking_ratio": DEFAULT_MASKING_RATIO,
            "clm_share": (0.25, 0.5),
            "size": "610m",
            "final": True,
        },
        {**MLM40, "size": "610m", "final": True, "schedule_steps": tuple(BIPHASIC_SPLITS)},
        ("schedule_steps", "dataset"),
        "greater",
        "points",
    ),
    Claim(
        "biphasic_less_ratio_sensitive",
        "After a CLM phase, the masking ratio of the MLM phase matters less",
        "Sec. 5, Fig. 7",
        "spread",
        {"objective": "clm+mlm", "clm_steps": CLM_STEPS_BEFORE_MASKING, "size": "610m", **FINAL_42K},
        {"objective": "mlm", "size": "610m", **FINAL_42K},
        ("dataset",),
        "less",
        "points of standard deviation",
        covariate="masking_tenths",
        needs_runs="Figure 7's 40k CLM + 2k MLM models (610m-clm-40k-mlm{20,30,40,50}-42k) are in "
        "no table; the paper plots them from its raw runs",
    ),
    Claim(
        "cpt_clm_base_beats_mlm_base",
        "Continued MLM pretraining (22k steps) of a CLM model beats continuing an MLM model",
        "Sec. 5, Fig. 8, Tables 14-17",
        "difference",
        {"objective": "cpt", "cpt_base_objective": "clm", "cpt_steps": LONGEST_CPT},
        {"objective": "cpt", "cpt_base_objective": "mlm", "cpt_steps": LONGEST_CPT},
        ("dataset",),
        "greater",
        "points",
    ),
)


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
    """The model-description columns plus those the claims select on: final (the checkpoint is
    its schedule's last), clm_share (CLM share of the steps, to the nearest quarter: 3k of 12k,
    5k of 22k, 10k of 42k are all 25%), log2_params, masking_tenths (masking ratio x 10)."""
    out = pd.concat([cells.reset_index(drop=True), describe_models(cells["model"].reset_index(drop=True))], axis=1)
    out["final"] = out["checkpoint_step"] == out["schedule_steps"]
    steps = (out["clm_steps"] + out["mlm_steps"]).astype(float)
    out["clm_share"] = np.round(4 * out["clm_steps"].astype(float) / steps.where(steps > 0)) / 4
    out["log2_params"] = np.log2([_size_params(s) for s in out["size"]])
    out["masking_tenths"] = np.round(out["masking_ratio"].astype(float) * 10, 6)
    return out


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
    cells = describe_cells(grouped.agg(mean="mean", sd="std", n_seeds="size").reset_index())
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


# --- selecting cells and building contrasts -------------------------------------------------------
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


def _groups(claim: Claim, cells: pd.DataFrame) -> dict[tuple, dict[int, float]]:
    """Matched groups -> {cell row: weight} of (mean of treatment) - (mean of control) there."""
    treatment = select_cells(cells, claim.treatment, claim.task_types)
    if treatment.empty:
        raise NotTestable(
            f"no cells match the treatment ({_describe_selector(claim.treatment)}) on {'/'.join(claim.task_types)}"
        )
    control_groups = None
    if claim.control is not None:
        control = select_cells(cells, claim.control, claim.task_types)
        if control.empty:
            raise NotTestable(
                f"no cells match the control ({_describe_selector(claim.control)}) on {'/'.join(claim.task_types)}"
            )
        control_groups = _keyed_rows(control, claim.pair_on)
    groups = {}
    for key, mine in sorted(_keyed_rows(treatment, claim.pair_on).items()):
        weights = {i: 1.0 / len(mine) for i in mine}
        if control_groups is not None:
            theirs = control_groups.get(key)
            if theirs is None:
                continue
            weights.update({i: -1.0 / len(theirs) for i in theirs})
        groups[key] = weights
    if not groups:
        raise NotTestable(f"no {'/'.join(claim.pair_on)} has both treatment and control cells")
    return groups


def _estimated(claim: Claim, cells: pd.DataFrame, groups: dict) -> dict:
    if not claim.estimate_on:
        return groups
    kept = select_cells(cells, claim.estimate_on, claim.task_types).index
    chosen = {k: w for k, w in groups.items() if set(w) <= set(kept)}
    if not chosen:
        raise NotTestable(f"no matched groups with {_describe_selector(claim.estimate_on)}")
    return chosen


def contrast_weights(claim: Claim, cells: pd.DataFrame) -> tuple[dict[int, float], int]:
    """{cell row: weight} of the claim's linear contrast of cell means, and the number of groups
    (or strata) it averages. Raises NotTestable with the reason."""
    groups = _estimated(claim, cells, _groups(claim, cells))
    degree = DEGREE[claim.test]
    weights: dict[int, float] = {}
    if degree == 0:
        for group in groups.values():
            for cell, w in group.items():
                weights[cell] = weights.get(cell, 0.0) + w / len(groups)
        return weights, len(groups)
    position = claim.pair_on.index(claim.covariate)
    strata: dict[tuple, list[tuple[float, dict]]] = {}
    for key, group in groups.items():
        x = key[position]
        if x is None or not np.isfinite(float(x)):
            continue
        strata.setdefault(key[:position] + key[position + 1 :], []).append((float(x), group))
    strata = {k: v for k, v in strata.items() if len({x for x, _ in v}) > degree}
    if not strata:
        raise NotTestable(
            f"no {'/'.join(c for c in claim.pair_on if c != claim.covariate)} has "
            f"{degree + 1} or more values of {claim.covariate} to fit"
        )
    for levels in strata.values():
        x = np.array([x for x, _ in levels])
        # Row `degree` of the pseudo-inverse of [1, x, ..., x^degree]: the OLS coefficient of
        # x^degree as weights on the levels.
        coefficient = np.linalg.pinv(np.vander(x, degree + 1, increasing=True))[degree]
        for c, (_, group) in zip(coefficient, levels):
            for cell, w in group.items():
                weights[cell] = weights.get(cell, 0.0) + c * w / len(strata)
    return weights, len(strata)


# --- evaluation -----------------------------------------------------------------------------------
def _bootstrap(replicates: np.ndarray | None, reps_name: str) -> dict:
    nan = float("nan")
    if replicates is None:
        return {
            f"{reps_name}_low": nan,
            f"{reps_name}_high": nan,
            f"{reps_name}_low_mcse": nan,
            f"{reps_name}_high_mcse": nan,
        }
    bounds = percentile_bounds(replicates)
    return {
        f"{reps_name}_low": float(bounds.low[0]),
        f"{reps_name}_high": float(bounds.high[0]),
        f"{reps_name}_low_mcse": float(bounds.low_mcse[0]),
        f"{reps_name}_high_mcse": float(bounds.high_mcse[0]),
    }


def _seed_by_x(rows: pd.DataFrame, column: str, values: str) -> np.ndarray:
    """(seeds x `column` values) matrix of `values`, keeping only seeds that have every column."""
    seeds, seed_at = np.unique(rows["seed"].to_numpy(), return_inverse=True)
    xs, x_at = np.unique(rows[column].to_numpy(), return_inverse=True)
    matrix = np.full((len(seeds), len(xs)), np.nan)
    matrix[seed_at, x_at] = rows[values].to_numpy()
    return matrix[~np.isnan(matrix).any(axis=1)]


def _seed_matrix(inputs: ClaimInputs, cells: list[int]) -> np.ndarray:
    """(cells x seeds) scores over the seeds every one of these cells has."""
    scores = inputs.seed_scores[inputs.seed_scores["cell"].isin(cells)]
    local = scores.assign(cell=scores["cell"].map({c: i for i, c in enumerate(cells)}))
    return _seed_by_x(local, "cell", "score").T


def _contrast_claim(claim: Claim, inputs: ClaimInputs, reps: int, rng_seed: int) -> dict:
    weights, n_groups = contrast_weights(claim, inputs.cells)
    cells = sorted(weights)
    w = np.array([weights[c] for c in cells])
    chosen = inputs.cells.loc[cells]
    sd, n_seeds = chosen["sd"].to_numpy(dtype=float), chosen["n_seeds"].to_numpy()
    if (n_seeds < 2).any():
        few = chosen[n_seeds < 2].iloc[0]
        raise NotTestable(f"{few.model}/{few.dataset} has fewer than 2 seeds")
    if claim.test == "equivalence":
        if inputs.published:  # per-seed contrasts with the contrast's mean and (independent cells) sd
            per_seed = pseudo_seeds(
                float(w @ chosen["mean"].to_numpy()), math.sqrt(float(np.sum(w**2 * sd**2))), PUBLISHED_SEEDS
            )
        else:
            matrix = _seed_matrix(inputs, cells)
            if matrix.shape[1] < 2:
                raise NotTestable("fewer than 2 seeds common to every cell of the claim")
            per_seed = w @ matrix
        fit = equivalence_fit(per_seed, claim.margin)
    else:
        scores = inputs.seed_scores[inputs.seed_scores["cell"].isin(cells)]
        local = np.searchsorted(cells, scores["cell"].to_numpy())
        fit = contrast_fit(scores["score"].to_numpy(), local, w)
    paper_hw = Z_95 * math.sqrt(float(np.sum(w**2 * sd**2 / n_seeds)))
    row = _fit_row(fit, claim, n_runs=int(n_seeds.sum()), n_groups=n_groups)
    row.update(paper_low=fit.estimate - paper_hw, paper_high=fit.estimate + paper_hw)
    if inputs.seed_replicates is not None:
        row.update(_bootstrap(inputs.seed_replicates[:, cells].astype(np.float64) @ w, "seed_boot"))
        design = inputs.design_replicates[:, cells].astype(np.float64) @ w if inputs.hierarchical[cells].all() else None
        row.update(_bootstrap(design, "instance_boot"))
        row["boot_reps"] = inputs.seed_replicates.shape[0]
        if claim.test in ("difference", "equivalence"):
            row.update(_rliable(claim, inputs, reps, rng_seed))
    if claim.crossover_on:
        row["crossover"] = crossover_summary(claim, inputs, reps, rng_seed)
    return row


def _rliable(claim: Claim, inputs: ClaimInputs, reps: int, rng_seed: int) -> dict:
    groups = _estimated(claim, inputs.cells, _groups(claim, inputs.cells))
    by_cell = inputs.scores_by_cell
    treatment = [np.concatenate([by_cell[c] for c, w in g.items() if w > 0]) for g in groups.values()]
    control = [np.concatenate([by_cell[c] for c, w in g.items() if w < 0]) for g in groups.values()]
    summary = rliable_summary(treatment, control, reps, keyed_rng(rng_seed, ("rliable", claim.id)))
    return {
        "iqm_difference": summary.iqm_difference,
        "iqm_low": summary.iqm_low,
        "iqm_high": summary.iqm_high,
        "prob_improvement": summary.probability_of_improvement,
        "poi_low": summary.poi_low,
        "poi_high": summary.poi_high,
    }


def _fit_row(fit: Fit, claim: Claim, n_runs: int, n_groups: int) -> dict:
    return {
        "estimate": fit.estimate,
        "ci_low": fit.ci_low,
        "ci_high": fit.ci_high,
        "p_value": fit.p_value,
        "n_runs": n_runs,
        "n_groups": n_groups,
        "model": fit.model,
    }


def _lr_spreads(inputs: ClaimInputs, cells: list[int]) -> list[np.ndarray]:
    """Per cell: (seeds x LRs) test scores of the runs with an LR in Figure 5's range."""
    low, high = LR_SENSITIVITY_RANGE
    runs = inputs.runs[
        (inputs.runs["lr"] >= low * (1 - 1e-9))
        & (inputs.runs["lr"] <= high * (1 + 1e-9))
        & inputs.runs["cell"].isin(cells)
    ]
    by_cell = dict(iter(runs.groupby("cell")))
    matrices = []
    for cell in cells:
        matrix = _seed_by_x(by_cell[cell], "lr", "score") if cell in by_cell else np.empty((0, 0))
        if matrix.size < 2:
            row = inputs.cells.loc[cell]
            raise NotTestable(
                f"{row.model}/{row.dataset} has fewer than 2 runs with an LR in "
                f"[{low:g}, {high:g}] (every LR of a seed is needed)"
            )
        matrices.append(matrix)
    return matrices


def _spread_claim(claim: Claim, inputs: ClaimInputs, reps: int, rng_seed: int) -> dict:
    if not inputs.from_runs:
        raise NotTestable(claim.needs_runs)
    groups = _groups(claim, inputs.cells)
    treatment = [[c for c, w in g.items() if w > 0] for g in groups.values()]
    control = [[c for c, w in g.items() if w < 0] for g in groups.values()]
    if claim.covariate == "lr":
        pairs = [(t, c) for t, c in zip(treatment, control) if len(t) == 1 and len(c) == 1]
        if len(pairs) < 2:
            raise NotTestable("fewer than 2 groups with one treatment and one control cell")
        t_runs = _lr_spreads(inputs, [t[0] for t, _ in pairs])
        c_runs = _lr_spreads(inputs, [c[0] for _, c in pairs])
        differences = np.array([t.std(ddof=1) - c.std(ddof=1) for t, c in zip(t_runs, c_runs)])
        n_runs = sum(m.size for m in t_runs + c_runs)
        rng = keyed_rng(rng_seed, ("spread", claim.id))

        def resampled_sd(matrix):  # seeds drawn with replacement, each with all its LRs
            drawn = matrix[rng.integers(0, matrix.shape[0], size=(reps, matrix.shape[0]))]
            return drawn.reshape(reps, -1).std(axis=1, ddof=1)

        seed_boot = (
            np.mean([resampled_sd(t) - resampled_sd(c) for t, c in zip(t_runs, c_runs)], axis=0) if reps > 0 else None
        )
        design_boot = None
    else:
        pairs = [(t, c) for t, c in zip(treatment, control) if len(t) > 1 and len(c) > 1]
        if len(pairs) < 2:
            raise NotTestable(
                f"fewer than 2 {'/'.join(claim.pair_on)} with 2 or more values of {claim.covariate} on both sides"
            )
        means = inputs.cells["mean"].to_numpy()
        differences = np.array([means[t].std(ddof=1) - means[c].std(ddof=1) for t, c in pairs])
        n_runs = int(inputs.cells.loc[[x for t, c in pairs for x in t + c], "n_seeds"].sum())

        def replicate_spread(replicates):
            return np.mean(
                [
                    replicates[:, t].astype(np.float64).std(axis=1, ddof=1)
                    - replicates[:, c].astype(np.float64).std(axis=1, ddof=1)
                    for t, c in pairs
                ],
                axis=0,
            )

        seed_boot = replicate_spread(inputs.seed_replicates) if inputs.seed_replicates is not None else None
        every = [x for t, c in pairs for x in t + c]
        design_boot = (
            replicate_spread(inputs.design_replicates)
            if inputs.design_replicates is not None and inputs.hierarchical[every].all()
            else None
        )
    fit = paired_fit(differences, "/".join(claim.pair_on) + " groups")
    row = _fit_row(fit, claim, n_runs=n_runs, n_groups=len(differences))
    row.update(_bootstrap(seed_boot, "seed_boot"))
    row.update(_bootstrap(design_boot, "instance_boot"))
    if seed_boot is not None:
        row["boot_reps"] = reps
    return row


def crossover_summary(claim: Claim, inputs: ClaimInputs, reps: int, rng_seed: int) -> str:
    """Where treatment - control changes sign along `crossover_on`, per task type and overall,
    interpolated linearly in log10(step) between the checkpoints around it, with a 95% interval:
    the seed bootstrap for runs; for published numbers a parametric bootstrap of the cell means
    (normal, sd / sqrt(5) each)."""
    groups = _groups(claim, inputs.cells)
    position = claim.pair_on.index(claim.crossover_on)
    used = sorted({c for g in groups.values() for c in g})  # the claim's cells, renumbered 0..n-1
    renumber = {c: i for i, c in enumerate(used)}
    groups = {k: {renumber[c]: w for c, w in g.items()} for k, g in groups.items()}
    chosen = inputs.cells.loc[used]
    means = chosen["mean"].to_numpy()
    task_types = chosen["task_type"].to_numpy()
    if inputs.seed_replicates is not None:
        replicates = inputs.seed_replicates[:, used].astype(np.float64)
    else:
        rng = keyed_rng(rng_seed, ("crossover", claim.id))
        se = (chosen["sd"] / np.sqrt(chosen["n_seeds"])).fillna(0.0).to_numpy()
        replicates = means + se * rng.standard_normal((max(reps, 1), len(means)))
    parts = []
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
        point = crossovers(np.array(steps, dtype=float), weights @ means)[0]
        draws = crossovers(np.array(steps, dtype=float), replicates @ weights.T)
        low, high = np.quantile(draws, [0.025, 0.975], method="inverted_cdf")
        parts.append(f"{task_type}: {_fmt_step(point, steps)} [{_fmt_step(low, steps)}, {_fmt_step(high, steps)}]")
    return "; ".join(parts)


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


def evaluate_claim(claim: Claim, inputs: ClaimInputs, reps: int = 10000, rng_seed: int = 0) -> dict:
    """One report row (verdict filled in later by `with_verdicts`); never raises on data a source
    lacks: the claim is then NOT_TESTABLE with the reason."""
    row = {
        "claim": claim.id,
        "sentence": claim.sentence,
        "location": claim.location,
        "test": claim.test,
        "direction": claim.direction,
        "unit": claim.unit,
        "margin": claim.margin,
        "source": inputs.source,
        "verdict": "",
    }
    try:
        if claim.needs_runs and not inputs.from_runs:
            raise NotTestable(claim.needs_runs)
        evaluated = (
            _spread_claim(claim, inputs, reps, rng_seed)
            if claim.test == "spread"
            else _contrast_claim(claim, inputs, reps, rng_seed)
        )
        if inputs.published:
            evaluated["model"] += ", on 5 pseudo-seeds per printed cell"
        row.update(evaluated)
        row["reason"] = ""
    except NotTestable as exc:
        row.update(verdict=NOT_TESTABLE, reason=str(exc), n_runs=0)
    return row


def verdict(
    direction: str, estimate: float, p_holm: float, ci_low: float, ci_high: float, margin: float | None = None
) -> str:
    """docs/claims.md, "Verdicts"."""
    if direction == "equivalent":
        if p_holm < ALPHA:
            return SUPPORTED
        return CONTRADICTED if ci_low > margin or ci_high < -margin else INCONCLUSIVE
    if p_holm >= ALPHA or estimate == 0:
        return INCONCLUSIVE
    return SUPPORTED if (estimate > 0) == (direction == "greater") else CONTRADICTED


def with_verdicts(rows: list[dict]) -> pd.DataFrame:
    """Holm-adjusted p-values across every testable claim, then each claim's verdict."""
    report = pd.DataFrame(rows).reindex(columns=CSV_COLUMNS + DETAIL_COLUMNS)
    testable = report["verdict"] != NOT_TESTABLE
    report.loc[~testable, "p_holm"] = np.nan
    if testable.any():
        report.loc[testable, "p_holm"] = multipletests(
            report.loc[testable, "p_value"].astype(float), alpha=ALPHA, method="holm"
        )[1]
        report.loc[testable, "verdict"] = [
            verdict(r.direction, r.estimate, r.p_holm, r.ci_low, r.ci_high, r.margin)
            for r in report[testable].itertuples()
        ]
    report["n_runs"] = report["n_runs"].fillna(0).astype(int)
    return report


def evaluate_claims(
    inputs: ClaimInputs, claims: tuple[Claim, ...] = CLAIMS, reps: int = 10000, rng_seed: int = 0
) -> pd.DataFrame:
    """The report: one row per claim, CSV_COLUMNS then DETAIL_COLUMNS."""
    return with_verdicts([evaluate_claim(c, inputs, reps, rng_seed) for c in claims])
