"""One published claims report per test session: the README and docs/claims.md are checked against
the same `python -m analysis claims --published` (--reps 10000, --rng-seed 0) report."""

import pytest


@pytest.fixture(scope="session")
def published_claims_report():
    from analysis.claims import evaluate_claims, inputs_from_published

    return evaluate_claims(inputs_from_published(), reps=10000, rng_seed=0)
