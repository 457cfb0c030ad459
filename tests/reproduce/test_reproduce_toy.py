"""The reduced toy reproduction of Figure 3, end to end, then cached and resumed (about 60 s)."""

import json
import shutil

import pandas as pd
import pytest

from contracts.model_names import parse_model_name
from contracts.run_store import iter_records_in
from reproduce import cli, local, plan

# The CI mode of the CLI (--reduced), as a config: toy_s x (MLM-20, MLM-40, CLM) x 12 tasks x 1 LR x
# 2 seeds = 72 fine-tuning runs of 3 models pretrained for 8 steps.
REDUCED = dict(plan.REDUCED, reps=200)


def _mtimes(root):
    return {str(p): p.stat().st_mtime_ns for p in sorted(root.rglob("record.json"))}


@pytest.fixture(scope="module")
def reproduction(tmp_path_factory):
    out = tmp_path_factory.mktemp("figure3")
    cfg = cli.config_from_args(cli.build_parser().parse_args(["--out", str(out), "--reduced", "--reps", "200"]))
    lines = []
    timings = local.reproduce(cfg, log=lines.append)
    return cfg, out, timings, lines


def test_reduced_mode_is_the_documented_slice(reproduction):
    cfg, *_ = reproduction
    assert cfg.sizes == ("toy_s",) and cfg.ratios == (0.2, 0.4) and cfg.clm
    assert len(cfg.seeds) >= 2 and len(cfg.tasks) == 12
    assert plan.model_names(cfg) == ["toy_s-mlm20-8", "toy_s-mlm40-8", "toy_s-clm-8"]


def test_end_to_end_outputs(reproduction):
    cfg, out, timings, lines = reproduction
    assert set(timings) == {"data", "pretraining", "fine-tuning", "analysis"}
    # resolved configs: the reproduction, each pretraining run, each fine-tuning run
    assert (out / "reproduce.yaml").is_file()
    for name in plan.model_names(cfg):
        assert (out / "configs" / "pretraining" / f"{name}.yaml").is_file()
        assert (out / "pretraining" / name / "config.yaml").is_file()
        assert (out / "pretraining" / name / "FINISHED.json").is_file()
        assert (plan.model_path(cfg, name) / "config.json").is_file()
        # a finished toy run is never resumed: its resume checkpoints are removed (docs/reproduce.md)
        assert not (out / "pretraining" / name / "checkpoints").exists()
    assert "resume checkpoints of finished toy runs removed" in lines[1]
    # run records: 3 models x 12 tasks x 1 LR x 2 seeds, each with its pretraining description
    records = list(iter_records_in([out / "finetune"]))
    assert len(records) == 3 * 12 * 1 * 2
    assert len(list((out / "finetune").rglob("config.yaml"))) == len(records)
    for record in records:
        assert record.pretraining is not None and record.pretraining == parse_model_name(record.model)
        assert record.pretraining.size == "toy_s" and record.pretraining.schedule_steps == 8
    assert len((out / "runs.jsonl").read_text().splitlines()) == len(records)
    # cells, tables, audit
    cells = pd.read_csv(out / "cells.csv")
    averages = cells[cells["dataset"] == "average"]
    assert len(averages) == 3 * 4 and (averages["n_seeds"] == 2).all()
    # Tables 2-5 in the paper's layout, each toy run in the row of the checkpoint it stands in for
    assert (out / "tables" / "tables.md").is_file()
    assert sorted(p.name for p in (out / "tables").glob("*.csv")) == [f"table_0{n}.csv" for n in (2, 3, 4, 5)]
    table = pd.read_csv(out / "tables" / "table_02.csv").set_index("Checkpoint")
    assert table.loc["toy_s-mlm40-8", "Setup"] == "210M MLM-40"
    sst2 = cells[(cells["model"] == "toy_s-mlm40-8") & (cells["dataset"] == "sst2")].iloc[0]
    assert table.loc["toy_s-mlm40-8", "SST-2"] == f"{sst2['mean']:.2f} ± {sst2['ci_halfwidth']:.2f}"
    assert table.loc["610m-mlm40-42k", "SST-2"] == "—"  # not run here, not filled from the paper
    audit = json.loads((out / "audit" / "audit.json").read_text())
    assert audit["cells"]["published"] == 800  # toy models are in no paper table: all "missing"
    assert (out / "audit" / "audit.md").is_file()
    # the figure from our runs, next to the published one
    for stem in ("figure3", "figure3_published"):
        for suffix in (".png", ".pdf", "_points.csv", "_meta.json"):
            assert (out / "figure" / f"{stem}{suffix}").stat().st_size > 0
    assert (out / "figure" / "figure3_vs_published.png").stat().st_size > 0
    points = pd.read_csv(out / "figure" / "figure3_points.csv")
    chance_points = points[points["series"] == "chance"]
    points = points[points["series"] != "chance"]
    assert set(points["model"]) == set(plan.model_names(cfg))
    assert set(points["stand_in_for"]) == {"210m-mlm20-42k", "210m-mlm40-42k", "210m-clm-42k"}
    assert len(points) == 4 * 3 and points["mean"].notna().all()
    # chance levels: one per task under the runs' protocol (benchmarks.chance), their type means drawn
    chance = pd.read_csv(out / "chance.csv")
    assert sorted(chance["dataset"]) == sorted(cfg.tasks) and set(chance["protocol"]) == {"paper"}
    by_type = chance.groupby("task_type")["chance"].mean()
    assert chance_points.set_index("panel")["mean"].to_dict() == pytest.approx(by_type.to_dict())
    published = pd.read_csv(out / "figure" / "figure3_published_points.csv")
    assert len(published) == 4 * 3 * 5 and published["mean"].notna().all()
    assert any(line.startswith("reproduce: done") for line in lines)


