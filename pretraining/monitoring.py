"""Composer glue for watching a run (docs/watching.md): the `loggers:` section of a run config as
Composer's own logger objects, and Composer's monitors (SpeedMonitor, LRMonitor, MemoryMonitor).
The names, defaults and secret checks are pure (contracts.loggers); the FLOPs are pretraining.flops."""

from __future__ import annotations

import importlib
import inspect
import os
import re
from pathlib import Path

import composer.loggers
import composer.utils


class LoggerSetupError(ValueError):
    """A `loggers:` section that cannot run here; one line naming the field and the fix."""


class OfflineWandBLogger(composer.loggers.WandBLogger):
    """Composer's WandBLogger without its checkpoint download: when a run starts, Composer's
    autoresume asks every logger for the latest checkpoint, and WandBLogger asks the W&B server
    (wandb.Api()), which an offline compute node cannot reach. Checkpoints stay in the run folder."""

    def download_file(self, remote_file_name, destination, overwrite=False, progress_bar=True):
        raise NotImplementedError("checkpoints are read from the run folder, never from W&B")


class OneFileTensorboardLogger(composer.loggers.TensorboardLogger):
    """Composer's TensorboardLogger closes its writer at every flush (each `flush_interval` batches,
    each epoch, the end of fit) and the next scalar opens a new event file: a fine-tuning run of
    many small epochs left one file per epoch. This one flushes the same writer and closes it once,
    when the run closes: one event file per run, readable while it trains."""

    def _flush(self, logger):
        if self.writer is not None and (not self.rank_zero_only or composer.utils.dist.get_global_rank() == 0):
            self.writer.flush()

    def close(self, state, logger):
        if self.writer is not None:
            self.writer.flush()
            self.writer.close()
        self.writer = None


CLASSES = {"wandb": OfflineWandBLogger, "tensorboard": OneFileTensorboardLogger}  # Composer classes adapted here


MLFLOW_HTTP_DEFAULTS = {
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "30",
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "2",
}
_KINDS = (("dict", dict), ("list", list), ("bool", bool), ("int", int), ("float", float), ("str", str), ("Path", str))


def _argument_type_problem(parameter: inspect.Parameter, value) -> str | None:
    """What `value` should be by the parameter's annotation ("a str or null"), or None when it is that
    (or the annotation names none of the plain kinds: not checked). A bool is no int here (issue 66:
    logger arguments of the wrong type reached the class unchecked)."""
    annotation = parameter.annotation
    text = annotation.__name__ if isinstance(annotation, type) else str(annotation)
    while True:  # what a dict or list holds is not checked: dict[str, Any] is a dict
        inner = re.sub(r"(dict|list)\[[^\[\]]*\]", r"\1", text)
        if inner == text:
            break
        text = inner
    kinds = [kind for word, kind in _KINDS if re.search(rf"\b{word}\b", text)]
    if not kinds or parameter.annotation is inspect.Parameter.empty:
        return None
    nullable = "Optional" in text or "None" in text or parameter.default is None
    if value is None and nullable:
        return None
    fits = any(
        isinstance(value, kind) and (kind is bool or not isinstance(value, bool)) for kind in dict.fromkeys(kinds)
    ) or (float in kinds and isinstance(value, int) and not isinstance(value, bool))
    if fits:
        return None
    names = " or ".join(dict.fromkeys(k.__name__ for k in kinds)) + (" or null" if nullable else "")
    return f"{'an' if names[0] in 'aeiou' else 'a'} {names}"


