import math

import numpy as np
import pytest

from analysis.aggregate import aggregate_runs
from analysis.cells import CELL_COLUMNS
from analysis.intervals import paper_interval
from tests.analysis.analysis_testlib import make_record


def test_mldr_reproduces_the_published_cell(mldr_records):
    cells = aggregate_runs(mldr_records, reps=10000, rng_seed=0)
    assert list(cells.columns[: len(CELL_COLUMNS)]) == CELL_COLUMNS
    assert len(cells) == 1  # one dataset of IR: no category average
    cell = cells.iloc[0]
    assert (cell.model, cell.task_type, cell.dataset, cell.n_seeds) == ("610m-mlm40-42k", "IR", "mldr_en", 5)
    assert f"{cell['mean']:.2f} ± {cell.ci_halfwidth:.2f}" == "60.25 ± 0.76"
    assert cell.selected_lrs == "1e-04;2e-05;5e-05;2e-05;2e-05"
    assert cell.seed_test_scores == "59.6599;60.1389;61.7303;59.5876;60.1256"
    # Only seed 0's selected run has instance scores, so the bootstrap resamples seeds only.
    assert cell.bootstrap == "seeds"
    assert cell.boot_low < 60.25 < cell.boot_high
    assert (cell["size"], cell.objective, cell.masking_ratio, cell.train_set) == ("610m", "mlm", 0.4, "msmarco_pairs")


def test_hierarchical_bootstrap_when_every_selected_run_has_instances(mldr_records):
    only_1e4 = [r for r in mldr_records if r.lr == 1e-4]
    cell = aggregate_runs(only_1e4, reps=2000).iloc[0]
    assert cell.bootstrap == "seeds+instances"
    assert cell.boot_high - cell.boot_low > 4 * cell.ci_halfwidth


def test_cell_bootstrap_does_not_depend_on_other_cells(mldr_records):
    alone = aggregate_runs(mldr_records, reps=1000, rng_seed=5)
    others = [make_record(model="x", seed=s, lr=lr, val=50 + s, test=60 + s) for s in range(3) for lr in (1e-5, 1e-4)]
    together = aggregate_runs([*others, *mldr_records], reps=1000, rng_seed=5)
    mine = together[together.model == "610m-mlm40-42k"].reset_index(drop=True)
    assert mine[["mean", "boot_low", "boot_high"]].equals(alone[["mean", "boot_low", "boot_high"]])
    assert aggregate_runs(mldr_records, reps=1000, rng_seed=6).boot_low.iloc[0] != alone.boot_low.iloc[0]


def _sc_records(per_dataset_scores, model="m"):
    return [
        make_record(model=model, dataset=d, seed=s, lr=1e-5, val=50, test=score)
        for d, scores in per_dataset_scores.items()
        for s, score in enumerate(scores)
    ]


def test_category_average_is_computed_per_seed():
    scores = {"sst2": [90, 92, 91], "qqp": [80, 81, 85], "mnli": [70, 72, 71]}
    cells = aggregate_runs(_sc_records(scores), reps=500).set_index("dataset")
    assert list(cells.index) == ["sst2", "qqp", "mnli", "average"]
    per_seed = [(90 + 80 + 70) / 3, (92 + 81 + 72) / 3, (91 + 85 + 71) / 3]  # 80, 81.667, 82.333
    assert cells.loc["average", "mean"] == pytest.approx(np.mean(per_seed))
    assert cells.loc["average", "ci_halfwidth"] == pytest.approx(paper_interval(per_seed))
    # Not the mean of the three half-widths, and narrower than a naive combination here.
    mean_halfwidth = cells.loc[["sst2", "qqp", "mnli"], "ci_halfwidth"].mean()
    assert cells.loc["average", "ci_halfwidth"] != pytest.approx(mean_halfwidth)
    assert cells.loc["average", "n_seeds"] == 3


def test_category_average_needs_all_three_datasets_and_uses_common_seeds():
    partial = aggregate_runs(_sc_records({"sst2": [90, 91], "qqp": [80, 81]}), reps=100)
    assert "average" not in set(partial["dataset"])
    uneven = aggregate_runs(_sc_records({"sst2": [90, 92, 99], "qqp": [80, 82], "mnli": [70, 72]}), reps=100)
    average = uneven.set_index("dataset").loc["average"]
    assert average.n_seeds == 2 and average["mean"] == pytest.approx((80 + 82) / 2)


def test_unreported_dataset_gets_a_cell_but_no_average_role():
    records = _sc_records({"squad": [80, 82], "squad_v2": [70, 72], "record": [60, 62]})
    records = [make_record(task_type="QA", dataset=r.dataset, seed=r.seed, test=r.test_score) for r in records]
    records += [make_record(task_type="QA", dataset="qed", seed=s, test=10) for s in range(2)]
    cells = aggregate_runs(records, reps=100).set_index("dataset")
    assert cells.loc["average", "mean"] == pytest.approx(71.0)
    assert cells.loc["qed", "mean"] == 10


def test_single_seed_has_no_interval():
    cell = aggregate_runs([make_record(test=42)], reps=100).iloc[0]
    assert cell["mean"] == 42 and math.isnan(cell.ci_halfwidth) and cell.bootstrap == "none"