def test_second_run_is_cached_and_changes_nothing(reproduction):
    cfg, out, _, _ = reproduction
    before = _mtimes(out)
    watched = [
        out / "cells.csv",
        out / "figure" / "figure3.png",
        out / "audit" / "audit.json",
        out / "finetune" / "jobs.jsonl",
        out / "reproduce.yaml",
    ]
    watched += [out / "pretraining" / n / "FINISHED.json" for n in plan.model_names(cfg)]
    watched_before = [p.stat().st_mtime_ns for p in watched]
    lines = []
    timings = local.reproduce(cfg, log=lines.append)
    assert _mtimes(out) == before
    assert [p.stat().st_mtime_ns for p in watched] == watched_before
    assert "0 trained, 3 reused" in lines[1] and "0 runs done, 72 reused" in lines[2]
    assert lines[3].startswith("analysis: unchanged records")
    assert timings["fine-tuning"] + timings["analysis"] + timings["pretraining"] < 10


def test_interrupted_run_resumes(reproduction):
    cfg, out, _, _ = reproduction
    # a fine-tuning run killed before its record: the run dir is left without record.json
    lost = sorted((out / "finetune").rglob("record.json"))[-1]
    lost.unlink()
    (lost.parent / "partial.bin").write_bytes(b"half")
    # a pretraining run killed before FINISHED.json and its export (here without resume checkpoints:
    # it trains again from step 0, deterministically)
    name = plan.model_names(cfg)[0]
    run_dir = out / "pretraining" / name
    (run_dir / "FINISHED.json").unlink()
    shutil.rmtree(run_dir / "hf")
    before = _mtimes(out)
    lines = []
    local.reproduce(cfg, log=lines.append)
    after = _mtimes(out)
    assert set(after) == set(before) | {str(lost)}
    assert all(after[p] == t for p, t in before.items())  # the other records were not touched
    assert not (lost.parent / "partial.bin").exists()
    assert "1 trained, 2 reused" in lines[1] and "1 runs done, 71 reused" in lines[2]
    assert (run_dir / "FINISHED.json").is_file() and (plan.model_path(cfg, name) / "config.json").is_file()
    assert lines[3].startswith("analysis: 72 records")
