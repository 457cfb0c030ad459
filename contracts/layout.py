"""On-disk layout of the run directories that stages hand to each other (docs/architecture.md).

A pretraining run directory (`python -m pretraining train`, pretraining.train):

  <run_dir>/config.yaml       the resolved run config, with git sha and package versions
  <run_dir>/loss.jsonl        one line per optimizer step: step, loss, lr, objective, tokens, time
  <run_dir>/checkpoints/      Composer full-state checkpoints (autoresume), latest-rank0.pt
  <run_dir>/hf/step-<N>/      weights exported as Hugging Face folders (what benchmarks fine-tunes)
  <run_dir>/FINISHED.json     written last; a finished run is never overwritten

A fine-tuning run directory (`python -m benchmarks run`, benchmarks.run):

  <out>/<model>/<task>/lr<lr>_sd<seed>/config.yaml    the resolved run config
  <out>/<model>/<task>/lr<lr>_sd<seed>/record.json    its run record (contracts.run_record), written last
  <out>/<model>/<task>/lr<lr>_sd<seed>/error.txt      a failed run's error (its first line: type and
                                                      message), for `python -m reproduce status`
  <out>/<model>/msmarco/lr<lr>_sd<seed>/model/        the IR model an MS MARCO run trains (NQ and MLDR
                                                      runs of the same lr and seed evaluate it)
"""

from __future__ import annotations

from pathlib import Path

# pretraining run directory
RUN_CONFIG_FILE = "config.yaml"  # in both kinds of run directory
LOSS_LOG_FILE = "loss.jsonl"
CHECKPOINTS_DIR = "checkpoints"
CHECKPOINT_PATTERN = "ba{batch}-rank{rank}.pt"  # Composer's save_filename
LATEST_CHECKPOINT_PATTERN = "latest-rank{rank}.pt"  # Composer's save_latest_filename (-> the newest)
EXPORTS_DIR = "hf"
BRANCHES_DIR = "branches"  # full-state checkpoints kept for decay branches (train.branch_steps)
FINISHED_FILE = "FINISHED.json"

# fine-tuning run directory
MAX_SEED = 2**32 - 1  # a fine-tuning seed's range: numpy.random.seed's (issue 78: a larger one, a traceback)
RECORD_FILE = "record.json"
ERROR_FILE = "error.txt"  # a failed run's error; the folder is cleared when the run is redone
IR_MODEL_DIR = "model"


def export_dir(run_dir: str | Path, step: int) -> Path:
    """The Hugging Face export of a pretraining run at `step`: <run_dir>/hf/step-<step>."""
    return Path(run_dir) / EXPORTS_DIR / f"step-{step}"


def latest_checkpoint(run_dir: str | Path) -> Path:
    """Rank 0's link to the newest full-state checkpoint: <run_dir>/checkpoints/latest-rank0.pt."""
    return Path(run_dir) / CHECKPOINTS_DIR / LATEST_CHECKPOINT_PATTERN.format(rank=0)


def resume_state(run_dir: str | Path, step: int) -> Path:
    """A run's resume checkpoint of step `step` (its last one: the full state a CPT run that
    continues the base's optimizer starts from)."""
    return Path(run_dir) / CHECKPOINTS_DIR / CHECKPOINT_PATTERN.format(batch=step, rank=0)


def branch_state(run_dir: str | Path, step: int) -> Path:
    """Rank 0's full-state checkpoint kept at `step` for decay branches: <run_dir>/branches/ba<step>-rank0.pt."""
    return Path(run_dir) / BRANCHES_DIR / CHECKPOINT_PATTERN.format(batch=step, rank=0)


def format_lr(lr: float) -> str:
    """`1e-04` as in the released run names; more digits only when needed to be exact."""
    short = f"{lr:.0e}"
    return short if float(short) == lr else f"{lr:.6g}"


def finetune_run_id(model_name: str, task: str, lr: float, seed: int) -> str:
    """`<model>/<task>/lr<lr>_sd<seed>`: a fine-tuning run's path below the output folder."""
    return f"{model_name}/{task}/lr{format_lr(lr)}_sd{seed}"


def finetune_run_dir(out: str | Path, model_name: str, task: str, lr: float, seed: int) -> Path:
    return Path(out) / finetune_run_id(model_name, task, lr, seed)
