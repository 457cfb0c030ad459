"""The paper's claims, one readable entry each: what the paper says, where, and what is tested.

This module holds only definitions (no evaluation code), so that each entry can be checked
against the paper (Gisserot-Boukhlef et al., arXiv 2507.00994 v4) without reading
analysis/claims.py. An entry gives
- `quote`: the paper's words; `verbatim` says whether they are the v4 text word for word or our
  paraphrase of its finding (docs/claims.md, "The claims", lists which);
- `location`: the section, figure and tables that say it;
- `scope`: what must hold, in words, and the selectors that build it (`treatment`, `control`,
  `task_types`, `across`: one component per level, each must hold);
- `test`, `direction`, `margin` (with `margin_source`: where the number comes from);
and the evaluation (analysis/claims.py) turns the selectors into components.

A claim whose `role` is "sensitivity" is another reading of a primary claim's sentence: it is
reported, but not counted in the Holm family of the primary claims (it is adjusted as if it were
added to that family alone).

Tests:
- difference      treatment - control, averaged over matched groups (`pair_on`) within each
                  level of `across` ("at every size": one component per size, each must hold);
- noninferiority  the same, each component above -margin ("CLM is competitive");
- equivalence     the same, each component within +-margin (TOST; printed with its 90% interval);
- steps           the difference at consecutive levels of `across`, ordered by `covariate`
                  ("the gap grows with size": every step in the claimed direction);
- u_shape         per curve (a level of `across`), the quadratic fitted over `covariate` falls at
                  its lowest value and rises at its highest: an interior minimum;
- monotone        per curve, every step between consecutive values of `covariate` in the claimed
                  direction ("prefer higher masking ratios");
- spread          ratio of variance components, treatment over control, seed noise removed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from contracts.paper import (
    BIPHASIC_SPLITS,
    CLM_STEPS_BEFORE_MASKING,
    CPT_STEPS,
    DEFAULT_MASKING_RATIO,
    INTERMEDIATE_STEPS,
    PRETRAIN_STEPS,
    TASK_TYPES,
)

TESTS = ("difference", "noninferiority", "equivalence", "steps", "u_shape", "monotone", "spread")
CURVE_TESTS = ("u_shape", "monotone")  # components per curve of `across`, over `covariate`
ROLES = ("primary", "sensitivity")

FINAL_42K = {"checkpoint_step": PRETRAIN_STEPS, "schedule_steps": PRETRAIN_STEPS}
MLM40 = {"objective": "mlm", "masking_ratio": DEFAULT_MASKING_RATIO}
CLM = {"objective": "clm"}
INTERMEDIATE_610M = {"size": "610m", "schedule_steps": PRETRAIN_STEPS, "final": False}
EARLY_STEPS = INTERMEDIATE_STEPS[:3]  # 1k, 2k, 5k: "early in pretraining" (Figure 4)
LONGEST_CPT = max(CPT_STEPS)  # 22k: Figure 8
# Figure 3's curves of the 610M and 1B MLM models over the masking ratio (Tables 2-5).
U_SHAPE_610M_1B = {
    "test": "u_shape",
    "treatment": {"objective": "mlm", "size": ("610m", "1b"), **FINAL_42K},
    "control": None,
    "pair_on": ("size", "task_type", "masking_tenths", "dataset"),
    "direction": "greater",
    "unit": "points per 10 pp of masking",
}

# Margins on the paper's own scale (docs/claims.md, "Margins"): the median printed 95% half-width of
# the averages the claim compares, a difference the paper's own intervals do not resolve.
# TC: the six TC averages of Table 3 (CLM and MLM-40 at 42k, 3 sizes): 0.09-0.26, median 0.125 F1;
# well under the 0.48 F1 at 610M that the paper calls "a substantial margin" (Sec. 3).
TC_MARGIN = 0.125
TC_MARGIN_SOURCE = (
    "median printed 95% half-width of the six TC averages compared (Table 3: CLM, MLM-40 at 42k, 3 sizes; "
    "0.09-0.26 F1); below the 0.48 F1 the paper calls 'a substantial margin'"
)
# Biphasic: the 12-dataset mean has no printed interval; by the paper's rule its half-width is
# sqrt(sum of the 4 printed category half-widths^2) / 4, for the six models compared (MLM-40 and the
# 75% CLM split at 12k, 22k, 42k; Tables 10-13): 0.19-0.48, median 0.40 points.
BIPHASIC_MARGIN = 0.40
BIPHASIC_MARGIN_SOURCE = (
    "median 95% half-width of the 12-dataset mean of the six models compared (MLM-40 and 75% CLM at 12k, 22k, "
    "42k; from the printed category half-widths of Tables 10-13, the paper's interval rule)"
)
# The final 42k checkpoints, matched by size and dataset (Figure 2, Tables 2-5).
SIZE_DATASET = ("size", "dataset")
MLM40_VS_CLM_42K = {"treatment": {**MLM40, **FINAL_42K}, "control": {**CLM, **FINAL_42K}, "pair_on": SIZE_DATASET}
CLM_VS_MLM40_42K = {"treatment": {**CLM, **FINAL_42K}, "control": {**MLM40, **FINAL_42K}, "pair_on": SIZE_DATASET}


@dataclass(frozen=True)
class Claim:
    id: str
    sentence: str  # what the paper concludes, in our words
    location: str  # where the paper says it (section, figure, tables)
    test: str  # one of TESTS
    treatment: dict
    control: dict | None
    pair_on: tuple[str, ...]  # columns matching treatment and control cells (a "group")
    direction: str  # greater | less: the claimed side of the boundary
    unit: str
    scope: str  # what must hold, in words (the report prints it)
    task_types: tuple[str, ...] = TASK_TYPES
    across: tuple[str, ...] = ()  # one component per level of these columns; each must hold
    levels: dict = field(default_factory=dict)  # only these values of `across` columns
    covariate: str | None = None  # steps: the order of the levels; u_shape: the x; spread: what varies
    crossover_on: str | None = None  # also report where treatment - control changes sign
    margin: float | None = None  # noninferiority / equivalence margin, in `unit`
    margin_source: str = ""  # where the margin's number comes from
    noninferior: dict = field(default_factory=dict)  # levels of `across` tested for non-inferiority at `margin`
    needs_runs: str | None = None  # why published numbers cannot test it
    role: str = "primary"  # or "sensitivity": another reading, outside the primary Holm family
    headline: str = ""  # the pre-registered component shown as the claim's estimate (HEADLINE_RULE)
    quote: str = ""  # the paper's words (v4)
    verbatim: bool = False  # quote is the v4 text word for word (else our paraphrase of the finding)


# The headline component of a multi-part claim, fixed by this rule rather than by the estimates
# (docs/claims.md, "Headline component"): its interval keeps its 95% coverage, which the interval
# of the weakest component, selected after the fact, does not.
HEADLINE_RULE = (
    "610M where the components span sizes (the size of every ablation of Sections 4-5); otherwise, "
    "and within 610M, the first component in the paper's table order (SC first, lowest masking ratio, "
    "earliest step, smallest budget, 25% CLM first)"
)

PARAPHRASE = False  # readability of the entries below: `verbatim=PARAPHRASE`
VERBATIM = True

CLAIMS: tuple[Claim, ...] = (
    Claim(
        id="mlm_beats_clm_sc",
        sentence="MLM beats CLM on sequence classification, at every model size",
        quote="MLM beats CLM on sequence classification at every size",
        verbatim=PARAPHRASE,
        location="Sec. 3, Fig. 2, Table 2",
        test="difference",
        **MLM40_VS_CLM_42K,
        direction="greater",
        unit="points",
        scope="each of the 3 sizes (MLM-40 - CLM, mean of the 3 SC datasets) above 0",
        task_types=("SC",),
        across=("size",),
        headline="610m",
    ),
    Claim(
        id="mlm_beats_clm_qa",
        sentence="MLM beats CLM on question answering, at every model size",
        quote="MLM beats CLM on question answering at every size",
        verbatim=PARAPHRASE,
        location="Sec. 3, Fig. 2, Table 4",
        test="difference",
        **MLM40_VS_CLM_42K,
        direction="greater",
        unit="points",
        scope="each of the 3 sizes (mean of the 3 QA datasets) above 0",
        task_types=("QA",),
        across=("size",),
        headline="610m",
    ),
    Claim(
        id="mlm_beats_clm_ir",
        sentence="MLM beats CLM on information retrieval",
        quote="MLM beats CLM on information retrieval",
        verbatim=PARAPHRASE,
        location="Sec. 3, Fig. 2, Table 5",
        test="difference",
        **MLM40_VS_CLM_42K,
        direction="greater",
        unit="points",
        scope="the mean over sizes and IR datasets above 0 (the sentence says no 'every size'; the gap's "
        "size trend is its own claim)",
        task_types=("IR",),
        headline="all",  # one component
    ),
    Claim(
        id="clm_competitive_tc",
        sentence="CLM is competitive with MLM on token classification (not worse by the margin), at every size",
        quote="CLM is competitive with MLM on token classification",
        verbatim=PARAPHRASE,
        location="Sec. 3, Fig. 2, Table 3",
        test="noninferiority",
        **CLM_VS_MLM40_42K,
        direction="greater",
        unit="points",
        scope=f"each of the 3 sizes (CLM - MLM-40, mean of the 3 TC datasets) above -{TC_MARGIN:g}",
        task_types=("TC",),
        across=("size",),
        margin=TC_MARGIN,
        margin_source=TC_MARGIN_SOURCE,
        headline="610m",
    ),
    Claim(
        id="clm_beats_mlm_tc_610m",
        sentence="At 610M, CLM even beats MLM on token classification",
        quote="a substantial margin",
        verbatim=VERBATIM,
        location="Sec. 3, Fig. 2, Table 3",
        test="difference",
        treatment={**CLM, **FINAL_42K, "size": "610m"},
        control={**MLM40, **FINAL_42K, "size": "610m"},
        pair_on=("dataset",),
        direction="greater",
        unit="points",
        scope="610M: CLM - MLM-40, mean of the 3 TC datasets, above 0",
        task_types=("TC",),
        headline="all",  # one component
    ),
    Claim(
        id="gap_widens_with_size_sc",
        sentence="The MLM-over-CLM gap on sequence classification grows with model size",
        quote="the MLM advantage on sequence classification grows with model size",
        verbatim=PARAPHRASE,
        location="Sec. 3, Fig. 2",
        test="steps",
        **MLM40_VS_CLM_42K,
        direction="greater",
        unit="points",
        scope="each step 210M->610M and 610M->1B of the SC gap (mean of 3 datasets) above 0",
        task_types=("SC",),
        across=("size",),
        covariate="log2_params",
        headline="210m to 610m",
    ),
    Claim(
        id="gap_narrows_with_size_ir",
        sentence="The MLM-over-CLM gap on information retrieval shrinks with model size",
        quote="the MLM advantage on information retrieval shrinks with model size",
        verbatim=PARAPHRASE,
        location="Sec. 3, Fig. 2",
        test="steps",
        **MLM40_VS_CLM_42K,
        direction="less",
        unit="points",
        scope="each step 210M->610M and 610M->1B of the IR gap (mean of 3 datasets) below 0",
        task_types=("IR",),
        across=("size",),
        covariate="log2_params",
        headline="210m to 610m",
    ),
    Claim(
        id="u_shape_masking_610m_1b",
        sentence="TC scores of the 610M and 1B models are U-shaped in the masking ratio",
        quote="the U-shaped curve observed in Figure 3 for TC on the 610M and 1B models, in contrast with the "
        "monotonic trend observed for IR",
        verbatim=VERBATIM,
        location="Limitations; Sec. 3, Fig. 3, Table 3",
        **U_SHAPE_610M_1B,
        scope="each of the 2 TC curves of Figure 3 (610M, 1B; mean of the 3 TC datasets) has an interior "
        "minimum: its fitted quadratic falls at 20% and rises at 50%",
        task_types=("TC",),
        across=("size", "task_type"),
        covariate="masking_tenths",
        headline="610m TC slope at 20%",
    ),
    Claim(
        id="u_shape_masking_610m_1b_tc_qa",
        sentence="Sensitivity reading of the U-shape: TC and QA curves of 610M and 1B",
        quote="610M and 1B show U-shaped curves (Figure 3), read on the TC and QA panels",
        verbatim=PARAPHRASE,
        location="Sec. 3, Fig. 3, Tables 3-4",
        **U_SHAPE_610M_1B,
        scope="each of the 4 TC and QA curves of Figure 3 (610M, 1B) has an interior minimum",
        task_types=("TC", "QA"),
        across=("size", "task_type"),
        covariate="masking_tenths",
        role="sensitivity",
        headline="610m TC slope at 20%",
    ),
    Claim(
        id="ir_prefers_high_masking",
        sentence="IR prefers higher masking ratios at every model size",
        quote="IR datasets consistently prefer higher masking ratios regardless of model size",
        verbatim=VERBATIM,
        location="Sec. 3, Fig. 3, Table 5",
        test="monotone",
        treatment={"objective": "mlm", **FINAL_42K},
        control=None,
        pair_on=("size", "task_type", "masking_tenths", "dataset"),
        direction="greater",
        unit="points",
        scope="at each of the 3 sizes, the IR curve (mean of the 3 IR datasets) rises at every step "
        "20%->30%->40%->50% (9 steps)",
        task_types=("IR",),
        across=("size", "task_type"),
        covariate="masking_tenths",
        headline="610m IR 20% to 30%",
    ),
    Claim(
        id="clm_leads_early",
        sentence="CLM is more data-efficient: it leads MLM early in pretraining (1k-5k steps), on every task type",
        quote="CLM-trained models are more data-efficient",
        verbatim=VERBATIM,
        location="Abstract; Sec. 4, Fig. 4 (one panel per task type), Tables 6-9",
        test="difference",
        treatment={**CLM, **INTERMEDIATE_610M},
        control={**MLM40, **INTERMEDIATE_610M},
        pair_on=("checkpoint_step", "dataset"),
        direction="greater",
        unit="points",
        scope="each task type (Figure 4 panel) at each of the 1k, 2k, 5k checkpoints: 610M CLM - MLM-40, "
        "mean of its 3 datasets, above 0 (12)",
        across=("task_type", "checkpoint_step"),
        levels={"checkpoint_step": EARLY_STEPS},
        crossover_on="checkpoint_step",
        headline="SC 1k steps",
    ),
    Claim(
        id="clm_less_lr_sensitive",
        sentence="CLM models are less sensitive to the fine-tuning learning rate",
        quote="CLM-trained models are more data-efficient and demonstrate improved fine-tuning stability",
        verbatim=VERBATIM,
        location="Abstract; Sec. 4, Fig. 5",
        test="spread",
        **CLM_VS_MLM40_42K,
        direction="less",
        unit="ratio of LR-sensitivity SDs (CLM / MLM-40)",
        scope="the LR variance component (seed noise removed), summed over the 36 size x dataset cells, "
        "smaller for CLM: SD ratio below 1",
        covariate="lr",
        needs_runs="Figure 5 is the spread over every LR in [1e-5, 1e-4] and seed; the tables print "
        "only the best-LR mean per seed",
    ),
    Claim(
        id="biphasic_beats_mlm",
        sentence="At a fixed budget, the 25/75 CLM-then-MLM split beats MLM only, and the 75/25 split is comparable",
        quote="the 25%-75% split reliably surpasses the MLM baseline, while even a 75% CLM allocation maintains "
        "comparable results",
        verbatim=VERBATIM,
        location="Sec. 4, Fig. 6, Tables 10-13",
        test="difference",
        treatment={
            "objective": "clm+mlm",
            "masking_ratio": DEFAULT_MASKING_RATIO,
            "clm_share": (0.25, 0.75),
            "size": "610m",
            "final": True,
        },
        control={**MLM40, "size": "610m", "final": True, "schedule_steps": tuple(BIPHASIC_SPLITS)},
        pair_on=("schedule_steps", "dataset"),
        direction="greater",
        unit="points",
        scope="at each budget (12k, 22k, 42k), mean of the 12 datasets: 25% CLM - MLM-40 above 0, and "
        f"75% CLM - MLM-40 above -{BIPHASIC_MARGIN:g} (6)",
        across=("schedule_steps", "clm_share"),
        noninferior={"clm_share": (0.75,)},
        margin=BIPHASIC_MARGIN,
        margin_source=BIPHASIC_MARGIN_SOURCE,
        headline="12k budget 25% CLM",
    ),
    Claim(
        id="biphasic_less_ratio_sensitive",
        sentence="After a CLM phase, the masking ratio of the MLM phase matters less",
        quote="after CLM pretraining, the masking ratio of the MLM phase matters less",
        verbatim=PARAPHRASE,
        location="Sec. 5, Fig. 7",
        test="spread",
        treatment={"objective": "clm+mlm", "clm_steps": CLM_STEPS_BEFORE_MASKING, "size": "610m", **FINAL_42K},
        control={"objective": "mlm", "size": "610m", **FINAL_42K},
        pair_on=("dataset",),
        direction="less",
        unit="ratio of masking-ratio SDs (CLM+MLM / MLM)",
        scope="the variance of the true means over the 4 masking ratios (seed noise removed), summed over "
        "the 12 datasets, smaller after CLM: SD ratio below 1",
        covariate="masking_tenths",
        needs_runs="Figure 7's 40k CLM + 2k MLM models (610m-clm-40k-mlm{20,30,40,50}-42k) are in "
        "no table; the paper plots them from its raw runs",
    ),
    Claim(
        id="cpt_clm_base_beats_mlm_base",
        sentence="Continued MLM pretraining (22k steps) of a CLM model beats continuing an MLM one, on every task type",
        quote="this strategy becomes more appealing when initializing from readily available pretrained CLM models",
        verbatim=VERBATIM,
        location="Abstract; Sec. 5, Fig. 8 (one panel per task type), Tables 14-17",
        test="difference",
        treatment={"objective": "cpt", "cpt_base_objective": "clm", "cpt_steps": LONGEST_CPT},
        control={"objective": "cpt", "cpt_base_objective": "mlm", "cpt_steps": LONGEST_CPT},
        pair_on=("dataset",),
        direction="greater",
        unit="points",
        scope="each task type (Figure 8 panel): CPT 22k from CLM - from MLM, mean of its 3 datasets, above 0 (4)",
        across=("task_type",),
        headline="SC",
    ),
)
