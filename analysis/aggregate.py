"""Run records -> cells: per-seed LR selection, means, the paper's interval and bootstrap CIs.

The rule that reproduces the published tables (docs/analysis.md): for each seed, the LR with the
best validation score is selected (it may differ per seed); the cell is the mean of those
seeds' test scores with half-width 1.96 * sd(ddof=1) / sqrt(n). A category average is computed
per seed (mean of that seed's selected test scores over the task type's 3 datasets) and then
aggregated the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd
from tqdm import tqdm

from analysis.cells import CELL_COLUMNS, describe_models
from analysis.intervals import (
    clip_to_scale,
    instance_mean_replicates,
    keyed_rng,
    paper_interval,
    percentile_bounds,
    seed_weights,
)
from analysis.small_sample import design_bootstrap_calibration, seed_bootstrap_calibration, stretch
from contracts.paper import AVERAGE, DATASETS, datasets_of
from contracts.run_record import RunRecord

RUN_KEY = ["model", "task_type", "dataset", "train_set"]
EXTRA_COLUMNS = [
    "train_set",
    "bootstrap",
    "seed_boot_low",
    "seed_boot_high",
    "boot_reps",
    "boot_low_mcse",
    "boot_high_mcse",
    "boot_factor",
    "seed_boot_factor",
    "seeds",
    "selected_lrs",
    "seed_test_scores",
    "at_chance_runs",
    "interval_clipped",
]
# The seeds x instances interval's df from the seed variance's 75% upper bound (small_sample).
DF_SEED_UPPER = 0.75
BOOTSTRAP_SEEDS = "seeds"
BOOTSTRAP_HIERARCHICAL = "seeds+instances"


RUN_COLUMNS = [*RUN_KEY, "lr", "seed", "validation_score", "test_score"]


def scan_runs(records: Iterable[RunRecord]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One pass over the records: (selected, runs).

    selected: one row per (model, task_type, dataset, train_set, seed), the run whose LR has the
    best validation score for that seed, with its test_instance_scores (a float32 array, the run
    store's precision, docs/analysis.md "Run store"; or None) and n_lrs
    (how many LRs that seed had); rows ordered by (model, task_type, dataset, train_set, seed).
    runs: every run's RUN_COLUMNS (no instance scores).

    Ties (equal validation scores) go to the smallest LR, so the choice never depends on the
    order of the records. Two records of the same run (same key, LR and seed) are an error.
    `train_set` is "" when the model was fine-tuned on the evaluated dataset itself. Only the
    best run so far keeps its instance scores, so a stream of records never holds them all.
    """
    rows, seen, best, n_lrs = [], set(), {}, {}
    for r in records:
        lr, validation = float(r.lr), float(r.validation_score)
        key = (r.model, r.task_type, r.dataset, r.train_set or "", int(r.seed))
        if (key, lr) in seen:
            raise ValueError(
                f"duplicate run records for model={r.model} task_type={r.task_type} dataset={r.dataset} "
                f"train_set={r.train_set} lr={lr:g} seed={r.seed}; pass each run once"
            )
        seen.add((key, lr))
        rows.append((*key[:4], lr, key[4], validation, float(r.test_score)))
        n_lrs[key] = n_lrs.get(key, 0) + 1
        current = best.get(key)
        if current is None or validation > current[1] or (validation == current[1] and lr < current[0]):
            instances = r.test_instance_scores
            best[key] = (
                lr,
                validation,
                float(r.test_score),
                None if instances is None else np.asarray(instances, dtype=np.float32),
                run_at_chance(r),
            )
    runs = pd.DataFrame(rows, columns=RUN_COLUMNS)
    ordered = sorted(best)
    selected = pd.DataFrame(
        [(*key[:4], best[key][0], key[4], *best[key][1:4], n_lrs[key], best[key][4]) for key in ordered],
        columns=[*RUN_COLUMNS, "test_instance_scores", "n_lrs", "at_chance"],
    )
    return selected, runs


