"""The release's checkpoint names <-> what each checkpoint's pretraining was (paper Section 3).

Grammar (steps are `<n>k` = n thousand, or a plain integer for toy runs):
  single objective   <size>-clm-<T>            <size>-mlm<p>-<T>          e.g. 610m-mlm40-42k
  intermediate ckpt  <size>-<obj>-<T>-<step>   (step of the T run, before its decay)
  biphasic           <size>-clm-<N>-mlm<p>-<T> (N CLM steps, then MLM up to T in total)
  CPT                <size>-<obj>-dec<B>-mlm<p>-<T> (decayed B-step base, MLM up to T in total)
  replicate          <any of the above>-rep<k>, k >= 2: the k-th pretraining run of the same
                     configuration (other init and data-order seeds; the first run has no suffix)
A replicate parses to its configuration's description; `split_replicate` is the one place that
reads the suffix and `replicate_name` the one that writes it. A hub prefix (`MLMvsCLM/`) is
ignored. Names outside the grammar are external models: `parse` returns None and records carry
no pretraining description. Every name in the package is built
by the functions below (`format_model_name`, or by parts: `single_objective_name`, `biphasic_name`,
`cpt_name`).
"""

from __future__ import annotations

import re

from contracts.description import PretrainingDescription  # noqa: F401 - what a name parses to
from contracts.paper import PRETRAIN_STEPS
from contracts.steps import format_steps  # noqa: F401 - part of the names' grammar, imported from here too

_STEPS = r"\d+k?"
_NAME = re.compile(
    rf"^(?P<size>[a-z0-9_]+)-(?:"
    rf"(?P<cpt_base>clm|mlm\d+)-dec(?P<base_steps>{_STEPS})-mlm(?P<cpt_ratio>\d+)-(?P<cpt_total>{_STEPS})"
    rf"|clm-(?P<clm_part>{_STEPS})-mlm(?P<bip_ratio>\d+)-(?P<bip_total>{_STEPS})"
    rf"|(?P<single>clm|mlm\d+)-(?P<total>{_STEPS})(?:-(?P<ckpt>\d+))?"
    rf")$"
)


def _steps(token: str) -> int:
    return int(token[:-1]) * 1000 if token.endswith("k") else int(token)


def objective_token(masking_ratio: float | None) -> str:
    """'clm' (None) or 'mlm40' (0.4): the objective part of a name."""
    return "clm" if masking_ratio is None else f"mlm{round(masking_ratio * 100)}"


def _ratio(token: str) -> float:
    return int(token) / 100


def strip_hub_prefix(model: str) -> str:
    return model.rstrip("/").rsplit("/", 1)[-1]


# ASCII digits only, no leading zero, at most MAX_REPLICATE, matched against the whole name: `-rep٢`
# (Arabic-Indic two) or `-rep2\n` must not collide with `-rep2` (issue 56)
MAX_REPLICATE = 999
_REPLICATE = re.compile(r"(?P<base>.+)-rep(?P<k>[1-9][0-9]{0,2})", re.ASCII)


def split_replicate(model: str) -> tuple[str, int]:
    """(configuration name, replicate number) of a model name: '610m-clm-42k-rep2' ->
    ('610m-clm-42k', 2); a name without the suffix is replicate 1 of itself. The suffix counts
    only on a release-style configuration with k >= 2 ('-rep1' and 'my-model-rep2' are names of
    their own)."""
    name = strip_hub_prefix(model)
    match = _REPLICATE.fullmatch(name)
    if match and int(match["k"]) >= 2 and _NAME.match(match["base"]):
        return match["base"], int(match["k"])
    return name, 1


def replicate_name(configuration: str, k: int) -> str:
    """The name of the k-th pretraining run of a configuration (k = 1: the configuration's name)."""
    if not 1 <= k <= MAX_REPLICATE:
        raise ValueError(f"replicate numbers run from 1 to {MAX_REPLICATE}, got {k}")
    return configuration if k == 1 else f"{configuration}-rep{k}"


