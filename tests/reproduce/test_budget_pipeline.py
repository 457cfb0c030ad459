"""The budget's predicted power against the whole pipeline (issue 91, "Done when"): synthetic run
records of a design, drawn from the planning values (analysis.claims.simulation.design_records),
decided by `analysis claims`' own code (pipeline_verdicts: LR selection, cells, every claim's
tests, Holm), against what `reproduce budget` prints for that design (family_power)."""

from __future__ import annotations

import math

import pytest

from contracts.paper import FINETUNE_LRS
from reproduce import budget

pytestmark = pytest.mark.e2e  # about 2 minutes: 300 simulated releases through the claims analysis

SIMS = 60


@pytest.mark.parametrize(
    "design, pretraining_sd",
    [
        (budget.Design(budget.SIZES, 5, 1, FINETUNE_LRS), 0.0),  # the paper's study
        (budget.Design(("210m",), 5, 1, FINETUNE_LRS), 1.0),  # a 210m-only slice, an assumed SD
        (budget.Design(budget.SIZES, 3, 1, (5e-5,)), 0.5),  # one LR per cell
        # MLM-40 and CLM only (the objective claims' models)
        (budget.Design(budget.SIZES, 3, 1, (5e-5,), *budget.MODEL_SETS["mlm40+clm"]), 0.5),
    ],
    ids=["paper", "210m-only", "one-lr", "mlm40-clm"],
)
def test_the_planner_decides_as_the_claims_analysis_does_on_the_same_releases(design, pretraining_sd):
    """Paired: on the same simulated releases, the planner's test (decision_on_draws, the test
    decision_power simulates) and `analysis claims` support the same claims, so the two powers
    agree within 0.03 however few the releases (common random numbers: the difference is a
    disagreement of the logic, not Monte Carlo noise). Unpaired: the printed power (4,000 draws
    of the planner's own) agrees with the pipeline's rate within 0.03 plus 3 binomial standard
    errors of the pipeline's SIMS releases (its Monte Carlo noise, stated)."""
    check = budget.pipeline_check(design, SIMS, pretraining_sd, rng_seed=1)
    compared = [i for i, complete in enumerate(check["complete"]) if complete]
    assert compared, "the design decides no claim: nothing compared"
    for i in compared:
        claim, pipeline = check["ids"][i], check["pipeline"][i]
        assert abs(pipeline - check["same_draws"][i]) <= 0.03, claim
        band = 0.03 + 3 * math.sqrt(max(pipeline * (1 - pipeline), 0.02) / SIMS)
        assert abs(pipeline - check["predicted"][i]) <= band, (claim, pipeline, check["predicted"][i])
    # the paper's design at SD 0 decides claims both ways: the check is not all zeros and ones
    assert any(0.1 < check["pipeline"][i] < 0.9 for i in compared) or not design.is_paper


def test_replicated_runs_are_planned_as_the_claims_analysis_estimates_their_spread():
    """Two runs per configuration: `analysis claims` estimates the pretraining SD per task type from
    every configuration's runs (df 15 x (2 - 1)) and tests each claim with it; the budget plans the
    same test (analysis.claims.power._pooled_replicate_tests). Before it did, the planner gave each
    model its own spread (df 1) and printed 0.00 for claims the pipeline supported 70% of the time."""
    check = budget.pipeline_check(budget.Design(budget.SIZES, 3, 2, (5e-5,)), SIMS, 0.5, rng_seed=2)
    for i, complete in enumerate(check["complete"]):
        if complete:
            pipeline, predicted = check["pipeline"][i], check["predicted"][i]
            band = 0.03 + 3 * math.sqrt(max(pipeline * (1 - pipeline), 0.02) / SIMS)
            assert abs(pipeline - predicted) <= band, (check["ids"][i], pipeline, predicted)
