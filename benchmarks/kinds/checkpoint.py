"""Checks on a model path that need no torch (so that CLI errors come fast), and the one switch
for checkpoints that ship their own model code (docs/export.md)."""

from __future__ import annotations

import ast
import hashlib
import importlib
from dataclasses import dataclass
from pathlib import Path

from contracts.bounded import LARGE, read_json_object_or


class ModelLoadError(ValueError):
    """A model path or id that cannot be loaded; the message says what is missing."""


def _read_config_json(path: Path) -> dict:
    """A model folder's config.json, bounded (issue 56); ModelLoadError in one line naming it."""
    return read_json_object_or(path, ModelLoadError, LARGE)


_WEIGHT_FILES = (
    "model.safetensors",
    "pytorch_model.bin",
    "model.safetensors.index.json",
    "pytorch_model.bin.index.json",
)
# What a tokenizer loads from: a fast tokenizer's own file, or a vocabulary a fast one is built from
# (WordPiece, BPE, SentencePiece). tokenizer_config.json alone holds none (transformers then fails
# with a TypeError deep in its loader, issue 90).
TOKENIZER_FILES = (
    "tokenizer.json",
    "vocab.txt",
    "vocab.json",
    "spiece.model",
    "sentencepiece.bpe.model",
    "tokenizer.model",
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

    if _read_config_json(Path(directory) / "config.json").get("model_type") == MODEL_TYPE:
        add_remote_code(directory)


def check_model_path(model: str) -> None:
    """Fail early, in one line, for a local folder without config or weights (its tokenizer:
    check_tokenizer_files)."""
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


def check_tokenizer_files(model: str) -> None:
    """A local folder holds a tokenizer: one of TOKENIZER_FILES (a hub id: checked as it loads).
    A folder without one is one line naming it and the fix, before anything is written."""
    path = Path(model)
    if not path.is_dir() or any((path / name).is_file() for name in TOKENIZER_FILES):
        return
    raise ModelLoadError(
        f"model path {model} has no tokenizer (none of {', '.join(TOKENIZER_FILES)}): save the tokenizer the "
        f"model was trained with into it (tokenizer.save_pretrained({str(model)!r}))"
    )


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
    config = _read_config_json(config_file)
    if "auto_map" not in config:
        return
    register_own_model_types()
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    if config.get("model_type") not in CONFIG_MAPPING:
        raise remote_code_error(model)


def _model_config(model: str) -> dict:
    config_file = Path(model) / "config.json"
    if config_file.is_file():
        return _read_config_json(config_file)
    from transformers import PretrainedConfig  # a hub id (offline: from the cache)

    try:
        config, _ = PretrainedConfig.get_config_dict(model)
    except OSError as exc:
        raise ModelLoadError(f"cannot read the config of model {model}: {str(exc).splitlines()[0]}") from None
    return config


def shipped_classes(model: str) -> dict:
    """The classes a checkpoint's config.json names for its own code: `auto_map` ({} if none)."""
    return dict(_model_config(model).get("auto_map") or {})


@dataclass(frozen=True)
class HeadSource:
    """Where a task head's class comes from, as a run record keeps it (docs/protocol.md, Choice 21)."""

    head: str  # own | package
    class_name: str
    module: str  # the checkpoint's code module (own) or this package's module (package)
    sha256: str  # of the file that defines the class
    found_by: str  # auto_map | modeling_code | package

    def to_dict(self) -> dict:
        return {"class": self.class_name, "module": self.module, "sha256": self.sha256, "found_by": self.found_by}


def _sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _code_file(model: str, module: str) -> Path | None:
    """The checkpoint's `<module>.py` (a local folder, or the hub cache / the hub)."""
    from transformers.utils import cached_file

    try:
        found = cached_file(model, f"{module}.py", _raise_exceptions_for_missing_entries=False)
    except OSError:
        return None
    return Path(found) if found else None


def _split_reference(reference: str) -> tuple[str, str]:
    """auto_map's "[repo--]module.Class" -> (module, Class)."""
    module, _, name = reference.split("--")[-1].rpartition(".")
    return module, name


def own_head_source(model: str, auto_class: str) -> HeadSource | None:
    """The checkpoint's own class for `auto_class` (e.g. AutoModelForSequenceClassification), found
    as the release found it: the released harness registered its model type's head classes with
    the Auto classes in-process, so they resolved whether or not the checkpoint's auto_map named
    them (docs/protocol.md, Choice 21). First auto_map; else the modeling code its auto_map names
    for the model (AutoModel) is read (parsed, not run) for a class named <X>For<Task> (X: the
    AutoModel class's name where several match). None when the code defines none."""
    auto_map = shipped_classes(model)
    if isinstance(auto_map.get(auto_class), str):
        module, name = _split_reference(auto_map[auto_class])
        code = _code_file(model, module)
        return HeadSource("own", name, module, _sha256(code) if code else "", "auto_map")
    base = auto_map.get("AutoModel")
    if not isinstance(base, str):
        return None
    module, base_name = _split_reference(base)
    code = _code_file(model, module)
    if code is None:
        return None
    suffix = auto_class.removeprefix("AutoModel")  # ForSequenceClassification, ...
    defined = [node.name for node in ast.parse(code.read_text()).body if isinstance(node, ast.ClassDef)]
    matches = [name for name in defined if name.endswith(suffix) and not name.startswith("_")]
    preferred = [name for name in matches if name == base_name + suffix]
    chosen = preferred or (matches if len(matches) == 1 else [])
    return HeadSource("own", chosen[0], module, _sha256(code), "modeling_code") if chosen else None


def package_head_source(module) -> HeadSource:
    """The head of this package that `module` (a task module of benchmarks.kinds) trains."""
    import inspect

    cls = type(module)
    return HeadSource("package", cls.__name__, cls.__module__, _sha256(inspect.getfile(cls)), "package")


def check_own_head(model: str, auto_class: str) -> HeadSource:
    """`head: own` needs the checkpoint's own `auto_class` (e.g. AutoModelForSequenceClassification):
    named in its auto_map or defined by its modeling code; one line naming the checkpoint, the
    missing class and the fix otherwise."""
    source = own_head_source(model, auto_class)
    if source is None:
        has = ", ".join(sorted(shipped_classes(model))) or "none"
        suffix = auto_class.removeprefix("AutoModel")
        raise ModelLoadError(
            f"model {model} ships no {auto_class} class (config.json auto_map names: {has}; its "
            f"modeling code defines no ...{suffix} class), which head: own needs; use head: package "
            "(the linear head of this package)"
        )
    return source
