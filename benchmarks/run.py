"""One fine-tuning run: (model, task, lr, seed) -> `<out>/<model>/<task>/lr<lr>_sd<seed>/record.json`.

A run directory holds the resolved config (`config.yaml`, with git sha and package versions) and,
once the run is complete, its run record (`record.json`, contracts.run_record, written atomically
last). A directory with a record is complete and never touched again (the run is skipped); a
directory without one is the leftover of an interrupted run and is cleared and redone. A running
job holds the directory's lock (`.lock`, contracts.locks): a second job of the same run refuses.

IR: one model per (lr, seed) is trained on MS MARCO pairs by the `msmarco` run, saved under its
run directory (`model/`, written before its record) and evaluated on MS MARCO; the `nq` and
`mldr_en` runs evaluate that saved model zero-shot. If it does not exist yet they run the
`msmarco` job first (in Slurm they are scheduled after it). With `save_sentence_transformers`, the
`msmarco` run also writes that model as a sentence-transformers folder (`sentence_transformers/`,
benchmarks.export_st).

Weights (docs/benchmarks.md, "What a run keeps"): a run keeps its config and record, never an
optimizer state. `save_weights` keeps the fine-tuned weights in `model/` (encoder as a Hugging Face
folder, plus the task head in `head.safetensors`). Without it, the MS MARCO `model/` lives only
until every IR evaluation of it (`nq`, `mldr_en`) has its record.

`protocol` (docs/protocol.md) picks the evaluation protocol: `paper` (default: the released
harness's heads, inputs and metrics) or `standard`. The record holds the scores under it
(`validation_score`, `test_score`, `test_instance_scores`, `protocol`, `metric`) and, where the
same predictions serve the other protocol's metric (SC, TC, IR), those scores in `other_scores`.
A run directory holds one protocol: a different protocol needs another `out`. Six settings where
the release and the better-known convention part (`max_grad_norm`, `ir_eval_encoding`,
`tc_whitespace_tokens`, `head`, `release_quirks`, `weight_decay_exempt`; docs/protocol.md, "Choices"
18-23) are fields of
their own, null meaning the protocol's choice; the values a run used are in its provenance (`protocol_choices`).

`trust_remote_code` is the one switch that lets a checkpoint's own model code run (the paper's
released checkpoints and EuroBERT ship theirs, docs/export.md); off, such a checkpoint is an error.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import re
import shutil
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

from benchmarks.tasks import IR_TRAIN_TASK, TASKS, get_task
from contracts.config import config_from_dict, config_to_dict, save_resolved_config
from contracts.layout import (
    ERROR_FILE,
    EXPORTS_DIR,
    IR_MODEL_DIR,
    MAX_SEED,
    RECORD_FILE,
    RUN_CONFIG_FILE,
    finetune_run_dir,
    finetune_run_id,
    format_lr,
)
from contracts.locks import LOCK_FILE, folder_lock
from contracts.loggers import check_logger_section
from contracts.model_names import strip_hub_prefix
from contracts.provenance import atomic_write_json, atomic_write_text, git_sha, package_versions, stable_hash, utc_now
from contracts.run_record import PROTOCOLS, RunRecord, read_record_file

CONFIG_DIR = Path(__file__).resolve().parent / "configs"
log = logging.getLogger("benchmarks.run")


class RunError(ValueError):
    """A run that cannot start; the message says why in one line."""


@dataclass(frozen=True)
class RunConfig:
    """Everything one run depends on. Defaults = the paper's protocol (configs/paper.yaml)."""

    # Fields used only by one protocol say so; docs/protocol.md lists both protocols side by side.

    model: str  # local Hugging Face folder or hub id
    task: str  # benchmarks.tasks id (sst2, ..., mldr_en)
    lr: float
    seed: int
    out: str = "runs"
    data_root: str | None = None  # local mirror of the datasets; None: the Hub
    model_name: str | None = None  # name in records and run paths; None: from `model`
    batch_size: int = 32
    device_microbatch_size: int | None = None
    max_steps: int | None = None  # None: the task's budget
    # Stop after one pass over the training set (and at max_steps). None: the task's rule (one
    # epoch for CoNLL and UNER only, as released); the toy world sizes its training sets so that
    # one epoch is each task's budget (docs/benchmarks.md).
    one_epoch: bool | None = None
    max_length: int | None = None  # None: the model maximum
    warmup_fraction: float = 0.1
    betas: tuple[float, float] = (0.9, 0.95)
    eps: float = 1e-5
    weight_decay: float = 0.1
    precision: str = "auto"
    device: str = "auto"
    eval_batch_size: int = 64
    doc_stride: int = 128
    n_best: int = 20
    max_answer_length: int = 30
    null_score_diff_threshold: float = 0.0
    ir_scale: float = 20.0
    ir_top_k: int = 100
    attn_implementation: str | None = None
    protocol: Literal["paper", "standard"] = "paper"
    candidate_pool: Literal["qrels_pool_all_splits", "qrels_pool", "full_corpus"] = "qrels_pool_all_splits"
    ir_query_split_seed: int | None = None  # NQ query halves; None: the run's seed (as released)
    trust_remote_code: bool = False  # run model code shipped with the checkpoint (auto_map)
    # fine-tune a checkpoint that lacks backbone weights (re-initialised at random, named in the record)
    allow_reinitialised_weights: bool = False
    save_sentence_transformers: bool = False  # IR: also save the trained model for sentence-transformers
    save_weights: bool = False  # keep the fine-tuned weights in model/ (else only IR's, until evaluated)
    # Where the release and the better-known convention part (docs/protocol.md, "Choices" 18-23).
    # null: the protocol's choice (benchmarks.kinds.PROTOCOL_CHOICES), recorded in the provenance.
    max_grad_norm: float | None = 1.0  # clip the gradient norm before each step (HF Trainer default); null: never
    ir_eval_encoding: Literal["sentence_transformers", "as_training"] | None = None  # IR evaluation inputs
    tc_whitespace_tokens: Literal["next_word", "ignore"] | None = None  # TC whitespace-only sub-tokens
    head: Literal["own", "package"] | None = None  # SC/TC/QA: the checkpoint's own head class, or ours
    release_quirks: bool | None = None  # the release's LR timing, steps per epoch, QA positions (Choice 22)
    # which parameters skip weight decay: the pinned Trainer's nn.LayerNorm and biases, or every 1-D one (Choice 23)
    weight_decay_exempt: Literal["layernorm_and_bias", "one_dim"] | None = None
    # Experiment trackers the training logs to, by name (contracts.loggers, docs/watching.md)
    loggers: dict[str, Any] = dataclasses.field(default_factory=dict, hash=False)

    def __post_init__(self):
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if not 0 <= self.seed <= MAX_SEED:
            raise ValueError(f"seed must be between 0 and {MAX_SEED} (numpy's and torch's seed range), got {self.seed}")
        if self.batch_size < 1 or (self.device_microbatch_size is not None and self.device_microbatch_size < 1):
            raise ValueError("batch_size and device_microbatch_size must be >= 1")
        if self.max_steps is not None and self.max_steps < 0:
            raise ValueError(f"max_steps must be >= 1 (0: zero-shot evaluation, IR tasks), got {self.max_steps}")
        if self.zero_shot and self.task in TASKS and get_task(self.task).task_type != "IR":
            raise ValueError(
                f"max_steps 0 (zero-shot) scores a model as it is, which is defined for the IR tasks only "
                f"(embedding similarity); {self.task} needs a head trained for it: give max_steps >= 1"
            )
        if self.max_length is not None and self.max_length < 1:  # 0 read as "no limit" before
            raise ValueError(f"max_length must be >= 1 (null: the model maximum), got {self.max_length}")
        if not self.model:
            raise ValueError("model is empty")
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {PROTOCOLS}, got {self.protocol!r}")
        if self.max_grad_norm is not None and not self.max_grad_norm > 0:
            raise ValueError(f"max_grad_norm must be > 0 (null: no clipping), got {self.max_grad_norm}")
        check_logger_section(self.loggers)
        if not is_folder_name(self.name):  # the run directory is <out>/<name>/...: it must stay inside out
            raise ValueError(
                f"model name {self.name!r} ({'model_name' if self.model_name else 'from model'}) is not one folder "
                "name (no '/', '.', '..' or control characters); give --model-name NAME"
            )

    @property
    def zero_shot(self) -> bool:
        """`max_steps: 0`: the model scored as it is, no fine-tuning (IR; issue 67)."""
        return self.max_steps == 0

    @property
    def name(self) -> str:
        name = run_model_name(self.model, self.model_name)
        # a zero-shot run is a model of its own in records and tables, beside the fine-tuned ones
        return f"{name}{ZERO_SHOT_SUFFIX}" if self.zero_shot and not self.model_name else name

    @property
    def run_dir(self) -> Path:
        return finetune_run_dir(self.out, self.name, self.task, self.lr, self.seed)


