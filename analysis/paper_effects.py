"""The smallest differences the paper interprets, per dataset (issue 63, item 3): what an audit
margin must be compared with (docs/analysis.md, "Margins and what they can tell apart").

Per dataset (and per task type's average), from the published cells:
- `mlm_clm`: the smallest |MLM-40 - CLM| gap at 42k over the three sizes (Tables 2-5: the paper's
  headline comparison, interpreted at every size);
- `masking_step`: the LARGEST |difference| between adjacent masking ratios (20/30, 30/40,
  40/50) at any size (Tables 2-5; Figure 3 reads the curves' shapes from them): a margin wider
  than it cannot tell any two adjacent ratios apart (most steps are far smaller and the paper
  reads them as a curve, not one by one, so the smallest step is no standard);
- `cpt_step`: the largest |difference| between adjacent CPT lengths (0, 2k, 12k, 22k) from
  either base (Tables 14-17; Figure 9), in the same sense.
A margin wider than `mlm_clm` cannot tell MLM from CLM on that dataset: "reproduced" there is a
weaker statement than the paper's own comparisons (`wider_than`).
`--margin paper-effects` sets each margin to half the dataset's `mlm_clm` gap: at it, a
reproduction that is "reproduced" is closer to the paper than half its headline effect.
"""

from __future__ import annotations

import math

import pandas as pd

from contracts.model_names import cpt_name, objective_token, single_objective_name
from contracts.paper import AVERAGE, CPT_STEPS, DEFAULT_MASKING_RATIO, MASKING_RATIOS, PAPER_SIZES

CELL_KEY = ["model", "task_type", "dataset"]
MLM = objective_token(DEFAULT_MASKING_RATIO)  # 'mlm40': the MLM of the MLM-vs-CLM comparison and the CPT
RATIOS = tuple(objective_token(r) for r in MASKING_RATIOS)
KINDS = ("mlm_clm", "masking_step", "cpt_step")
WORDS = {
    "mlm_clm": "the smallest MLM-40 vs CLM gap",
    "masking_step": "every adjacent masking-ratio step",
    "cpt_step": "every adjacent CPT-length step",
}
PAPER_EFFECTS = "paper-effects"  # the --margin value that asks for half the MLM-CLM gap


def _key(task_type: str, dataset: str) -> str:
    return f"{task_type} {AVERAGE}" if dataset == AVERAGE else dataset


def interpreted_differences(published: pd.DataFrame) -> dict[str, dict]:
    """{margin key: {"mlm_clm", "masking_step", "cpt_step"}} in points (NaN where the paper prints
    no such pair for the dataset)."""
    means = published.drop_duplicates(CELL_KEY).set_index(CELL_KEY)["mean"]
    out = {}
    for (task_type, dataset), _ in published.groupby(["task_type", "dataset"], sort=True):

        def mean(model, task_type=task_type, dataset=dataset):
            return means.get((model, task_type, dataset), math.nan)

        gaps = {
            "mlm_clm": [
                abs(mean(single_objective_name(s, MLM)) - mean(single_objective_name(s, "clm"))) for s in PAPER_SIZES
            ],
            "masking_step": [
                abs(mean(single_objective_name(s, a)) - mean(single_objective_name(s, b)))
                for s in PAPER_SIZES
                for a, b in zip(RATIOS, RATIOS[1:])
            ],
            "cpt_step": [
                abs(mean(cpt_name(base, a)) - mean(cpt_name(base, b)))
                for base in (MLM, "clm")
                for a, b in zip((0, *CPT_STEPS), CPT_STEPS)
            ],
        }
        pick = {"mlm_clm": min, "masking_step": max, "cpt_step": max}
        out[_key(task_type, dataset)] = {
            kind: pick[kind]((g for g in values if not math.isnan(g)), default=math.nan)
            for kind, values in gaps.items()
        }
    return out


def wider_than(margin: float, effects: dict) -> str:
    """'' or what a margin is wider than: 'wider than the smallest MLM-40 vs CLM gap (0.18)'."""
    wider = [f"{WORDS[k]} ({effects[k]:.2f})" for k in KINDS if margin > effects.get(k, math.nan)]
    return f"margin wider than {', '.join(wider)}" if wider else ""


def effect_margins(published: pd.DataFrame, defaults: dict[str, dict]) -> dict[str, dict]:
    """`--margin paper-effects`: every margin half the dataset's smallest MLM-CLM gap (the default
    where the paper prints no gap for it), its source saying so."""
    effects = interpreted_differences(published)
    out = {}
    for key, value in defaults.items():
        gap = effects.get(key, {}).get("mlm_clm", math.nan)
        if math.isnan(gap) or gap <= 0:
            out[key] = dict(value)
            continue
        out[key] = {
            **value,
            "margin": round(gap / 2, 3),
            "source": f"--margin {PAPER_EFFECTS}: half the smallest MLM-40 vs CLM gap ({gap:.2f})",
        }
    return out