def at_chance_cells(cells: pd.DataFrame) -> pd.DataFrame:
    """The dataset cells (not averages) whose selected runs include one at its chance level
    (`at_chance_runs`, issue 67); empty for cells that predate the count."""
    if "at_chance_runs" not in cells:
        return cells.iloc[0:0]
    return cells[(cells["at_chance_runs"] > 0) & (cells["dataset"] != AVERAGE)]


def at_chance_note(cells: pd.DataFrame) -> str | None:
    """One line naming the dataset cells whose selected runs include one at its chance level
    (`at_chance_runs`, issue 67); None when there is none."""
    flagged = at_chance_cells(cells)
    if flagged.empty:
        return None
    named = ", ".join(
        f"{m}/{d} ({n})" for m, d, n in flagged[["model", "dataset", "at_chance_runs"]].head(8).itertuples(index=False)
    )
    more = f" and {len(flagged) - 8} more" if len(flagged) > 8 else ""
    return (
        f"note: {len(flagged)} cells include selected runs at their chance level (a collapsed run in the mean; "
        f"cells.csv at_chance_runs): {named}{more}"
    )


def run_at_chance(record: RunRecord) -> bool:
    """Whether a record is flagged at its chance level (benchmarks.chance, issue 67); a record from
    before the flag, or one imported from the release, is not."""
    from benchmarks.chance import chance_flag

    return chance_flag(record.provenance) is not None


def lr_grid_gaps(runs: pd.DataFrame) -> list[str]:
    """One line per seed that lacks an LR which another seed of its cell has (a run that failed
    or is still missing): its LR is then selected from fewer candidates than the others'."""
    out = []
    for key, cell in runs.groupby(RUN_KEY, sort=True):
        grid = set(cell["lr"])
        for seed, own in cell.groupby("seed", sort=True):
            missing = sorted(grid - set(own["lr"]))
            if missing:
                model, _, dataset, train_set = key
                trained = f" (trained on {train_set})" if train_set else ""
                out.append(
                    f"{model} {dataset}{trained} seed {seed}: no run at LR {', '.join(f'{lr:g}' for lr in missing)} "
                    f"({len(own)} of the cell's {len(grid)} LRs); its LR is selected from the others"
                )
    return out


TIE_RULE = "ties go to the smallest LR (docs/analysis.md, 'Validation ties')"


def validation_ties(runs: pd.DataFrame) -> list[str]:
    """One line per seed whose best validation score is shared by several LRs (a small validation
    set at 100% at several LRs): which LRs tied and which one `scan_runs` picked (the smallest,
    TIE_RULE), so that a reader knows the choice was the rule's, not the data's."""
    if runs.empty:
        return []
    best = runs.groupby([*RUN_KEY, "seed"], sort=True)["validation_score"].transform("max")
    tied = runs[runs["validation_score"] == best]
    out = []
    for key, group in tied.groupby([*RUN_KEY, "seed"], sort=True):
        if len(group) < 2:
            continue
        model, _, dataset, train_set, seed = key
        lrs = sorted(group["lr"])
        trained = f" (trained on {train_set})" if train_set else ""
        out.append(
            f"{model} {dataset}{trained} seed {seed}: validation {group['validation_score'].iloc[0]:.2f} at LRs "
            f"{', '.join(f'{lr:g}' for lr in lrs)}; picked {lrs[0]:g}"
        )
    return out


def select_best_lr_per_seed(records: Iterable[RunRecord]) -> pd.DataFrame:
    """The `selected` frame of scan_runs: the best-validation LR of every seed."""
    return scan_runs(records)[0]


@dataclass(frozen=True)
class CellRuns:
    """The selected runs of one cell: a dataset, or a category average over several datasets."""

    key: tuple  # (model, task_type, dataset or AVERAGE, train_set)
    seeds: tuple[int, ...]
    rows: tuple[np.ndarray, ...]  # per dataset: positions in the selected frame, aligned by seed
    per_seed: np.ndarray  # mean over the datasets of each seed's selected test score
    hierarchical: bool  # every run has instance scores, of one length per dataset