# Folder names that say where a model sits, not which model it is (issue 67: every run of a folder
# named `model` was named `model`): the name comes from the nearest part above them.
GENERIC_FOLDER_NAMES = frozenset(
    {"model", "models", EXPORTS_DIR, "export", "exports", "checkpoint", "checkpoints", "final", "latest", "best"}
    | {"snapshots"}
)
_GENERIC_FOLDER = re.compile(r"(step|checkpoint|ckpt|epoch)[-_]?[0-9]+|[0-9a-f]{40}", re.ASCII)


def run_model_name(model: str, model_name: str | None = None) -> str:
    """The name of a run's model in records and run paths: `model_name`, else the last part of
    `model` that names a model: `.../MiniLM/model` -> `MiniLM`, `.../toy_s-clm/hf/step-250` ->
    `toy_s-clm`, a Hugging Face cache snapshot `.../models--org--name/snapshots/<sha>` -> `name`."""
    if model_name:
        return model_name
    parts = [part for part in str(model).rstrip("/").split("/") if part]
    for part in reversed(parts):
        generic = part.lower() in GENERIC_FOLDER_NAMES or _GENERIC_FOLDER.fullmatch(part)
        if not generic:
            return part.split("--")[-1] if part.startswith("models--") else part
    return strip_hub_prefix(str(model).rstrip("/"))


