"""The budget's written config runs at toy scale unchanged (issue 91, "Done when"): `reproduce budget
--gpu-hours 500` writes DIR/reproduce.yaml, and `python -m reproduce --config DIR/reproduce.yaml
--scale toy` runs that design end to end (pretraining, fine-tuning, analysis) in DIR/study-toy.

The session's toy study (tests/toy_study.py: toy_s MLM-20, MLM-40, CLM and the untrained toy_s, seed
0, the toy LR) is copied into DIR/study-toy first: the runs of the design that it already holds
have the same configs and are reused by their hashes, as in a user's folder, so only the rest is
trained (36 fine-tuning runs, about a minute), and the test checks that they were."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from contracts.run_store import iter_records_in
from tests.toy_study import copy_toy_study

pytestmark = pytest.mark.e2e


def test_the_budgets_config_runs_at_toy_scale_unchanged(cli, toy_study, tmp_path):
    out = tmp_path / "budget"
    done = cli("reproduce", "budget", "--gpu-hours", "500", "--out", out, "--sims", "200")
    assert done.returncode == 0, done.stderr
    design = json.loads((out / "budget.json").read_text())["design"]
    written = (out / "reproduce.yaml").read_text()
    copy_toy_study(toy_study, out / "study-toy")

    run = cli("reproduce", "--config", out / "reproduce.yaml", "--scale", "toy")
    assert run.returncode == 0, run.stderr[-3000:]
    assert (out / "reproduce.yaml").read_text() == written  # run unchanged
    models = [f"toy_s-mlm{round(r * 100)}-250" for r in design["ratios"]] + ["toy_s-clm-250"] * design["clm"]
    seeds = design["seeds"]
    runs = (len(models) + 1) * 12 * len(seeds)  # + the untrained toy_s, Figure 3's reference
    # the toy study held seed 0 of these models (its MLM-20 is not in the design): the rest was trained
    assert f"0 trained, {len(models)} reused" in run.stdout, run.stdout[-2000:]
    assert f"{runs - runs // len(seeds)} runs done, {runs // len(seeds)} reused" in run.stdout
    records = list(iter_records_in([out / "study-toy" / "finetune"]))
    ours = [r for r in records if r.model in [*models, "toy_s-random-init"]]
    assert len(ours) == runs and {r.seed for r in ours} == set(seeds) and {r.lr for r in ours} == {2e-3}
    cells = pd.read_csv(out / "study-toy" / "cells.csv")
    cells = cells[cells["dataset"] != "average"]
    for model in models:
        mine = cells[cells["model"] == model]
        assert len(mine) == 12 and (mine["n_seeds"] == len(seeds)).all(), model
    assert "reproduce: done" in run.stdout
