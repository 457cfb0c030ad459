import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from analysis.bench import synthetic_records
from analysis.claims import (
    CLAIMS,
    CSV_COLUMNS,
    NOT_TESTABLE,
    Claim,
    claim_components,
    crossovers,
    describe_cells,
    evaluate_claim,
    evaluate_claims,
    inputs_from_published,
    inputs_from_records,
)
from analysis.claims.hypothesis_tests import CONTRADICTED, INCONCLUSIVE, LEANS_AGAINST, SUPPORTED
from analysis.claims.report import claims_markdown, verdict_table
from analysis.models import pseudo_seeds
from analysis.published import load_published_cells
from contracts.paper import TASK_TYPES
from tests.analysis.analysis_testlib import make_record

CLAIM = {c.id: c for c in CLAIMS}


@pytest.fixture(scope="module")
def published():
    return inputs_from_published()


@pytest.fixture(scope="module")
def published_report(published):
    return evaluate_claims(published, reps=2000)


def test_every_sentence_is_a_spec():
    assert set(CLAIM) == {
        "mlm_beats_clm_sc",
        "mlm_beats_clm_qa",
        "mlm_beats_clm_ir",
        "clm_competitive_tc",
        "clm_beats_mlm_tc_610m",
        "gap_widens_with_size_sc",
        "gap_narrows_with_size_ir",
        "u_shape_masking_610m_1b",
        "u_shape_masking_610m_1b_tc_qa",
        "ir_prefers_high_masking",
        "ir_prefers_high_masking_mean",  # issue 63, item 6: the IR mean's trend, a sensitivity reading
        "clm_leads_early",
        "clm_less_lr_sensitive",
        "biphasic_25_beats_mlm",
        "biphasic_75_comparable",
        "biphasic_best_balance",
        "biphasic_less_ratio_sensitive",
        "cpt_clm_base_beats_mlm_base",
        # issue 52, item 6: the findings' other sentences, one claim each
        "no_universal_masking_ratio",
        "larger_models_higher_ratios",
        "small_models_lower_ratios_tc_qa",
        "mlm_overtakes_clm_late",
        "cpt_12k_matches_mlm_cpt",
        "cpt_clm_base_steeper_sc",
    }
    assert CLAIM["clm_competitive_tc"].test == "noninferiority" and CLAIM["clm_competitive_tc"].margin == 0.24
    assert CLAIM["ir_prefers_high_masking_mean"].role == "sensitivity"
    assert CLAIM["biphasic_best_balance"].test == "difference" and CLAIM["biphasic_best_balance"].margin is None
    assert CLAIM["u_shape_masking_610m_1b"].task_types == ("TC",)
    assert CLAIM["u_shape_masking_610m_1b_tc_qa"].role == "sensitivity"
    assert CLAIM["ir_prefers_high_masking"].test == "trend"
    # the pre-registered Holm family: the abstract's findings (issue 52)
    assert {c.id for c in CLAIMS if c.role == "primary"} == {
        "mlm_beats_clm_sc",
        "mlm_beats_clm_qa",
        "mlm_beats_clm_ir",
        "clm_leads_early",
        "clm_less_lr_sensitive",
        "biphasic_25_beats_mlm",
        "cpt_clm_base_beats_mlm_base",
    }
    assert len({c.quote for c in CLAIMS if c.role != "sensitivity"}) == len(
        [c for c in CLAIMS if c.role != "sensitivity"]
    )
    assert all(c.quote and c.location for c in CLAIMS)
    assert CLAIM["mlm_beats_clm_sc"].across == ("size",) and CLAIM["u_shape_masking_610m_1b"].test == "u_shape"