def is_folder_name(name: str) -> bool:
    """One path component that stays where it is put: not empty, '.', '..', no separator, no
    control character (a newline in a name would also end up in scripts and logs)."""
    return (
        bool(name)
        and name not in {".", ".."}
        and "/" not in name
        and not any(ord(c) < 32 or ord(c) == 127 for c in name)
    )


def load_run_config(values: dict, config_file: str | Path | None = None, overrides: list[str] = ()) -> RunConfig:
    """CLI values on top of a YAML file (default: configs/paper.yaml) and `field=value` overrides."""
    from contracts.config import apply_overrides, read_yaml_mapping

    path = Path(config_file) if config_file else CONFIG_DIR / "paper.yaml"
    data = read_yaml_mapping(path)
    data.pop(LR_GRID_KEY, None)  # the matrix's grid (config_lr_grid), not a setting of one run
    data.update({k: v for k, v in values.items() if v is not None})
    return config_from_dict(RunConfig, apply_overrides(data, list(overrides)), str(path))


LR_GRID_KEY = "lr_grid"
ZERO_SHOT_SUFFIX = "-zero-shot"


def config_lr_grid(config_file: str | Path | None) -> tuple[float, ...] | None:
    """The LR grid a fine-tuning config declares for `matrix` (its `lr_grid:` list), None if none:
    the toy world's spans the paper's grid and the toy LR, so that any model, not only ours, is
    fine-tuned at an LR chosen on validation as the paper chooses it (issue 67)."""
    from contracts.config import ConfigError, read_yaml_mapping

    path = Path(config_file) if config_file else CONFIG_DIR / "paper.yaml"
    grid = read_yaml_mapping(path).get(LR_GRID_KEY)
    if grid is None:
        return None
    if (
        not isinstance(grid, list)
        or not grid
        or not all(isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0 for x in grid)
    ):
        raise ConfigError(f"{path}: {LR_GRID_KEY} must be a non-empty list of positive learning rates, got {grid!r}")
    return tuple(float(x) for x in grid)


def existing_record(path: Path) -> RunRecord | None:
    """The record of a complete run, None when there is none; a broken one is an error."""
    return read_record_file(path) if path.is_file() else None


def reusable_record(cfg: RunConfig) -> RunRecord | None:
    """The complete record of `cfg`'s run, None when it has none; a RunError when the record was made
    with other settings (`run` would refuse to reuse it too, docs/benchmarks.md "Reruns")."""
    path = cfg.run_dir / RECORD_FILE
    done = existing_record(path)
    return None if done is None else _same_settings(done, path, cfg)


def trained_ir_model(cfg: RunConfig) -> Path:
    return finetune_run_dir(cfg.out, cfg.name, IR_TRAIN_TASK, cfg.lr, cfg.seed) / IR_MODEL_DIR


# The meaning of the RunConfig fields, saved in each run's config.yaml (`settings_version`; absent:
# 1). Bump it when a field changes what it does without a new field appearing: a complete run saved
# under another version is then not reused. A field added to RunConfig needs no bump: a saved
# config that lacks it was made before it existed and is not reused either (`_same_settings`).
SETTINGS_VERSION = 1

# Settings that change how a run is computed or where it is kept, not what it measures: a complete
# run is reused whatever they are (a moved output folder, another GPU kind, a larger micro-batch).
NOT_RESULT_SETTINGS = frozenset(
    {
        "out",
        "model",
        "model_name",
        "data_root",
        "device",
        "device_microbatch_size",
        "precision",
        "attn_implementation",
        "trust_remote_code",
        "allow_reinitialised_weights",
        "save_sentence_transformers",
        "save_weights",
        "loggers",
    }
)
# What an IR evaluation (NQ, MLDR) may change about the MS MARCO model it reuses: its own task and
# how it is evaluated, not how the model was trained.
IR_EVALUATION_SETTINGS = frozenset(
    {"task", "eval_batch_size", "ir_top_k", "candidate_pool", "ir_query_split_seed", "ir_eval_encoding"}
)


