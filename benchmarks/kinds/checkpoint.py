"""Checks on a model path that need no torch (so that CLI errors come fast)."""
from __future__ import annotations

import importlib
from pathlib import Path


class ModelLoadError(ValueError):
    """A model path or id that cannot be loaded; the message says what is missing."""


_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin", "model.safetensors.index.json",
                 "pytorch_model.bin.index.json")


def register_own_model_types() -> None:
    """Import `pretraining` (if present) so that our own model type is known to AutoModel."""
    try:
        importlib.import_module("pretraining")  # registers model_type mlmclm_llama
    except ImportError:
        pass


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