def test_published_report(published_report):
    report = published_report.set_index("claim")
    assert list(published_report.columns[: len(CSV_COLUMNS)]) == CSV_COLUMNS
    untestable = report[report.verdict == NOT_TESTABLE]
    assert set(untestable.index) == {"clm_less_lr_sensitive", "biphasic_less_ratio_sensitive"}
    assert "Figure 5" in untestable.loc["clm_less_lr_sensitive", "reason"]
    assert "Figure 7" in untestable.loc["biphasic_less_ratio_sensitive", "reason"]
    assert report.loc["mlm_beats_clm_sc", "verdict"] == SUPPORTED and report.loc["mlm_beats_clm_sc", "shown"] == "610m"
    assert report.loc["mlm_beats_clm_sc", "weakest"] == "210m"
    # Issue 63, item 6: "competitive" may allow half the smallest TC gap the paper calls a difference
    # (CLM's 0.48 at 610M): 0.24; the 1B estimate -0.06 [-0.28, 0.17] is on the claimed side, its
    # interval not within the margin
    assert report.loc["clm_competitive_tc", "verdict"] == INCONCLUSIVE
    assert report.loc["clm_competitive_tc", "weakest"] == "1b" and report.loc["clm_competitive_tc", "margin"] == 0.24
    # Issue 29: at 610M alone CLM - MLM-40 = +0.48, not significant once Holm counts the claims.
    assert report.loc["clm_beats_mlm_tc_610m", "verdict"] == INCONCLUSIVE
    assert report.loc["clm_beats_mlm_tc_610m", "p_value"] < 0.05 < report.loc["clm_beats_mlm_tc_610m", "p_holm"]
    # The 210M->610M step of the IR gap goes the wrong way. Both TC curves are U-shaped (unadjusted
    # p 0.0066), but in the one confirmatory family of issue 63 (20 testable claims) Holm gives 0.086
    # (issue 52's primaries-plus-itself gave 0.026, with report-wide false support up to about 9%)
    assert report.loc["gap_narrows_with_size_ir", "qualifying"] == "1 of 2"
    # Issue 63, item 4: an estimate on the wrong side without significance is not "inconclusive"
    assert report.loc["gap_narrows_with_size_ir", "verdict"] == LEANS_AGAINST
    assert report.loc["u_shape_masking_610m_1b", "qualifying"] == "2 of 2"
    assert (
        report.loc["u_shape_masking_610m_1b", "p_value"] < 0.01 < 0.05 < report.loc["u_shape_masking_610m_1b", "p_holm"]
    )
    assert report.loc["u_shape_masking_610m_1b", "verdict"] == INCONCLUSIVE
    assert report.loc["u_shape_masking_610m_1b_tc_qa", "qualifying"] == "4 of 4"
    # "consistently ... regardless of model size" per IR dataset and size (issue 63, item 6): MS MARCO
    # at 210M slopes the other way; the IR mean's trend (issue 52's reading: 0.71, 0.99, 0.87 points
    # per 10 pp at 210M, 610M, 1B) is supported as the labelled sensitivity claim
    assert report.loc["ir_prefers_high_masking", "verdict"] == LEANS_AGAINST
    assert report.loc["ir_prefers_high_masking", "qualifying"] == "8 of 9"
    assert "210m IR msmarco: -0.39 [-0.71, -0.06]" in report.loc["ir_prefers_high_masking", "components"]
    assert report.loc["ir_prefers_high_masking_mean", "verdict"] == SUPPORTED
    assert "210m IR: 0.71 [0.53, 0.88]" in report.loc["ir_prefers_high_masking_mean", "components"]
    # Per task type (Figure 8's panels): better on SC and TC; QA and IR "comparable" at half the
    # smallest gap the paper calls a difference (QA 5.08, IR 0.63): QA's -1.04 is within it, IR's
    # 0.25 [-0.31, 0.80] not yet clear of -0.63 after Holm
    assert report.loc["cpt_clm_base_beats_mlm_base", "verdict"] == INCONCLUSIVE
    assert report.loc["cpt_clm_base_beats_mlm_base", "qualifying"] == "4 of 4"
    assert report.loc["cpt_clm_base_beats_mlm_base", "margins"] == "QA 5.08, IR 0.63"
    assert "SC: 0.93" in report.loc["cpt_clm_base_beats_mlm_base", "components"]
    assert report.loc["clm_leads_early", "weakest"] == "QA 5k steps"
    assert report.loc["biphasic_25_beats_mlm", "weakest"] == "22k budget IR"
    assert report.loc["biphasic_25_beats_mlm", "verdict"] == LEANS_AGAINST  # 22k IR: -0.25
    # ... while the true-but-underpowered ones (every estimate on the claimed side) stay inconclusive
    for claim_id in ("clm_leads_early", "biphasic_75_comparable", "clm_beats_mlm_tc_610m"):
        assert report.loc[claim_id, "verdict"] == INCONCLUSIVE, claim_id
    # "best balance" as better than every other split (issue 63, item 6): 5 of 6; at 42k the +0.64
    # over MLM only is not clear of 0
    assert report.loc["biphasic_best_balance", "verdict"] == INCONCLUSIVE
    assert report.loc["biphasic_best_balance", "qualifying"] == "5 of 6"
    # Issue 52, item 6. Opposite masking trends at 210M: IR rises (0.71) and QA falls (-1.08), but
    # TC's -0.03 [-0.06, 0.00] is not significant: both 210M-trend sentences stay inconclusive
    for claim_id in ("no_universal_masking_ratio", "small_models_lower_ratios_tc_qa"):
        assert report.loc[claim_id, "verdict"] == INCONCLUSIVE, claim_id
        assert "210m TC: -0.03 [-0.06, 0.00]" in report.loc[claim_id, "components"]
    assert "210m IR: 0.71" in report.loc["no_universal_masking_ratio", "components"]
    assert report.loc["no_universal_masking_ratio", "qualifying"] == "1 of 3"
    # 20% -> 50% gains 1.31 points more at 1B than at 210M (p 0.009, Holm 0.11 in the one family);
    # MLM leads by 5.35 at 40k steps
    assert report.loc["larger_models_higher_ratios", "components"] == "210m to 1b: 1.31 [0.40, 2.22]"
    assert report.loc["larger_models_higher_ratios", "verdict"] == INCONCLUSIVE
    assert report.loc["mlm_overtakes_clm_late", "components"] == "40k steps: 5.35 [4.19, 6.51]"
    # CPT at 12k from CLM vs from MLM, every word of the parenthesis (issue 63, item 6): TC +0.51
    # better, IR +0.35 [-0.31, 1.01] not shown better, SC +0.23 comparable (margin 1.04), QA -3.37
    # nearly on par (within the 10.17 the paper calls a difference on QA); on SC the CLM base gains
    # 0.70 more from 12k to 22k
    assert report.loc["cpt_12k_matches_mlm_cpt", "qualifying"] == "3 of 4"
    assert report.loc["cpt_12k_matches_mlm_cpt", "weakest"] == "IR"
    assert report.loc["cpt_12k_matches_mlm_cpt", "verdict"] == INCONCLUSIVE
    assert report.loc["cpt_clm_base_steeper_sc", "components"] == "12k steps to 22k steps: 0.70 [0.34, 1.07]"
    for claim_id in ("mlm_overtakes_clm_late", "cpt_clm_base_steeper_sc", "gap_widens_with_size_sc"):
        assert report.loc[claim_id, "verdict"] == SUPPORTED, claim_id
    # Each sentence's own power at the paper's effects, with the reason where it is below 50%
    assert report.loc["mlm_beats_clm_sc", "power_alone"] > 0.99 and report.loc["mlm_beats_clm_sc", "power_note"] == ""
    assert "observed on the wrong side" in report.loc["gap_narrows_with_size_ir", "power_note"]
    assert "15 seeds reach 80%" in report.loc["small_models_lower_ratios_tc_qa", "power_note"]
    assert (report.loc[report.verdict != NOT_TESTABLE, "cells_used"] == report.cells_needed.dropna()).all()
    assert (report["warning"].fillna("") == "").all()
    # Published numbers have no seeds: no bootstrap over seeds or instances, no rliable metrics.
    assert report[["seed_boot_low", "instance_boot_low", "iqm_difference"]].isna().all().all()
    assert "SC: 9.2k" in report.loc["clm_leads_early", "crossover"]


