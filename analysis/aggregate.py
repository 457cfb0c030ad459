"""Run records -> cells: per-seed LR selection, means, the paper's interval and a bootstrap CI.

The rule that reproduces the published tables (SPEC section 5): for each seed, the LR with the
best validation score is selected (it may differ per seed); the cell is the mean of those
seeds' test scores with half-width 1.96 * sd(ddof=1) / sqrt(n). A category average is computed
per seed (mean of that seed's selected test scores over the task type's 3 datasets) and then
aggregated the same way.
"""
from __future__ import annotations

import hashlib
from typing import Iterable

import numpy as np
import pandas as pd
from tqdm import tqdm

from analysis.cells import CELL_COLUMNS, describe_models
from analysis.intervals import hierarchical_bootstrap_ci, paper_interval, seed_bootstrap_ci
from contracts.paper import AVERAGE, DATASETS, datasets_of
from contracts.run_record import RunRecord

RUN_KEY = ["model", "task_type", "dataset", "train_set"]
EXTRA_COLUMNS = ["train_set", "bootstrap", "seeds", "selected_lrs", "seed_test_scores"]
BOOTSTRAP_SEEDS = "seeds"
BOOTSTRAP_HIERARCHICAL = "seeds+instances"


def _records_frame(records: Iterable[RunRecord]) -> pd.DataFrame:
    rows = [{
        "model": r.model, "task_type": r.task_type, "dataset": r.dataset,
        "train_set": r.train_set or "", "lr": float(r.lr), "seed": int(r.seed),
        "validation_score": float(r.validation_score), "test_score": float(r.test_score),
        "test_instance_scores": r.test_instance_scores,
    } for r in records]
    columns = [*RUN_KEY, "lr", "seed", "validation_score", "test_score", "test_instance_scores"]
    return pd.DataFrame(rows, columns=columns)


def select_best_lr_per_seed(records: Iterable[RunRecord]) -> pd.DataFrame:
    """One row per (model, task_type, dataset, train_set, seed): the run whose LR has the best
    validation score for that seed. Columns: the key, seed, lr, validation_score, test_score,
    test_instance_scores (tuple or None) and n_lrs (how many LRs that seed had).

    Ties (equal validation scores) go to the smallest LR, so the choice never depends on the
    order of the records. Two records of the same run (same key, LR and seed) are an error.
    `train_set` is "" when the model was fine-tuned on the evaluated dataset itself.
    """
    frame = _records_frame(records)
    duplicated = frame.duplicated([*RUN_KEY, "lr", "seed"], keep=False)
    if duplicated.any():
        row = frame[duplicated].iloc[0]
        raise ValueError(
            f"duplicate run records for model={row.model} task_type={row.task_type} "
            f"dataset={row.dataset} train_set={row.train_set or None} lr={row.lr:g} seed={row.seed}; "
            "pass each run once")
    group = [*RUN_KEY, "seed"]
    n_lrs = frame.groupby(group, sort=False)["lr"].transform("size")
    ordered = frame.assign(n_lrs=n_lrs).sort_values(
        [*group, "validation_score", "lr"], ascending=[True] * len(group) + [False, True],
        kind="mergesort")
    return ordered.drop_duplicates(group, keep="first").reset_index(drop=True)


def _cell_rng_seed(rng_seed: int, key: tuple) -> np.random.SeedSequence:
    """A generator seed per cell, so a cell's bootstrap does not depend on which others exist."""
    digest = hashlib.sha256(repr(key).encode()).digest()
    return np.random.SeedSequence(rng_seed, spawn_key=(int.from_bytes(digest[:8], "little"),))


def _summarise(seed_rows: list[pd.DataFrame], reps: int, rng_seed) -> dict:
    """Cell statistics from the selected runs of one or more datasets (rows aligned by seed)."""
    seeds = seed_rows[0]["seed"].tolist()
    per_seed = np.mean([rows["test_score"].to_numpy() for rows in seed_rows], axis=0)
    instances = [rows["test_instance_scores"].tolist() for rows in seed_rows]
    hierarchical = all(
        all(x is not None for x in lists) and len({len(x) for x in lists}) == 1
        for lists in instances)
    if hierarchical:
        low, high = hierarchical_bootstrap_ci(
            [np.asarray(lists, dtype=float) for lists in instances], reps=reps, rng_seed=rng_seed)
    else:
        low, high = seed_bootstrap_ci(per_seed, reps=reps, rng_seed=rng_seed)
    lrs = ";".join("/".join(f"{lr:.0e}" for lr in lr_set)
                   for lr_set in zip(*[rows["lr"].tolist() for rows in seed_rows]))
    return {
        "n_seeds": len(seeds), "mean": float(per_seed.mean()),
        "ci_halfwidth": paper_interval(per_seed), "boot_low": low, "boot_high": high,
        "bootstrap": (BOOTSTRAP_HIERARCHICAL if hierarchical else BOOTSTRAP_SEEDS)
        if len(seeds) > 1 else "none",
        "seeds": ";".join(map(str, seeds)), "selected_lrs": lrs,
        "seed_test_scores": ";".join(f"{x:.4f}" for x in per_seed),
    }


def aggregate_runs(records: Iterable[RunRecord], reps: int = 10000, rng_seed: int = 0) -> pd.DataFrame:
    """Cells (analysis.cells.CELL_COLUMNS plus EXTRA_COLUMNS) for every dataset with runs, and a
    category average wherever all 3 datasets of a task type are present for a model.

    `bootstrap` says which bootstrap gave boot_low/boot_high: "seeds+instances" when every
    selected run of the cell has test instance scores (of one length per dataset), else "seeds";
    `selected_lrs` lists the chosen LR per seed (per dataset, "/"-joined, for averages).
    Averages use the seeds present in all 3 datasets.
    """
    selected = select_best_lr_per_seed(records)
    rows = []
    groups = selected.groupby(RUN_KEY, sort=True)
    for key, group in tqdm(groups, total=groups.ngroups, desc="cells", disable=None, leave=False):
        group = group.sort_values("seed")
        rows.append({**dict(zip(RUN_KEY, key)),
                     **_summarise([group], reps, _cell_rng_seed(rng_seed, key))})
    for (model, task_type, train_set), group in selected.groupby(["model", "task_type", "train_set"]):
        wanted = [d.id for d in datasets_of(task_type)]
        by_dataset = {d: g.set_index("seed") for d, g in group.groupby("dataset") if d in wanted}
        if len(by_dataset) != len(wanted):
            continue
        common = sorted(set.intersection(*(set(g.index) for g in by_dataset.values())))
        if not common:
            continue
        seed_rows = [by_dataset[d].loc[common].reset_index() for d in wanted]
        key = (model, task_type, AVERAGE, train_set)
        rows.append({**dict(zip(RUN_KEY, key)),
                     **_summarise(seed_rows, reps, _cell_rng_seed(rng_seed, key))})
    cells = pd.DataFrame(rows, columns=[*RUN_KEY, "n_seeds", "mean", "ci_halfwidth", "boot_low",
                                        "boot_high", *EXTRA_COLUMNS[1:]])
    cells = pd.concat([cells, describe_models(cells["model"])], axis=1)
    order = {d.id: i for i, d in enumerate(DATASETS)}  # the paper's column order
    cells["_order"] = [order.get(d, 98 if d != AVERAGE else 99) for d in cells["dataset"]]
    cells = cells.sort_values(["model", "task_type", "train_set", "_order", "dataset"], kind="mergesort")
    return cells[[*CELL_COLUMNS, *EXTRA_COLUMNS]].reset_index(drop=True)