def _same_settings(record: RunRecord, path: Path, cfg: RunConfig, also_free: frozenset = frozenset()) -> RunRecord:
    """A complete record is reused only for the run it was made by: same protocol, same
    SETTINGS_VERSION, and every setting present and equal (its config.yaml, except
    NOT_RESULT_SETTINGS and `also_free`). Otherwise a changed --max-steps or batch size, or a run
    made before a setting existed (an unclipped run before `max_grad_norm`), would silently return
    the old score (docs/benchmarks.md, "Reruns")."""
    import yaml

    from contracts.bounded import BoundedReadError, read_yaml
    from contracts.config import CONFIG_BYTES_LIMIT, config_to_dict

    if record.protocol != cfg.protocol:
        raise RunError(
            f"{path}: holds a complete run under protocol {record.protocol!r}; write "
            f"protocol {cfg.protocol!r} runs to another --out"
        )
    saved_path = path.parent / RUN_CONFIG_FILE
    redo = f"remove {path.parent} to redo it, or write this run to another --out"
    try:
        document = read_yaml(saved_path, CONFIG_BYTES_LIMIT)
        saved = document["config"]
        version = document.get("settings_version", 1)
        if not isinstance(saved, dict):
            raise TypeError(saved_path)
    except (OSError, BoundedReadError, TypeError, KeyError, AttributeError):
        # a record whose config is missing or unreadable (copied by hand, a damaged folder): its
        # settings cannot be compared, so it is not taken for this run's result
        raise RunError(
            f"{path}: holds a complete run without a readable {RUN_CONFIG_FILE} beside it, so its settings "
            f"cannot be checked against this run's: restore {saved_path}, or {redo}"
        ) from None
    if version != SETTINGS_VERSION:
        raise RunError(
            f"{path}: holds a complete run saved under settings version {version} ({saved_path}), this "
            f'package\'s is {SETTINGS_VERSION} (docs/benchmarks.md, "Reruns"): {redo}'
        )
    wanted = yaml.safe_load(yaml.safe_dump(config_to_dict(cfg), sort_keys=False))
    for field, value in wanted.items():
        if field in NOT_RESULT_SETTINGS or field in also_free:
            continue
        if field not in saved:
            raise RunError(
                f"{path}: holds a complete run made before the setting {field} existed ({saved_path} lacks it), "
                f"so it may not have been computed as this run ({field}={value!r}): {redo}"
            )
        if saved[field] == value:
            continue
        raise RunError(
            f"{path}: holds a complete run with {field}={saved[field]!r} ({saved_path}); this run has "
            f"{field}={value!r}: write it to another --out, or remove {path.parent} to redo it"
        )
    return record


def _check_batch_splits(cfg: RunConfig, world_size: int) -> None:
    """`batch_size` is the batch over all ranks; each takes an equal share of it."""
    if cfg.batch_size % world_size:
        fits = [n for n in range(1, cfg.batch_size + 1) if cfg.batch_size % n == 0]
        raise RunError(
            f"batch_size {cfg.batch_size} (the batch over all ranks) is not divisible by the world size "
            f"{world_size} (ranks launched): launch a number of ranks that divides it ({', '.join(map(str, fits))})"
        )


RANK_ZERO_WAIT = timedelta(hours=6)  # the other ranks wait this long for rank 0's evaluation


def _rank_zero_handoff(device: str) -> Callable[[RunRecord | None], RunRecord]:
    """Several ranks: join the process group (as Composer's Trainer would), and make a gloo group
    with a long timeout through which rank 0, once it has evaluated and written the record, hands
    it to the other ranks; they wait for it (the process group's own timeout is 5 minutes). Every
    rank calls this at the same point, before any of them works alone."""
    import torch.distributed
    from composer.utils import dist

    from benchmarks.finetune import resolve_device

    dist.initialize_dist(resolve_device(device))
    group = torch.distributed.new_group(backend="gloo", timeout=RANK_ZERO_WAIT)

    def handoff(record: RunRecord | None) -> RunRecord:
        box = [None if record is None else record.to_dict()]
        torch.distributed.broadcast_object_list(box, src=0, group=group)
        return RunRecord.from_dict(box[0], "the record of rank 0")

    return handoff


def run(cfg: RunConfig) -> tuple[RunRecord, bool]:
    """Run (or skip) one job; returns its record and whether it was computed now.

    Under a launcher with several ranks (docs/benchmarks.md, "Several ranks"), every rank trains
    its share of each batch; rank 0 alone writes the run directory and evaluates, and hands the
    record to the others."""
    from composer.utils import dist

    from benchmarks.tasks import get_task

    spec = get_task(cfg.task)  # an unknown task fails before anything is written
    rank, world_size = dist.get_global_rank(), dist.get_world_size()  # as the launcher set them
    _check_batch_splits(cfg, world_size)
    out_dir = cfg.run_dir
    record_path = out_dir / RECORD_FILE
    done = existing_record(record_path)
    if done is not None:
        log.info("skip %s: complete record exists", record_path)
        return _same_settings(done, record_path, cfg), False
    from benchmarks.kinds import own_head_class
    from benchmarks.kinds.checkpoint import check_own_head
    from benchmarks.kinds.loading import check_checkpoint

    if spec.task_type == "IR" and cfg.task != IR_TRAIN_TASK and not cfg.zero_shot:
        model_dir = trained_ir_model(cfg)
        trained = existing_record(model_dir.parent / RECORD_FILE)
        if trained is None:
            log.info(
                "%s needs the MS MARCO model of lr %s seed %s: training it first", cfg.task, format_lr(cfg.lr), cfg.seed
            )
            run(dataclasses.replace(cfg, task=IR_TRAIN_TASK))
        else:
            _same_settings(trained, model_dir.parent / RECORD_FILE, cfg, IR_EVALUATION_SETTINGS)
        if not model_dir.is_dir():
            raise RunError(
                f"{model_dir}: the trained MS MARCO model is missing although its record "
                "exists (removed once its IR evaluations had records, as save_weights is "
                "false); remove that run directory to retrain it"
            )
    else:  # the model's folder, tokenizer and weights, checked before anything is written (issue 90)
        check_checkpoint(cfg.model, cfg.trust_remote_code, cfg.allow_reinitialised_weights)
        head_class = own_head_class(spec.task_type, cfg.protocol)
        if cfg.head == "own" and head_class:
            check_own_head(cfg.model, head_class)
    _training_loggers(cfg, spec, out_dir, build=False)  # a bad section stops the run before anything is written
    with _run_dir_lock(out_dir, rank):
        if rank == 0 and world_size == 1 and (done := existing_record(record_path)) is not None:
            return _same_settings(done, record_path, cfg), False  # completed by a job that just ended
        handoff = _rank_zero_handoff(cfg.device) if world_size > 1 else None
        if rank == 0:
            _clear_leftover(out_dir)
            save_resolved_config(cfg, out_dir, extra={"settings_version": SETTINGS_VERSION})
        # built after the leftovers are cleared: MLflow creates its file store as it is built
        loggers = _training_loggers(cfg, spec, out_dir)
        try:
            record = _execute(cfg, spec, out_dir, loggers)
        except Exception as exc:  # kept beside the run for `reproduce status`; a rerun clears the folder
            if rank == 0:
                atomic_write_text(out_dir / ERROR_FILE, f"{type(exc).__name__}: {exc}\n\n{traceback.format_exc()}")
            raise
        if rank == 0:
            atomic_write_json(record_path, record.to_dict())
            if spec.task_type == "IR" and cfg.task != IR_TRAIN_TASK and not cfg.zero_shot:
                _drop_evaluated_ir_model(cfg)
    return (record if handoff is None else handoff(record)), True


