"""The statistics behind a claim's verdict (analysis.claims.hypothesis_tests), its power (analysis.claims.power) and
the small-sample corrections and variance components (analysis.small_sample)."""

import math
from dataclasses import replace

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestPower

from analysis.claims.hypothesis_tests import (
    CONTRADICTED,
    INCONCLUSIVE,
    LEANS_AGAINST,
    SUPPORTED,
    CellTerm,
    ComponentStats,
    claim_p,
    component_p,
    decide,
    holm,
    interval,
    tipping_pretraining_sd,
    verdicts_at,
    wrong_side,
)
from analysis.claims.power import claim_power, component_power, plan
from analysis.models import contrast_fit
from analysis.small_sample import (
    fieller_ratio,
    level_variance,
    lr_variance,
    seed_bootstrap_calibration,
    stretch,
    welch_df,
)


def _difference(estimate, sd=1.0, n=5, direction="greater", null=0.0, label="c", curve=None):
    """A component treatment - control of two cells (two models) with seed sd `sd` and n seeds."""
    terms = (CellTerm("t", 1.0, sd, n), CellTerm("c", -1.0, sd, n))
    return ComponentStats(label, curve or label, estimate, direction, null, terms)


def test_component_p_is_twice_the_one_sided_t_p_in_the_claimed_direction():
    c = _difference(1.0, sd=1.0, n=5)  # se = sqrt(2 / 5), df = 8 (Welch, equal cells)
    se, df = c.se_df()
    assert se == pytest.approx(math.sqrt(0.4)) and df == pytest.approx(8.0)
    p_for, p_against = component_p(c)
    assert p_for == pytest.approx(2 * stats.t.sf(1.0 / math.sqrt(0.4), 8))
    assert p_against == 1.0  # twice the other tail (> 1/2 of it), capped at 1
    assert component_p(_difference(-1.0))[1] == pytest.approx(p_for)
    # "less": the same numbers mirrored; a non-inferiority boundary shifts the t.
    assert component_p(_difference(-1.0, direction="less"))[0] == pytest.approx(p_for)
    shifted = component_p(_difference(0.0, null=-1.0))[0]
    assert shifted == pytest.approx(p_for)
    low, high, level = interval(c)
    assert level == 0.95 and (high - low) / 2 == pytest.approx(stats.t.ppf(0.975, 8) * math.sqrt(0.4))


def test_the_cell_means_closed_form_is_statsmodels_ols_with_hc2():
    rng = np.random.default_rng(0)
    scores = [rng.normal(m, s, n) for m, s, n in ((80, 0.5, 5), (78, 2.0, 5), (60, 1.0, 4))]
    weights = np.array([0.5, 0.5, -1.0])
    fit = contrast_fit(np.concatenate(scores), np.repeat([0, 1, 2], [5, 5, 4]), weights)
    sds = [float(np.std(x, ddof=1)) for x in scores]
    terms = tuple(CellTerm(str(i), w, sd, len(x)) for i, (w, sd, x) in enumerate(zip(weights, sds, scores)))
    estimate = float(weights @ [x.mean() for x in scores])
    se, df = ComponentStats("c", "c", estimate, "greater", terms=terms).se_df()
    assert fit.estimate == pytest.approx(estimate)
    assert fit.df == pytest.approx(df)
    assert (fit.ci_high - fit.estimate) == pytest.approx(stats.t.ppf(0.975, df) * se)


def test_tost_component_uses_5_percent_per_side_and_a_90_interval():
    c = _difference(0.1, sd=0.3, n=5, direction="equivalent", null=0.5)
    se, df = c.se_df()
    p_for, _ = component_p(c)
    expected = max(stats.t.sf((0.1 + 0.5) / se, df), stats.t.cdf((0.1 - 0.5) / se, df))
    assert p_for == pytest.approx(expected)
    low, high, level = interval(c)
    assert level == 0.90 and high - 0.1 == pytest.approx(stats.t.ppf(0.95, df) * se)
    # TOST passes at 5% exactly when the 90% interval lies inside the margins.
    assert (p_for < 0.05) == (low > -0.5 and high < 0.5)


def test_every_level_is_an_intersection_union_and_against_is_bonferroni():
    sizes = [_difference(3.0, label="210m"), _difference(2.5, label="610m"), _difference(-1.5, label="1b")]
    each = [component_p(c) for c in sizes]
    result = claim_p(sizes)
    assert result.p_for == max(p for p, _ in each) and sizes[result.deciding].label == "1b"
    assert result.p_against == pytest.approx(min(1.0, 3 * min(q for _, q in each)))
    assert result.passing == (True, True, False)


