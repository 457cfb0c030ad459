"""Paper scale (`make reproduce SCALE=paper [DRY_RUN=1]`): the GPU-hour estimate of the DAG
(reproduce.slurm.cost) and the check that what the offline jobs read is in place (reproduce.slurm.preflight)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from container.build import build_record_path, write_build_record
from container.definition import LOCK
from contracts.paper import PAPER_SHAPES, TOKENS_PER_STEP_TABLE1
from paper_figures.flops import count_parameters, training_flops
from pretraining.assets import ASSETS_DIR
from pretraining.data.prepare import PrepareConfig, prepare_data
from reproduce import cli, slurm
from reproduce.plan import ReproduceError, build_plan
from reproduce.slurm import cost, preflight
from tests.hub_server import HubServer
from tests.reproduce.slurm_study import stand_in_image

ROOT = Path(__file__).resolve().parents[2]
LLAMA3 = "meta-llama/Meta-Llama-3-8B"  # the tokenizer the paper-scale run configs name


def _config(*argv):
    return cli.config_from_args(cli.build_parser().parse_args(["--scale", "paper", "--out", "/tmp/unused", *argv]))


def test_the_estimate_is_the_figure_10_flop_count_over_the_assumed_utilisation():
    cfg = _config("--figure", "3")
    runs = cost.pretraining_costs(build_plan(cfg))
    assert len(runs) == 15 and {r["tokens"] for r in runs} == {42_000 * TOKENS_PER_STEP_TABLE1}
    n_610m = count_parameters(PAPER_SHAPES["610m"])["matmul"]
    assert next(r for r in runs if r["run"] == "610m-mlm40-42k")["flops"] == training_flops(42_000, n_610m)
    lines = cost.cost_report(build_plan(cfg), mfu=0.4)
    total = sum(r["flops"] for r in runs)
    assert f"{total:.2e} FLOPs = {cost.gpu_hours(total, 0.4, 989):,.0f} GPU-h" in lines[3]
    assert cost.gpu_hours(total, 0.2, 989) == pytest.approx(2 * cost.gpu_hours(total, 0.4, 989))
    assert "5,400 runs of 15 models" in lines[4]
    # a CPT run costs its own steps: separately, the 2k run from the base; as a decay branch (the
    # default), the main 22k run and the branch's 1,001 steps past step 999; NQ alone still trains
    # the MS MARCO model it evaluates
    two_k = ("--figure", "8", "--checkpoints", "610m-clm-dec42k-mlm40-44k")
    separate = cost.pretraining_costs(build_plan(_config(*two_k, "--cpt-recipe", "separate")))
    assert [r["steps"] for r in separate] == [42_000, 2_000]
    branched = cost.pretraining_costs(build_plan(_config(*two_k)))
    assert [(r["run"], r["steps"]) for r in branched] == [
        ("610m-clm-42k", 42_000),
        ("610m-clm-dec42k-mlm40-64k", 22_000),
        ("610m-clm-dec42k-mlm40-44k", 1_001),
    ]
    nq = cost.finetune_costs(
        build_plan(_config("--figure", "3", "--sizes", "210m", "--no-clm", "--ratios", "0.4", "--tasks", "nq"))
    )
    assert nq["runs"] == 2 * 30
    with pytest.raises(ReproduceError, match="--mfu"):
        cost.cost_report(build_plan(cfg), mfu=1.5)


def test_the_estimate_prints_the_papers_gpu_hours_and_the_utilisation_they_imply():
    """Section 2 of the paper: 110k MI250X GPU-hours (81k base pretraining, 16k biphasic, 4k CPT,
    about 9k evaluation). The 15 base runs' FLOPs (Figure 10's count) over 81k hours of a 191.5
    TFLOP/s GPU: about 11%, so an estimate at 40% MFU is 3.7x below the paper's hours."""
    cfg = _config("--figure", "3")
    lines = cost.cost_report(build_plan(cfg), mfu=0.4)
    text = "\n".join(lines)
    assert "reports no GPU-hours" not in text
    assert "the paper (Section 2) reports 110,000 AMD MI250X GPU-hours on 192 GPUs: pretraining 81,000" in text
    assert "biphasic 16,000 (17 models, 120,000 steps at 610m), cpt 4,000" in text
    assert "evaluation 9,000 (42 models, 15,120 runs)" in text
    base = sum(r["flops"] for r in cost.pretraining_costs(build_plan(cfg)))  # the masking study is the 15 base runs
    implied = base / (81_000 * 3600 * 191.5e12)
    assert cost.paper_utilisation("pretraining") == pytest.approx(implied) and 0.10 < implied < 0.115
    assert f"pretraining {implied:.1%}" in text and "this estimate assumes 40%, 3.7x the paper's pretraining" in text
    at_paper = cost.gpu_hours(base, implied, 989)
    assert f"at the paper's utilisation this DAG takes pretraining {at_paper:,.0f} GPU-h" in text
    # issue 53: the first line sums both budgets, the paper's utilisation first
    fine = cost.finetune_costs(build_plan(cfg))["flops"]
    fine_at_paper = cost.gpu_hours(fine, cost.paper_utilisation("evaluation"), 989)
    fine_at_mfu = cost.gpu_hours(fine, 0.4, 989)
    assert lines[0].startswith(f"cost: this DAG takes {at_paper + fine_at_paper:,.0f} GPU-h at the paper's utilisation")
    assert f"and {cost.gpu_hours(base, 0.4, 989) + fine_at_mfu:,.0f} GPU-h at the assumed MFU 40%" in lines[0]