def test_published_components_by_hand(published_report):
    """mlm_beats_clm_sc at 210M = mean over SC datasets of MLM-40 - CLM; its 95% interval uses
    the cells' seed sds (half-width x sqrt(5) / 1.96), variance sum / 9 / 5, Welch df."""
    cells = load_published_cells()
    sc = cells[(cells.task_type == "SC") & (cells.dataset != "average")].drop_duplicates(["model", "dataset"])
    sc = sc.set_index(["model", "dataset"])
    diffs, variances = [], []
    for dataset in ("sst2", "qqp", "mnli"):
        mlm, clm = sc.loc[("210m-mlm40-42k", dataset)], sc.loc[("210m-clm-42k", dataset)]
        diffs.append(mlm["mean"] - clm["mean"])
        variances += [(hw * math.sqrt(5) / 1.96) ** 2 / 5 / 9 for hw in (mlm.ci_halfwidth, clm.ci_halfwidth)]
    df = sum(variances) ** 2 / sum(v**2 / 4 for v in variances)
    row = published_report.set_index("claim").loc["mlm_beats_clm_sc"]
    assert row.weakest == "210m"  # the deciding component; the headline is 610M
    assert row.weakest_estimate == pytest.approx(np.mean(diffs)) == pytest.approx(2.09, abs=0.005)
    half = (row.weakest_ci_high - row.weakest_ci_low) / 2
    assert half == pytest.approx(stats.t.ppf(0.975, df) * math.sqrt(sum(variances)))
    assert row.n_runs == 90  # 18 printed cells x 5 seeds
    assert row.components.startswith("1b: 5.56") and "210m: 2.09" in row.components


def test_pseudo_seeds_have_the_printed_statistics():
    values = pseudo_seeds(87.0, 0.4)
    assert values.mean() == pytest.approx(87.0) and values.std(ddof=1) == pytest.approx(0.4)


def _value(component, cells) -> float:
    return sum(w * cells.loc[c, "mean"] for c, w in component.weights.items())


def test_components_recover_steps_and_an_interior_minimum_exactly(published):
    """Noise-free means: a gap of 1 + 0.5 log2(parameters) gives steps of 0.5 x log2 of the size
    ratio; a score of 2 (x - 3.5)^2 over the masking ratio (x = ratio x 10) has slopes -6 at 20%
    and +6 at 50% in every curve, and its vertex at 35%."""
    cells = published.cells.copy()
    is_mlm40 = (cells.objective == "mlm") & np.isclose(cells.masking_ratio.astype(float), 0.4)
    cells["mean"] = 80.0 + np.where(is_mlm40, 1 + 0.5 * cells.log2_params, 0.0)
    steps = claim_components(CLAIM["gap_widens_with_size_sc"], cells)
    assert [s.label for s in steps] == ["210m to 610m", "610m to 1b"]
    assert _value(steps[0], cells) == pytest.approx(0.5 * math.log2(610 / 210))
    assert _value(steps[1], cells) == pytest.approx(0.5 * math.log2(1000 / 610))
    cells["mean"] = 70.0 + 2 * (cells.masking_tenths - 3.5) ** 2
    curves = claim_components(CLAIM["u_shape_masking_610m_1b_tc_qa"], cells)
    assert len(curves) == 8 and len({c.curve for c in curves}) == 4
    assert [round(_value(c, cells), 9) for c in curves[:2]] == [-6.0, 6.0]
    inputs = replace(published, cells=cells.assign(sd=0.1))
    row, _ = evaluate_claim(CLAIM["u_shape_masking_610m_1b_tc_qa"], inputs, reps=0)
    assert row["components"].count("(vertex 35%)") == 4
    cells["mean"] = 70.0 + 3 * cells.masking_tenths + 0.5 * (cells.masking_tenths - 3.5) ** 2
    trends = claim_components(CLAIM["ir_prefers_high_masking_mean"], cells)  # the least-squares slope per size
    assert [c.label for c in trends] == ["1b IR", "210m IR", "610m IR"]
    assert [round(_value(c, cells), 9) for c in trends] == [3.0] * 3  # the symmetric bend adds no slope
    per_dataset = claim_components(CLAIM["ir_prefers_high_masking"], cells)  # issue 63: per dataset and size
    assert len(per_dataset) == 9 and per_dataset[0].label == "1b IR mldr_en"
    assert all(len(c.weights) == 4 for c in per_dataset)  # one dataset's 4 masking ratios each
    assert [round(_value(c, cells), 9) for c in per_dataset] == [3.0] * 9


def _tree(published, mean_of):
    """Noise-free published design (sd 0.1 per cell) with the means `mean_of(cells)`."""
    cells = published.cells.copy()
    cells["mean"] = mean_of(cells)
    return replace(published, cells=cells.assign(sd=0.1))