def _cells_of(selected: pd.DataFrame, averages: bool) -> list[CellRuns]:
    """Dataset cells, then category averages wherever all 3 datasets of a task type are present
    (over the seeds present in all 3). Rows of `selected` are ordered by (RUN_KEY, seed)."""
    scores = selected["test_score"].to_numpy()
    seeds = selected["seed"].to_numpy()
    lengths = np.array([len(x) if x is not None else 0 for x in selected["test_instance_scores"]])

    def cell(key, rows):
        hierarchical = all(np.all(lengths[r] > 0) and np.all(lengths[r] == lengths[r][0]) for r in rows)
        return CellRuns(
            key,
            tuple(int(s) for s in seeds[rows[0]]),
            tuple(rows),
            np.mean([scores[r] for r in rows], axis=0),
            hierarchical,
        )

    if selected.empty:
        return []
    codes = selected.groupby(RUN_KEY, sort=False).ngroup().to_numpy()
    starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
    keys = selected[RUN_KEY].to_numpy()[starts]
    cells = [
        cell(tuple(key), [np.arange(start, stop)])
        for key, start, stop in zip(keys, starts, np.r_[starts[1:], len(selected)])
    ]
    if not averages:
        return cells
    # (model, task type, train set) -> dataset -> seed -> row in `selected`.
    positions: dict[tuple, dict[str, dict[int, int]]] = {}
    columns = ("model", "task_type", "train_set", "dataset")
    for pos, (model, task_type, train_set, dataset) in enumerate(zip(*(selected[c] for c in columns))):
        positions.setdefault((model, task_type, train_set), {}).setdefault(dataset, {})[int(seeds[pos])] = pos
    for (model, task_type, train_set), by_dataset in sorted(positions.items()):
        wanted = [d.id for d in datasets_of(task_type)]
        if not all(d in by_dataset for d in wanted):
            continue
        common = sorted(set.intersection(*(set(by_dataset[d]) for d in wanted)))
        if common:
            cells.append(
                cell(
                    (model, task_type, AVERAGE, train_set),
                    [np.array([by_dataset[d][s] for s in common]) for d in wanted],
                )
            )
    return cells


@dataclass(frozen=True)
class CellReplicates:
    """Bootstrap replicates of the means of some cells: column j belongs to cells[j]."""

    cells: list[CellRuns]
    seeds: np.ndarray  # (reps x cells): seeds resampled
    design: np.ndarray  # (reps x cells): seeds and instances resampled where the cell is hierarchical


def iter_cell_replicates(
    selected: pd.DataFrame, reps: int, rng_seed: int = 0, averages: bool = True
) -> Iterator[CellReplicates]:
    """Bootstrap replicates of every cell of the selected runs, one task type at a time (memory).

    A cell's seed draws come from a generator keyed by the cell, a test set's instance resample
    from one keyed by the test set (dataset, number of instances): the draws of a cell never
    depend on which other cells exist, and every model scored on a test set shares its resample,
    so differences between models are paired at the instance level.
    """
    cells = _cells_of(selected, averages)
    instances = selected["test_instance_scores"].to_numpy()
    datasets = selected["dataset"].to_numpy()
    for task_type in sorted({c.key[1] for c in cells}):
        group = [c for c in cells if c.key[1] == task_type]
        needed = sorted({int(p) for c in group if c.hierarchical for rows in c.rows for p in rows})
        by_test_set: dict[tuple, list[int]] = {}
        for p in needed:
            by_test_set.setdefault((task_type, datasets[p], len(instances[p])), []).append(p)
        # Instance-resampled means of the runs, (reps x runs) per test set; `column[p]` is run p's
        # column there (the runs of one cell and dataset always share a test set).
        replicates, test_set_of, column = {}, {}, np.full(len(selected), -1)
        for test_set, positions in by_test_set.items():
            matrix = np.array([instances[p] for p in positions], dtype=np.float32)
            replicates[test_set] = instance_mean_replicates(matrix, reps, keyed_rng(rng_seed, test_set))
            column[positions] = np.arange(len(positions))
            test_set_of.update(dict.fromkeys(positions, test_set))
        seed_reps = np.empty((reps, len(group)), dtype=np.float32)
        design_reps = np.empty((reps, len(group)), dtype=np.float32)
        for j, cell in enumerate(tqdm(group, desc=f"bootstrap {task_type}", disable=None, leave=False)):
            weights = seed_weights(len(cell.seeds), reps, keyed_rng(rng_seed, cell.key))
            seed_reps[:, j] = weights @ cell.per_seed
            if cell.hierarchical:
                per_seed = sum(replicates[test_set_of[int(rows[0])]][:, column[rows]] for rows in cell.rows)
                design_reps[:, j] = np.einsum("rs,rs->r", weights, per_seed) / len(cell.rows)
            else:
                design_reps[:, j] = seed_reps[:, j]
        yield CellReplicates(group, seed_reps, design_reps)