def _training_loggers(cfg: RunConfig, spec, out_dir: Path, build: bool = True) -> list:
    """Composer loggers of `cfg.loggers` for a run that trains (files under its run directory by
    default); RunError naming the field when a name, argument or package is wrong (`build=False`:
    the check alone)."""
    if not cfg.loggers or cfg.zero_shot or (spec.task_type == "IR" and cfg.task != IR_TRAIN_TASK):
        return []
    from pretraining.monitoring import LoggerSetupError, composer_loggers

    sections = dict(cfg.loggers)
    if "mlflow" in sections:  # the run's identity as MLflow tags (the config's own tags win)
        mlflow = dict(sections["mlflow"] or {})
        mlflow["tags"] = {**{k: str(v) for k, v in tracker_params(cfg, spec).items()}, **(mlflow.get("tags") or {})}
        sections["mlflow"] = mlflow
    try:
        return composer_loggers(sections, out_dir, build=build)
    except LoggerSetupError as exc:
        raise RunError(str(exc)) from None


def _run_dir_lock(out_dir: Path, rank: int) -> contextlib.AbstractContextManager:
    """Rank 0 holds `<run dir>/.lock` for the whole run (contracts.locks): a second job of the same
    run refuses at once, naming the holder's pid, and never clears the live run's folder as a
    leftover (docs/reliability.md)."""
    if rank != 0:
        return contextlib.nullcontext()
    return folder_lock(
        out_dir,
        job="benchmarks run",
        advice="wait for it to finish (a rerun then skips the complete run), or choose another --out",
    )


def tracker_run_name(cfg: RunConfig) -> str:
    """The run's name in TensorBoard, MLflow and W&B: `<model>/<task>/lr<LR>_sd<SEED>`, its path."""
    return finetune_run_id(cfg.name, cfg.task, cfg.lr, cfg.seed)


def tracker_params(cfg: RunConfig, spec) -> dict:
    """What a tracker can filter a fine-tuning run by (logged as hyperparameters; MLflow tags too)."""
    return {
        "model": cfg.name,
        "task": cfg.task,
        "task_type": spec.task_type,
        "lr": cfg.lr,
        "seed": cfg.seed,
        "protocol": cfg.protocol,
    }


def _tracked_metrics(spec, cfg: RunConfig, scores: dict) -> dict[str, float]:
    """The final validation and test metric of the run's protocol, as the trackers show them."""
    own, metric = scores[cfg.protocol], spec.metric_under(cfg.protocol)
    return {f"metrics/validation/{metric}": own["validation"].score, f"metrics/test/{metric}": own["test"].score}


def _clear_leftover(out_dir: Path) -> None:
    """Remove what an interrupted run left in `out_dir` (not the lock this run holds)."""
    leftovers = [p for p in out_dir.iterdir() if p.name != LOCK_FILE]
    if leftovers:
        log.info("clearing %s: leftover of an interrupted run", out_dir)
    for path in leftovers:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()


def _drop_evaluated_ir_model(cfg: RunConfig) -> None:
    """Remove the MS MARCO model of (lr, seed) once every IR evaluation of it has its record, unless
    this run or the MS MARCO run asked to keep weights (`save_weights`)."""
    from benchmarks.tasks import tasks_of
    from contracts.config import saved_config

    model_dir = trained_ir_model(cfg)
    trained_config = saved_config(model_dir.parent)
    if cfg.save_weights or trained_config.get("save_weights") or not model_dir.is_dir():
        return
    evaluations = [spec.name for spec in tasks_of("IR") if spec.name != IR_TRAIN_TASK]
    if all(
        (finetune_run_dir(cfg.out, cfg.name, task, cfg.lr, cfg.seed) / RECORD_FILE).is_file() for task in evaluations
    ):
        log.info("removing %s: every IR evaluation of it has its record (save_weights is false)", model_dir)
        doomed = model_dir.with_name(model_dir.name + ".removing")  # a kill mid-removal leaves no half model/
        shutil.rmtree(doomed, ignore_errors=True)
        model_dir.rename(doomed)
        shutil.rmtree(doomed)


