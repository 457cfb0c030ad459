"""Issue 90, item 4: no printed interval leaves the metric's scale [0, 100], and coverage is claimed
only at the seed counts the suite simulates (docs/analysis.md, "Bounds at the scale's ends and what
is claimed at which seed counts")."""

import re

import numpy as np
import pandas as pd
import pytest

from analysis.aggregate import aggregate_runs
from analysis.cli import _readable
from analysis.coverage import SEED_COUNTS
from analysis.intervals import (
    CLIPPED_MARK,
    CLIPPED_NOTE,
    PASSES_MARK,
    PASSES_NOTE,
    SIMULATED_SEEDS,
    clip_to_scale,
    coverage_checked,
    paper_rule_label,
)
from analysis.published import load_published_cells
from analysis.tables import _tex_escape, write_tables
from tests.analysis.analysis_testlib import make_record

BOUNDS = ["seed_boot_low", "seed_boot_high", "boot_low", "boot_high"]


def _mnli_like(model="toy-near-100", correct=(399, 388, 400), instances=400):
    """3 seeds of an accuracy near 100 on one test set (per-instance 0/100 scores: both bootstraps)."""
    records = []
    for seed, k in enumerate(correct):
        row = [100.0] * k + [0.0] * (instances - k)
        records.append(
            make_record(model=model, dataset="mnli", seed=seed, lr=1e-5, test=float(np.mean(row)), instances=row)
        )
    return records


@pytest.fixture(scope="module")
def cells() -> pd.DataFrame:
    far_apart = [
        make_record(model="toy-two-seeds", dataset="sst2", seed=s, lr=1e-5, test=t) for s, t in enumerate([0, 100])
    ]
    return aggregate_runs([*far_apart, *_mnli_like()], reps=2000, rng_seed=0)


def test_every_interval_stays_on_the_scale_and_says_it_was_clipped(cells):
    two = cells[cells["model"] == "toy-two-seeds"].iloc[0]
    near = cells[cells["model"] == "toy-near-100"].iloc[0]
    # Unclipped, 50 ± 9.17 x 50 (2 seeds) and about 98.9 ± 4 (3 seeds) pass both ends / 100.
    assert (two.n_seeds, two["mean"], near.n_seeds, near.bootstrap) == (2, 50.0, 3, "seeds+instances")
    for cell in (two, near):
        assert cell.interval_clipped
        assert all(0.0 <= cell[b] <= 100.0 for b in BOUNDS), cell[BOUNDS]
    assert (two.seed_boot_low, two.seed_boot_high, two.boot_low, two.boot_high) == (0.0, 100.0, 0.0, 100.0)
    assert near.seed_boot_high == 100.0 and near.boot_high == 100.0 and near.seed_boot_low > 90
    # The paper's half-width is the paper's rule as it is: never clipped.
    assert two.ci_halfwidth == pytest.approx(1.96 * np.std([0, 100], ddof=1) / np.sqrt(2))


def test_an_interval_inside_the_scale_is_not_flagged(mldr_records):
    cell = aggregate_runs(mldr_records, reps=200).iloc[0]
    assert not cell.interval_clipped and 0 < cell.seed_boot_low < cell.seed_boot_high < 100


def test_clipping_never_loses_coverage():
    # A truth on the scale inside [low, high] stays inside the clipped interval, and one outside stays outside.
    rng = np.random.default_rng(0)
    for _ in range(2000):
        low, high = sorted(rng.uniform(-50, 150, 2))
        truth = float(rng.uniform(0, 100))
        clipped_low, clipped_high, _ = clip_to_scale(low, high)
        assert (low <= truth <= high) == (clipped_low <= truth <= clipped_high)


