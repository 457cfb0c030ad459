"""Figures 5 and 7 from small synthetic run records whose answers can be checked by hand."""

import math

import numpy as np
import pytest

from paper_figures import from_runs
from tests.paper_figures.conftest import run

MLM, CLM = "610m-mlm40-42k", "610m-clm-42k"


def lr_records():
    """sst2: MLM scores 80,82,84,86 (seed 0) and 81,83,85,87 (seed 1) at LRs 1e-5..1e-4; CLM 90 flat.

    The LR 2e-4 runs (outside [1e-5, 1e-4]) score 10 and must be ignored.
    """
    lrs = [1e-5, 2e-5, 5e-5, 1e-4]
    records = []
    for seed, start in ((0, 80.0), (1, 81.0)):
        records += [run(MLM, "sst2", lr, seed, start + 2 * i) for i, lr in enumerate(lrs)]
        records += [run(CLM, "sst2", lr, seed, 90.0) for lr in lrs]
        records += [run(m, "sst2", 2e-4, seed, 10.0) for m in (MLM, CLM)]
    records.append(run("610m-mlm30-42k", "sst2", 1e-5, 0, 50.0))  # not an MLM-40/CLM model
    return records


def test_centred_scores_use_the_mean_over_lrs_in_range_and_seeds():
    runs = from_runs.centred_scores(lr_records())
    assert set(runs["model"]) == {MLM, CLM}
    assert runs["lr"].max() == pytest.approx(1e-4)  # 2e-4 excluded
    mlm = runs[runs["model"] == MLM].sort_values(["seed", "lr"])
    assert (mlm["range_mean"] == 83.5).all()
    assert mlm["centred"].tolist() == [-3.5, -1.5, 0.5, 2.5, -2.5, -0.5, 1.5, 3.5]
    assert (runs[runs["model"] == CLM]["centred"] == 0).all()


def test_lr_sensitivity_std_over_seeds_and_lrs():
    summary = from_runs.lr_sensitivity(lr_records()).set_index("model")
    # squared deviations: 3.5^2+1.5^2+0.5^2+2.5^2+2.5^2+0.5^2+1.5^2+3.5^2 = 42; 42 / (8 - 1) = 6
    assert summary.loc[MLM, "std"] == pytest.approx(math.sqrt(6))
    assert summary.loc[MLM, ["n_runs", "n_lrs", "n_seeds"]].tolist() == [8, 4, 2]
    assert summary.loc[CLM, "std"] == 0
    population = from_runs.lr_sensitivity(lr_records(), ddof=0).set_index("model")
    assert population.loc[MLM, "std"] == pytest.approx(math.sqrt(42 / 8))
    wider = from_runs.lr_sensitivity(lr_records(), lr_range=(1e-5, 2e-4)).set_index("model")
    assert wider.loc[MLM, "n_runs"] == 10


def test_figure5_points_and_missing_datasets():
    fig, points = from_runs.figure_5(lr_records())
    assert len(fig.axes) >= 4
    sst2 = points[(points["dataset"] == "sst2")].set_index("objective")
    assert sst2.loc["mlm", "std"] == pytest.approx(math.sqrt(6))
    assert sst2.loc["clm", "std"] == 0
    qqp = points[points["dataset"] == "qqp"]
    assert qqp["std"].isna().all() and qqp["note"].str.startswith("missing").all()
    assert "[1e-05, 0.0001]" in points.attrs["caption"]


def test_figure5_and_7_refuse_a_cells_table(published_cells):
    with pytest.raises(from_runs.NeedsRunRecords, match="raw run records"):
        from_runs.figure_5(published_cells)
    with pytest.raises(from_runs.NeedsRunRecords, match="raw run records"):
        from_runs.figure_7(published_cells)


def masking_records(mlm_averages=(80.0, 82.0, 84.0, 86.0), biphasic_averages=(85.0, 85.0, 85.0, 85.0), skip=()):
    """SC runs: per model and seed, sst2/qqp/mnli = avg-1, avg, avg+1 at the best-validation LR.

    A second LR has a worse validation score and a test score of 0: picking it would show.
    """
    families = from_runs.masking_family_models("610m")
    records = []
    for family, averages in (("MLM", mlm_averages), ("CLM+MLM", biphasic_averages)):
        for (_ratio, model), avg in zip(families[family].items(), averages):
            if model in skip:
                continue
            for seed in (0, 1):
                for offset, dataset in zip((-1, 0, 1), ("sst2", "qqp", "mnli")):
                    records.append(run(model, dataset, 5e-5, seed, avg + offset + (seed - 0.5), validation=90.0))
                    records.append(run(model, dataset, 1e-4, seed, 0.0, validation=40.0))
    return records


def test_masking_ratio_variability_by_hand():
    points = from_runs.masking_ratio_variability(masking_records())
    sc = points[points["task_type"] == "SC"]
    mlm = sc[sc["series"] == "MLM"].sort_values("x")
    assert mlm["mean"].tolist() == pytest.approx([80.0, 82.0, 84.0, 86.0])  # seed offsets -0.5/+0.5 cancel
    assert (mlm["n_seeds"] == 2).all()
    # deviations from 83: -3, -1, 1, 3 -> 20 / (4 - 1)
    assert mlm["spread_std"].iloc[0] == pytest.approx(math.sqrt(20 / 3))
    assert mlm["spread_range"].iloc[0] == pytest.approx(6.0)
    both = sc[sc["series"] == "CLM+MLM"]
    assert both["spread_std"].iloc[0] == pytest.approx(0.0)
    assert set(both["model"]) == {f"610m-clm-40k-mlm{p}-42k" for p in (20, 30, 40, 50)}
    # other task types have no runs: missing, not zero
    assert points[points["task_type"] == "IR"]["mean"].isna().all()
    assert np.isnan(points[points["task_type"] == "IR"]["spread_std"]).all()


def test_masking_ratio_variability_with_a_missing_ratio():
    points = from_runs.masking_ratio_variability(masking_records(skip={"610m-mlm50-42k"}))
    mlm = points[(points["task_type"] == "SC") & (points["series"] == "MLM")].sort_values("x")
    assert math.isnan(mlm["mean"].iloc[-1]) and mlm["note"].iloc[-1].startswith("missing")
    assert mlm["spread_std"].iloc[0] == pytest.approx(np.std([80, 82, 84], ddof=1))
    assert "3 of 4 ratios" in mlm["note"].iloc[0]


def test_incomplete_category_is_missing():
    records = [r for r in masking_records() if not (r.model == "610m-mlm20-42k" and r.dataset == "mnli")]
    points = from_runs.masking_ratio_variability(records)
    row = points[(points["model"] == "610m-mlm20-42k") & (points["task_type"] == "SC")].iloc[0]
    assert math.isnan(row["mean"]) and "all 3 SC datasets" in row["note"]


def test_figure7_draws_both_families():
    fig, points = from_runs.figure_7(masking_records())
    assert len(fig.axes) >= 4 and set(points["series"]) == {"MLM", "CLM+MLM"}
    assert "best-validation LR" in points.attrs["caption"]


def test_selection_agrees_with_the_analysis_aggregation():
    aggregate = pytest.importorskip("analysis.aggregate")
    records = masking_records()
    mine = from_runs.category_averages(records, {r.model for r in records}).set_index(["model", "task_type"])
    cells = aggregate.aggregate_runs(records, reps=200)
    cells = cells[cells["dataset"] == "average"].set_index(["model", "task_type"])
    assert len(cells) == len(mine)
    for key, row in mine.iterrows():
        assert row["category_average"] == pytest.approx(cells.loc[key, "mean"])