def model_origin(model) -> str:
    """Where the fine-tuned model came from, for the audit's question (analysis.recipe):
    'pretrained' (exported by `python -m pretraining export`: pretraining.json beside the
    weights), 'fetched' (`python -m pretraining fetch-model`: fetch_manifest.json), else 'other'
    (a hub id, or any other folder)."""
    from contracts.hub import MODEL_MANIFEST

    folder = Path(str(model))
    if (folder / "pretraining.json").is_file():
        return "pretrained"
    if (folder / MODEL_MANIFEST).is_file():
        return "fetched"
    return "other"


def _execute(cfg: RunConfig, spec, out_dir: Path, loggers=()) -> RunRecord | None:
    """Train (every rank) and evaluate (rank 0): the record on rank 0, None on the others."""
    import torch
    from composer.utils import dist, reproducibility

    from benchmarks import metrics, reuse
    from benchmarks.chance import CHANCE_BAND, at_chance, describe, label_prior_entropy, run_chance_levels, tail_loss
    from benchmarks.finetune import TrainSettings, check_last_batch, fit, resolve_device, resolve_precision
    from benchmarks.kinds import KindSettings, get_kind, own_head_class, protocol_choice
    from benchmarks.kinds.checkpoint import own_head_source, package_head_source
    from benchmarks.kinds.common import (
        EvalContext,
        load_backbone,
        load_tokenizer,
        model_max_length,
        protocol_max_length,
    )

    started, t0 = utc_now(), time.time()
    kind = get_kind(spec.task_type)
    trains = (spec.task_type != "IR" or cfg.task == IR_TRAIN_TASK) and not cfg.zero_shot
    rank, world_size = dist.get_global_rank(), dist.get_world_size()
    if rank != 0 and not trains:
        return None
    source = str(cfg.model) if trains or cfg.zero_shot else str(trained_ir_model(cfg))
    roles = ("train", "validation", "test") if trains else ("validation", "test")
    data_root = Path(cfg.data_root) if cfg.data_root else None
    extra = {}
    if spec.task_type == "IR":
        # NQ's random query halves: after seeding with the fine-tuning seed (docs/protocol.md)
        split_seed = cfg.seed if cfg.ir_query_split_seed is None else cfg.ir_query_split_seed
        data = reuse.task_data(spec, data_root, roles=roles, pool=cfg.candidate_pool, query_split_seed=split_seed)
        if "query_split_seed" in data.split_record:
            data.split_record["query_split_seed_from"] = (
                "seed" if cfg.ir_query_split_seed is None else "ir_query_split_seed"
            )
    else:
        data = reuse.task_data(spec, data_root, roles=roles)
    # The head: the checkpoint's own task model (loaded with its head, seeded like ours) or ours
    head_class = own_head_class(spec.task_type, cfg.protocol)
    head = None if head_class is None else protocol_choice("head", cfg.protocol, cfg.head)
    head_source = None
    if head == "own_if_shipped":  # as the release: the class its code defines, auto_map or not
        head_source = own_head_source(source, head_class)
        head = "own" if head_source else "package"
        if head_source is None and rank == 0:
            print(f"head: {source}: uses this package's head (the checkpoint ships no {head_class} class of its own)")
    tokenizer = load_tokenizer(source, cfg.trust_remote_code)
    if head == "own":
        reproducibility.seed_all(cfg.seed)  # the own head is initialised as it loads
        backbone = load_backbone(
            source, cfg.attn_implementation, cfg.trust_remote_code, head_class, kind.num_labels(data, cfg.protocol)
        )
    else:
        backbone = load_backbone(source, cfg.attn_implementation, cfg.trust_remote_code)
    full_length = min(cfg.max_length or 10**9, model_max_length(backbone, tokenizer))
    length_from = "config" if cfg.max_length else "model_maximum"
    declared = None
    if spec.task_type == "IR":
        from benchmarks.kinds.ir import sentence_transformers_max_length

        declared = sentence_transformers_max_length(cfg.model)  # an embedding model's own input length
        if cfg.max_length is None and declared is not None and declared < full_length:
            full_length, length_from = declared, "sentence_transformers_config"
    max_length = protocol_max_length(full_length, cfg.protocol)
    settings = KindSettings(
        max_length=max_length,
        protocol=cfg.protocol,
        doc_stride=cfg.doc_stride,
        n_best=cfg.n_best,
        max_answer_length=cfg.max_answer_length,
        null_score_diff_threshold=cfg.null_score_diff_threshold,
        ir_scale=cfg.ir_scale,
        ir_top_k=cfg.ir_top_k,
        device_microbatch_size=cfg.device_microbatch_size,
        ir_eval_encoding=cfg.ir_eval_encoding,
        # sentence-transformers caps at the model maximum (its max_seq_length), not at the 99%
        ir_eval_max_length=full_length,
        ir_model_dir=(str(cfg.model) if cfg.zero_shot else str(trained_ir_model(cfg)))
        if spec.task_type == "IR"
        else None,
        trust_remote_code=cfg.trust_remote_code,
        tc_whitespace_tokens=cfg.tc_whitespace_tokens,
        head=head or "package",
        release_quirks=cfg.release_quirks,
    )
    ir, st = spec.task_type == "IR", settings.ir_eval_encoding == "sentence_transformers"
    exempt = protocol_choice("weight_decay_exempt", cfg.protocol, cfg.weight_decay_exempt)
    extra["protocol_choices"] = {  # the resolved settings of docs/protocol.md, "Choices" 18-23
        "max_grad_norm": cfg.max_grad_norm if trains else None,
        "ir_eval_encoding": settings.ir_eval_encoding if ir else None,
        "ir_eval_max_length": (full_length if st else max_length) if ir else None,
        "tc_whitespace_tokens": settings.tc_whitespace_tokens if spec.task_type == "TC" else None,
        "head": head,
        "release_quirks": settings.release_quirks,
        "weight_decay_exempt": exempt if trains else None,
        "max_length_from": length_from,
    }
    if ir and rank == 0:  # what the input length cuts off the documents a model is judged on (issue 67)
        from benchmarks.kinds.ir import CUT_WARN_SHARE, documents_cut_share

        eval_length = full_length if st else max_length
        cut = documents_cut_share(tokenizer, data.test.corpus, data.spec.doc_prefix, eval_length)
        extra["ir_documents_cut_share"] = round(cut, 4)
        # said for a model made for longer inputs than the pinned length (our own models declare none)
        if cut > CUT_WARN_SHARE and length_from == "config" and declared is not None and declared > eval_length:
            print(
                f"warning: {cfg.task}: max_length {cfg.max_length} cuts {cut:.0%} of the test documents "
                f"(more than {CUT_WARN_SHARE:.0%}); the model is judged on cut inputs (docs/benchmarks.md, "
                '"Your own checkpoint")',
                file=sys.stderr,
            )
    device_type = resolve_device(cfg.device)
    precision = resolve_precision(cfg.precision, device_type)
    scores: dict[str, dict] = {}  # protocol -> role -> MetricResult

    def _scores() -> dict[str, dict]:
        device = torch.device("cuda" if device_type == "gpu" else "cpu")
        amp = torch.bfloat16 if precision == "amp_bf16" else None
        module.to(device).eval()
        ctx = EvalContext(device, amp, cfg.eval_batch_size)
        found: dict[str, dict] = {}
        for role in ("validation", "test"):
            for protocol, (predictions, references) in kind.metric_inputs(
                module, data, role, tokenizer, settings, ctx
            ).items():
                metric = metrics.METRICS[spec.metric_under(protocol)]
                found.setdefault(protocol, {})[role] = metric(predictions, references)
        return found

    reproducibility.seed_all(cfg.seed)  # the head's initialisation depends on the seed too
    module = kind.build_module(backbone, data, settings)
    if head == "own":
        head_source = head_source or own_head_source(source, head_class)
    elif head == "package":
        head_source = package_head_source(module)
    if head_source is not None:
        extra["head_source"] = head_source.to_dict()
    if trains or cfg.zero_shot:  # what the loader did to the checkpoint's weights (issue 90)
        extra["loading_report"] = _loading_report(cfg, source, backbone, module, head, rank)
    if cfg.protocol == "paper" and precision == "amp_bf16":
        module.to(torch.bfloat16)  # the release loads (and so fine-tunes) the whole model in bf16
    extra["weights_dtype"] = str(next(module.parameters()).dtype).removeprefix("torch.")
    if trains:
        features, collate = reuse.training_features(kind, data, tokenizer, settings)
        train_settings = TrainSettings(
            lr=cfg.lr,
            seed=cfg.seed,
            batch_size=cfg.batch_size,
            device_microbatch_size=cfg.device_microbatch_size,
            max_steps=cfg.max_steps or spec.max_steps,
            one_epoch=spec.one_epoch if cfg.one_epoch is None else cfg.one_epoch,
            warmup_fraction=cfg.warmup_fraction,
            betas=tuple(cfg.betas),
            eps=cfg.eps,
            weight_decay=cfg.weight_decay,
            precision=cfg.precision,
            device=cfg.device,
            accumulate_inside_loss=spec.task_type == "IR",
            max_grad_norm=cfg.max_grad_norm,
            hf_schedule=settings.release_quirks,
            weight_decay_exempt=exempt,
        )
        try:
            check_last_batch(len(features), train_settings, world_size)
        except ValueError as exc:
            raise RunError(f"{cfg.task}: {exc}") from None

        def evaluate() -> dict[str, float]:  # rank 0 evaluates before the trackers close
            scores.update(_scores())
            return _tracked_metrics(spec, cfg, scores)

        train = fit(
            module,
            features,
            collate,
            train_settings,
            loggers=loggers,
            run_name=tracker_run_name(cfg),
            params=tracker_params(cfg, spec),
            after_fit=evaluate if loggers and rank == 0 else None,
        )
        losses_tail = tail_loss(train.pop("step_losses"))
        extra["train"] = {**train, "n_examples": len(features), "tail_loss": losses_tail}
        if rank != 0:
            return None
        if spec.task_type == "IR" or cfg.save_weights:
            _save_model(module, tokenizer, out_dir / IR_MODEL_DIR)  # IR: = trained_ir_model(cfg)
            if cfg.save_sentence_transformers:
                from benchmarks.export_st import SENTENCE_TRANSFORMERS_DIR, export_inputs, save_sentence_transformer

                length, eos_only = export_inputs(cfg.protocol, settings.ir_eval_encoding, max_length, full_length)
                save_sentence_transformer(
                    out_dir / IR_MODEL_DIR,
                    out_dir / SENTENCE_TRANSFORMERS_DIR,
                    length,
                    data.spec.query_prefix,
                    data.spec.doc_prefix,
                    cfg.trust_remote_code,
                    eos_only=eos_only,
                )
    else:
        extra["trained_model"] = source
    if not scores:  # not evaluated yet (by `fit`, for the trackers, before they closed)
        scores.update(_scores())
    # the chance level of each score, with this run's data, tokenizer and length (issue 67)
    levels = run_chance_levels(
        spec,
        data,
        list(scores),
        tokenizer,
        max_length,
        whitespace=settings.tc_whitespace_tokens if spec.task_type == "TC" else None,
        past_window=bool(settings.release_quirks) if spec.task_type == "QA" else False,
    )
    own_scores = {role: scores[cfg.protocol][role].score for role in ("validation", "test")}
    prior = label_prior_entropy(data.train["label"]) if trains and spec.task_type == "SC" else None
    loss = extra.get("train", {}).get("tail_loss")
    reasons = at_chance(own_scores, levels[cfg.protocol], loss, prior)
    extra["chance"] = {
        "levels": levels,
        "band": CHANCE_BAND,
        "label_prior_entropy": prior,
        "at_chance": reasons,
        "why": describe(reasons, own_scores, levels[cfg.protocol], loss, prior) if reasons else None,
    }
    own = scores.pop(cfg.protocol)
    other_scores = {
        protocol: {
            "metric": spec.metric_under(protocol),
            "validation_score": result["validation"].score,
            "test_score": result["test"].score,
            "test_instance_scores": list(result["test"].instance_scores) or None,
        }
        for protocol, result in scores.items()
    }
    finished = utc_now()
    body = config_to_dict(cfg)
    provenance = {
        "source": "benchmarks",
        "config_hash": stable_hash(body),
        "git_sha": git_sha(),
        "package_versions": package_versions(),
        "started": started,
        "finished": finished,
        "wall_s": round(time.time() - t0, 2),
        "model_path": str(cfg.model),
        "model_origin": model_origin(cfg.model),
        "metric": spec.metric_under(cfg.protocol),
        "max_length": max_length,
        "splits": data.split_record,
        "validation_metric": own["validation"].summary(),
        "test_metric": own["test"].summary(),
        "other_metrics": {
            protocol: {role: result.summary() for role, result in by_role.items()}
            for protocol, by_role in scores.items()
        },
        **extra,
    }
    return RunRecord.create(
        cfg.name,
        task_type=spec.task_type,
        dataset=spec.name,
        train_set=spec.train_set,
        lr=cfg.lr,
        seed=cfg.seed,
        validation_score=own["validation"].score,
        test_score=own["test"].score,
        test_instance_scores=list(own["test"].instance_scores) or None,
        provenance=provenance,
        protocol=cfg.protocol,
        metric=spec.metric_under(cfg.protocol),
        other_scores=other_scores or None,
    )


