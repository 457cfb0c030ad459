"""What the claims are evaluated from: cells (one per model x task type x dataset, with mean, seed
SD and seed count) built from the published tables or from run records, and the paper's design
cells, which say what each claim needs (docs/claims.md, "From published numbers only").

Published tables: each cell's seed sd is recovered from its printed half-width by the paper's
interval rule (hw = 1.96 sd / sqrt(5)). Runs: the best-validation LR per seed (the paper's
selection); a cell whose seeds all scored the same gets the SD its seed count allows ("Floors").
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property, lru_cache

import numpy as np
import pandas as pd

from analysis.aggregate import iter_cell_replicates, scan_runs
from analysis.bench import release_models
from analysis.cells import describe_models
from analysis.intervals import halfwidth_sd
from analysis.models import pseudo_seeds
from analysis.published import load_published_cells
from analysis.small_sample import (
    equal_seeds_sd,
    score_resolution,
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
            "sd": halfwidth_sd(cells["ci_halfwidth"], PUBLISHED_SEEDS),
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


@lru_cache(maxsize=1)
def _release_positions() -> dict[str, int]:
    return {m: i for i, m in enumerate(release_models())}


def release_order(models: Iterable[str]) -> list[str]:
    """Models in the release's order (the order of Tables 2-17), others after them."""
    order = _release_positions()
    return sorted(models, key=lambda m: (order.get(m, len(order)), m))
