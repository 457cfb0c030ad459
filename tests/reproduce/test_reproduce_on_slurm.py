"""The generated Slurm scripts of a reduced toy reproduction, submitted for real to a local cluster.

No container here (`--no-container`, apptainer is absent): the jobs run the same commands with this
Python. sbatch, arrays, `afterok` dependencies and the final analysis job all run. One fine-tuning
seed: each array task is a process importing torch, Composer and transformers, and a second seed
only adds tasks of the same arrays.
"""

import json
import re

import pandas as pd
import pytest
import yaml

from contracts.run_store import iter_records_in
from reproduce import cli
from tests.reproduce.slurm_study import toy_cluster_config


@pytest.mark.slurm
@pytest.mark.slow
def test_reduced_toy_reproduction_on_local_slurm(local_slurm, tmp_path, monkeypatch, capsys):
    cluster = toy_cluster_config(
        tmp_path,
        local_slurm,
        monkeypatch,
        data_cache_dir=str(tmp_path / "node_cache"),
        pretraining_time="00:30:00",
        finetune_time="00:30:00",
        analysis_time="00:30:00",
        data_time="00:30:00",
    )
    out = tmp_path / "out"
    argv = [
        "--figure",
        "3",
        "--scale",
        "toy",
        "--slurm",
        "--no-container",
        "--cluster",
        str(cluster),
        "--out",
        str(out),
        "--sizes",
        "toy_s",
        "--ratios",
        "0.4",
        "--tasks",
        "sst2,qqp,mnli",
        "--lrs",
        "5e-4",
        "--seeds",
        "0",
        "--pretrain-steps",
        "8",
        "--reps",
        "200",
    ]
    assert cli.main(argv) == 0, capsys.readouterr().err
    stdout = capsys.readouterr().out
    ids = re.search(r"submitted: data (\d+), pretraining ([\d ]+), analysis (\d+)", stdout)
    assert ids, stdout
    analysis = ids.group(3)
    local_slurm.wait_for(analysis, timeout=600)  # pending until every job it depends on has ended
    logs = "\n".join(f"--- {p.name}\n{p.read_text()[-1500:]}" for p in sorted((out / "slurm" / "slurm_logs").glob("*")))
    assert local_slurm.job_state(analysis) == "COMPLETED", logs
    for job in [ids.group(1), *ids.group(2).split()]:
        assert local_slurm.job_state(job) == "COMPLETED", logs
    # the pretraining runs, their records and the figure, made by the jobs
    for name in ("toy_s-mlm40-8", "toy_s-clm-8"):
        assert (tmp_path / "runs" / name / "FINISHED.json").is_file()
    records = list(iter_records_in([out / "finetune"]))
    assert len(records) == 3 * 3 * 1 * 1  # the two runs and the untrained toy_s (its export in the data job)
    assert {r.model for r in records} == {"toy_s-mlm40-8", "toy_s-clm-8", "toy_s-random-init"}
    points = pd.read_csv(out / "figure" / "figure3_points.csv")
    sc = points[points["panel"] == "SC"]
    assert sc["mean"].notna().all() and sorted(sc["series"]) == ["210M", "210M", "210M", "chance"]
    assert (sc["x_label"] == "random init").sum() == 1
    assert sorted(pd.read_csv(out / "chance.csv")["dataset"]) == ["mnli", "qqp", "sst2"]
    for name in ("figure3.png", "figure3.pdf", "figure3_published.png"):
        assert (out / "figure" / name).stat().st_size > 0
    assert json.loads((out / "audit" / "audit.json").read_text())["cells"]["distinct"] == 552
    assert (out / "tables" / "tables.md").is_file()


@pytest.mark.slurm
@pytest.mark.slow
def test_cpt_study_runs_its_base_before_the_cpt_job_on_local_slurm(local_slurm, tmp_path, monkeypatch, capsys):
    """`--figure 8` as Slurm jobs: the CPT pretraining job depends on its base's job (afterok) and
    starts from the base's final export; Figures 8 and 9 come out of the analysis job."""
    cluster = toy_cluster_config(tmp_path, local_slurm, monkeypatch, data_cache_dir=str(tmp_path / "node_cache"))
    out = tmp_path / "out"
    argv = [
        "--figure",
        "8",
        "--scale",
        "toy",
        "--slurm",
        "--no-container",
        "--cluster",
        str(cluster),
        "--out",
        str(out),
        "--checkpoints",
        "610m-mlm40-42k,610m-mlm40-dec42k-mlm40-44k",
        "--tasks",
        "sst2",
        "--lrs",
        "5e-4",
        "--seeds",
        "0",
        "--reps",
        "100",
    ]
    assert cli.main(argv) == 0, capsys.readouterr().err
    stdout = capsys.readouterr().out
    ids = re.search(r"submitted: data (\d+), pretraining (\d+) (\d+), analysis (\d+)", stdout)
    assert ids, stdout
    data, base, cpt, analysis = ids.groups()
    local_slurm.wait_for(analysis, timeout=600)
    logs = "\n".join(f"--- {p.name}\n{p.read_text()[-1500:]}" for p in sorted((out / "slurm" / "slurm_logs").glob("*")))
    for job in (data, base, cpt, analysis):
        assert local_slurm.job_state(job) == "COMPLETED", logs
    base_end = json.loads((tmp_path / "runs" / "toy_m-mlm40-42" / "FINISHED.json").read_text())
    cpt_run = tmp_path / "runs" / "toy_m-mlm40-dec42-mlm40-44"
    cpt_config = yaml.safe_load((cpt_run / "config.yaml").read_text())["config"]
    assert cpt_config["init"]["path"] == str(tmp_path / "runs" / "toy_m-mlm40-42" / "hf" / "step-42")
    assert base_end and (tmp_path / "runs" / "toy_m-mlm40-dec42-mlm40-44" / "FINISHED.json").is_file()
    records = list(iter_records_in([out / "finetune"]))
    assert {r.model for r in records} == {"toy_m-mlm40-42", "toy_m-mlm40-dec42-mlm40-44"} and len(records) == 2
    for name in ("figure8.png", "figure9.png", "figure8_vs_published.png", "figure12.png"):
        assert (out / "figure" / name).stat().st_size > 0
    assert (out / "tables" / "table_14.csv").is_file()
