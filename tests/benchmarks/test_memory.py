"""A long-lived process runs fine-tuning runs back to back without growing (the toy reproduce and
`benchmarks matrix --local` run hundreds in one process)."""

from __future__ import annotations

import dataclasses
import gc
import os
from pathlib import Path

import pytest

from benchmarks.datasets import TOY_DATA_ROOT
from benchmarks.run import CONFIG_DIR, load_run_config, run
from tests.benchmarks.tiny import one_torch_thread, save_tiny_model  # noqa: F401 (autouse fixture)

STATM = Path("/proc/self/statm")


def _rss_mb() -> float:
    return int(STATM.read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@pytest.mark.e2e  # 300 runs: about 4 CPU minutes
@pytest.mark.skipif(not STATM.exists(), reason="reads the resident set size from /proc (Linux)")
def test_300_fine_tuning_runs_in_one_process_grow_its_memory_by_less_than_50_mb(tmp_path):
    model = save_tiny_model(tmp_path / "bert", "bert")
    base = load_run_config(
        {
            "model": str(model),
            "task": "sst2",
            "lr": 1e-3,
            "seed": 0,
            "out": str(tmp_path / "runs"),
            "data_root": str(TOY_DATA_ROOT),
            "max_steps": 1,
        },
        CONFIG_DIR / "toy.yaml",
    )
    for seed in range(10):  # warm-up: imports, allocator pools, caches that fill once
        run(dataclasses.replace(base, seed=seed))
    gc.collect()
    before = _rss_mb()
    for seed in range(10, 310):
        _, computed = run(dataclasses.replace(base, seed=seed))
        assert computed
    gc.collect()
    growth = _rss_mb() - before
    # Before Composer's atexit entry was dropped (pretraining.train.close_trainer): ~20 MB a run.
    assert growth < 50, f"RSS grew by {growth:.0f} MB over 300 runs"
