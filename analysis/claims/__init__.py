"""The paper's claims as tested hypotheses (docs/claims.md): one room for the claims layer.

- definitions: the claims, one readable entry each (the paper's words, section, scope, test,
  margin, Holm role);
- inputs: the cells they are evaluated from (published tables or run records) and the design
  cells that say what each claim needs;
- components: from a claim's selectors to the contrasts its sentence constrains, the margins the
  design resolves, the cells used and needed;
- hypothesis_tests: component tests, intersection-union, Holm, verdicts, tipping SD, flip margin;
- engine: a claim's report row, the verdicts of all claims (`evaluate_claims`);
- power, pretraining_variance: the next experiment's design; the pretraining SD from replicates;
- simulation: held-out simulations with known truths (coverage, sentence trees, power at the
  paper's effects);
- report: CSV, Markdown and forest plot.

Each claim is tested as what its sentence says, not as a pooled average that can hold when the
sentence is false. The names below are the layer's public API.
"""

from analysis.claims.components import Component, claim_components, describe_cells_list, design_margin
from analysis.claims.definitions import CLAIMS, Claim
from analysis.claims.engine import (
    CSV_COLUMNS,
    DETAIL_COLUMNS,
    ONE_PRETRAINING_RUN,
    POWER_NOTE,
    WEAKEST_CAVEAT,
    crossovers,
    evaluate_claim,
    evaluate_claims,
)
from analysis.claims.inputs import (
    NOT_TESTABLE,
    PUBLISHED_SEEDS,
    ClaimInputs,
    NotTestable,
    describe_cells,
    inputs_from_published,
    inputs_from_records,
    inputs_from_selected,
    release_order,
)

__all__ = [
    "CLAIMS",
    "CSV_COLUMNS",
    "DETAIL_COLUMNS",
    "NOT_TESTABLE",
    "ONE_PRETRAINING_RUN",
    "POWER_NOTE",
    "PUBLISHED_SEEDS",
    "WEAKEST_CAVEAT",
    "Claim",
    "ClaimInputs",
    "Component",
    "NotTestable",
    "claim_components",
    "crossovers",
    "describe_cells",
    "describe_cells_list",
    "design_margin",
    "evaluate_claim",
    "evaluate_claims",
    "inputs_from_published",
    "inputs_from_records",
    "inputs_from_selected",
    "release_order",
]
