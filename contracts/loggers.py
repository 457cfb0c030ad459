"""The `loggers:` section of a run config (pretraining and fine-tuning): the experiment trackers a run
logs to, by name, each built from Composer's own logger class (docs/watching.md). Pure: the names,
their defaults and the checks that run before anything is written; no Composer import.

    loggers:
      tensorboard: {}                       # event files in <run_dir>/tensorboard
      mlflow: {experiment_name: masking}    # a local file store, file:<run_dir>/mlruns
      wandb: {project: mlm-vs-clm}          # offline mode, synced later from a login node

The run's own `loss.jsonl` is always written, whatever this section holds. Secrets (W&B API key,
tokens, passwords, credentials inside a tracking URI) are refused here: they belong in the
environment (WANDB_API_KEY, MLFLOW_TRACKING_TOKEN, ...), never in a config saved beside the run.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from contracts.bounded import short_repr


@dataclass(frozen=True)
class LoggerKind:
    composer_class: str  # the class in composer.loggers
    package: str  # the module the class needs at construction
    extra: str  # Composer's pip extra that installs it at versions Composer supports


LOGGERS: dict[str, LoggerKind] = {
    "tensorboard": LoggerKind("TensorboardLogger", "tensorboard", "tensorboard"),
    "mlflow": LoggerKind("MLFlowLogger", "mlflow", "mlflow"),
    "wandb": LoggerKind("WandBLogger", "wandb", "wandb"),
}
SECRET_WORDS = ("api_key", "apikey", "token", "password", "secret", "credential")
DEFAULT_PROJECT = "mlm-vs-clm"  # W&B project and MLflow experiment unless the config names one


def install_line(name: str) -> str:
    """pip install line of a logger's package, through Composer's extra (Composer's tested versions)."""
    try:
        version = f"=={importlib.metadata.version('mosaicml')}"
    except importlib.metadata.PackageNotFoundError:
        version = ""
    return f"pip install 'mosaicml[{LOGGERS[name].extra}]{version}'"


def _secret_in(value: Any, where: str) -> str | None:
    """The first field under `value` that holds a secret: a key naming one, or a URI with credentials."""
    if isinstance(value, dict):
        for key, item in value.items():
            if any(word in str(key).lower().replace("-", "_") for word in SECRET_WORDS):
                return f"{where}.{key}"
            found = _secret_in(item, f"{where}.{key}")
            if found:
                return found
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            found = _secret_in(item, f"{where}[{i}]")
            if found:
                return found
    elif isinstance(value, str) and "://" in value:
        try:
            parts = urlsplit(value)
        except ValueError:
            return None
        if parts.password is not None or (parts.username and parts.scheme not in ("file", "")):
            return where
    return None


def check_logger_section(loggers: dict, where: str = "loggers") -> None:
    """ValueError naming the field: an unknown logger name, settings that are not a mapping, a secret."""
    for name, settings in loggers.items():
        if name not in LOGGERS:
            raise ValueError(
                f"{where}.{name}: unknown logger; use one of {sorted(LOGGERS)} (the run's loss.jsonl "
                "is always written; docs/watching.md)"
            )
        if settings is not None and not isinstance(settings, dict):
            raise ValueError(
                f"{where}.{name}: expected a mapping of {LOGGERS[name].composer_class} arguments, "
                f"got {short_repr(settings)}"
            )
        secret = _secret_in(settings or {}, f"{where}.{name}")
        if secret:
            raise ValueError(
                f"{secret}: secrets are never written into a saved config; set them in the environment "
                "(WANDB_API_KEY, MLFLOW_TRACKING_USERNAME/PASSWORD or MLFLOW_TRACKING_TOKEN; docs/watching.md)"
            )


def missing_logger_package(loggers: dict, where: str = "loggers") -> str | None:
    """One line naming the first configured logger whose package is not installed, with its install line."""
    for name in loggers:
        package = LOGGERS[name].package
        if importlib.util.find_spec(package) is None:
            return (
                f"{where}.{name}: the {package} package is not installed here; {install_line(name)} "
                f"(docs/watching.md), or remove {where}.{name}"
            )
    return None


def logger_arguments(name: str, settings: dict | None, run_dir: str | Path) -> dict[str, Any]:
    """The arguments of the Composer logger class of `name`: the config's, over the offline defaults
    (files under `run_dir`; MLflow a local file store; W&B offline)."""
    run_dir = Path(run_dir).absolute()
    kwargs = dict(settings or {})
    if name == "tensorboard":
        kwargs.setdefault("log_dir", str(run_dir / "tensorboard"))
    elif name == "mlflow":
        uri = str(kwargs.get("tracking_uri") or run_dir / "mlruns")
        kwargs["tracking_uri"] = uri if "://" in uri or uri.startswith("file:") else Path(uri).absolute().as_uri()
        kwargs.setdefault("experiment_name", DEFAULT_PROJECT)
    elif name == "wandb":
        kwargs.setdefault("project", DEFAULT_PROJECT)
        init = dict(kwargs.get("init_kwargs") or {})
        init.setdefault("mode", "offline")  # compute nodes have no network: wandb sync afterwards
        init.setdefault("dir", str(run_dir))
        kwargs["init_kwargs"] = init
    return kwargs