def test_u_shape_is_supported_where_tc_is_u_shaped_and_ir_monotone(published):
    """Issue 36: the paper contrasts the U on TC with IR's monotone trend (Limitations); a tree
    with exactly that shape supports both, where the former 8-curve reading could not."""
    x = published.cells.masking_tenths

    def means(cells):
        return np.where(cells.task_type == "IR", 70.0 + 2 * x, 70.0 + (x - 3.5) ** 2)

    report = evaluate_claims(_tree(published, means), reps=0).set_index("claim")
    assert report.loc["u_shape_masking_610m_1b", "verdict"] == SUPPORTED
    assert report.loc["ir_prefers_high_masking", "verdict"] == SUPPORTED
    assert report.loc["u_shape_masking_610m_1b_tc_qa", "verdict"] == SUPPORTED  # QA U-shaped too


def test_biphasic_sentences_are_claims_of_their_own(published):
    """Issue 52: 25/75 above MLM (per budget and task type), 75/25 comparable and the best balance
    are three claims; a 75/25 split far below MLM fails its own claim only."""
    share = published.cells.clm_share

    def means(cells, at_75=-0.1):
        return 80.0 + np.select([share == 0.25, share == 0.5, share == 0.75], [1.0, 0.5, at_75], 0.0)

    # the three biphasic claims alone (issue 64: a noise-free tree, so Holm over 3 or 22 claims agrees)
    biphasic = tuple(c for c in CLAIMS if c.id.startswith("biphasic_"))
    report = evaluate_claims(_tree(published, means), claims=biphasic, reps=0).set_index("claim")
    assert report.loc["biphasic_25_beats_mlm", "verdict"] == SUPPORTED
    assert report.loc["biphasic_25_beats_mlm", "qualifying"] == "12 of 12"
    assert report.loc["biphasic_75_comparable", "verdict"] == SUPPORTED
    balance = report.loc["biphasic_best_balance"]
    assert balance.verdict == SUPPORTED and balance.qualifying == "6 of 6" and "vs 75% CLM" in balance.components
    worse = evaluate_claims(_tree(published, lambda c: means(c, at_75=-5.0)), claims=biphasic, reps=0)
    worse = worse.set_index("claim")
    assert worse.loc["biphasic_75_comparable", "verdict"] == CONTRADICTED
    assert worse.loc["biphasic_25_beats_mlm", "verdict"] == SUPPORTED


def test_margins_are_what_the_words_allow(published):
    """docs/claims.md, "Margins" (issue 63, item 6): the smallest gap the paper calls a difference on
    each task type (MLM-40 vs CLM at 42k, Figure 2; CLM's 610M win on TC) recomputed from the
    published cells; "comparable"/"competitive" margins are at most half of it, "nearly on par" less
    than all of it. The design's resolution (issue 52: the smallest margin the claim's components all
    clear 60% of the time when the models are equal, 5 seeds at the printed noise) is recomputed too:
    it stays in each source as context."""
    from analysis.claims import design_margin
    from analysis.claims.definitions import (
        BIPHASIC_MARGIN,
        COMPARABLE_MARGIN,
        CPT_12K_MARGIN,
        CPT_MARGIN,
        SMALLEST_CALLED_GAP,
        TC_MARGIN,
    )

    cells = published.cells
    final = cells[(cells.checkpoint_step == 42000) & (cells.schedule_steps == 42000)]
    mlm = final[(final.objective == "mlm") & np.isclose(final.masking_ratio.astype(float), 0.4)]
    clm = final[final.objective == "clm"]
    gaps = (
        mlm.groupby(["size", "task_type"])["mean"].mean() - clm.groupby(["size", "task_type"])["mean"].mean()
    ).unstack()
    expected = {t: gaps[t].min() for t in ("SC", "QA", "IR")} | {"TC": -gaps.loc["610m", "TC"]}
    assert SMALLEST_CALLED_GAP == pytest.approx(expected, abs=0.0005)
    for task_type, margin in COMPARABLE_MARGIN.items():
        assert SMALLEST_CALLED_GAP[task_type] / 2 - 0.01 < margin <= SMALLEST_CALLED_GAP[task_type] / 2
    assert CLAIM["clm_competitive_tc"].margin == COMPARABLE_MARGIN["TC"]
    assert CLAIM["biphasic_75_comparable"].margins == COMPARABLE_MARGIN
    assert CLAIM["cpt_clm_base_beats_mlm_base"].margins == {
        "QA": COMPARABLE_MARGIN["QA"],
        "IR": COMPARABLE_MARGIN["IR"],
    }
    assert CLAIM["cpt_12k_matches_mlm_cpt"].margins == {"SC": COMPARABLE_MARGIN["SC"], "QA": SMALLEST_CALLED_GAP["QA"]}
    for claim_id, labels, design in (
        ("clm_competitive_tc", None, TC_MARGIN),
        ("biphasic_75_comparable", None, BIPHASIC_MARGIN),
        ("cpt_clm_base_beats_mlm_base", ("QA", "IR"), CPT_MARGIN),
        ("cpt_12k_matches_mlm_cpt", ("SC", "TC", "IR"), CPT_12K_MARGIN),
    ):
        claim = CLAIM[claim_id]
        assert design == pytest.approx(design_margin(claim, cells, labels), abs=0.01), claim_id
        assert "the smallest gap the paper calls a difference" in claim.margin_source
        assert f"the design resolves {design:g}" in claim.margin_source


