"""Captions and titles say what is drawn: error bars only where a point has an interval, and toy
figures' stand-in explanation in the caption under one short title line that fits the figure."""

import math

import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from contracts.model_names import objective_token, single_objective_name
from contracts.paper import AVERAGE, MASKING_RATIOS, PAPER_SIZES, TASK_TYPES
from paper_figures import from_cells
from paper_figures.plotting import CAPTION_GID, add_caption, extend_caption

ERROR_BAR_CLAIM = "error bars = half-width by the paper's rule"
NO_BARS = "one fine-tuning seed per point (no interval)"
CELL_FIGURES_WITH_BARS = ("figure_2", "figure_3", "figure_4", "figure_6", "figure_8", "figure_9")


def _one_seed(cells: pd.DataFrame) -> pd.DataFrame:
    """The cells as a one-seed run gives them: no interval."""
    return cells.assign(ci_halfwidth=math.nan, boot_low=math.nan, boot_high=math.nan, n_seeds=1)


def _masking_cells(sizes=PAPER_SIZES, ci=math.nan, n_seeds=1, random_init=False) -> pd.DataFrame:
    """Category averages of Figure 3's models (paper names, as draw_figures renames toy runs)."""
    models = [single_objective_name(s, objective_token(r)) for s in sizes for r in MASKING_RATIOS]
    models += [single_objective_name(s, "clm") for s in sizes]
    models += [f"{s}-random-init" for s in sizes] if random_init else []
    return pd.DataFrame(
        [
            {"model": m, "task_type": t, "dataset": AVERAGE, "mean": 50.0 + i, "ci_halfwidth": ci, "n_seeds": n_seeds}
            for i, m in enumerate(models)
            for t in TASK_TYPES
        ]
    )


# --- error bars -----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", CELL_FIGURES_WITH_BARS)
def test_published_figures_keep_their_error_bar_sentence(published_cells, name):
    _, points = getattr(from_cells, name)(published_cells)
    assert ERROR_BAR_CLAIM in points.attrs["caption"].lower()
    assert "no error bars" not in points.attrs["caption"].lower()


@pytest.mark.parametrize("name", CELL_FIGURES_WITH_BARS)
def test_one_seed_figures_claim_no_error_bars(published_cells, name):
    fig, points = getattr(from_cells, name)(_one_seed(published_cells))
    caption = points.attrs["caption"]
    assert ERROR_BAR_CLAIM not in caption.lower()
    assert NO_BARS in caption
    drawn = next(t for t in fig.texts if t.get_gid() == CAPTION_GID).get_text()
    assert "".join(drawn.split()) == "".join(caption.split())  # the caption drawn is the one stored


def test_figure3_from_one_seed_runs_says_no_error_bars():
    _, points = from_cells.figure_3(_masking_cells())
    assert points["ci_halfwidth"].isna().all()
    assert "Error bars = 95% CI" not in points.attrs["caption"]
    assert "No error bars: one fine-tuning seed per point (no interval)." in points.attrs["caption"]
    _, with_ci = from_cells.figure_3(_masking_cells(ci=1.5, n_seeds=3))
    assert (
        "Error bars = half-width by the paper's rule, 1.96 SD/sqrt(n) over seeds (covers about 81% / 88% / 92%"
        in with_ci.attrs["caption"]
    )
    assert "No error bars" not in with_ci.attrs["caption"]


def test_reference_lines_with_an_interval_draw_no_error_bars():
    """Figure 3's CLM and random-init levels are lines without bars: their intervals claim nothing."""
    cells = _masking_cells(random_init=True)
    references = ~cells["model"].str.contains("mlm")
    cells.loc[references, "ci_halfwidth"] = 2.0
    _, points = from_cells.figure_3(cells, random_init={s: f"{s}-random-init" for s in PAPER_SIZES})
    assert points.loc[points["reference"], "ci_halfwidth"].notna().all()
    assert "Error bars = 95% CI" not in points.attrs["caption"] and NO_BARS in points.attrs["caption"]


def test_figure2_keeps_its_lower_case_sentence():
    _, points = from_cells.figure_2(_masking_cells())
    assert points.attrs["caption"].endswith("(Tables 2-5); no error bars: " + NO_BARS + ".")


