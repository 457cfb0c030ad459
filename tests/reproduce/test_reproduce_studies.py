"""`reproduce --figure N / --table N` for the studies beyond Figure 3: data efficiency (intermediate
exports), biphasic, CPT (base run first, then the CPT run from its decayed export). Toy subsets end to
end here (about 90 s); every study at paper scale as Slurm scripts (dry run)."""

import json
import re
from dataclasses import replace

import pandas as pd
import pytest
import yaml

from contracts.model_names import parse_model_name
from contracts.run_store import iter_records_in
from reproduce import cli, local, plan, slurm

SMALL = ["--tasks", "sst2,conll2003", "--lrs", "5e-4", "--seeds", "0,1", "--reps", "100"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """One prepared embedded corpus for the three reproductions (each would otherwise prepare its own)."""
    cfg = cli.config_from_args(cli.build_parser().parse_args(["--out", str(tmp_path_factory.mktemp("data"))]))
    local.stage_data(plan.build_plan(cfg))
    return plan.data_dir(cfg)


def _reproduce(tmp_path_factory, data, argv):
    out = tmp_path_factory.mktemp("study")
    cfg = cli.config_from_args(cli.build_parser().parse_args(["--out", str(out), *argv, *SMALL]))
    cfg = replace(cfg, data_dir=str(data))
    lines = []
    local.reproduce(cfg, log=lines.append)
    return cfg, out, lines


@pytest.fixture(scope="module")
def cpt(tmp_path_factory, data):
    return _reproduce(
        tmp_path_factory, data, ["--figure", "8", "--checkpoints", "610m-clm-42k,610m-clm-dec42k-mlm40-44k"]
    )


@pytest.fixture(scope="module")
def data_efficiency(tmp_path_factory, data):
    # 42-step runs, the paper's 5k checkpoint at step 5 (its share of 42k); one size, one run
    argv = ["--table", "6", "--checkpoints", "610m-mlm40-42k-5000,610m-mlm40-42k", "--pretrain-steps", "42"]
    return _reproduce(tmp_path_factory, data, [*argv, "--sizes", "toy_m", "--pretrain-replicates", "1"])


@pytest.fixture(scope="module")
def biphasic(tmp_path_factory, data):
    return _reproduce(tmp_path_factory, data, ["--figure", "6", "--checkpoints", "toy_m-clm-3-mlm40-12"])


@pytest.mark.e2e  # a toy study end to end
def test_cpt_trains_the_base_then_continues_from_its_decayed_export(cpt):
    cfg, out, lines = cpt
    assert cfg.study == "cpt"
    assert list(plan.build_plan(cfg).registry_runs) == ["toy_m-clm-42", "toy_m-clm-dec42-mlm40-44"]
    body = yaml.safe_load((out / "configs" / "pretraining" / "toy_m-clm-dec42-mlm40-44.yaml").read_text())
    assert body["init"]["path"] == str(out / "pretraining" / "toy_m-clm-42" / "hf" / "step-42")
    assert body["train"]["max_steps"] == 2 and body["objective"]["kind"] == "mlm"
    assert (plan.build_plan(cfg).model_path("toy_m-clm-dec42-mlm40-44") / "config.json").is_file()
    records = list(iter_records_in([out / "finetune"]))
    assert len(records) == 2 * 2 * 1 * 2
    cpt_records = [r for r in records if r.model == "toy_m-clm-dec42-mlm40-44"]
    assert cpt_records and all(r.pretraining == parse_model_name(r.model) for r in cpt_records)
    assert cpt_records[0].pretraining.cpt_steps == 2 and cpt_records[0].pretraining.cpt_base_objective == "clm"
    # Figures 8 and 9 (from our runs, next to the published ones) and Tables 14-17
    for name in ("figure8", "figure9", "figure8_published", "figure9_vs_published"):
        assert (out / "figure" / f"{name}.png").stat().st_size > 0
    points = pd.read_csv(out / "figure" / "figure9_points.csv")
    sc = points[(points["panel"] == "SC") & (points["series"] == "CPT from CLM")].set_index("x_label")
    assert sc.loc["2k", "model"] == "toy_m-clm-dec42-mlm40-44"
    assert sc.loc["2k", "stand_in_for"] == "610m-clm-dec42k-mlm40-44k"
    cells = pd.read_csv(out / "cells.csv")
    sst2 = cells[(cells["model"] == "toy_m-clm-dec42-mlm40-44") & (cells["dataset"] == "sst2")].iloc[0]
    # SC panel value = the SC average; only SST-2 ran, so the average is missing and noted
    assert pd.isna(sc.loc["2k", "mean"]) and "missing" in sc.loc["2k", "note"]
    table = pd.read_csv(out / "tables" / "table_14.csv").set_index("Checkpoint")
    assert table.loc["toy_m-clm-dec42-mlm40-44", "SST-2"] == f"{sst2['mean']:.2f} ± {sst2['ci_halfwidth']:.2f}"
    assert sorted(p.name for p in (out / "tables").glob("table_*.csv")) == [f"table_{n}.csv" for n in (14, 15, 16, 17)]
    # Figure 12: the CPT run's MLM loss per step, from its loss.jsonl (no published version)
    loss = pd.read_csv(out / "figure" / "figure12_points.csv")
    assert list(loss["x"]) == [1, 2] and set(loss["model"]) == {"toy_m-clm-dec42-mlm40-44"}
    assert set(loss["stand_in_for"]) == {"610m-clm-dec42k-mlm40-44k"} and loss["raw_loss"].notna().all()
    assert not (out / "figure" / "figure12_published.png").exists()
    meta = json.loads((out / "figure" / "figure8_meta.json").read_text())
    assert meta["study"] == "cpt" and meta["stand_ins"]["toy_m-clm-42"] == "610m-clm-42k"


@pytest.mark.e2e  # a toy study end to end
def test_a_cpt_decay_branch_trains_after_its_main_run_from_the_kept_state(tmp_path, data):
    """The default CPT recipe (docs/pretraining.md): the 12k CPT model is a decay branch of the 22k
    run of its base, so `make reproduce` trains base, main run and branch in three waves."""
    argv = ["--figure", "8", "--checkpoints", "610m-clm-dec42k-mlm40-54k", "--out", str(tmp_path), *SMALL]
    cfg = replace(cli.config_from_args(cli.build_parser().parse_args(argv)), data_dir=str(data))
    assert cfg.cpt_recipe == "branches"
    runs = ["toy_m-clm-42", "toy_m-clm-dec42-mlm40-64", "toy_m-clm-dec42-mlm40-54"]
    assert list(plan.build_plan(cfg).registry_runs) == runs
    assert "3 trained, 0 reused" in local.stage_pretraining(plan.build_plan(cfg))
    main, branch = (yaml.safe_load((tmp_path / "configs" / "pretraining" / f"{r}.yaml").read_text()) for r in runs[1:])
    assert main["init"]["path"] == str(tmp_path / "pretraining" / runs[0] / "hf" / "step-42")
    assert main["train"]["branch_steps"] == [9] and main["train"]["max_steps"] == 22
    kept = tmp_path / "pretraining" / runs[1] / "branches" / "ba9-rank0.pt"
    assert branch["init"] == {"path": str(kept), "kind": "full_state"} and branch["train"]["max_steps"] == 12
    losses = [json.loads(x) for x in (tmp_path / "pretraining" / runs[2] / "loss.jsonl").read_text().splitlines()]
    assert [row["step"] for row in losses] == [10, 11, 12]  # continues the main run's state after step 9
    assert (plan.build_plan(cfg).model_path(runs[2]) / "config.json").is_file()
    separate = replace(cfg, cpt_recipe="separate")
    assert list(plan.build_plan(separate).registry_runs) == [runs[0], runs[2]]


@pytest.mark.e2e  # a toy study end to end
def test_cpt_literal_recipe_with_the_base_optimizer_continued(tmp_path, data):
    """`--cpt-recipe literal --cpt-optimizer continued` (docs/pretraining.md, "CPT readings"): the
    main CPT run starts from the base's last resume checkpoint (weights and AdamW state) at its peak
    LR (no warmup) and decays over its last 2 toy steps (2,000 paper steps); the 12k model branches
    from its state at step 9."""
    argv = ["--figure", "8", "--checkpoints", "610m-clm-dec42k-mlm40-54k", "--out", str(tmp_path), *SMALL]
    argv += ["--cpt-recipe", "literal", "--cpt-optimizer", "continued"]
    cfg = replace(cli.config_from_args(cli.build_parser().parse_args(argv)), data_dir=str(data))
    assert (cfg.cpt_recipe, cfg.cpt_optimizer) == ("literal", "continued")
    runs = ["toy_m-clm-42", "toy_m-clm-dec42-mlm40-64", "toy_m-clm-dec42-mlm40-54"]
    assert list(plan.build_plan(cfg).registry_runs) == runs
    assert "3 trained, 0 reused" in local.stage_pretraining(plan.build_plan(cfg))
    main, branch = (yaml.safe_load((tmp_path / "configs" / "pretraining" / f"{r}.yaml").read_text()) for r in runs[1:])
    base_state = tmp_path / "pretraining" / runs[0] / "checkpoints" / "ba42-rank0.pt"
    assert main["init"] == {"path": str(base_state), "kind": "weights_and_optimizer"}
    assert (main["schedule"]["warmup"], main["schedule"]["decay"], main["train"]["branch_steps"]) == (0, 2, [9])
    assert branch["init"]["kind"] == "full_state" and branch["schedule"]["warmup"] == 0
    rows = [json.loads(x) for x in (tmp_path / "pretraining" / runs[1] / "loss.jsonl").read_text().splitlines()]
    assert rows[0]["step"] == 1 and rows[0]["lr"] == pytest.approx(main["optimizer"]["lr"])  # the peak at once
    assert [row["step"] for row in rows] == list(range(1, 23)) and rows[-1]["lr"] == 0.0
    assert not base_state.exists()  # the toy's finished runs keep no resume checkpoints ...
    assert "0 trained, 3 reused" in local.stage_pretraining(plan.build_plan(cfg))  # ... and a rerun needs none


@pytest.mark.e2e  # a toy study end to end
def test_data_efficiency_fine_tunes_an_intermediate_export(data_efficiency):
    cfg, out, lines = data_efficiency
    assert cfg.study == "data-efficiency" and list(plan.build_plan(cfg).registry_runs) == ["toy_m-mlm40-42"]
    assert (
        plan.build_plan(cfg).model_path("toy_m-mlm40-42-5") == out / "pretraining" / "toy_m-mlm40-42" / "hf" / "step-5"
    )
    assert (plan.build_plan(cfg).model_path("toy_m-mlm40-42-5") / "config.json").is_file()
    records = [r for r in iter_records_in([out / "finetune"]) if r.model == "toy_m-mlm40-42-5"]
    assert len(records) == 4 and records[0].pretraining.checkpoint_step == 5
    assert not records[0].pretraining.decayed
    table = pd.read_csv(out / "tables" / "table_07.csv").set_index("Checkpoint")  # TC: CoNLL ran
    assert table.loc["toy_m-mlm40-42-5", "Setup"] == "610M MLM-40 @ 5k steps"
    assert table.loc["toy_m-mlm40-42-5", "CoNLL"] != "—"
    points = pd.read_csv(out / "figure" / "figure4_points.csv")
    tc = points[(points["panel"] == "TC") & (points["series"] == "MLM-40 610M")].set_index("step")
    assert tc.loc[5000, "model"] == "toy_m-mlm40-42-5" and tc.loc[42000, "model"] == "toy_m-mlm40-42"
    assert (out / "figure" / "figure10.png").is_file() and (out / "figure" / "figure10_published.png").is_file()
    assert any("table" in line and "6, 7, 8, 9" in line for line in lines)


@pytest.mark.e2e  # a toy study end to end
def test_biphasic_switches_objective_inside_one_run(biphasic):
    cfg, out, _ = biphasic
    body = yaml.safe_load((out / "configs" / "pretraining" / "toy_m-clm-3-mlm40-12.yaml").read_text())
    assert body["objective"]["kind"] == "clm_then_mlm" and body["objective"]["switch_at"] == 3
    assert body["train"]["max_steps"] == 12
    record = next(iter_records_in([out / "finetune"]))
    assert (record.pretraining.clm_steps, record.pretraining.mlm_steps) == (3, 9)
    points = pd.read_csv(out / "figure" / "figure6_points.csv")
    row = points[(points["model"] == "toy_m-clm-3-mlm40-12") & (points["panel"] == "SC")].iloc[0]
    assert row["stand_in_for"] == "610m-clm-3k-mlm40-12k" and row["x"] == 25
    assert (out / "tables" / "table_10.csv").is_file()


@pytest.mark.e2e  # a toy study end to end
def test_a_second_run_reuses_everything(cpt):
    cfg, out, _ = cpt
    lines = []
    local.reproduce(cfg, log=lines.append)
    assert "0 trained, 2 reused" in lines[1] and "0 runs done, 8 reused" in lines[2]
    assert lines[3].startswith("analysis: unchanged records")


@pytest.mark.parametrize(
    "argv, error",
    [
        (["--figure", "11"], "1B 25/75"),
        (["--table", "1"], "Table 1"),
        (["--figure", "8", "--sizes", "toy_m"], "sizes applies to the masking and data-efficiency studies"),
        (["--figure", "6", "--pretrain-steps", "8"], "pretrain_steps"),
        (["--figure", "4", "--checkpoints", "610m-mlm20-42k"], "not in study data-efficiency"),
        (["--figure", "6", "--reduced"], "--reduced is the toy-scale CI mode of Figure 3"),
    ],
)
def test_bad_targets_are_one_line_errors(tmp_path, capsys, argv, error):
    assert cli.main(["--out", str(tmp_path / "o"), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("reproduce: error:") and error in err and "\n" not in err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    "figure, runs, checkpoints",
    [
        (4, 2, 14),
        (6, 15, 15),
        (7, 8, 8),
        (8, 8, 8),
    ],
)
def test_every_study_at_paper_scale_as_slurm_scripts(tmp_path, figure, runs, checkpoints):
    cfg = cli.config_from_args(
        cli.build_parser().parse_args(["--figure", str(figure), "--scale", "paper", "--out", str(tmp_path)])
    )
    written = slurm.reproduce_slurm(cfg, slurm.CONFIG_DIR / "cluster.example.yaml", dry_run=True, log=lambda _: None)
    assert written["pretraining_jobs"] == runs and written["checkpoints"] == checkpoints
    assert written["finetune_runs"] == checkpoints * 12 * 6 * 5
    submit = (tmp_path / "slurm" / "submit.sh").read_text()
    assert len(list((tmp_path / "slurm").glob("pretrain_*.sbatch"))) == runs
    assert len(list((tmp_path / "slurm").glob("finetune_*.sh"))) == checkpoints
    if figure == 8:  # each CPT job waits for its base's job; the bases wait for the data job
        cluster = slurm.load_cluster_config(slurm.CONFIG_DIR / "cluster.example.yaml")
        var = {
            m.group(2): m.group(1)
            for m in re.finditer(
                r"(pt\d+)=\$\(sbatch --parsable --dependency=afterok:"
                r'"\$\w+" --kill-on-invalid-dep=yes pretrain_(\S+)\.sbatch',
                submit,
            )
        }
        assert len(var) == 8
        deps = dict(re.findall(r'(pt\d+)=\$\(sbatch --parsable --dependency=afterok:"\$(\w+)"', submit))
        assert deps[var["610m-clm-42k"]] == "data"
        assert deps[var["610m-clm-dec42k-mlm40-64k"]] == var["610m-clm-42k"]
        body = yaml.safe_load((tmp_path / "configs" / "pretraining" / "610m-clm-dec42k-mlm40-64k.yaml").read_text())
        assert body["init"]["path"] == f"{cluster.runs_dir}/610m-clm-42k/hf/step-42000"
        assert body["train"]["max_steps"] == 22000
        for branch, step in (("610m-clm-dec42k-mlm40-54k", 9999), ("610m-clm-dec42k-mlm40-44k", 999)):
            assert deps[var[branch]] == var["610m-clm-dec42k-mlm40-64k"]  # the decay branches after their main run
            body = yaml.safe_load((tmp_path / "configs" / "pretraining" / f"{branch}.yaml").read_text())
            kept = f"{cluster.runs_dir}/610m-clm-dec42k-mlm40-64k/branches/ba{step}-rank0.pt"
            assert body["init"] == {"path": kept, "kind": "full_state"}
    if figure == 4:  # the intermediate exports of Tables 6-9 are fine-tuned from the runs' hf folders
        jobs = [
            json.loads(line)
            for line in (tmp_path / "finetune" / "jobs" / "610m-clm-42k-5000.jsonl").read_text().splitlines()
        ]
        runs_dir = slurm.load_cluster_config(slurm.CONFIG_DIR / "cluster.example.yaml").runs_dir
        assert {j["config"]["model"] for j in jobs} == {f"{runs_dir}/610m-clm-42k/hf/step-5000"}


def test_toy_data_efficiency_default_plan(tmp_path):
    """`make reproduce FIGURE=4` at toy scale: toy_s and toy_m, MLM-40 and CLM, 2 runs each of 1,000
    steps (no repeated sample: a 34,000-page world, allow_repeats off), exported at the paper's 5k, 10k,
    20k steps' shares and fine-tuned with the final models and the untrained ones."""
    cfg = cli.config_from_args(cli.build_parser().parse_args(["--figure", "4", "--out", str(tmp_path)]))
    assert cfg.pretrain_replicates == 2 and plan.pretrain_length(cfg) == 1000
    assert plan.world_documents(cfg) == 34_000
    runs = list(plan.build_plan(cfg).registry_runs)
    assert runs[:4] == ["toy_s-mlm40-1k", "toy_s-clm-1k", "toy_m-mlm40-1k", "toy_m-clm-1k"] and len(runs) == 8
    body = plan.build_plan(cfg).run("toy_m-clm-1k-rep2").body()
    assert body["train"]["max_steps"] == 1000 and body["train"]["checkpoint_steps"] == [119, 238, 476]
    assert body["schedule"]["warmup"] == body["schedule"]["decay"] == 48  # 2k of 42k
    assert body["data"]["allow_repeats"] is False and body["train"]["resume_interval"] == 100
    models = plan.build_plan(cfg).finetuned_models
    assert len(models) == 34 and models[-2:] == ["toy_s-random-init", "toy_m-random-init"]
    assert plan.build_plan(cfg).stand_ins["toy_s-clm-1k-119-rep2"] == "210m-clm-42k-5000-rep2"
    # any of the paper's seven checkpoints on request
    asked = cli.config_from_args(
        cli.build_parser().parse_args(["--figure", "4", "--out", str(tmp_path), "--checkpoints", "610m-clm-42k-1000"])
    )
    assert plan.build_plan(asked).model_names == ["toy_m-clm-1k-24", "toy_m-clm-1k-24-rep2"]