def test_crossovers_interpolate_in_log_steps():
    steps = np.array([1000.0, 2000.0, 5000.0])
    found = crossovers(steps, np.array([[2.0, 1.0, -1.0], [3.0, 2.0, 1.0], [-1.0, 1.0, 2.0]]))
    assert found[0] == pytest.approx(math.sqrt(2000 * 5000))  # halfway between 2k and 5k in log10
    assert found[1] == math.inf and found[2] == -math.inf


def _without(inputs, mask):
    cells = inputs.cells[~mask].reset_index(drop=True)
    return replace(inputs, cells=cells)


def test_a_missing_size_makes_the_claim_not_testable_naming_the_cells(published):
    """Issue 29: dropping every 1B TC run left "CLM matches MLM on TC" supported, silently."""
    cells = published.cells
    inputs = _without(published, (cells["size"] == "1b") & (cells.task_type == "TC"))
    used = tuple(CLAIM[c] for c in ("clm_competitive_tc", "u_shape_masking_610m_1b", "mlm_beats_clm_sc"))
    report = evaluate_claims(inputs, claims=used, reps=0).set_index("claim")
    row = report.loc["clm_competitive_tc"]
    assert row.verdict == NOT_TESTABLE and "\n" not in row.reason
    assert row.reason == (
        "no cells for 1b (the claim needs every one): missing 1b-mlm40-42k, 1b-clm-42k (conll2003, ontonotes5, uner)"
    )
    # The U-shape needs the 1B TC curve too; claims that do not use TC are untouched.
    assert report.loc["u_shape_masking_610m_1b", "verdict"] == NOT_TESTABLE
    assert report.loc["mlm_beats_clm_sc", "verdict"] == SUPPORTED and report.loc["mlm_beats_clm_sc", "warning"] == ""


def test_partly_missing_cells_warn_in_every_output(published, tmp_path):
    cells = published.cells
    inputs = _without(published, (cells.model == "1b-clm-42k") & (cells.dataset == "qqp"))
    # the claims that use 1B SC cells (issue 64: the warning is per claim, p < 1e-4 whatever the family)
    used = tuple(CLAIM[c] for c in ("mlm_beats_clm_sc", "gap_widens_with_size_sc", "clm_competitive_tc"))
    report = evaluate_claims(inputs, claims=used, reps=0)
    row = report.set_index("claim").loc["mlm_beats_clm_sc"]
    assert row.verdict == SUPPORTED and (row.cells_used, row.cells_needed) == (16, 18)
    assert row.warning == (
        "tested on 16 of 18 needed cells; missing 1b-clm-42k (qqp); "
        "unmatched (their pair or curve is incomplete) 1b-mlm40-42k (qqp)"
    )
    assert f"warning: mlm_beats_clm_sc: {row.warning}" in verdict_table(report)
    assert f"- `mlm_beats_clm_sc`: {row.warning}" in claims_markdown(report, None, None)
    report.to_csv(tmp_path / "c.csv", index=False)
    assert pd.read_csv(tmp_path / "c.csv").set_index("claim").loc["mlm_beats_clm_sc", "warning"] == row.warning


def test_runs_that_cannot_test_a_claim_say_why(mldr_records):
    report = evaluate_claims(inputs_from_records(mldr_records, "fixture", reps=200), reps=200).set_index("claim")
    assert (report.verdict == NOT_TESTABLE).all() and report.reason.str.len().gt(0).all()
    assert not report.reason.str.contains("\n").any()
    # 610m-mlm40-42k on MLDR is there, its CLM pair is not: named as missing and as unmatched.
    reason = report.loc["mlm_beats_clm_ir", "reason"]
    assert reason.startswith("needs 18 cells and can use none: missing 210m-mlm40-42k, 210m-clm-42k")
    assert "unmatched (their pair or curve is incomplete) 610m-mlm40-42k (mldr_en)" in reason
    one_seed = [
        make_record(model=f"{size}-{objective}-42k", task_type="SC", dataset=d, seed=0, test=80)
        for size in ("210m", "610m", "1b")
        for objective in ("mlm40", "clm")
        for d in ("sst2", "qqp", "mnli")
    ]
    row = evaluate_claims(inputs_from_records(one_seed, "one seed", reps=50), reps=50).set_index("claim")
    assert row.loc["mlm_beats_clm_sc", "verdict"] == NOT_TESTABLE
    assert "fewer than 2 seeds" in row.loc["mlm_beats_clm_sc", "reason"]
    external = [make_record(model="my-encoder", seed=s, test=80 + s) for s in range(3)]
    report = evaluate_claims(inputs_from_records(external, "external", reps=50), reps=50)
    assert (report.verdict == NOT_TESTABLE).all() and report.reason.str.startswith("needs").all()


def test_an_equivalence_claim_prints_its_90_percent_interval(published):
    claim = Claim(
        "tc_equivalent_210m",
        "CLM and MLM are equivalent on TC at 210M",
        "test",
        "equivalence",
        {"objective": "clm", "size": "210m", "checkpoint_step": 42000, "schedule_steps": 42000},
        {"objective": "mlm", "masking_ratio": 0.4, "size": "210m", "checkpoint_step": 42000, "schedule_steps": 42000},
        ("dataset",),
        "greater",
        "points",
        "within +-0.5",
        task_types=("TC",),
        margin=0.5,
    )
    report = evaluate_claims(published, claims=(claim,), reps=0)
    row = report.iloc[0]
    assert row.ci_level == 0.90 and row.verdict == SUPPORTED
    cells = published.cells
    chosen = cells[(cells.task_type == "TC") & cells.model.isin(["210m-clm-42k", "210m-mlm40-42k"])]
    variances = (chosen["sd"] ** 2 / 5 / 9).to_numpy()  # 6 cells, weights +-1/3
    df = variances.sum() ** 2 / np.sum(variances**2 / 4)
    assert (row.ci_high - row.ci_low) / 2 == pytest.approx(stats.t.ppf(0.95, df) * math.sqrt(variances.sum()))
    assert "(90% CI)" in claims_markdown(report, None, None)