def parse_model_name(model: str) -> PretrainingDescription | None:
    """Pretraining description of a release-style name (a replicate: of its configuration), None
    for any other model."""
    match = _NAME.match(split_replicate(model)[0])
    if match is None:
        return None
    g = match.groupdict()
    size = g["size"]
    if g["cpt_base"]:
        base_obj = "clm" if g["cpt_base"] == "clm" else "mlm"
        base = _steps(g["base_steps"])
        total = _steps(g["cpt_total"])
        cpt = total - base
        if cpt <= 0:
            return None
        return PretrainingDescription(
            size=size,
            objective="cpt",
            masking_ratio=_ratio(g["cpt_ratio"]),
            clm_steps=base if base_obj == "clm" else 0,
            mlm_steps=cpt + (base if base_obj == "mlm" else 0),
            cpt_steps=cpt,
            cpt_base_objective=base_obj,
            schedule_steps=total,
            checkpoint_step=total,
            decayed=True,
        )
    if g["clm_part"]:
        clm = _steps(g["clm_part"])
        total = _steps(g["bip_total"])
        if not 0 < clm < total:
            return None
        return PretrainingDescription(
            size=size,
            objective="clm+mlm",
            masking_ratio=_ratio(g["bip_ratio"]),
            clm_steps=clm,
            mlm_steps=total - clm,
            cpt_steps=0,
            cpt_base_objective=None,
            schedule_steps=total,
            checkpoint_step=total,
            decayed=True,
        )
    total = _steps(g["total"])
    step = int(g["ckpt"]) if g["ckpt"] else total
    if not 0 < step <= total:
        return None
    is_clm = g["single"] == "clm"
    return PretrainingDescription(
        size=size,
        objective="clm" if is_clm else "mlm",
        masking_ratio=None if is_clm else _ratio(g["single"][3:]),
        clm_steps=step if is_clm else 0,
        mlm_steps=0 if is_clm else step,
        cpt_steps=0,
        cpt_base_objective=None,
        schedule_steps=total,
        checkpoint_step=step,
        decayed=step == total,
    )


def format_model_name(desc: PretrainingDescription) -> str:
    """Inverse of parse_model_name for every description it can return."""
    ratio = objective_token(desc.masking_ratio) if desc.masking_ratio is not None else None
    if desc.objective == "cpt":
        base = desc.checkpoint_step - desc.cpt_steps
        base_obj = "clm" if desc.cpt_base_objective == "clm" else ratio
        return f"{desc.size}-{base_obj}-dec{format_steps(base)}-{ratio}-{format_steps(desc.checkpoint_step)}"
    if desc.objective == "clm+mlm":
        return f"{desc.size}-clm-{format_steps(desc.clm_steps)}-{ratio}-{format_steps(desc.schedule_steps)}"
    obj = "clm" if desc.objective == "clm" else ratio
    name = f"{desc.size}-{obj}-{format_steps(desc.schedule_steps)}"
    return name if desc.decayed else f"{name}-{desc.checkpoint_step}"


def single_objective_name(size: str, objective: str, steps: int = PRETRAIN_STEPS, checkpoint: int | None = None) -> str:
    """'610m-mlm40-42k', '610m-clm-42k-10000' (objective: 'clm' or 'mlm40', see objective_token)."""
    name = f"{size}-{objective}-{format_steps(steps)}"
    return name if checkpoint is None or checkpoint == steps else f"{name}-{checkpoint}"


def biphasic_name(size: str, clm_steps: int, budget: int, mlm: str = "mlm40") -> str:
    """CLM for `clm_steps`, then `mlm` up to `budget`; 0 and `budget` CLM steps are the plain runs."""
    if clm_steps == 0:
        return single_objective_name(size, mlm, budget)
    if clm_steps == budget:
        return single_objective_name(size, "clm", budget)
    return f"{size}-clm-{format_steps(clm_steps)}-{mlm}-{format_steps(budget)}"


def cpt_name(
    base: str, cpt_steps: int, size: str = "610m", base_steps: int = PRETRAIN_STEPS, mlm: str = "mlm40"
) -> str:
    """base: 'clm' or 'mlm40'; 0 CPT steps is the decayed base itself."""
    if cpt_steps == 0:
        return single_objective_name(size, base, base_steps)
    return f"{size}-{base}-dec{format_steps(base_steps)}-{mlm}-{format_steps(base_steps + cpt_steps)}"
