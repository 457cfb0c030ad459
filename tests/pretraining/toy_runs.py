"""The toy pretraining setup shared by the end-to-end, multi-rank and Slurm tests: a slice of the
embedded corpus prepared with `python -m pretraining prepare-data`, and a tiny MLM-40 run config."""

from __future__ import annotations

from pathlib import Path

import yaml

SEQ_LEN = 64


def prepare_embedded_data(out: Path) -> Path:
    """`prepare-data` of the embedded corpus's first 30 documents in SEQ_LEN-token samples into `out`."""
    from pretraining.__main__ import main as cli

    argv = ["prepare-data", "--input", "embedded", "--seq-len", str(SEQ_LEN), "--max-documents", "30"]
    assert cli([*argv, "--out", str(out), "--no-progress"]) == 0
    return out


def write_toy_mlm_config(
    path: Path, data: Path, run_dir: Path, *, steps: int, resume_interval: int, decay: int
) -> Path:
    """A toy_s MLM-40 run of `steps` steps (batch 8, seed 5) on `data`, written to `path` as YAML."""
    config = {
        "name": "toy",
        "run_dir": str(run_dir),
        "tokenizer": "embedded",
        "data": {"path": str(data), "seq_len": SEQ_LEN},
        "model": {"preset": "toy_s"},
        "objective": {"kind": "mlm", "mlm_ratio": 0.4},
        "optimizer": {"lr": 3e-3},
        "schedule": {"warmup": 2, "decay": decay},
        "train": {
            "max_steps": steps,
            "global_batch_size": 8,
            "resume_interval": resume_interval,
            "progress_bar": False,
            "seed": 5,
        },
    }
    path.write_text(yaml.safe_dump(config))
    return path