def test_synthetic_release_runs_end_to_end():
    """Every LR and seed of the 42k MLM-40 / CLM models (synthetic, published truth, 30 test
    instances per run): LR selection, the calibrated bootstrap intervals, rliable point values,
    the LR variance-component claim."""
    models = [f"{size}-{obj}-42k" for size in ("210m", "610m", "1b") for obj in ("mlm40", "clm")]
    records = synthetic_records(models, instances=30, rng_seed=3)
    assert len(records) == 6 * 12 * 6 * 5
    report = evaluate_claims(inputs_from_records(iter(records), "synthetic", reps=500), reps=500).set_index("claim")
    sc = report.loc["mlm_beats_clm_sc"]
    assert sc.verdict == SUPPORTED and sc.n_runs == 90 and sc.boot_reps == 500
    assert sc.seed_boot_low < sc.estimate < sc.seed_boot_high
    # The test-set error cancels only partly in a difference of models: the seeds x instances
    # interval is at least as wide as the seed one.
    assert sc.instance_boot_high - sc.instance_boot_low >= sc.seed_boot_high - sc.seed_boot_low
    assert 0.5 < sc.prob_improvement <= 1.0 and not math.isnan(sc.iqm_difference)
    lr = report.loc["clm_less_lr_sensitive"]
    assert lr.verdict != NOT_TESTABLE and lr.n_runs == 6 * 12 * 4 * 5  # LRs 1e-5..1e-4
    assert lr.boundary == 1.0 and lr.ci_low <= lr.estimate
    assert report.loc["clm_leads_early", "verdict"] == NOT_TESTABLE  # no intermediate checkpoints here


@pytest.mark.e2e  # every claim evaluated at many SDs, over 30 s
def test_pretraining_sd_tipping_point_and_option(published, published_report):
    """At the tipping SD the verdict still holds; 2% above it, it does not (every claim re-tested
    with Holm); inconclusive claims have no tipping value; --pretraining-sd widens the intervals."""
    report = published_report.set_index("claim")
    tipping = report.loc["mlm_beats_clm_sc", "tipping_pretraining_sd"]
    assert 0.3 < tipping < 1.0
    at = evaluate_claims(published, reps=0, pretraining_sd=tipping).set_index("claim")
    above = evaluate_claims(published, reps=0, pretraining_sd=tipping * 1.02).set_index("claim")
    assert at.loc["mlm_beats_clm_sc", "verdict"] == SUPPORTED
    assert above.loc["mlm_beats_clm_sc", "verdict"] == INCONCLUSIVE
    assert above.loc["mlm_beats_clm_sc", "ci_high"] - above.loc["mlm_beats_clm_sc", "ci_low"] > (
        report.loc["mlm_beats_clm_sc", "ci_high"] - report.loc["mlm_beats_clm_sc", "ci_low"]
    )
    assert math.isnan(report.loc["cpt_clm_base_beats_mlm_base", "tipping_pretraining_sd"])
    assert report.loc["gap_widens_with_size_sc", "fragile"]  # overturned below its planning SD
    assert report.loc["clm_beats_mlm_tc_610m", "seeds_for_80"].endswith("seeds")
    wrong_side = "none: 210m to 610m observed on the wrong side"
    assert report.loc["gap_narrows_with_size_ir", "seeds_for_80"] == wrong_side
    with pytest.raises(ValueError, match="pretraining-sd"):
        evaluate_claims(published, reps=0, pretraining_sd=-1.0)


def test_readme_tables_are_the_published_report(published_report):
    """README.md's claims tables (tests/docs/test_readme_claims.py checks estimates, intervals and
    verdicts): the deciding component and qualifying count of each claim, and its tipping SD and
    designs for 80% power, as `python -m analysis claims --published` computes them."""
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text().splitlines()
    report = published_report.set_index("claim")
    robustness = {}
    for line in readme:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not cells[0].startswith("`"):
            continue
        claim = cells[0].split("`")[1]
        if len(cells) == 4 and claim in report.index and report.loc[claim, "verdict"] != NOT_TESTABLE:
            row = report.loc[claim]
            if row.shown != "all":
                assert f"({row.shown}; {row.qualifying} " in cells[0], (claim, cells[0])
        elif len(cells) == 5:
            robustness[claim] = cells
    testable = report[report.verdict != NOT_TESTABLE]
    assert set(robustness) == set(testable.index)
    for claim, (_, verdict, tipping, seeds, design) in robustness.items():
        row = testable.loc[claim]
        assert verdict == row.verdict + (" (fragile)" if row.fragile else ""), claim
        assert tipping == ("—" if math.isnan(row.tipping_pretraining_sd) else f"{row.tipping_pretraining_sd:.2f}")
        assert seeds == row.seeds_for_80, claim
        expected = f"{row.design_for_80} ({row.planning_pretraining_sd:.2f})"
        assert design == ("none" if row.design_for_80.startswith("none") else expected), claim