def test_a_paper_scale_submission_stops_at_what_the_offline_jobs_miss(tmp_path, capsys, monkeypatch):
    shared = tmp_path / "shared"
    cluster = yaml.safe_load((slurm.CONFIG_DIR / "cluster.example.yaml").read_text())
    cluster.update(
        image=str(shared / "mlm_vs_clm.sif"),
        data_dir=str(shared / "data" / "fineweb-edu"),
        runs_dir=str(shared / "runs"),
        hf_cache=str(shared / "hf_cache"),
        task_data=str(ROOT / "benchmarks" / "datasets" / "toy"),
    )
    cluster_file = tmp_path / "cluster.yaml"
    cluster_file.write_text(yaml.safe_dump(cluster))
    argv = ["--figure", "3", "--scale", "paper", "--sizes", "210m", "--ratios", "0.4", "--no-clm", "--tasks", "sst2"]
    argv += ["--out", str(tmp_path / "out"), "--cluster", str(cluster_file)]

    assert cli.main([*argv, "--dry-run", "--mfu", "0.3"]) == 0
    out = capsys.readouterr().out
    assert "cost:   pretraining  1 runs (210m 1 x " in out and "MFU 0.30" in out
    assert "preflight: 3 missing for the offline jobs (a submission stops here):" in out
    assert f"image {shared / 'mlm_vs_clm.sif'} does not exist" in out
    assert f"HF_HOME={shared / 'hf_cache'} python -m pretraining prepare-data --hf-dataset" in out
    assert f"fetch-model {LLAMA3} --cache --include '*.json'" in out

    # issue 53: a 5-byte file is not an image
    shared.mkdir(exist_ok=True)
    (shared / "mlm_vs_clm.sif").write_bytes(b"image")
    assert cli.main([*argv, "--dry-run"]) == 0
    assert "is not a SIF image (5 bytes, no SIF_MAGIC header)" in capsys.readouterr().out
    # on the "login node": build (here: a stand-in with a SIF header and the build record make container
    # writes), prepare, fetch the tokenizer into hf_cache
    image = shared / "mlm_vs_clm.sif"
    stand_in_image(image, 4096)  # issue 65: a 4 kB file with a SIF header passed
    write_build_record(image, "0123456789abcdef", LOCK)
    assert cli.main([*argv, "--dry-run"]) == 0
    assert f"image {image} is 4,096 bytes, too small for an image of this project" in capsys.readouterr().out
    build_record_path(image).unlink()
    stand_in_image(image)
    assert cli.main([*argv, "--dry-run"]) == 0
    assert f"image {image} has no build record mlm_vs_clm.sif.build.json" in capsys.readouterr().out
    other_lock = tmp_path / "other.lock"
    other_lock.write_text("torch==2.0.0\n")
    write_build_record(image, "0123456789abcdef", other_lock)
    assert cli.main([*argv, "--dry-run"]) == 0
    assert (
        "built from commit 0123456789ab with another requirements.lock than this checkout's" in capsys.readouterr().out
    )
    write_build_record(image, "0123456789abcdef", LOCK)
    size = image.stat().st_size
    os.truncate(image, size + 4)  # another image copied over it since
    assert cli.main([*argv, "--dry-run"]) == 0
    assert f"changed since it was built ({size:,} bytes recorded, {size + 4:,} now)" in capsys.readouterr().out
    os.truncate(image, size)
    prepare_data(
        PrepareConfig(out=cluster["data_dir"], inputs=("embedded",), seq_len=2048, max_documents=20), progress=False
    )
    with HubServer() as hub:
        hub.add("model", LLAMA3, {p.name: p.read_bytes() for p in (ASSETS_DIR / "tokenizer").iterdir()})
        env = {**os.environ, "HF_HUB_OFFLINE": "0", "HF_ENDPOINT": hub.url, "HF_HOME": cluster["hf_cache"]}
        fetched = subprocess.run(
            [sys.executable, "-m", "pretraining", "fetch-model", LLAMA3, "--cache", "--include", "*.json"],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
    assert fetched.returncode == 0, fetched.stderr
    # 20 documents for a 42k-step run: the only thing left is the data budget (issue 53: such a
    # submission went out and each job would have failed at its start)
    assert cli.main([*argv, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "preflight: 1 missing for the offline jobs" in out
    assert "prepared pretraining data too small: run 210m-mlm40-42k: data: " in out and "samples would repeat" in out
    assert cli.main(argv) == 2  # a submission: refused before any sbatch, in one line
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "prepared pretraining data too small" in err[0]
    # everything else is in place: with the budget check alone stubbed out, the preflight says ready
    monkeypatch.setattr(preflight, "_budget_problems", lambda folder, bodies: [])
    assert cli.main([*argv, "--dry-run"]) == 0
    assert "preflight: ready: the image, the prepared data, the tokenizer and the task data" in capsys.readouterr().out

    shard = next(Path(cluster["data_dir"]).glob("shard.*"))
    shard.write_bytes(shard.read_bytes()[:-1])  # truncated
    assert cli.main(argv) == 2  # a submission, not a dry run: refused before any sbatch
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("reproduce: error: not ready for the offline Slurm jobs: prepared")
    assert f"shard {shard.name} is missing or truncated" in err[0]