def test_the_readable_table_marks_clipped_bounds_and_claims_nothing_at_2_seeds(cells):
    text = _readable(cells)
    rows = {line.split()[0]: line for line in text.splitlines() if line.lstrip().startswith("toy-")}
    assert "2 (coverage not checked)" in rows["toy-two-seeds"]
    assert f"[0.00{CLIPPED_MARK}, 100.00{CLIPPED_MARK}]" in rows["toy-two-seeds"]
    assert f"50.00 ± 98.00{PASSES_MARK}" in rows["toy-two-seeds"]
    assert "not checked" not in rows["toy-near-100"] and f"100.00{CLIPPED_MARK}]" in rows["toy-near-100"]
    assert CLIPPED_NOTE in text and PASSES_NOTE in text
    assert "coverage not checked at 2 seeds" in text
    # Every coverage figure printed is at a simulated seed count; none at 2 seeds.
    assert not re.search(r"(covers?|coverage)[^;\n]*\bat 2\b", text.replace("not checked at 2", ""))
    # No printed bound leaves [0, 100].
    for low, high in re.findall(r"\[(-?[\d.]+)\D*, (-?[\d.]+)\D*\]", text):
        assert 0 <= float(low) <= float(high) <= 100


def test_the_paper_layout_tables_mark_them_too(cells, tmp_path):
    write_tables(cells, tmp_path, source="runs")
    markdown = (tmp_path / "tables.md").read_text()
    assert (
        f"| 50.00 ± 98.00{PASSES_MARK} [0.00{CLIPPED_MARK}, 100.00{CLIPPED_MARK}] (coverage not checked at 2 seeds) |"
        in markdown
    )
    assert CLIPPED_NOTE in markdown and PASSES_NOTE in markdown and "Coverage not checked at 2 seeds" in markdown
    extra = pd.read_csv(tmp_path / "extra_SC.csv", keep_default_na=False).set_index("Checkpoint")
    assert extra.loc["toy-near-100", "MNLI: 95% CI (t-calibrated bootstrap over seeds)"].endswith(
        f"100.00{CLIPPED_MARK}]"
    )
    tex = (tmp_path / "tables.tex").read_text()
    assert r"$50.00 \pm 98.00^{\ddagger}$" in tex and r"$^{\ddagger}$ mean $\pm$ the paper's half-width" in tex


def test_published_tables_keep_their_numbers_and_mark_the_one_cell_past_0(tmp_path):
    """The paper's ± is what it is (ReCoRD 2.55 ± 4.07 in Table 12 reaches below 0): kept, marked."""
    published = load_published_cells()
    passing = published[
        (published["mean"] - published["ci_halfwidth"] < 0) | (published["mean"] + published["ci_halfwidth"] > 100)
    ]
    assert list(zip(passing["table"], passing["dataset"], passing["mean"], passing["ci_halfwidth"])) == [
        (12, "record", 2.55, 4.07)
    ]
    write_tables(published, tmp_path, source="published")
    markdown = (tmp_path / "tables.md").read_text()
    assert markdown.count(PASSES_MARK) == 2  # the cell and its legend line
    assert f"2.55 ± 4.07{PASSES_MARK}" in markdown.split("## Table 12:")[1].split("## Table 13:")[0]
    assert CLIPPED_MARK not in markdown and "not checked" not in markdown  # 5 seeds, no bootstrap
    table12 = pd.read_csv(tmp_path / "table_12.csv", keep_default_na=False)
    assert f"2.55 ± 4.07{PASSES_MARK}" in set(table12["ReCoRD"])
    assert "60.25 ± 0.76 |" in markdown  # the other cells exactly as printed


def test_the_tex_captions_say_what_the_plus_minus_is(tmp_path):
    write_tables(load_published_cells(), tmp_path, formats=("tex",), source="published")
    tex = (tmp_path / "tables.tex").read_text()
    captions = re.findall(r"\\caption\{(.*)\}", tex)
    assert len(captions) == 16
    meaning = r"Cells: mean $\pm$ half-width, " + _tex_escape(paper_rule_label()) + "."
    assert all(c.endswith(meaning) for c in captions), captions[0]
    assert "not a 95\\% interval" in captions[0]
    assert tex.count(r"^{\ddagger}") == 2  # the ReCoRD cell and its footnote in Table 12


def test_coverage_is_claimed_at_exactly_the_simulated_seed_counts():
    # analysis.coverage simulates SIMULATED_SEEDS; test_table_coverage.py checks them (3, 5, 10).
    assert SEED_COUNTS == SIMULATED_SEEDS == (3, 5, 10)
    assert [n for n in range(1, 21) if coverage_checked(n)] == [3, 5, 10]
