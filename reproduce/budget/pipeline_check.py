"""The budget's predicted power against `analysis claims` itself (issue 91, "Done when"; docs/reproduce.md,
"Sizing a reproduction to your allocation", "Checked against the pipeline")."""

from __future__ import annotations

from reproduce.budget.search import Design, claim_family, family_power, holm_family, published_cells


def pipeline_check(
    design: Design, sims: int, pretraining_sd: float = 0.0, rng_seed: int = 0, predicted_sims: int = 4000
):
    """Per claim of CLAIMS, the design's power three ways (issue 91, "Done when"): `pipeline`, the
    rate of `supported` when `analysis claims` itself (analysis.claims.simulation.pipeline_verdicts,
    told --pretraining-sd with one run) decides simulated run records of the design
    (design_records: the planning values as the truth, pretraining runs varying by
    `pretraining_sd`); `same_draws`, the planner's test on the cells of those same releases (one run
    per configuration: analysis.claims.power.decision_on_draws); `predicted`, what the budget
    prints (family_power, `predicted_sims` draws). Claims the design tests only in part are 0 in
    `predicted` by the budget's rule and left out of the comparison (`complete`)."""
    import numpy as np

    from analysis.claims.hypothesis_tests import SUPPORTED
    from analysis.claims.power import decision_on_draws
    from analysis.claims.simulation import design_records, pipeline_verdicts

    family = claim_family(*design.models_key)
    truth = published_cells(*design.models_key)
    rng = np.random.default_rng(rng_seed)
    supported = np.zeros((sims, len(family.ids)), dtype=bool)
    keys = list(zip(truth["model"], truth["dataset"]))
    means, sds = np.empty((sims, len(truth))), np.empty((sims, len(truth)))
    for s in range(sims):
        records = design_records(truth, design.seeds, design.replicates, design.lrs, pretraining_sd, rng)
        verdicts, inputs = pipeline_verdicts(records, pretraining_sd if design.replicates == 1 else 0.0)
        supported[s] = [verdicts.get(claim) == SUPPORTED for claim in family.ids]
        if design.replicates == 1:
            cells = inputs.cells.set_index(["model", "dataset"])
            means[s], sds[s] = cells.loc[keys, "mean"].to_numpy(float), cells.loc[keys, "sd"].to_numpy(float)
    same = [float("nan")] * len(family.ids)
    if design.replicates == 1:
        tested, claims, primary, observed_p = holm_family(family, len(design.lrs) > 1)
        on_draws = decision_on_draws(
            claims,
            primary,
            lambda row: (means[:, row], sds[:, row], design.seeds),
            [pretraining_sd] * len(claims),
            assumed_pretraining_sd=pretraining_sd > 0,
            observed_p=observed_p,
        )
        for j, i in enumerate(tested):
            same[i] = float(on_draws[:, j].mean())
    predicted = family_power(
        family, design.seeds, design.replicates, pretraining_sd, predicted_sims, rng_seed + 1, len(design.lrs) > 1
    )
    return {
        "ids": family.ids,
        "complete": family.complete,
        "pipeline": [float(v) for v in supported.mean(axis=0)],
        "same_draws": same,
        "predicted": predicted,
        "sims": sims,
    }
