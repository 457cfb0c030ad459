"""Simulated releases of the published design (analysis.claims.simulation): the report's intervals
cover their targets, false sentences are never supported, true ones are at the predicted power.

Each test runs as many simulations as fit in a few seconds; its tolerance is 3 binomial standard
errors of 95% for that count (a coverage of 95% fails one run in about 400). The full study with
2,000 simulations (docs/claims.md, "Checks") is `python -m analysis claims-coverage`.
"""

import math

import numpy as np
import pytest
from scipy import stats

from analysis.claims import simulation

NOMINAL = 0.95


def _within_binomial(rate: float, sims: int) -> bool:
    return abs(rate - NOMINAL) <= 3 * math.sqrt(NOMINAL * (1 - NOMINAL) / sims)


def test_analytic_intervals_cover_every_component():
    result = simulation.analytic_coverage(1000, np.random.default_rng(10))
    assert len(result) == 22  # every claim but the two spread ones (issue 63 added the IR-mean reading)
    for claim, entry in result.items():
        assert _within_binomial(entry["rate"], 1000), (claim, entry)
    # The weakest component, selected after the fact, is not a 95% interval (issue 36 item 5): its
    # coverage strays from 95% by more than the binomial error for some claims (94-98% in all)
    strays = [abs(e["weakest"]["rate"] - NOMINAL) for e in result.values() if "weakest" in e]
    assert max(strays) > 3 * math.sqrt(NOMINAL * (1 - NOMINAL) / 1000)


def test_seed_bootstrap_is_calibrated():
    """The t-calibrated seed bootstrap of every component of the 42k claims (the plain percentile
    interval it replaced covers about 89%: docs/claims.md)."""
    sims = 120
    result = simulation.bootstrap_coverage(sims, 400, np.random.default_rng(11), rliable=False)
    assert _within_binomial(result["seed bootstrap (t-calibrated)"]["rate"], sims), result


def test_seeds_by_instances_interval_covers_the_test_set_population():
    sims = 80
    result = simulation.instance_coverage(sims, 400, np.random.default_rng(12))
    for entry in result.values():
        assert _within_binomial(entry["rate"], sims), result


def test_crossover_interval_covers_the_true_crossover():
    sims = 300
    result = simulation.crossover_coverage(sims, np.random.default_rng(13))
    for name, entry in result.items():
        if "none by 40k" in name:  # TC: CLM still ahead at 40k by far more than its noise
            assert entry["rate"] == 1.0
        else:
            assert _within_binomial(entry["rate"], sims), (name, entry)


def test_spread_claims_recover_a_planted_ratio():
    """Planted SD ratio 0.5 with twice the seed noise on the treatment side: the variance
    components find 0.5 (a plain SD ratio is biased towards 1 and above), the Fieller interval
    covers it."""
    sims = 300
    result = simulation.spread_recovery(sims, np.random.default_rng(14))
    for name, entry in result.items():
        assert entry["mean_estimate"] == pytest.approx(0.5, abs=0.04), (name, entry)
        assert entry["plain_sd_ratio"] > 0.6, (name, entry)
        assert _within_binomial(entry["coverage"]["rate"], sims), (name, entry)


@pytest.mark.e2e  # a simulation of false and true sentences, over 30 s
def test_false_sentences_are_never_supported_and_true_ones_at_their_power():
    """Issue 29's trees: gaps +4, +4, -1.5 over sizes; CLM - MLM = +0.8, -0.8, 0 on TC; a monotone
    convex masking curve; issue 36's: IR falling with the ratio, 75/25 biphasic 1 point below MLM.
    A false sentence has a chance of being supported below 0.1% (the power at that truth) and is
    supported at most as often as that allows (99.9% binomial quantile: 0 or 1 of 150). A sentence
    false at its boundary (one component exactly on it) is supported at most 2.5% of the time by
    construction: below the issue's 5% bound within the 99.9% binomial quantile. Each true version
    is supported at the predicted rate within 3 binomial standard errors, every component on its
    claimed side. Where the compared models are equal, a "comparable"/"competitive" claim is
    supported at its predicted power (issue 63: its margin comes from the words, half the smallest
    gap the paper calls a difference, so that power is printed rather than held at 50% as issue 52's
    design margins did); an IR trend of 0.8 points per 10 pp is found (the all-steps test found it
    3.8% of the time)."""
    sims = 150
    result = simulation.sentence_trees(sims, np.random.default_rng(15))
    assert len(result) == 28
    for name, entry in result.items():
        supported, power = round(entry["supported"]["rate"] * sims), entry["predicted_power"]
        spread = 3 * math.sqrt(max(power * (1 - power), 0.01) / sims)
        if "(false sentence)" in name:
            assert power < 1e-3 and supported <= stats.binom.ppf(0.999, sims, max(power, 1e-12)), (name, entry)
        elif "(boundary sentence)" in name:
            assert power <= 0.0251 and supported <= stats.binom.ppf(0.999, sims, 0.05), (name, entry)
        elif "(equal sentence)" in name:
            assert abs(supported / sims - power) <= spread, (name, entry)
        elif "true at" in name:  # IR's 0.8 points per 10 pp must clear 9 dataset curves (issue 63)
            # the predicted power, a product of 9 noncentral t powers at the true Welch df, is about
            # 0.005 per component above the test's (whose df is estimated): 0.80 vs 0.75 at 600 sims
            assert power > 0.75 and -spread - 0.05 <= supported / sims - power <= spread, (name, entry)
        else:
            assert power > 0.9 and abs(supported / sims - power) <= spread, (name, entry)
            assert entry["components_on_claimed_side"] > 0.99


@pytest.mark.e2e  # a 2,000-tree simulation, over 30 s
def test_every_claim_has_power_at_the_papers_effects_or_says_why_not():
    """Issue 52, item 8: every claim the published numbers test, simulated with 5 seeds per cell.
    With its component nearest the boundary moved onto it, it is supported at most 5% of the time
    (99.9% binomial quantile). At the paper's own effects it is supported at least half of the time
    (within 3 binomial SEs), or analysis.claims.power says why (a component on the wrong side, or effects
    too small for 5 seeds) and the simulation agrees that it is not; one-component claims match
    the predicted power within 3 binomial SEs (components sharing cells are correlated, so the
    product of their powers is only a guide)."""
    sims = 150
    result = simulation.paper_effects(sims, np.random.default_rng(16))
    testable = {c.id for c in simulation.CLAIMS if not c.needs_runs and c.test != "spread"}
    assert set(result) == testable and len(testable) >= 20
    for claim_id, entry in result.items():
        at_paper, boundary = entry["paper"]["supported"]["rate"], entry["boundary"]["supported"]["rate"]
        assert round(boundary * sims) <= stats.binom.ppf(0.999, sims, 0.05), (claim_id, entry)
        spread = 3 * math.sqrt(0.25 / sims)
        if entry["power_alone"] >= 0.5:
            assert entry["why"] == "" and at_paper >= 0.5 - spread, (claim_id, entry)
        else:
            assert entry["why"] and at_paper < 0.5 + spread, (claim_id, entry)
        if len(simulation.claim_components(simulation.CLAIM[claim_id], simulation.published_truth())) == 1:
            power = entry["power_alone"]
            assert abs(at_paper - power) <= 3 * math.sqrt(max(power * (1 - power), 0.01) / sims), (claim_id, entry)