def test_holm_matches_statsmodels_and_a_hand_computation():
    p = [0.001, 0.04, 0.03, 0.2, 0.012]
    assert np.allclose(holm(p), multipletests(p, method="holm")[1])
    # By hand: the sorted p-values times 5, 4, 3, 2, 1, then their running maximum.
    assert np.allclose(holm(p), [0.005, 0.09, 0.09, 0.2, 0.048])
    with_gap = holm([0.01, np.nan, 0.04])  # an untestable claim is not in the family
    assert np.isnan(with_gap[1]) and np.allclose(with_gap[[0, 2]], multipletests([0.01, 0.04], method="holm")[1])


def test_verdicts_are_holm_adjusted_across_claims():
    strong, weak, wrong = _difference(3.0), _difference(1.6), _difference(-3.0)
    p_weak = claim_p([weak]).p_for
    assert p_weak < 0.05 < 2 * p_weak  # supported alone, not once a second claim shares the family
    assert verdicts_at([[weak]]) == [SUPPORTED]
    assert verdicts_at([[strong], [weak], None, [wrong]]) == [SUPPORTED, INCONCLUSIVE, "", CONTRADICTED]


def test_leans_against_is_an_undecided_claim_with_an_estimate_on_the_wrong_side():
    """Issue 63, item 4: the four undecided/decided words, each from its own rule."""
    assert not wrong_side([_difference(0.3)]) and wrong_side([_difference(-0.3)])
    assert wrong_side([_difference(0.3), _difference(-0.1, label="d")])  # any component
    assert wrong_side([_difference(0.3, direction="less")])
    assert not wrong_side([_difference(-0.5, null=-1.0)])  # non-inferiority: above -margin is the claimed side
    assert wrong_side([_difference(-1.5, null=-1.0)])
    assert wrong_side([_difference(1.2, direction="equivalent", null=1.0)])
    assert not wrong_side([_difference(0.2, direction="equivalent", null=1.0)])
    p_for, p_against = [0.01, 0.5, 0.5, 0.5], [1.0, 0.01, 0.5, 0.5]
    against = [False, False, True, False]
    assert list(decide(p_for, p_against, against)) == [SUPPORTED, CONTRADICTED, LEANS_AGAINST, INCONCLUSIVE]
    assert list(decide(p_for, p_against)) == [SUPPORTED, CONTRADICTED, INCONCLUSIVE, INCONCLUSIVE]


def test_leans_against_rate_on_simulated_estimates():
    """ "Leans against" describes the estimate; it is no test. On simulated 5-seed differences it
    appears about half the time when the truth sits on the boundary and rarely (Phi(-z)) when the
    claim is true by z standard errors: 20,000 draws each (binomial SE <= 0.4 points)."""
    rng = np.random.default_rng(3)
    se = math.sqrt(2 / 5)  # two cells of sd 1, 5 seeds
    for truth, expected in ((0.0, 0.5), (2 * se, stats.norm.cdf(-2)), (3 * se, stats.norm.cdf(-3))):
        estimates = truth + se * rng.standard_normal(20000)
        rate = np.mean([wrong_side([_difference(e)]) for e in estimates])
        assert rate == pytest.approx(expected, abs=0.012), (truth, rate)


def test_tipping_pretraining_sd_is_where_the_verdict_flips():
    """Two cells of two models: tau adds 2 tau^2 to the variance. The tipping value keeps the
    verdict; 1% more overturns it; inconclusive claims have none."""
    claims = [[_difference(2.0, sd=0.5, n=5)], [_difference(0.2, sd=0.5, n=5)]]
    tipping = tipping_pretraining_sd(claims)
    assert math.isnan(tipping[1])
    tau = tipping[0]
    assert verdicts_at(claims, tau)[0] == SUPPORTED and verdicts_at(claims, tau * 1.01)[0] == INCONCLUSIVE
    # By hand: Holm doubles the smaller of the two p-values, so the claim holds while
    # 2 / sqrt(0.1 + 2 tau^2) exceeds the t quantile at 0.05 / 2 / 2 one-sided (Satterthwaite df).
    se, df = claims[0][0].se_df(tau)
    assert se == pytest.approx(math.sqrt(0.1 + 2 * tau**2))
    assert 2.0 / se == pytest.approx(stats.t.isf(0.0125, df), rel=2e-3)
    assert tipping_pretraining_sd([[_difference(500.0, sd=0.1)]]) == [math.inf]  # holds up to 50 points