@pytest.mark.e2e  # every claim evaluated at many margins, over 30 s
def test_flip_margin_is_where_the_non_inferiority_verdict_changes(published, published_report):
    """Issue 36: the report prints the margin at which each non-inferiority verdict flips; the
    claim re-evaluated with a margin 1% above it is supported, 1% below it is not (Holm over the
    same family). Claims with a margin per task type (issue 63) print their margins, no flip value."""
    report = published_report.set_index("claim")
    flip = report.loc["clm_competitive_tc", "flip_margin"]
    # the words allow 0.24 (half of CLM's 0.48 win); the published numbers need about 0.45
    assert 0.24 < flip < 0.6 and report.loc["clm_competitive_tc", "verdict"] == INCONCLUSIVE
    for factor, verdict in ((1.01, SUPPORTED), (0.99, INCONCLUSIVE)):
        claims = tuple(replace(c, margin=flip * factor) if c.id == "clm_competitive_tc" else c for c in CLAIMS)
        again = evaluate_claims(published, claims=claims, reps=0).set_index("claim")
        assert again.loc["clm_competitive_tc", "verdict"] == verdict, factor
    assert math.isnan(report.loc["cpt_clm_base_beats_mlm_base", "flip_margin"])
    assert math.isnan(report.loc["mlm_beats_clm_sc", "flip_margin"])
    printed = verdict_table(published_report)
    assert f"supported when the margin exceeds {flip:.3f}" in printed
    assert "margin: cpt_clm_base_beats_mlm_base: per task type QA 5.08, IR 0.63 points" in printed
    assert "## Margins" in claims_markdown(published_report, None, None)


def test_the_headline_is_pre_registered_and_the_weakest_is_shown_beside_it(published, published_report):
    """Issue 36 item 5: the estimate shown is the headline named in the claim definition whatever
    the data say; the deciding (weakest) component is reported beside it with its caveat."""
    for gaps in ({"210m": 3.0, "610m": 1.0, "1b": 3.0}, {"210m": 1.0, "610m": 3.0, "1b": 3.0}):
        inputs = _tree(
            published,
            lambda cells, gaps=gaps: np.where(
                (cells.objective == "mlm") & np.isclose(cells.masking_tenths, 4.0), 80.0 + cells["size"].map(gaps), 80.0
            ),
        )
        # the claim alone (issue 64): a noise-free tree, its p is the same in any family
        row = evaluate_claims(inputs, claims=(CLAIM["mlm_beats_clm_sc"],), reps=0).set_index("claim").iloc[0]
        assert row.shown == CLAIM["mlm_beats_clm_sc"].headline == "610m"
        assert row.estimate == pytest.approx(gaps["610m"], abs=1e-9)
        assert row.weakest == min(gaps, key=gaps.get) and row.weakest_estimate == pytest.approx(1.0)
    assert all(c.headline for c in CLAIMS if c.test != "spread")
    table = verdict_table(published_report)
    assert "210m: 2.09 [1.75, 2.43]*" in table and "not a 95% interval" in table


def _with_replicate(published, model: str, shift: float):
    """The published cells plus a second pretraining run of `model` (`-rep2`), its means shifted."""
    cells = published.cells
    copy = cells[cells.model == model].assign(model=f"{model}-rep2")
    copy["mean"] = copy["mean"] + shift
    base = ["model", "task_type", "dataset", "mean", "sd", "n_seeds"]
    return replace(published, cells=describe_cells(pd.concat([cells[base], copy[base]], ignore_index=True)))


def test_a_replicate_named_run_aggregates_with_its_configuration(published):
    """Issue 36: `1b-clm-42k-rep2` selects as 1b-clm-42k; the 1B SC gap is MLM-40 minus the mean
    of the two CLM runs, each run's pretraining effect weighing half; the report prints the SD
    estimated from the two runs per task type, with its interval."""
    inputs = _with_replicate(published, "1b-clm-42k", shift=1.0)
    assert set(inputs.cells.loc[inputs.cells.replicate == 2, "configuration"]) == {"1b-clm-42k"}
    before = {c.label: c for c in claim_components(CLAIM["mlm_beats_clm_sc"], published.cells)}
    after = {c.label: c for c in claim_components(CLAIM["mlm_beats_clm_sc"], inputs.cells)}
    assert _value(after["1b"], inputs.cells) == pytest.approx(_value(before["1b"], published.cells) - 0.5)
    assert sum(w for c, w in after["1b"].weights.items() if inputs.cells.loc[c, "replicate"] == 2) == pytest.approx(
        -0.5
    )
    # the SD is estimated from the cells whatever claims are tested (issue 64: one claim is enough)
    report = evaluate_claims(inputs, claims=(CLAIM["mlm_beats_clm_sc"],), reps=0)
    estimates = {e.task_type: e for e in report.attrs["pretraining_sd_estimates"]}
    assert set(estimates) == set(TASK_TYPES) and all(e.runs == 2 and e.df == 1 for e in estimates.values())
    # Two runs 1 point apart on every dataset: MS = 0.5, the SD is sqrt(0.5 - seed part).
    sc = estimates["SC"]
    assert sc.sd == pytest.approx(math.sqrt(0.5 - sc.seed_part)) and sc.low <= sc.sd <= sc.high
    assert "estimated pretraining SD SC: " in verdict_table(report)
    assert "estimated from replicates" in report.set_index("claim").loc["mlm_beats_clm_sc", "pretraining_sd"]


