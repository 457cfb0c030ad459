"""The data-efficiency arc's interval (analysis.claims.arc): its false-positive rate at the boundary
(no difference) and its power when the difference is real, on simulated replicated runs."""

import math

import numpy as np
import pytest

from analysis.claims.arc import arc_readings, compare, run_scores, simulate_cells, simulate_scores

RUN_SD = 2.0


def _ahead_rate(difference: float, trials: int, runs: int = 2, seed: int = 0) -> float:
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(trials):
        scores = simulate_scores(rng, difference, RUN_SD, runs=runs)
        reading = compare(scores, "clm_ahead_early", "toy_s", "12-task", 1, "clm", "mlm40")
        hits += reading.low > 0
    return hits / trials


def test_no_difference_is_called_ahead_at_most_at_the_nominal_rate():
    # d = 0: "ahead (interval above 0)" is a one-sided 2.5% error; 400 trials -> SE 0.8 points
    rate = _ahead_rate(0.0, 400)
    assert rate <= 0.025 + 3 * math.sqrt(0.025 * 0.975 / 400)


def test_a_difference_of_three_run_sds_is_found():
    # SE of the difference with 2 runs each = RUN_SD; t_{10, .975} = 2.23, so d = 3 SD is found in
    # about 76% of draws (noncentral t), d = 4.5 SD in about 99%
    assert _ahead_rate(3 * RUN_SD, 300, seed=1) >= 0.65
    assert _ahead_rate(4.5 * RUN_SD, 200, seed=2) >= 0.95


def test_coverage_of_the_interval_is_nominal():
    rng = np.random.default_rng(3)
    covered = 0
    trials = 400
    for _ in range(trials):
        scores = simulate_scores(rng, 1.5, RUN_SD)
        r = compare(scores, "x", "toy_s", "12-task", 3, "clm", "mlm40")
        covered += r.low <= 1.5 <= r.high
    assert abs(covered / trials - 0.95) < 3 * math.sqrt(0.95 * 0.05 / trials)


def test_readings_pick_the_earliest_and_the_last_checkpoint_and_say_so():
    cells = simulate_cells(np.random.default_rng(4), 5.0, 0.5)
    readings = {r.name: r for r in arc_readings(cells)}
    assert readings["clm_ahead_early"].step == 1 and readings["mlm_ahead_late_tc"].step == 5
    assert readings["clm_ahead_early"].verdict == "ahead (interval above 0)"
    assert readings["mlm_ahead_late_qa"].verdict == "not ahead"  # CLM ahead everywhere in this draw
    line = readings["clm_ahead_early"].line("[toy] ")
    assert line.startswith("[toy] toy_s step 1, 12-task: clm - mlm40 +") and "means of 2 runs each" in line
    assert "df 10" in line


def test_one_run_each_gives_no_interval_and_says_so():
    cells = simulate_cells(np.random.default_rng(5), 2.0, 1.0, runs=1)
    reading = arc_readings(cells)[0]
    assert math.isnan(reading.low) and "no interval" in reading.verdict


def test_scores_of_cells_are_the_runs_means_per_scope():
    cells = simulate_cells(np.random.default_rng(7), 2.0, 1.0)
    scores = run_scores(cells)
    assert len(scores) == 2 * 5 * 2 * 5  # objectives x steps x runs x (12-task + 4 task types)
    row = scores[(scores["objective"] == "clm") & (scores["step"] == 2) & (scores["replicate"] == 2)]
    expected = cells[cells["model"] == "toy_s-clm-1k-2-rep2"]["mean"].mean()
    assert row[row["scope"] == "12-task"]["score"].item() == pytest.approx(expected)


def test_random_init_and_missing_objectives():
    cells = simulate_cells(np.random.default_rng(6), 1.0, 1.0)
    extra = cells[cells["model"] == "toy_s-clm-1k-1"].assign(model="toy_s-random-init")
    scores = run_scores(__import__("pandas").concat([cells, extra]))
    assert set(scores["objective"]) == {"clm", "mlm40"}
    with pytest.raises(ValueError, match="no runs of clm"):
        compare(scores, "x", "toy_s", "SC", 99, "clm", "mlm40")


def test_replicate_mean_cells_fold_the_runs_and_keep_single_ones():
    import pandas as pd

    from analysis.claims.arc import replicate_mean_cells

    cells = pd.DataFrame(
        [
            {"model": "toy_s-clm-1k-119", "task_type": "SC", "dataset": "sst2", "mean": 60.0},
            {"model": "toy_s-clm-1k-119-rep2", "task_type": "SC", "dataset": "sst2", "mean": 64.0},
            {"model": "toy_s-random-init", "task_type": "SC", "dataset": "sst2", "mean": 50.0},
        ]
    )
    out = replicate_mean_cells(cells).set_index("model")
    assert out.loc["toy_s-clm-1k-119", "mean"] == 62.0 and out.loc["toy_s-clm-1k-119", "ci_halfwidth"] == 2.0
    assert out.loc["toy_s-clm-1k-119", "runs"] == 2
    assert out.loc["toy_s-random-init", "mean"] == 50.0 and math.isnan(out.loc["toy_s-random-init", "ci_halfwidth"])
