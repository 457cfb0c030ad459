"""Helpers for the analysis tests: a released results tree and run records made to order."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest

from contracts.run_record import RunRecord

# The paper's released MLDR runs of 610m-mlm40-42k (30 runs, per-query scores of 6) are read from
# the shared folder beside the clone, not copied into the repository: released 610M and 1B runs stay
# out of it so that they remain an independent check (fixtures in the repository are 210M runs only:
# tests/fixtures/released_210m). MLMCLM_SHARED_RELEASED_RUNS points elsewhere.
DATA = Path(
    os.environ.get(
        "MLMCLM_SHARED_RELEASED_RUNS", Path(__file__).resolve().parents[3] / "shared" / "paper" / "released_runs"
    )
)
MODEL = "610m-mlm40-42k"


def write_released_tree(root: Path) -> Path:
    """<root>/results/<model>/IR/mldr_en/msmarco_pairs_lr<LR>_sd<SEED>/results.json for 30 runs."""
    if not (DATA / f"{MODEL}_mldr_en.csv").is_file():
        pytest.skip(
            f"the released 610M MLDR runs are not at {DATA} (the project's shared/paper/released_runs "
            "beside the clone; set MLMCLM_SHARED_RELEASED_RUNS)"
        )
    instances = {}
    with (DATA / f"{MODEL}_mldr_en_test_instances.jsonl").open() as handle:
        for line in handle:
            row = json.loads(line)
            instances[(float(row["lr"]), int(row["seed"]))] = row["test_scores_i"]
    with (DATA / f"{MODEL}_mldr_en.csv").open() as handle:
        for row in csv.DictReader(handle):
            lr, seed = float(row["lr"]), int(row["seed"])
            run = (
                root
                / "results"
                / row["model"]
                / row["task_type"]
                / row["dataset"]
                / f"{row['train_set']}_lr{lr:.0e}_sd{seed}"
            )
            run.mkdir(parents=True)
            test = {"score": float(row["test_score"])}
            if (lr, seed) in instances:
                test["scores_i"] = instances[(lr, seed)]
            (run / "results.json").write_text(
                json.dumps({"validation": {"score": float(row["validation_score"])}, "test": test})
            )
    return root


def make_record(
    model="m",
    task_type="SC",
    dataset="sst2",
    lr=1e-5,
    seed=0,
    val=50.0,
    test=50.0,
    instances=None,
    train_set=None,
    **protocol_fields,
) -> RunRecord:
    """`protocol_fields`: protocol, metric, other_scores (contracts.run_record)."""
    return RunRecord.create(
        model,
        task_type=task_type,
        dataset=dataset,
        lr=lr,
        seed=seed,
        validation_score=val,
        test_score=test,
        train_set=train_set,
        test_instance_scores=instances,
        provenance={"source": "test"},
        **protocol_fields,
    )
