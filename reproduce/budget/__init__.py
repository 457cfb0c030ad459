"""`python -m reproduce budget --gpu-hours H --out DIR` (issue 91): `design` says what a design of
the masking study is and costs; `search` scores the designs and writes the chosen one;
`pipeline_check` compares its predicted power with `analysis claims` itself on simulated run
records of a design; `audit` sizes a recipe reproduction of one checkpoint."""

from reproduce.budget.command import main
from reproduce.budget.design import (
    MODEL_SETS,
    PAPER_SEEDS,
    REPLICATE_CHOICES,
    SEED_CHOICES,
    SIZES,
    Design,
    design_flops,
    design_hours,
    designs,
    reproduce_config,
)
from reproduce.budget.pipeline_check import pipeline_check
from reproduce.budget.search import (
    BUDGET_FILE,
    DEFAULT_SIMS,
    TARGET,
    BudgetError,
    build_parser,
    claim_family,
    family_power,
    published_cells,
    screen,
    search,
    write_outputs,
)

__all__ = [
    "BUDGET_FILE",
    "DEFAULT_SIMS",
    "MODEL_SETS",
    "PAPER_SEEDS",
    "REPLICATE_CHOICES",
    "SEED_CHOICES",
    "SIZES",
    "TARGET",
    "BudgetError",
    "Design",
    "build_parser",
    "claim_family",
    "design_flops",
    "design_hours",
    "designs",
    "family_power",
    "main",
    "pipeline_check",
    "published_cells",
    "reproduce_config",
    "screen",
    "search",
    "write_outputs",
]