# --- the caption of a built figure ----------------------------------------------------------------
def test_extend_caption_replaces_the_drawn_caption_and_keeps_the_points_in_step():
    fig, points = from_cells.figure_3(_masking_cells())
    before = points.attrs["caption"]
    extend_caption(fig, points, "More words. " * 40)
    captions = [t for t in fig.texts if t.get_gid() == CAPTION_GID]
    assert len(captions) == 1
    assert points.attrs["caption"].startswith(before) and points.attrs["caption"].endswith("More words.")
    assert "".join(captions[0].get_text().split()) == "".join(points.attrs["caption"].split())
    add_caption(fig, "short")
    assert [t.get_text() for t in fig.texts if t.get_gid() == CAPTION_GID] == ["short"]


# --- toy figures ----------------------------------------------------------------------------------
def _toy_cfg(tmp_path, **kwargs):
    from reproduce.plan import ReproduceConfig

    return ReproduceConfig(out=str(tmp_path / "out"), **kwargs)


def build_plan(cfg):
    from reproduce.plan import build_plan as build

    return build(cfg)


def test_toy_stand_in_labels_say_the_real_step_counts(tmp_path):
    from reproduce.figures import stand_in_labels
    from reproduce.plan import pretrain_length

    cfg = _toy_cfg(tmp_path)
    title, caption = stand_in_labels(build_plan(cfg), 3)
    assert "\n" not in title and len(title) <= 70
    assert "toy_s for 210M, toy_m for 610M, toy_l for 1B" in caption
    assert f"the paper's 42,000 pretraining steps are {pretrain_length(cfg):,} toy steps" in caption
    assert "steps / 1,000" not in caption and "divided by" not in caption
    assert "Toy world" in caption
    assert f"{pretrain_length(cfg):,} toy steps are the early regime" in caption
    assert "make reproduce FIGURE=4" in caption
    _, figure2 = stand_in_labels(build_plan(cfg), 2)  # the CLM-ahead sentence is about Figure 3's dashed lines
    assert "make reproduce FIGURE=4" not in figure2 and "toy_s for 210M" in figure2


def test_toy_stand_in_labels_of_a_subset_and_of_other_studies(tmp_path):
    from reproduce.figures import stand_in_labels
    from reproduce.plan import pretrain_length

    _, caption = stand_in_labels(build_plan(_toy_cfg(tmp_path, sizes=("toy_s",), ratios=(0.2, 0.4))), 3)
    assert "toy_s for 210M;" in caption and "toy_m" not in caption
    biphasic = _toy_cfg(tmp_path, study="biphasic")
    _, caption = stand_in_labels(build_plan(biphasic), 6)
    if pretrain_length(biphasic) is None:
        assert "every paper step count divided by 1,000" in caption
    else:
        assert f"pretraining steps are {pretrain_length(biphasic):,} toy steps" in caption
    assert "make reproduce FIGURE=4" not in caption


def test_toy_figure3_title_fits_and_its_caption_explains_the_stand_ins(tmp_path):
    """As draw_figures draws it: Figure 3 from cells under the paper's names, then labelled."""
    from reproduce.figures import label_stand_ins

    cells = _masking_cells(random_init=True)
    fig, points = from_cells.figure_3(
        cells, chance={t: 10.0 for t in TASK_TYPES}, random_init={s: f"{s}-random-init" for s in PAPER_SIZES}
    )
    label_stand_ins(build_plan(_toy_cfg(tmp_path)), 3, fig, points)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    title = fig._suptitle
    assert len(title.get_text().split("\n")) <= 2
    box, frame = title.get_window_extent(renderer), fig.bbox
    assert frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1
    caption = next(t for t in fig.texts if t.get_gid() == CAPTION_GID)
    box = caption.get_window_extent(renderer)
    assert frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0
    for ax in fig.axes:  # the taller caption pushes the panels up, not under it
        assert ax.get_tightbbox(renderer).y0 >= box.y1 - 1
    text = points.attrs["caption"]
    assert "".join(caption.get_text().split()) == "".join(text.split())
    assert "toy_s for 210M" in text and "make reproduce FIGURE=4" in text
    assert "Error bars = 95% CI" not in text and NO_BARS in text
