"""What the loader does to a checkpoint's weights, read before a run writes anything and kept in its
record (issue 90): transformers' loading report (`output_loading_info=True`) split into the
backbone weights the checkpoint lacks, which transformers re-initialises at random (a broken or
foreign checkpoint: refused unless `allow_reinitialised_weights`), the task head's new weights
(expected), the pooler the package's heads never read, and the checkpoint's weights the model does
not use (a pretraining head, say).

The check before a run loads the model on the meta device: the same report, no tensor read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from benchmarks.kinds.checkpoint import (
    ModelLoadError,
    check_model_path,
    check_remote_code,
    check_tokenizer_files,
    register_own_model_types,
)

FLAG = "--allow-reinitialised-weights"
FIELD = "allow_reinitialised_weights"
_LAYER = re.compile(r"^(.*?\.\d+)\.")  # encoder.layer.1.attention... -> encoder.layer.1


@dataclass(frozen=True)
class LoadingReport:
    """A run's `provenance.loading_report` (names as the backbone model names its weights)."""

    reinitialised_backbone: tuple[str, ...] = ()  # missing from the checkpoint: random weights
    head_initialised: tuple[str, ...] = ()  # the task head, new as every fine-tuning head is
    unused_initialised: tuple[str, ...] = ()  # missing but unread by the package's heads (the pooler)
    unexpected: tuple[str, ...] = ()  # in the checkpoint, not in the model (ignored)

    def to_dict(self) -> dict:
        return {
            "reinitialised_backbone": list(self.reinitialised_backbone),
            "head_initialised": list(self.head_initialised),
            "unused_initialised": list(self.unused_initialised),
            "unexpected": list(self.unexpected),
        }


def modules_of(names: Iterable[str]) -> list[str]:
    """Weight names grouped by the layer (`encoder.layer.1`) or module (`embeddings.word_embeddings`)
    they belong to, in first-seen order."""
    found: dict[str, None] = {}
    for name in names:
        layer = _LAYER.match(name)
        found[layer.group(1) if layer else name.rpartition(".")[0] or name] = None
    return list(found)


def describe_reinitialised(names: Sequence[str], limit: int = 3) -> str:
    """`encoder.layer.1 (16 tensors)`: the modules, the first `limit`, and how many tensors."""
    modules = modules_of(names)
    more = f" and {len(modules) - limit} more" if len(modules) > limit else ""
    return f"{', '.join(modules[:limit])}{more} ({len(names)} tensor{'s' if len(names) != 1 else ''})"


def _is_pooler(name: str) -> bool:
    return "pooler" in name.split(".")


def report_from_info(info: dict, base_prefix: str | None, package_head: Sequence[str] = ()) -> LoadingReport:
    """Split transformers' loading info. `base_prefix`: the task model's name for its backbone
    (`bert`, `model`) when the loaded model has a head of its own (its other missing weights are
    the head's), None for a base model (AutoModel: every missing weight is the backbone's, and the
    package's head, `package_head`, is new). Weights of a mismatched shape are re-initialised too."""
    missing = list(info.get("missing_keys") or [])
    missing += [entry[0] if isinstance(entry, (tuple, list)) else entry for entry in info.get("mismatched_keys") or []]
    backbone, head = [], list(package_head)
    for name in sorted(dict.fromkeys(missing)):
        if base_prefix is None:
            backbone.append(name)
        elif name.startswith(base_prefix + "."):
            backbone.append(name[len(base_prefix) + 1 :])
        else:
            head.append(name)
    unused = [n for n in backbone if _is_pooler(n)] if base_prefix is None else []
    return LoadingReport(
        reinitialised_backbone=tuple(n for n in backbone if n not in unused),
        head_initialised=tuple(head),
        unused_initialised=tuple(unused),
        unexpected=tuple(sorted(info.get("unexpected_keys") or [])),
    )


def backbone_report(hf_model, info: dict, package_head: Sequence[str] = ()) -> LoadingReport:
    """The report of a loaded model: a base model (AutoModel) or a task model with its own head."""
    own_head = getattr(hf_model, "base_model", hf_model) is not hf_model
    return report_from_info(info, hf_model.base_model_prefix if own_head else None, package_head)


def refusal(model: str, report: LoadingReport) -> ModelLoadError:
    names = report.reinitialised_backbone
    return ModelLoadError(
        f"model {model}: the checkpoint lacks backbone weights, which transformers would re-initialise at random: "
        f"{describe_reinitialised(names)}; fix the checkpoint (an incomplete save, or another architecture's), or "
        f"pass {FLAG} ({FIELD}: true) to fine-tune it as it is (its record names them)"
    )


def checkpoint_report(model: str, trust_remote_code: bool) -> LoadingReport:
    """The loading report of `model`'s backbone, loaded on the meta device (no weights read; the
    attention implementation, which changes no weight, left to transformers)."""
    import pickle

    import transformers

    from benchmarks.kinds.common import model_load_error

    register_own_model_types()
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # its "Some weights ... newly initialized" list: the report says it
    try:
        hf_model, info = transformers.AutoModel.from_pretrained(
            model, device_map="meta", trust_remote_code=trust_remote_code, output_loading_info=True
        )
    except (OSError, ValueError, pickle.UnpicklingError) as exc:
        raise model_load_error(model, exc, trust_remote_code) from None
    finally:
        hf_logging.set_verbosity(verbosity)
    return backbone_report(hf_model, info)


def check_checkpoint(model: str, trust_remote_code: bool, allow_reinitialised: bool) -> LoadingReport:
    """Everything a run loads from `model`, checked before it writes anything: the folder (config,
    weights, tokenizer), its code switch, the tokenizer loaded, and the backbone's loading report
    (re-initialised backbone weights refused unless `allow_reinitialised`). A Hub id that cannot be
    resolved (a typo offline) fails here, in one line."""
    from benchmarks.kinds.common import load_tokenizer

    check_model_path(model)
    check_tokenizer_files(model)
    check_remote_code(model, trust_remote_code)
    load_tokenizer(model, trust_remote_code)
    report = checkpoint_report(model, trust_remote_code)
    if report.reinitialised_backbone and not allow_reinitialised:
        raise refusal(model, report)
    return report
