"""The toy pretraining setup shared by the end-to-end, multi-rank and Slurm tests: a slice of the
embedded corpus prepared with `python -m pretraining prepare-data`, a tiny MLM-40 run config, and
a callback that holds a run at a known step until the test releases it (a test that signals a run
waits for that event, never for a duration)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import yaml
from composer import Callback
from composer.utils import dist

SEQ_LEN = 64


def prepare_embedded_data(out: Path) -> Path:
    """`prepare-data` of the embedded corpus's first 30 documents in SEQ_LEN-token samples into `out`."""
    from pretraining.__main__ import main as cli

    argv = ["prepare-data", "--input", "embedded", "--seq-len", str(SEQ_LEN), "--max-documents", "30"]
    assert cli([*argv, "--out", str(out), "--no-progress"]) == 0
    return out


class HoldAtStep(Callback):
    """At the end of step `step`, unless `release` exists: each rank writes its pid to
    `<arrived>.rank<r>` and waits until `release` exists (a killed run never gets past it).
    Rank 0 also appends the step each process starts training at to `<arrived>.starts`.
    Named in a config as {"factory": "tests.pretraining.toy_runs:HoldAtStep", "kwargs": {...}}."""

    def __init__(self, step: int, arrived: str, release: str):
        self.step, self.arrived, self.release = step, Path(arrived), Path(release)

    def fit_start(self, state, logger) -> None:
        if dist.get_global_rank() == 0:
            with self.arrived.with_name(self.arrived.name + ".starts").open("a") as starts:
                starts.write(f"{int(state.timestamp.batch)}\n")

    def batch_end(self, state, logger) -> None:
        if int(state.timestamp.batch) != self.step or self.release.exists():
            return
        marker = self.arrived.with_name(f"{self.arrived.name}.rank{dist.get_global_rank()}")
        tmp = marker.with_name(marker.name + ".tmp")
        tmp.write_text(str(os.getpid()))
        tmp.rename(marker)  # the test reads a whole pid or nothing
        while not self.release.exists():
            time.sleep(0.05)


class RecordWindows(Callback):
    """Each rank appends one JSON line per row of each batch, {"step", "sample_index", "first_window"}
    (the length of the block's first window), to `<directory>/<pid>-rank<r>.jsonl`. Reads the
    segments the objective made: with attention_scope "window" they are the windows."""

    def __init__(self, directory: str):
        self.directory = Path(directory)

    def after_dataloader(self, state, logger) -> None:
        from pretraining.objectives import SAMPLE_INDEX
        from pretraining.train import SEGMENT_IDS

        step, batch = int(state.timestamp.batch), state.batch
        first = (batch[SEGMENT_IDS] == 0).sum(1).tolist()
        rows = [
            {"step": step, "sample_index": i, "first_window": f} for i, f in zip(batch[SAMPLE_INDEX].tolist(), first)
        ]
        self.directory.mkdir(parents=True, exist_ok=True)
        with (self.directory / f"{os.getpid()}-rank{dist.get_global_rank()}.jsonl").open("a") as log:
            log.writelines(json.dumps(row) + "\n" for row in rows)


class RecordGradients(Callback):
    """Rank 0 saves each parameter's gradient after each of the first `steps` optimizer steps (after
    every microbatch and the ranks' all-reduce, before the optimizer steps on it) to
    `<directory>/step-<n>.safetensors` (DDP's "module." prefix dropped)."""

    def __init__(self, directory: str, steps: int):
        self.directory, self.steps, self.step = Path(directory), steps, 0

    def after_train_batch(self, state, logger) -> None:
        from safetensors.torch import save_file

        self.step += 1
        if dist.get_global_rank() != 0 or self.step > self.steps:
            return
        gradients = {
            name.removeprefix("module."): param.grad.detach().clone().contiguous()
            for name, param in state.model.named_parameters()
            if param.grad is not None
        }
        self.directory.mkdir(parents=True, exist_ok=True)
        save_file(gradients, str(self.directory / f"step-{self.step}.safetensors"))


def record_gradients_spec(directory: Path, steps: int) -> dict:
    return {
        "factory": f"{__name__}:{RecordGradients.__name__}",
        "kwargs": {"directory": str(directory), "steps": steps},
    }


def recorded_windows(directory: Path) -> dict[int, list[tuple[int, int]]]:
    """{step: sorted (sample index, first window length)} over every rank's RecordWindows file,
    which are then removed (so the next run records afresh)."""
    steps: dict[int, list[tuple[int, int]]] = {}
    for path in sorted(directory.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            row = json.loads(line)
            steps.setdefault(row["step"], []).append((row["sample_index"], row["first_window"]))
        path.unlink()
    return {step: sorted(rows) for step, rows in sorted(steps.items())}


def record_windows_spec(directory: Path) -> dict:
    return {"factory": f"{__name__}:{RecordWindows.__name__}", "kwargs": {"directory": str(directory)}}


def hold_spec(step: int, arrived: Path, release: Path) -> dict:
    """The `train.callbacks` entry of a HoldAtStep."""
    kwargs = {"step": step, "arrived": str(arrived), "release": str(release)}
    return {"factory": f"{__name__}:{HoldAtStep.__name__}", "kwargs": kwargs}


def write_toy_mlm_config(
    path: Path,
    data: Path,
    run_dir: Path,
    *,
    steps: int,
    resume_interval: int,
    decay: int,
    callbacks: tuple = (),
    objective: str = "mlm",
    batch: int = 8,
    **train: object,
) -> Path:
    """A toy_s MLM-40 (or `objective`) run of `steps` steps (batch 8, seed 5) on `data`, written to
    `path` as YAML; `train` adds settings of the train section."""
    config = {
        "name": "toy",
        "run_dir": str(run_dir),
        "tokenizer": "embedded",
        "data": {"path": str(data), "seq_len": SEQ_LEN},
        "model": {"preset": "toy_s"},
        "objective": {"kind": objective, "mlm_ratio": 0.4},
        "optimizer": {"lr": 3e-3},
        "schedule": {"warmup": 2, "decay": decay},
        "train": {
            "max_steps": steps,
            "global_batch_size": batch,
            "resume_interval": resume_interval,
            "progress_bar": False,
            "seed": 5,
            "callbacks": list(callbacks),
            **train,
        },
    }
    path.write_text(yaml.safe_dump(config))
    return path