def aggregate_runs(records: Iterable[RunRecord], reps: int = 10000, rng_seed: int = 0) -> pd.DataFrame:
    """aggregate_selected of the best-validation LR per seed of the records."""
    return aggregate_selected(select_best_lr_per_seed(records), reps, rng_seed)


def aggregate_selected(selected: pd.DataFrame, reps: int = 10000, rng_seed: int = 0) -> pd.DataFrame:
    """Cells (analysis.cells.CELL_COLUMNS plus EXTRA_COLUMNS) for every dataset with runs, and a
    category average wherever all 3 datasets of a task type are present for a model.

    `bootstrap` says which bootstrap gave boot_low/boot_high: "seeds+instances" when every
    selected run of the cell has test instance scores (of one length per dataset), else "seeds";
    seed_boot_low/high is the seeds-only bootstrap in both cases; boot_reps is the number of
    replicates and boot_low_mcse/boot_high_mcse the Monte-Carlo standard errors of the bounds.
    Both bootstrap intervals are t-calibrated percentile intervals (`calibrated_bounds`):
    boot_factor / seed_boot_factor is how much each was widened about the mean.
    `selected_lrs` lists the chosen LR per seed (per dataset, "/"-joined, for averages).
    `at_chance_runs` counts the cell's selected runs flagged at their chance level.
    Both bootstrap intervals stay within the metric's scale [0, 100] (issue 90): a bound past it is
    clipped there and `interval_clipped` is True (the paper's half-width `ci_halfwidth` is kept as
    the paper computes it; docs/analysis.md, "Bounds at the scale's ends").
    Averages use the seeds present in all 3 datasets.
    """
    lrs = selected["lr"].to_numpy()
    flagged = selected["at_chance"].to_numpy(dtype=bool) if "at_chance" in selected else np.zeros(len(selected), bool)
    rows = []
    for group in iter_cell_replicates(selected, reps, rng_seed):
        design = percentile_bounds(group.design)
        seeds = percentile_bounds(group.seeds)
        for j, cell in enumerate(group.cells):
            several = len(cell.seeds) > 1
            mean = float(cell.per_seed.mean())
            bounds = calibrated_bounds(cell, mean, group, seeds, design, j) if several else None
            clipped = False
            if bounds is not None:
                bounds["low"], bounds["high"], clipped_design = clip_to_scale(bounds["low"], bounds["high"])
                bounds["seed_low"], bounds["seed_high"], clipped_seeds = clip_to_scale(
                    bounds["seed_low"], bounds["seed_high"]
                )
                clipped = clipped_design or clipped_seeds

            def value(name, bounds=bounds):  # 4 decimals: float32 replicates, bounds move ~0.01
                return round(float(bounds[name]), 4) if bounds is not None else float("nan")

            rows.append(
                {
                    **dict(zip(RUN_KEY, cell.key)),
                    "n_seeds": len(cell.seeds),
                    "mean": mean,
                    "ci_halfwidth": paper_interval(cell.per_seed),
                    "boot_low": value("low"),
                    "boot_high": value("high"),
                    "bootstrap": (BOOTSTRAP_HIERARCHICAL if cell.hierarchical else BOOTSTRAP_SEEDS)
                    if several
                    else "none",
                    "seed_boot_low": value("seed_low"),
                    "seed_boot_high": value("seed_high"),
                    "boot_reps": reps if several else 0,
                    "boot_low_mcse": value("low_mcse"),
                    "boot_high_mcse": value("high_mcse"),
                    "boot_factor": value("factor"),
                    "seed_boot_factor": value("seed_factor"),
                    "seeds": ";".join(map(str, cell.seeds)),
                    "selected_lrs": ";".join(
                        "/".join(f"{lr:.0e}" for lr in lr_set) for lr_set in zip(*[lrs[r] for r in cell.rows])
                    ),
                    "seed_test_scores": ";".join(f"{x:.4f}" for x in cell.per_seed),
                    # selected runs of the cell at their chance level (a collapsed run in the mean)
                    "at_chance_runs": int(sum(flagged[r].sum() for r in cell.rows)),
                    # a bound of seed_boot_* or boot_* clipped at 0 or 100 (issue 90)
                    "interval_clipped": clipped,
                }
            )
    cells = pd.DataFrame(
        rows, columns=[*RUN_KEY, "n_seeds", "mean", "ci_halfwidth", "boot_low", "boot_high", *EXTRA_COLUMNS[1:]]
    )
    cells = pd.concat([cells, describe_models(cells["model"])], axis=1)
    order = {d.id: i for i, d in enumerate(DATASETS)}  # the paper's column order
    cells["_order"] = [order.get(d, 98 if d != AVERAGE else 99) for d in cells["dataset"]]
    cells = cells.sort_values(["model", "task_type", "train_set", "_order", "dataset"], kind="mergesort")
    return cells[[*CELL_COLUMNS, *EXTRA_COLUMNS]].reset_index(drop=True)