def composer_loggers(loggers: dict, run_dir: str | Path, where: str = "loggers", build: bool = True) -> list:
    """The Composer logger of each configured name, built with its arguments checked against the
    class's own signature; LoggerSetupError before any is built (so before anything is written).
    `build=False` checks only (a logger may create its files as it is built: MLflow its store)."""
    from contracts.loggers import (
        LOGGERS,
        check_logger_section,
        install_line,
        logger_arguments,
        missing_logger_package,
    )

    try:
        check_logger_section(loggers, where)
    except ValueError as exc:
        raise LoggerSetupError(str(exc)) from None
    planned = []
    for name, settings in loggers.items():
        cls = CLASSES.get(name) or getattr(composer.loggers, LOGGERS[name].composer_class)
        kwargs = logger_arguments(name, settings, run_dir)
        parameters = inspect.signature(cls).parameters
        accepted = set(parameters) - {"self"}
        unknown = sorted(set(kwargs) - accepted)
        if unknown:
            raise LoggerSetupError(
                f"{where}.{name}.{unknown[0]}: not an argument of composer.loggers.{LOGGERS[name].composer_class}; "
                f"valid: {sorted(accepted)}"
            )
        for key, value in (settings or {}).items():  # the config's own values (ours are right by construction)
            problem = _argument_type_problem(parameters[key], value)
            if problem:
                raise LoggerSetupError(
                    f"{where}.{name}.{key}: {value!r} is not {problem} "
                    f"(composer.loggers.{LOGGERS[name].composer_class})"
                )
        planned.append((cls, kwargs))
    missing = missing_logger_package(loggers, where)
    if missing:
        raise LoggerSetupError(missing)
    for name in loggers:  # installed, but at a version that does not import with this stack
        try:
            importlib.import_module(LOGGERS[name].package)
        except Exception as exc:
            first = (str(exc).splitlines() or [""])[0]
            raise LoggerSetupError(
                f"{where}.{name}: the {LOGGERS[name].package} package is installed but does not import here "
                f"({type(exc).__name__}: {first}); {install_line(name)} (docs/watching.md)"
            ) from None
    for cls, kwargs in planned:
        if cls is composer.loggers.MLFlowLogger and str(kwargs.get("tracking_uri", "")).startswith("file:"):
            # MLflow 3.x refuses its file store unless opted in; a local file store is what an offline
            # compute node has (docs/watching.md). A user's own setting of the variable wins.
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        elif cls is composer.loggers.MLFlowLogger:
            # a tracking server asked as the logger is built: MLflow's own defaults (120 s per request,
            # 7 retries with backoff) kept a run silent for minutes when it did not answer (issue 66):
            # 30 s, 2 retries; a user's own settings of the variables win (docs/watching.md)
            for variable, value in MLFLOW_HTTP_DEFAULTS.items():
                os.environ.setdefault(variable, value)
    if not build:
        return []
    built = []
    for name, (cls, kwargs) in zip(loggers, planned):
        try:
            built.append(cls(**kwargs))
        except Exception as exc:  # noqa: BLE001 - a tracker that cannot start: one line naming it
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
            raise LoggerSetupError(
                f"{where}.{name}: composer.loggers.{LOGGERS[name].composer_class} could not start "
                f"({type(exc).__name__}: {first}); check its settings and that its server answers, or remove "
                f"{where}.{name} (the run's loss.jsonl is always written)"
            ) from None
    return built


def monitor_callbacks(window: int, peak_flops: float | None = None) -> list:
    """Composer's SpeedMonitor (throughput over `window` steps; MFU where the model counts its FLOPs
    and the device peak is known: Composer's table of GPUs, or `peak_flops`), the same MFU in model
    FLOPs (model_flops_monitor), LRMonitor, and MemoryMonitor where there is a CUDA device (it reads
    CUDA's allocator statistics)."""
    import torch
    from composer.callbacks import LRMonitor, MemoryMonitor, SpeedMonitor

    callbacks = [
        SpeedMonitor(window_size=window, gpu_flops_available=peak_flops),
        model_flops_monitor(window, peak_flops),
        LRMonitor(),
    ]
    if torch.cuda.is_available():
        callbacks.append(MemoryMonitor())
    return callbacks


def model_flops_monitor(window: int, peak_flops: float | None = None):
    """SpeedMonitor's FLOP/s and MFU over the same window, in model FLOPs (6N + attention, the LM
    head at every position: pretraining.flops.model_flops) where SpeedMonitor counts the needed ones
    (issue 82): `throughput/device/model_flops_per_sec` and `throughput/device/mfu_model_flops`.
    Logs nothing for a model without `model_flops_per_batch` (the fine-tuning task models)."""
    from collections import deque

    import torch
    from composer.callbacks.speed_monitor import get_gpu_flops_available
    from composer.core import Callback
    from composer.utils import dist

    class ModelFlopsMonitor(Callback):
        def __init__(self):
            self.peak = peak_flops
            self.flops: deque[float] = deque(maxlen=window + 1)
            self.wct: deque[float] = deque(maxlen=window + 1)

        def init(self, state, logger) -> None:
            if self.peak is None:
                self.peak = get_gpu_flops_available(state)

        def batch_end(self, state, logger) -> None:
            model = state.model.module if hasattr(state.model, "module") else state.model
            count = getattr(model, "model_flops_per_batch", None)
            if count is None:
                return
            flops = state.device.tensor_to_device(torch.tensor(float(count(state.batch))))
            dist.all_reduce(flops, reduce_operation="SUM")  # every rank's batch, as SpeedMonitor
            self.flops.append(flops.item())
            self.wct.append(state.timestamp.total_wct.total_seconds())
            if len(self.flops) == self.flops.maxlen:
                per_device = (sum(self.flops) - self.flops[0]) / (self.wct[-1] - self.wct[0]) / dist.get_world_size()
                logger.log_metrics({"throughput/device/model_flops_per_sec": per_device})
                if self.peak:
                    logger.log_metrics({"throughput/device/mfu_model_flops": per_device / self.peak})

    return ModelFlopsMonitor()
