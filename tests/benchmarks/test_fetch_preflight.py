"""`matrix --slurm-script` checks, before writing anything, that the offline jobs find their data
and models (benchmarks.matrix.preflight): one line naming what is missing and the fetch command."""

from __future__ import annotations

import shutil

from benchmarks.__main__ import main as cli
from benchmarks.datasets import TOY_DATA_ROOT
from tests.benchmarks.tiny import save_tiny_model


def _matrix(tmp_path, model, *extra):
    argv = ["matrix", "--models", model, "--tasks", "sst2,ontonotes5,nq", "--lrs", "1e-3", "--seeds", "0"]
    return cli([*argv, "--out", str(tmp_path / "runs"), "--slurm-script", str(tmp_path / "submit.sh"), *extra])


def _one_error(capsys) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_slurm_jobs_need_a_local_mirror_with_every_task(tmp_path, capsys):
    model = str(save_tiny_model(tmp_path / "bert"))
    assert _matrix(tmp_path, model) == 2
    line = _one_error(capsys)
    assert line.startswith("error: not ready for the offline Slurm jobs: no task data: the jobs run offline")
    assert "`python -m benchmarks fetch-data --out DIR --tasks sst2,ontonotes5,nq,msmarco`" in line
    assert not (tmp_path / "runs").exists() and not (tmp_path / "submit.sh").exists()  # nothing written

    mirror = tmp_path / "mirror"
    shutil.copytree(TOY_DATA_ROOT, mirror, ignore=shutil.ignore_patterns("ontonotes5", "nq-qrels"))
    assert _matrix(tmp_path, model, "--data-root", str(mirror)) == 2
    line = _one_error(capsys)
    assert f"task data {mirror}: no file for hgissbkh/ontonotes5/default/train (task ontonotes5)" in line
    assert "(and " in line and f"fetch-data --out {mirror} --tasks sst2,ontonotes5,nq,msmarco" in line

    assert _matrix(tmp_path, model, "--data-root", str(TOY_DATA_ROOT)) == 0
    assert (tmp_path / "submit.sh").is_file()


def test_a_hub_model_must_be_fetched_for_offline_jobs(tmp_path, capsys):
    assert _matrix(tmp_path, "MLMvsCLM/610m-mlm40-42k", "--data-root", str(TOY_DATA_ROOT)) == 2
    line = _one_error(capsys)
    assert "model MLMvsCLM/610m-mlm40-42k is neither a local folder nor in the Hugging Face cache" in line
    assert "`python -m pretraining fetch-model 610m-mlm40-42k --out models/610m-mlm40-42k`" in line
    assert not (tmp_path / "runs").exists()