def calibrated_bounds(cell: CellRuns, mean: float, group: CellReplicates, seeds, design, j: int) -> dict:
    """The t-calibrated percentile intervals of cell j (docs/analysis.md, "Bootstrap intervals").

    A percentile interval of n resampled seeds is too narrow twice over (82% at 5 seeds, 75% at
    3, measured by `python -m analysis coverage`): resampling shrinks the seed variance by
    (n - 1) / n, and normal quantiles ignore that the variance is estimated from n values. Each
    bound is moved away from the mean by sqrt(V / V_boot) * t_df / z (analysis.small_sample):
    for the seeds bootstrap V = s^2 / n and df = n - 1; for the seeds x instances bootstrap the
    instance part (design minus seed replicate variance) is kept as it is and df is
    Welch-Satterthwaite over the two parts, with the seed variance at its 75% upper bound in the
    df only (DF_SEED_UPPER: the plug-in df covers about 92% at 3 seeds where seeds dominate). The
    interval stays a bootstrap interval (its shape, skew included, comes from the replicates);
    only its width is corrected.
    """
    n = len(cell.seeds)
    sd = float(np.std(cell.per_seed, ddof=1))
    seed_cal = seed_bootstrap_calibration([1.0], [sd], [n])
    seed_low, seed_high = stretch(mean, float(seeds.low[j]), float(seeds.high[j]), seed_cal.factor)
    out = {"seed_low": seed_low, "seed_high": seed_high, "seed_factor": seed_cal.factor}
    if cell.hierarchical:
        cal = design_bootstrap_calibration(
            seed_cal,
            sd**2 / n,
            float(np.var(group.seeds[:, j], dtype=np.float64)),
            float(np.var(group.design[:, j], dtype=np.float64)),
            df_seed_upper=DF_SEED_UPPER,
        )
        low, high = stretch(mean, float(design.low[j]), float(design.high[j]), cal.factor)
        factor = cal.factor
    else:
        low, high, factor = seed_low, seed_high, seed_cal.factor
    return {
        **out,
        "low": low,
        "high": high,
        "factor": factor,
        "low_mcse": float(design.low_mcse[j]) * factor,
        "high_mcse": float(design.high_mcse[j]) * factor,
    }