def test_a_model_effect_is_shared_by_its_datasets():
    # Category average over 3 datasets: treatment model weights 1/3 each sum to 1, control -1.
    terms = tuple(CellTerm(m, w, 0.0 + 0.3, 5) for m, w in [("t", 1 / 3)] * 3 + [("c", -1 / 3)] * 3)
    assert ComponentStats("avg", "avg", 1.0, "greater", terms=terms).pretraining_weight == pytest.approx(2.0)


def test_power_of_one_cell_is_statsmodels_ttest_power():
    # One cell against 0: a one-sample t test (df n - 1) at 2.5% one-sided.
    component = ComponentStats("cell", "cell", 0.8, "greater", terms=(CellTerm("m", 1.0, 1.0, 5),))
    for n in (3, 5, 12):
        expected = TTestPower().power(effect_size=0.8, nobs=n, alpha=0.025, alternative="larger")
        assert component_power(component, n) == pytest.approx(expected, rel=1e-6)


def test_planned_design_reaches_80_percent_and_one_seed_fewer_does_not():
    sizes = [_difference(0.6, sd=0.8, label=s) for s in ("210m", "610m", "1b")]
    design = plan(sizes)
    assert design.runs == 1 and design.power >= 0.8
    assert claim_power(sizes, design.seeds - 1) < 0.8
    with_runs = plan(sizes, pretraining_sd=0.3)
    assert with_runs.runs >= 2 and with_runs.power >= 0.8
    assert claim_power(sizes, with_runs.seeds - 1, with_runs.runs, 0.3) < 0.8
    wrong = plan([_difference(-0.1)])
    assert wrong.seeds is None and wrong.reason == "none: c observed on the wrong side"


def test_predicted_power_matches_simulated_support_rate():
    """2000 simulated experiments of the planned size (two cells, n seeds each): the share whose
    95% Welch interval clears 0 is the predicted power within 3 binomial standard errors."""
    component = _difference(0.6, sd=0.8)
    seeds = plan([component]).seeds
    rng = np.random.default_rng(1)
    t = rng.normal(0.6, 0.8, (2000, seeds))
    c = rng.normal(0.0, 0.8, (2000, seeds))
    result = stats.ttest_ind(t, c, axis=1, equal_var=False, alternative="greater")
    rate = np.mean(result.pvalue < 0.025)
    predicted = component_power(component, seeds)
    assert abs(rate - predicted) < 3 * math.sqrt(predicted * (1 - predicted) / 2000)


def test_seed_bootstrap_calibration_hand_value():
    calibration = seed_bootstrap_calibration([1.0], [2.0], [5])
    assert calibration.df == pytest.approx(4.0)
    assert calibration.factor == pytest.approx(math.sqrt(5 / 4) * stats.t.ppf(0.975, 4) / stats.norm.ppf(0.975))
    assert stretch(10.0, 9.0, 12.0, 2.0) == (8.0, 14.0)
    assert welch_df([1.0, 1.0], [4, 4]) == pytest.approx(8.0)


def test_lr_variance_is_unbiased_and_ignores_seed_effects():
    """4 LRs with true means of variance 1 (ddof 1), seed effects and noise of sd 1 each: the
    method-of-moments estimate averages 1 over 4000 tables (the plain variance would be ~2.6)."""
    rng = np.random.default_rng(2)
    lr_means = np.array([-1.0, 0.0, 1.0, 0.0]) * math.sqrt(1.5)  # var(ddof=1) = 1
    tables = lr_means + rng.normal(0, 1, (4000, 5, 1)) + rng.normal(0, 1, (4000, 5, 4))
    estimates = np.array([lr_variance(t) for t in tables])
    assert abs(estimates.mean() - 1.0) < 3 * estimates.std() / math.sqrt(4000)
    assert np.mean([t.var(ddof=1) for t in tables]) > 2.0


def test_level_variance_removes_the_seed_noise_of_the_means():
    rng = np.random.default_rng(3)
    true = np.array([1.0, -1.0, 0.5, -0.5])  # var(ddof=1) = 0.8333
    scores = true[:, None] + rng.normal(0, 2.0, (3000, 4, 5))
    estimates = [level_variance(s.mean(axis=1), s.std(axis=1, ddof=1), [5] * 4) for s in scores]
    assert abs(np.mean(estimates) - np.var(true, ddof=1)) < 3 * np.std(estimates) / math.sqrt(3000)