def test_figure7_intervals_widen_with_the_pretraining_sd():
    """Issue 36: the masking-ratio spread claim compares eight separately pretrained models;
    --pretraining-sd was silently ignored there. Now its interval widens with it."""
    models = [f"610m-mlm{r}-42k" for r in (20, 30, 40, 50)] + [f"610m-clm-40k-mlm{r}-42k" for r in (20, 30, 40, 50)]
    # MLM-only spread 4 times CLM+MLM's: SD ratio about 0.4 (synthetic runs, published truth).
    shift = {"610m-mlm20-42k": -4, "610m-mlm50-42k": 4, "610m-clm-40k-mlm20-42k": -1, "610m-clm-40k-mlm50-42k": 1}
    records = synthetic_records(models, instances=5, rng_seed=4, shift=shift)
    inputs = inputs_from_records(iter(records), "fig7", reps=50)
    claim = (CLAIM["biphasic_less_ratio_sensitive"],)
    rows = [evaluate_claims(inputs, claims=claim, reps=50, pretraining_sd=sd).iloc[0] for sd in (0.0, 0.3, 0.6, 1.0)]
    assert [r.verdict for r in rows] == [SUPPORTED] * 3 + [INCONCLUSIVE]
    assert rows[0].ci_high < rows[1].ci_high < rows[2].ci_high < rows[3].ci_high
    assert rows[0].p_value < rows[1].p_value < rows[2].p_value < rows[3].p_value


def test_equal_seeds_get_the_sd_their_seed_count_allows():
    """Issue 52, item 6: n seeds drawn at the floor SD and rounded to the metric's step all land on
    one value 5% of the time (within 3 binomial SEs of 20,000 draws), and more often below it: the
    floor is a one-sided 95% upper bound of the SD that "all equal" allows."""
    from analysis.small_sample import equal_seeds_sd, score_resolution

    rng = np.random.default_rng(21)
    for n in (2, 5):
        floor = equal_seeds_sd(0.5, n)
        for sd, low, high in ((floor, 0.05 - 0.0047, 0.05 + 0.0047), (floor / 2, 0.08, 1.0)):
            draws = np.round((rng.uniform(0, 0.5, (20000, 1)) + rng.normal(0, sd, (20000, n))) / 0.5)
            rate = np.mean((draws == draws[:, :1]).all(axis=1))
            assert low <= rate <= high, (n, sd, rate)
    assert equal_seeds_sd(0.5, 2) > equal_seeds_sd(0.5, 5)  # more agreeing seeds, a tighter floor
    assert score_resolution([80.0, 80.5, 81.0, 80.5]) == 0.5 and math.isnan(score_resolution([80.0, 80.0]))


def test_a_cell_whose_seeds_are_all_equal_is_not_exact():
    """A cell with 5 identical seeds had SD 0: every contrast on it got an exact p. Its SD is now
    the floor of its dataset's score step, and the report names the cells."""
    from analysis.small_sample import equal_seeds_sd

    records = [
        make_record(
            model=f"{size}-{objective}-42k",
            task_type="SC",
            dataset=d,
            seed=s,
            test=80.0 if objective == "clm" else 80.0 + 0.25 * (s % 2),
        )
        for size in ("210m", "610m", "1b")
        for objective in ("mlm40", "clm")
        for d in ("sst2", "qqp", "mnli")
        for s in range(5)
    ]
    inputs = inputs_from_records(records, "equal seeds", reps=0)
    clm = inputs.cells[inputs.cells.objective == "clm"]
    assert clm.sd_floor.all() and np.allclose(clm.sd, equal_seeds_sd(0.25, 5))
    assert not inputs.cells[inputs.cells.objective == "mlm"].sd_floor.any()
    row = evaluate_claims(inputs, reps=0).set_index("claim").loc["mlm_beats_clm_sc"]
    assert 0 < row.p_value < 1 and row.ci_high - row.ci_low > 0.01
    assert "seeds all equal in 210m-clm-42k" in row.warning


def test_a_toy_tag_opens_every_verdict_and_the_summary(published_report):
    text = claims_markdown(published_report, None, None, label="Toy run: no evidence.", tag="[toy]")
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    verdict_rows = rows[: len(published_report)]
    assert verdict_rows and all("| **[toy] " in line for line in verdict_rows)
    assert "[toy] Summary: " in text and "# [toy] The paper's claims" in text
    assert "[toy]" not in claims_markdown(published_report, None, None)


def test_power_table_leads_with_the_verdicts_power_with_holm(published_report):
    """Issue 63, item 5: the sentence power table gives P(verdict supported), the simulated power of
    the report's decision with Holm (decision_power), and the power alone (no Holm) labelled apart;
    Holm never raises a claim's power above its test's alone."""
    text = claims_markdown(published_report, None, None)
    assert "| claim | power at the observed effects (with Holm) | power alone (no Holm) | why below 50% |" in text
    row = published_report.set_index("claim").loc["clm_competitive_tc"]
    lines = text.splitlines()
    table = lines[
        lines.index("| claim | power at the observed effects (with Holm) | power alone (no Holm) | why below 50% |") :
    ]
    line = next(x for x in table if x.startswith("| `clm_competitive_tc` |"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[1] == f"{row.decision_power:.2f}" and cells[2] == f"{row.power_alone:.2f}"
    testable = published_report[published_report["power_alone"].notna() & published_report["decision_power"].notna()]
    assert (testable["decision_power"] <= testable["power_alone"] + 0.05).all()
    # below 50% only through Holm (the U-shape: 0.27 with Holm, 0.70 alone): the reason says so
    u_shape = published_report.set_index("claim").loc["u_shape_masking_610m_1b"]
    assert u_shape.decision_power < 0.5 <= u_shape.power_alone and u_shape.power_note == ""
    line = next(x for x in table if x.startswith("| `u_shape_masking_610m_1b` |"))
    assert line.endswith(f"| Holm across the family: its own test alone would reach {u_shape.power_alone:.2f} |")
