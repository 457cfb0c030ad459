"""Checks on a model path that need no torch (so that CLI errors come fast), and the one switch
for checkpoints that ship their own model code (docs/export.md)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path


class ModelLoadError(ValueError):
    """A model path or id that cannot be loaded; the message says what is missing."""


_WEIGHT_FILES = (
    "model.safetensors",
    "pytorch_model.bin",
    "model.safetensors.index.json",
    "pytorch_model.bin.index.json",
)


def register_own_model_types() -> None:
    """Import `pretraining` (if present) so that our own model type is known to AutoModel."""
    try:
        importlib.import_module("pretraining")  # registers model_type mlmclm_llama
    except ImportError:
        pass


def ship_own_model_code(directory: Path) -> None:
    """Give a saved model of ours (model_type mlmclm_llama) its model code and `auto_map`, so that
    it loads with `trust_remote_code=True` where this package is not installed (docs/export.md)."""
    from pretraining.export import add_remote_code
    from pretraining.modeling import MODEL_TYPE

    if json.loads((Path(directory) / "config.json").read_text()).get("model_type") == MODEL_TYPE:
        add_remote_code(directory)


def check_model_path(model: str) -> None:
    """Fail early, in one line, for a local folder without config or weights."""
    path = Path(model)
    looks_local = path.exists() or model.startswith((".", "/", "~"))
    if not looks_local:
        return  # a hub id: resolved (offline or not) by transformers
    if not path.is_dir():
        raise ModelLoadError(f"model path {model} does not exist")
    if not (path / "config.json").is_file():
        raise ModelLoadError(f"model path {model} has no config.json (not a Hugging Face model folder)")
    if not any((path / name).is_file() for name in _WEIGHT_FILES):
        raise ModelLoadError(f"model path {model} has no weights (expected one of {', '.join(_WEIGHT_FILES)})")


def remote_code_error(model: str) -> ModelLoadError:
    return ModelLoadError(
        f"model {model} ships its own model code (config.json auto_map), which runs only "
        "with the remote-code switch: pass --trust-remote-code (config field "
        "trust_remote_code: true) if you trust that code"
    )


def check_remote_code(model: str, trust_remote_code: bool) -> None:
    """Fail early for a local checkpoint that needs its shipped code (`auto_map`, and a model_type
    that neither transformers nor this package knows) when the switch is off. Hub ids are checked
    by transformers when they load (load_backbone turns its error into the same message)."""
    config_file = Path(model) / "config.json"
    if trust_remote_code or not config_file.is_file():
        return
    config = json.loads(config_file.read_text())
    if "auto_map" not in config:
        return
    register_own_model_types()
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    if config.get("model_type") not in CONFIG_MAPPING:
        raise remote_code_error(model)


def shipped_classes(model: str) -> dict:
    """The classes a checkpoint ships with its own code: config.json's `auto_map` ({} if none)."""
    config_file = Path(model) / "config.json"
    if config_file.is_file():
        config = json.loads(config_file.read_text())
    else:  # a hub id (offline: from the cache)
        from transformers import PretrainedConfig

        try:
            config, _ = PretrainedConfig.get_config_dict(model)
        except OSError as exc:
            raise ModelLoadError(f"cannot read the config of model {model}: {str(exc).splitlines()[0]}") from None
    return dict(config.get("auto_map") or {})


def check_own_head(model: str, auto_class: str) -> None:
    """`head: own` needs the checkpoint's own `auto_class` (e.g. AutoModelForSequenceClassification)
    in its auto_map; one line naming the checkpoint, the missing class and the fix otherwise."""
    shipped = shipped_classes(model)
    if auto_class not in shipped:
        has = ", ".join(sorted(shipped)) or "none"
        raise ModelLoadError(
            f"model {model} ships no {auto_class} class (config.json auto_map names: {has}), which "
            "head: own needs; use head: package (the linear head of this package)"
        )
