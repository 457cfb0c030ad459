"""Figures from cells: the published source gives exactly the printed table values, missing stays missing."""

import math

import pandas as pd
import pytest

from contracts.paper import PAPER_SHAPES
from paper_figures import from_cells
from paper_figures.flops import count_parameters


def _averages(raw, tables):
    rows = raw[raw["table"].isin(tables) & raw["dataset"].str.startswith("Average")].copy()
    rows["size"] = rows["model_size"].str.lower()
    return rows


def _close_figures(fig):
    assert len(fig.axes) >= 4


def test_figure3_points_are_the_published_table_2_5_averages(published_cells, published_raw):
    fig, points = from_cells.figure_3(published_cells)
    _close_figures(fig)
    expected = _averages(published_raw, [2, 3, 4, 5])
    mlm = expected[expected["objective"].str.startswith("MLM")]
    got = points[~points["reference"]]
    assert len(got) == len(mlm) == 3 * 4 * 4
    mlm = mlm.assign(x=mlm["objective"].str[4:].astype(float)).rename(
        columns={"value": "printed", "ci_halfwidth": "printed_ci"}
    )
    merged = got.merge(mlm, on=["size", "x", "task_type"])
    assert len(merged) == len(got)
    assert merged["mean"].tolist() == merged["printed"].tolist()  # exact, no rounding
    assert merged["ci_halfwidth"].tolist() == merged["printed_ci"].tolist()
    clm = expected[expected["objective"] == "CLM"]
    refs = points[points["reference"]].merge(clm, on=["size", "task_type"])
    assert len(refs) == 12 and (refs["mean"] == refs["value"]).all()
    assert (points["note"].str.contains("missing") == False).all()  # noqa: E712


def test_figure3_ci_error_bars_are_the_printed_half_widths(published_cells, published_raw):
    _, points = from_cells.figure_3(published_cells)
    expected = _averages(published_raw, [2, 3, 4, 5])
    expected = expected[expected["objective"] == "MLM-30"].set_index(["size", "task_type"])["ci_halfwidth"]
    got = points[points["x"] == 30].set_index(["size", "task_type"])["ci_halfwidth"]
    pd.testing.assert_series_equal(got.sort_index(), expected.sort_index(), check_names=False)


def test_figure2_points_are_the_published_mlm40_and_clm_averages(published_cells, published_raw):
    _, points = from_cells.figure_2(published_cells)
    expected = _averages(published_raw, [2, 3, 4, 5])
    expected = expected[expected["objective"].isin(["MLM-40", "CLM"])]
    merged = points.merge(
        expected, left_on=["size", "series", "task_type"], right_on=["size", "objective", "task_type"]
    )
    assert len(merged) == len(points) == 24
    assert (merged["mean"] == merged["value"]).all()


def test_figure4_points_are_tables_6_9_plus_the_42k_models(published_cells, published_raw):
    _, points = from_cells.figure_4(published_cells)
    inter = _averages(published_raw, [6, 7, 8, 9])
    final = _averages(published_raw, [2, 3, 4, 5])
    final = final[(final["size"] == "610m") & final["objective"].isin(["MLM-40", "CLM"])]
    expected = pd.concat([inter, final])
    merged = points.merge(
        expected, left_on=["series", "step", "task_type"], right_on=["objective", "pretraining_steps", "task_type"]
    )
    assert len(merged) == len(points) == 2 * 7 * 4
    assert (merged["mean"] == merged["value"]).all()


def test_figure6_points_are_tables_10_13(published_cells, published_raw):
    _, points = from_cells.figure_6(published_cells)
    expected = _averages(published_raw, [10, 11, 12, 13]).drop_duplicates(
        ["pretraining_steps", "clm_steps", "task_type"]
    )
    merged = points.merge(
        expected,
        left_on=["budget_steps", "clm_steps", "task_type"],
        right_on=["pretraining_steps", "clm_steps", "task_type"],
    )
    assert len(merged) == len(points) == 3 * 5 * 4
    assert (merged["mean"] == merged["value"]).all()
    # 42k budget: 10k CLM steps is plotted at the nominal 25% and says so
    row = points[(points["budget_steps"] == 42000) & (points["clm_steps"] == 10000)].iloc[0]
    assert row["x"] == 25 and "actual 23.8%" in row["note"]


def test_figure9_points_are_tables_14_17(published_cells, published_raw):
    _, points = from_cells.figure_9(published_cells)
    expected = _averages(published_raw, [14, 15, 16, 17])
    expected = expected.assign(cpt_base_objective=expected["cpt_base_objective"].str.lower())
    merged = points.merge(expected, on=["cpt_base_objective", "cpt_steps", "task_type"])
    assert len(merged) == len(points) == 2 * 4 * 4
    assert (merged["mean"] == merged["value"]).all()


def test_figure8_compares_the_bases_with_22k_cpt(published_cells, published_raw):
    _, points = from_cells.figure_8(published_cells)
    assert set(points["cpt_steps"]) == {0, 22000} and len(points) == 16
    expected = _averages(published_raw, [14, 15, 16, 17])
    expected = expected.assign(cpt_base_objective=expected["cpt_base_objective"].str.lower())
    merged = points.merge(expected, on=["cpt_base_objective", "cpt_steps", "task_type"])
    assert len(merged) == 16 and (merged["mean"] == merged["value"]).all()


