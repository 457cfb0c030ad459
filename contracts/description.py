"""What a pretrained checkpoint saw (`PretrainingDescription`): the value a release-style name parses
to (contracts.model_names) and that run records carry, kept apart from the name grammar so that a
reader of descriptions (a run record, a study plan) needs no name parser."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class PretrainingDescription:
    """What a checkpoint saw. Step counts are the steps actually trained, per objective."""

    size: str
    objective: str  # clm | mlm | clm+mlm (biphasic) | cpt
    masking_ratio: float | None  # ratio of the (last) MLM phase; None for pure CLM
    clm_steps: int
    mlm_steps: int
    cpt_steps: int  # MLM steps after the decayed base (CPT only), included in mlm_steps
    cpt_base_objective: str | None  # clm | mlm (CPT only)
    schedule_steps: int  # length of the WSD schedule the checkpoint belongs to
    checkpoint_step: int  # total steps trained when the checkpoint was taken
    decayed: bool  # the checkpoint went through its schedule's final decay

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> PretrainingDescription:
        return cls(**data)