def test_fieller_interval_hand_case():
    # Control values 2 +- 1, treatment exactly half of them: ratio 0.5 whatever the noise, and
    # the interval is a point (a - 0.5 b = 0 in every group).
    control = np.array([1.0, 3.0, 2.0, 2.5, 1.5])
    fit = fieller_ratio(control / 2, control)
    assert fit.ratio == pytest.approx(0.5) and fit.low == pytest.approx(0.5) and fit.high == pytest.approx(0.5)
    noisy = fieller_ratio(control / 2 + np.array([0.1, -0.1, 0.2, -0.2, 0.0]), control)
    assert noisy.low < 0.5 < noisy.high and noisy.df == 4
    unbounded = fieller_ratio([1.0, -1.0, 0.5], [0.1, -0.1, 0.05])  # the control mean is not clear of 0
    assert (unbounded.low, unbounded.high) == (-math.inf, math.inf)


def test_decision_power_of_one_component_alone_is_the_welch_tests_rate():
    """Issue 36 item 4, issue 63 item 5: the simulated whole decision reduces, for one claim of one
    two-cell component (Holm over one claim is its own p), to the rate at which scipy's Welch t test
    on raw simulated seeds supports it (p < 2.5% one-sided, the two-sided 5% convention), within 4
    binomial standard errors; the analytic noncentral t power at the true Welch df is close above it
    (the df the test uses is estimated)."""
    from analysis.claims.power import decision_power

    component = _difference(0.6, sd=0.8)
    rng = np.random.default_rng(11)
    for seeds in (3, 4, 8):
        got = decision_power([[component]], seeds, sims=4000, rng=np.random.default_rng(3))[0]
        treated = 0.6 + 0.8 * rng.standard_normal((4000, seeds))
        control = 0.8 * rng.standard_normal((4000, seeds))
        welch = stats.ttest_ind(treated, control, axis=1, equal_var=False, alternative="greater").pvalue
        expected = float(np.mean(welch < 0.025))
        assert abs(got - expected) < 4 * math.sqrt(2 * expected * (1 - expected) / 4000), seeds
        assert -0.01 < component_power(component, seeds) - got < 0.05, seeds


def _engine_support_rate(claims, truth_sd, n, sims, rng, primary=None):
    """The whole decision re-run by the report's own tests on raw simulated seeds: per cell
    (CellTerm.cell) its seeds drawn around 0 with its SD, every component rebuilt from its cells
    (estimate = truth + sum w x mean error, terms with the drawn SDs), claim_p and family_holm."""
    from dataclasses import replace as with_

    from analysis.claims.hypothesis_tests import family_holm

    hits = np.zeros((sims, len(claims)))
    for s in range(sims):
        drawn = {cell: sd * rng.standard_normal(n) for cell, sd in truth_sd.items()}
        p = []
        for comps in claims:
            rebuilt = []
            for c in comps:
                terms = tuple(with_(t, sd=float(drawn[t.cell].std(ddof=1))) for t in c.terms)
                error = sum(t.weight * drawn[t.cell].mean() for t in c.terms)
                rebuilt.append(with_(c, estimate=c.estimate + error, terms=terms))
            p.append(claim_p(rebuilt).p_for)
        hits[s] = family_holm(np.array(p), primary) < 0.05
    return hits.mean(axis=0)


def test_decision_power_shares_the_cells_its_components_share():
    """Issue 63, item 5: two components that share a noisy control cell move together, so the claim
    needing both passes more often than the product of their powers; and two claims sharing it rise
    and fall together under Holm. decision_power, which draws the cells, matches the report's own
    tests re-run on raw simulated seeds within 4 binomial standard errors, where treating the
    components as independent (the earlier simulation) is off by more than 0.1."""
    from analysis.claims.power import decision_power

    def term(cell, weight, sd):
        return CellTerm(f"m{cell}", weight, sd, 5, cell=cell)

    sd = {0: 1.2, 1: 0.2, 2: 0.2, 3: 0.2}
    both = [
        ComponentStats(f"t{k} - c", "x", 1.3, "greater", 0.0, (term(k, 1.0, sd[k]), term(0, -1.0, sd[0])))
        for k in (1, 2)
    ]
    other = [ComponentStats("t3 - c", "x", 1.3, "greater", 0.0, (term(3, 1.0, sd[3]), term(0, -1.0, sd[0])))]
    family = [both, other]
    printed = decision_power(family, None, sims=4000, rng=np.random.default_rng(5))
    engine = _engine_support_rate(family, sd, 5, 2000, np.random.default_rng(6))
    for got, expected in zip(printed, engine):
        assert abs(got - expected) < 4 * math.sqrt(expected * (1 - expected) * (1 / 4000 + 1 / 2000))
    independent = [[replace(c, terms=tuple(replace(t, cell=-1) for t in c.terms)) for c in comps] for comps in family]
    unshared = decision_power(independent, None, sims=4000, rng=np.random.default_rng(5))
    assert printed[0] - unshared[0] > 0.1


