"""The toy data-efficiency study's Figure 4 (paper_figures.data_efficiency): two sizes, replicate
means with their spread as bars, random-init and chance references, a caption that says so."""

import math

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg

from analysis.claims.arc import replicate_mean_cells
from contracts.paper import AVERAGE, TASK_TYPES
from paper_figures.data_efficiency import figure_4_sizes

STEPS = (5_000, 10_000, 20_000, 42_000)


def _cells() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for size in ("210m", "610m"):
        for objective in ("mlm40", "clm"):
            for step in STEPS:
                suffix = "" if step == 42_000 else f"-{step}"
                for rep in ("", "-rep2"):
                    for task in TASK_TYPES:
                        value = 50 + step / 1000 + rng.normal(0, 1)
                        rows.append(
                            {
                                "model": f"{size}-{objective}-42k{suffix}{rep}",
                                "task_type": task,
                                "dataset": AVERAGE,
                                "mean": value,
                            }
                        )
        for task in TASK_TYPES:
            rows.append({"model": f"{size}-random-init", "task_type": task, "dataset": AVERAGE, "mean": 40.0})
    return pd.DataFrame(rows)


def test_two_sizes_with_replicate_means_references_and_a_caption_that_says_what_the_bars_are():
    cells = replicate_mean_cells(_cells())
    fig, points = figure_4_sizes(
        cells,
        sizes=("210m", "610m"),
        steps=STEPS,
        step_labels={5_000: "5k\n(119)", 10_000: "10k\n(238)", 20_000: "20k\n(476)", 42_000: "42k\n(1000)"},
        random_init={"210m": "210m-random-init", "610m": "610m-random-init"},
        chance={t: 20.0 for t in TASK_TYPES},
        bars="Bars: half the range of the 2 pretraining runs of each point (not a confidence interval).",
        note="Toy.",
        bars_column="half_range",
    )
    curves = points[~points["reference"].astype(bool)]
    assert len(curves) == 4 * 2 * 2 * len(STEPS) and curves["mean"].notna().all()
    assert (curves["half_range"] > 0).all() and "ci_halfwidth" not in points  # two runs each: a spread
    assert set(points["series"]) >= {"MLM-40 210M", "CLM 610M", "random init 210M", "chance"}
    untrained = points[points["series"] == "random init 610M"]
    assert (untrained["mean"] == 40.0).all() and untrained["x"].isna().all()
    caption = points.attrs["caption"]
    assert "half the range of the 2 pretraining runs" in caption and "95% CI" not in caption
    assert "random initialisation" in caption and "chance" in caption and caption.endswith("Toy.")
    FigureCanvasAgg(fig).draw()  # draws without error
    point = curves[(curves["series"] == "CLM 610M") & (curves["step"] == 42_000) & (curves["panel"] == "TC")]
    assert point["x_label"].item() == "42k\n(1000) (decayed)"


def test_one_run_each_draws_no_bars_and_says_so():
    one = _cells()
    one = one[~one["model"].str.endswith("-rep2")]
    fig, points = figure_4_sizes(replicate_mean_cells(one), sizes=("610m",), steps=STEPS, bars="Bars: spread.")
    assert points["ci_halfwidth"].isna().all() and all(math.isnan(v) for v in points["ci_halfwidth"])
    assert "Bars: spread." not in points.attrs["caption"] and "No error bars" in points.attrs["caption"]
