"""The generated Slurm scripts of a toy CPT study, submitted for real to a local cluster by
`reproduce --slurm` itself (the job ids it prints are parsed).

No container here (`--no-container`, apptainer is absent): the jobs run the same commands with this
Python. One fine-tuning seed and task: each array task is a process importing torch, Composer and
transformers. The reduced toy Figure 3 on Slurm is test_resubmit_on_slurm.py's DAG (issue 64 merged
the two tests that each ran one).
"""

import json
import re

import pytest
import yaml

from contracts.run_store import iter_records_in
from reproduce import cli
from tests.reproduce.slurm_study import toy_cluster_config


@pytest.mark.slurm
@pytest.mark.e2e
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
