"""CLI wiring and option errors of `python -m reproduce` (no training here)."""

import pytest

from reproduce import cli, plan


def test_help(cli):
    result = cli("reproduce", "--help")
    assert result.returncode == 0
    assert "--pretrain-steps" in result.stdout and "--reduced" in result.stdout


@pytest.mark.parametrize(
    "argv, field",
    [
        (["--sizes", "toy_x"], "sizes"),
        (["--tasks", "sst2,nope"], "tasks"),
        (["--lrs", "0"], "lrs"),
        (["--pretrain-steps", "2"], "pretrain_steps"),
        (["--loggers", "{tensorbord: {}}"], "loggers.tensorbord: unknown logger"),
        (["--loggers", "{wandb: {api_key: x}}"], "loggers.wandb.api_key: secrets are never written"),
        # issue 88: a value given twice planned its runs twice (780 fine-tuning runs for 204)
        (["--figure", "4", "--sizes", "toy_s,toy_s", "--dry-run"], "sizes toy_s,toy_s: toy_s given more than once"),
        (["--seeds", "0,1,0", "--dry-run"], "seeds 0,1,0: 0 given more than once; give each once"),
    ],
)
def test_bad_options_are_one_line_errors(tmp_path, capsys, argv, field):
    assert cli.main(["--out", str(tmp_path / "o"), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("reproduce: error:") and field in err and "\n" not in err
    assert not (tmp_path / "o").exists()


def test_default_dag_is_the_paper_grid_at_toy_scale(tmp_path):
    cfg = cli.config_from_args(cli.build_parser().parse_args(["--out", str(tmp_path)]))
    names = plan.build_plan(cfg).model_names
    assert len(names) == 15 and "toy_m-mlm30-250" in names and "toy_l-clm-250" in names
    body = plan.build_plan(cfg).run("toy_l-mlm50-250").body()
    assert body["model"]["preset"] == "toy_l" and body["objective"]["mlm_ratio"] == 0.5
    assert body["train"]["max_steps"] == 250 and body["data"]["seq_len"] == 80
    assert body["train"]["global_batch_size"] == 26 and body["optimizer"]["lr"] == 1e-3
    assert body["schedule"]["warmup"] == body["schedule"]["decay"] == 12  # 2k of 42k, as the paper's
    assert body["data"]["windows"] == "random_split" and body["data"]["window_early_end"] == 12  # the release
    assert body["model"]["attention_scope"] == "window"
    # the toy world: its corpus packed, its tokenizer, its tasks
    assert body["data"]["path"] == str(tmp_path / "data" / "world-80")
    assert body["tokenizer"] == str(tmp_path / "data" / "toy-world" / "tokenizer")
    assert plan.task_data_root(cfg) == str(tmp_path / "data" / "toy-world" / "tasks")
    untrained = plan.build_plan(cfg).random_init_models
    assert untrained == {"toy_s-random-init": "toy_s", "toy_m-random-init": "toy_m", "toy_l-random-init": "toy_l"}
    assert plan.build_plan(cfg).model_path("toy_m-random-init") == tmp_path / "pretraining" / "toy_m-random-init"
    jobs = plan.build_plan(cfg).finetune_jobs()  # no checkpoints yet
    assert len(jobs) == (15 + 3) * 12 * len(cfg.lrs) * len(cfg.seeds)
    assert {j["config"]["model_name"] for j in jobs} == set(names) | set(untrained)
    assert {j["config"]["one_epoch"] for j in jobs} == {True}  # benchmarks/configs/toy_world.yaml
    no_untrained = cli.config_from_args(cli.build_parser().parse_args(["--out", str(tmp_path), "--no-random-init"]))
    assert plan.build_plan(no_untrained).finetuned_models == names


def test_loggers_reach_every_pretraining_and_fine_tuning_run_of_the_study(tmp_path):
    """--loggers (docs/watching.md): in each run's config, so in the Slurm jobs' configs too."""
    argv = ["--out", str(tmp_path), "--sizes", "toy_s", "--loggers", "{tensorboard: {}, mlflow: {experiment_name: m}}"]
    cfg = cli.config_from_args(cli.build_parser().parse_args(argv))
    wanted = {"tensorboard": {}, "mlflow": {"experiment_name": "m"}}
    assert all(
        plan.build_plan(cfg).run(name).body()["loggers"] == wanted for name in plan.build_plan(cfg).registry_runs
    )
    assert {str(j["config"]["loggers"]) for j in plan.build_plan(cfg).finetune_jobs()} == {str(wanted)}
    default = cli.config_from_args(cli.build_parser().parse_args(["--out", str(tmp_path), "--sizes", "toy_s"]))
    # the toy default: no tracker
    assert "loggers" not in plan.build_plan(default).run(f"toy_s-mlm40-{plan.TOY_PRETRAIN_STEPS}").body()
    assert {str(j["config"]["loggers"]) for j in plan.build_plan(default).finetune_jobs()} == {"{}"}


def test_figure3_accepts_toy_sizes_and_steps():
    import pandas as pd

    from paper_figures.from_cells import figure_3

    cells = pd.DataFrame(
        [
            {
                "model": f"toy_m-{obj}-42",
                "task_type": "SC",
                "dataset": "average",
                "mean": 50.0 + i,
                "ci_halfwidth": 1.0,
                "n_seeds": 2,
            }
            for i, obj in enumerate(["mlm20", "mlm30", "mlm40", "mlm50", "clm"])
        ]
    )
    _, points = figure_3(cells, sizes=("toy_m",), steps=42)
    sc = points[points["panel"] == "SC"]
    assert list(sc["mean"]) == [50.0, 51.0, 52.0, 53.0, 54.0]
    assert set(sc["series"]) == {"toy_m"}


def test_figure3_draws_the_random_initialisation_of_each_size():
    import pandas as pd

    from paper_figures.from_cells import RANDOM_INIT, figure_3

    def cell(model, mean):
        return {
            "model": model,
            "task_type": "SC",
            "dataset": "average",
            "mean": mean,
            "ci_halfwidth": 1.0,
            "n_seeds": 2,
        }

    objectives = ["mlm20", "mlm30", "mlm40", "mlm50", "clm"]
    cells = pd.DataFrame([cell(f"toy_m-{obj}-42", 60.0 + i) for i, obj in enumerate(objectives)])
    cells = pd.concat([cells, pd.DataFrame([cell("toy_m-random-init", 41.5)])])
    fig, points = figure_3(cells, sizes=("toy_m",), steps=42, random_init={"toy_m": "toy_m-random-init"})
    untrained = points[points["x_label"] == RANDOM_INIT].set_index("panel")
    assert untrained.loc["SC", "mean"] == 41.5 and untrained.loc["SC", "model"] == "toy_m-random-init"
    assert untrained["reference"].all() and untrained.loc["TC", "mean"] != untrained.loc["TC", "mean"]  # NaN
    sc_axis = next(ax for ax in fig.axes if ax.get_title().startswith("SC"))
    dash_dot = [
        line.get_ydata()[0] for line in sc_axis.get_lines() if line.get_linestyle() == "-." and len(line.get_ydata())
    ]
    assert dash_dot == [41.5]
    assert "random initialisation" in points.attrs["caption"]
    clm = points[(points["panel"] == "SC") & (points["x_label"] == "CLM")]
    assert list(clm["mean"]) == [64.0]  # the CLM reference is still the CLM model's


def test_cpt_runs_read_the_data_after_their_base_run(tmp_path):
    """Table 14's CPT runs continue the base run's data stream (docs/data.md)."""
    cfg = cli.config_from_args(cli.build_parser().parse_args(["--table", "14", "--out", str(tmp_path)]))
    cpt = [name for name, run in plan.build_plan(cfg).registry_runs.items() if "dec" in run]
    assert len(cpt) == 6
    for name in cpt:  # a decay branch too: its full state resumes the main CPT run's data position
        body = plan.build_plan(cfg).run(name).body()
        assert body["data"]["start_sample"] == 42 * body["train"]["global_batch_size"] == 42 * 26
        if plan.build_plan(cfg).run(name).wave != 2:  # not a decay branch
            assert body["init"]["path"].endswith("/hf/step-42")


def test_pretrain_replicates_add_runs_with_other_seeds(tmp_path):
    """Issue 36: --pretrain-replicates 2 on the reduced grid pretrains each configuration twice,
    the second run `-rep2` with other init and data-order seeds (a CPT run continues the base run
    of its own replicate), and fine-tunes both."""
    args = ["--reduced", "--pretrain-replicates", "2", "--out", str(tmp_path)]
    cfg = cli.config_from_args(cli.build_parser().parse_args(args))
    runs = plan.build_plan(cfg).registry_runs
    first = [r for r in runs if not r.endswith("-rep2")]
    assert len(runs) == 2 * len(first) == 6 and all(f"{r}-rep2" in runs for r in first)
    one, two = plan.build_plan(cfg).run(first[0]).body(), plan.build_plan(cfg).run(f"{first[0]}-rep2").body()
    assert two["name"] == f"{first[0]}-rep2" and two["run_dir"].endswith("-rep2")
    assert two["train"]["seed"] != one["train"]["seed"]
    assert two["data"]["shuffle_seed"] != one["data"].get("shuffle_seed", 17)
    assert two["model"] == one["model"]
    assert f"{first[0]}-rep2" in plan.build_plan(cfg).finetuned_models
    assert plan.build_plan(cfg).stand_ins[f"{first[0]}-rep2"].endswith("-42k-rep2")
    cpt = cli.config_from_args(
        cli.build_parser().parse_args(["--table", "14", "--pretrain-replicates", "2", "--out", str(tmp_path / "c")])
    )
    for name, run in plan.build_plan(cpt).registry_runs.items():
        if "dec" in run and name.endswith("-rep2"):
            assert "-rep2" in plan.build_plan(cpt).run(name).body()["init"]["path"]
    assert cli.main(["--out", str(tmp_path / "o"), "--pretrain-replicates", "0"]) == 2


def test_replicated_records_give_a_claims_report_with_the_estimated_sd(tmp_path):
    """The analysis stage's claims step (reproduce.figures.claims_report) on records of two runs per
    configuration: one line per task type with the estimated SD and its interval."""
    from reproduce.figures import claims_report
    from tests.analysis.analysis_testlib import make_record

    args = ["--reduced", "--pretrain-replicates", "2", "--out", str(tmp_path), "--reps", "50"]
    cfg = cli.config_from_args(cli.build_parser().parse_args(args))
    records = [
        make_record(model=model, task_type="SC", dataset=d, seed=s, val=60, test=60 + k + s / 10 + j)
        for j, model in enumerate(plan.build_plan(cfg).model_names)
        for k in (0.5 if model.endswith("-rep2") else 0.0,)
        for d in ("sst2", "qqp", "mnli")
        for s in range(3)
    ]
    line = claims_report(plan.build_plan(cfg), records, tmp_path / "claims")
    assert line.startswith("[toy] estimated pretraining SD SC: ") and "[" in line  # toy: tagged (issue 54)
    text = (tmp_path / "claims" / "claims.md").read_text()
    assert "estimated pretraining SD SC" in text
    # a toy run says what it is in its first line (issue 52)
    assert text.splitlines()[0].startswith("**Toy run: these verdicts test the pipeline") and "no evidence" in text
    assert "The paper pretrained each configuration once" not in text