def test_figure10_uses_6nd_with_the_chosen_tokens_per_step(published_cells):
    _, fig4 = from_cells.figure_4(published_cells)
    n = count_parameters(PAPER_SHAPES["610m"])["matmul"]
    _, points = from_cells.figure_10(published_cells)
    assert (points["mean"].to_numpy() == fig4["mean"].to_numpy()).all()
    assert points["x"].tolist() == [6 * n * s * 2_359_296 for s in points["step"]]
    assert (points["tokens_per_step"] == 2_359_296).all()
    assert "2,359,296 tokens/step" in points.attrs["caption"]
    _, other = from_cells.figure_10(published_cells, tokens_per_step=2_373_120, n_params=10)
    assert other["x"].tolist() == [6 * 10 * s * 2_373_120 for s in other["step"]]
    assert "2,373,120 tokens/step" in other.attrs["caption"]


def test_figure11_has_only_the_endpoints_from_tables(published_cells, published_raw):
    _, points = from_cells.figure_11(published_cells)
    middle = points[points["clm_steps"] == 10000]
    assert middle["mean"].isna().all() and middle["note"].str.contains("only in a plot").all()
    ends = points[points["clm_steps"] != 10000]
    expected = _averages(published_raw, [2, 3, 4, 5])
    expected = expected[(expected["size"] == "1b") & expected["objective"].isin(["MLM-40", "CLM"])]
    merged = ends.merge(expected, left_on=["x", "task_type"], right_on=["objective", "task_type"])
    assert len(merged) == 8 and (merged["mean"] == merged["value"]).all()
    assert "only as a plot" in points.attrs["caption"]


def test_figure11_draws_the_middle_point_when_the_source_has_it(published_cells):
    extra = published_cells[published_cells["model"] == "1b-mlm40-42k"].copy()
    extra["model"] = "1b-clm-10k-mlm40-42k"
    extra["mean"] = 50.0
    _, points = from_cells.figure_11(pd.concat([published_cells, extra]))
    assert (points[points["clm_steps"] == 10000]["mean"] == 50.0).all()
    assert not points["note"].str.contains("only in a plot").any()


def test_missing_cells_stay_missing_with_a_note(published_cells):
    cells = published_cells[~((published_cells["model"] == "610m-mlm30-42k") & (published_cells["task_type"] == "QA"))]
    _, points = from_cells.figure_3(cells)
    gone = points[(points["model"] == "610m-mlm30-42k") & (points["task_type"] == "QA")]
    assert len(gone) == 1 and math.isnan(gone["mean"].iloc[0])
    assert "missing" in gone["note"].iloc[0]
    # neighbours are untouched: no interpolation
    others = points[(points["size"] == "610m") & (points["task_type"] == "QA") & ~points["reference"]]
    assert others["mean"].isna().sum() == 1
    assert "1 expected value(s) missing" in points.attrs["caption"]


def test_missing_average_is_the_mean_of_its_three_datasets(published_cells):
    cells = published_cells[~((published_cells["model"] == "210m-clm-42k") & (published_cells["dataset"] == "average"))]
    _, points = from_cells.figure_2(cells)
    row = points[(points["model"] == "210m-clm-42k") & (points["task_type"] == "SC")].iloc[0]
    parts = published_cells[
        (published_cells["model"] == "210m-clm-42k")
        & (published_cells["task_type"] == "SC")
        & (published_cells["dataset"] != "average")
    ].drop_duplicates("dataset")["mean"]
    assert row["mean"] == pytest.approx(parts.mean())
    assert math.isnan(row["ci_halfwidth"]) and "computed here" in row["note"]


def test_hub_prefixed_model_names_are_found(published_cells):
    cells = published_cells.assign(model="MLMvsCLM/" + published_cells["model"])
    _, points = from_cells.figure_2(cells)
    assert points["mean"].notna().all()


def test_dynamics_figures_draw_panels_without_any_value():
    """A subset reproduction may have no category average at all: the log axes still render."""
    import io

    from paper_figures.from_cells import figure_4, figure_10

    empty = pd.DataFrame(columns=["model", "task_type", "dataset", "mean", "ci_halfwidth", "n_seeds"])
    for draw in (figure_4, figure_10):
        fig, points = draw(empty)
        assert points["mean"].isna().all()
        fig.savefig(io.BytesIO(), format="png")


def test_figure3_draws_the_chance_levels_given(published_cells):
    chance = {"SC": 47.4, "TC": 22.7, "QA": 39.6, "IR": 6.0}
    fig, points = from_cells.figure_3(published_cells, chance=chance)
    rows = points[points["series"] == "chance"].set_index("panel")["mean"]
    assert rows.to_dict() == chance
    for ax in fig.axes[:4]:  # the four task panels, each with one dotted line at its level
        dotted = [line for line in ax.get_lines() if line.get_linestyle() == ":"]
        assert [line.get_ydata()[0] for line in dotted] == [chance[ax.get_title().split(":")[0]]]
    assert "chance level" in points.attrs["caption"]
    _, plain = from_cells.figure_3(published_cells)
    assert "chance" not in set(plain["series"])