def test_decision_power_counts_holm_and_every_component():
    """Three claims of three components each: the chance that the report supports a claim (every
    component, Holm across the claims) is below the power of its components' tests alone, and a
    hopeless claim in the family lowers the others' (Holm divides by more); the planned design for
    the whole decision needs at least the seeds of the claim alone."""
    from analysis.claims.power import decision_power, plan_decision

    strong = [_difference(2.0, sd=0.8, label=s) for s in ("210m", "610m", "1b")]
    weak = [_difference(1.2, sd=0.8, label=s) for s in ("210m", "610m", "1b")]
    hopeless = [_difference(0.01, sd=0.8, label="x")]
    rng = np.random.default_rng
    alone = claim_power(weak, 10)
    assert 0.5 < alone < 0.95
    family = decision_power([strong, weak, hopeless], 10, sims=4000, rng=rng(4))
    assert family[1] < alone - 0.05
    without = decision_power([strong, weak], 10, sims=4000, rng=rng(4))
    assert family[1] < without[1] - 0.02
    seeds_for, _ = plan_decision([strong, weak, hopeless], [0.3, 0.3, 0.3], sims=1000)
    assert int(seeds_for[1].split()[0]) >= plan(weak).seeds


def test_one_run_with_an_assumed_pretraining_sd_is_the_report_told_that_sd():
    """Issue 91: one pretraining run per model whose runs vary by tau, analysed with `--pretraining-sd
    tau` (each contrast's variance + per model (sum of its weights x tau)^2, known): decision_power
    with assumed_pretraining_sd matches the report's own tests re-run on raw seeds plus one run effect
    per model within 4 binomial standard errors; at tau 0 it is the plain one-run power, draw for draw."""
    from dataclasses import replace as with_

    from analysis.claims.hypothesis_tests import family_holm
    from analysis.claims.power import decision_power

    def term(cell, model, weight, sd):
        return CellTerm(model, weight, sd, 5, cell=cell)

    sd = {0: 0.6, 1: 0.4, 2: 0.5}
    models = {0: "ctrl", 1: "a", 2: "a"}  # cells 1 and 2 share model a's run effect
    first = [
        ComponentStats("a1 - c", "x", 1.4, "greater", 0.0, (term(1, "a", 1.0, sd[1]), term(0, "ctrl", -1.0, sd[0])))
    ]
    second = [
        ComponentStats("a2 - c", "x", 1.6, "greater", 0.0, (term(2, "a", 1.0, sd[2]), term(0, "ctrl", -1.0, sd[0])))
    ]
    family, tau = [first, second], 0.3
    printed = decision_power(
        family, 5, 1, [tau, tau], sims=4000, rng=np.random.default_rng(1), assumed_pretraining_sd=True
    )
    rng, sims = np.random.default_rng(2), 2000
    hits = np.zeros((sims, 2))
    for s in range(sims):
        effect = {m: tau * rng.standard_normal() for m in set(models.values())}
        drawn = {cell: effect[models[cell]] + v * rng.standard_normal(5) for cell, v in sd.items()}
        p = []
        for comps in family:
            rebuilt = []
            for c in comps:
                terms = tuple(with_(t, sd=float(drawn[t.cell].std(ddof=1))) for t in c.terms)
                error = sum(t.weight * drawn[t.cell].mean() for t in c.terms)
                rebuilt.append(with_(c, estimate=c.estimate + error, terms=terms))
            p.append(claim_p(rebuilt, tau).p_for)
        hits[s] = family_holm(np.array(p)) < 0.05
    for got, expected in zip(printed, hits.mean(axis=0)):
        assert abs(got - expected) < 4 * math.sqrt(expected * (1 - expected) * (1 / 4000 + 1 / sims)), (got, expected)
    plain = decision_power(family, 5, 1, sims=500, rng=np.random.default_rng(3))
    at_zero = decision_power(
        family, 5, 1, [0.0, 0.0], sims=500, rng=np.random.default_rng(3), assumed_pretraining_sd=True
    )
    assert list(plain) == list(at_zero) and printed[0] < plain[0]