def _loading_report(cfg: RunConfig, source: str, backbone, module, head: str | None, rank: int) -> dict:
    """transformers' loading report of the run's model as `provenance.loading_report`, with one line
    when the checkpoint lacked backbone weights (allowed; the check before the run refused them
    otherwise, and so does this should the two differ). Weights the model does not use (a
    pretraining head: our exports' lm_head, BERT's cls.predictions) are recorded, not said."""
    from benchmarks.kinds.loading import FIELD, backbone_report, describe_reinitialised, refusal

    package_head = [] if head == "own" else [n for n, _ in module.named_parameters() if not n.startswith("backbone.")]
    report = backbone_report(backbone.model, backbone.loading_info, package_head)
    if report.reinitialised_backbone and not cfg.allow_reinitialised_weights:
        raise refusal(source, report)
    if report.reinitialised_backbone and rank == 0:
        print(
            f"weights: {source}: re-initialised at random ({FIELD}): "
            f"{describe_reinitialised(report.reinitialised_backbone)} (provenance.loading_report)",
            file=sys.stderr,
        )
    return report.to_dict()


def _save_model(module, tokenizer, path: Path) -> None:
    """Save the trained encoder + tokenizer, and the task head if any (`head.safetensors`, the
    module's other parameters under their names in it), atomically (write aside, then rename). A
    model of ours keeps its model code beside it: it loads without this package, as the checkpoint
    it was fine-tuned from."""
    from safetensors.torch import save_file

    from benchmarks.kinds.checkpoint import ship_own_model_code

    tmp = path.with_name(path.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    module.backbone.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    ship_own_model_code(tmp)
    head = {
        name: tensor.detach().contiguous()
        for name, tensor in module.state_dict().items()
        if not name.startswith("backbone.")
    }
    if head:
        save_file(head, str(tmp / "head.safetensors"))
    shutil.rmtree(path, ignore_errors=True)
    tmp.rename(path)
