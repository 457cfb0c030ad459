"""The paper's 50 checkpoints, their runs, and the configs written for them."""

import pytest
import yaml

from contracts.config import config_from_dict
from contracts.model_names import format_model_name, parse_model_name
from pretraining import registry
from pretraining.__main__ import main as cli
from pretraining.config import PretrainConfig


def test_fifty_checkpoints_38_final_and_12_intermediate():
    table = registry.released_checkpoints()
    assert len(table) == 50
    intermediate = {n: v for n, v in table.items() if not parse_model_name(n).decayed}
    assert len(intermediate) == 12
    assert {run for run, _ in intermediate.values()} == {"610m-clm-42k", "610m-mlm40-42k"}
    assert len(table) - len(intermediate) == 38 == len(registry.RUNS)
    assert all(format_model_name(parse_model_name(n)) == n for n in table)  # the contract's grammar
    assert "610m-mlm40-42k-10000" in table and "610m-clm-40k-mlm20-42k" in table
    assert "610m-clm-dec42k-mlm40-64k" in table and "1b-mlm50-42k" in table


@pytest.mark.parametrize("name", sorted(registry.released_checkpoints()))
def test_each_run_matches_its_name(name):
    run, step = registry.run_for(name)
    desc = parse_model_name(name)
    assert desc.checkpoint_step == (step if desc.objective != "cpt" else 42000 + run.max_steps)
    if desc.objective == "cpt":
        assert run.cpt_base == f"610m-{desc.cpt_base_objective.replace('mlm', 'mlm40')}-42k"
        assert run.max_steps == desc.cpt_steps and run.objective == "mlm"
    elif desc.objective == "clm+mlm":
        assert (run.switch_at, run.max_steps) == (desc.clm_steps, desc.schedule_steps)
    else:
        assert run.objective == desc.objective and run.max_steps == desc.schedule_steps
    if desc.masking_ratio is not None:
        assert run.mlm_ratio == desc.masking_ratio
    for scale in ("paper", "toy"):  # every written config is a valid PretrainConfig
        cfg = config_from_dict(PretrainConfig, registry.config_dict(run, scale), name)
        assert cfg.train.max_steps == (run.max_steps if scale == "paper" else max(1, run.max_steps // 1000))


def test_paper_config_has_the_paper_hyperparameters():
    cfg = config_from_dict(PretrainConfig, registry.config_dict(registry.RUNS["610m-clm-10k-mlm40-42k"]))
    assert (cfg.schedule.warmup, cfg.schedule.decay, cfg.train.max_steps) == (2000, 2000, 42000)
    assert cfg.objective.kind == "clm_then_mlm" and cfg.objective.switch_at == 10000
    assert (
        cfg.optimizer.lr,
        cfg.optimizer.betas,
        cfg.optimizer.eps,
        cfg.optimizer.weight_decay,
        cfg.optimizer.grad_clip_norm,
    ) == (5e-4, (0.9, 0.95), 1e-5, 0.1, 1.0)
    assert cfg.train.global_batch_size * cfg.data.seq_len == 2_359_296  # Table 1
    cpt = config_from_dict(PretrainConfig, registry.config_dict(registry.RUNS["610m-clm-dec42k-mlm40-44k"]))
    # the default CPT recipe: the 2k model is a decay branch of the 22k run, from its state at step 999
    assert cpt.init.path.endswith("610m-clm-dec42k-mlm40-64k/branches/ba999-rank0.pt") and cpt.train.max_steps == 2000
    assert (cpt.schedule.warmup, cpt.schedule.decay) == (200, 1000)


def test_configs_cli_lists_and_writes(tmp_path, capsys):
    assert cli(["configs", "--list"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 50
    out = tmp_path / "c.yaml"
    assert cli(["configs", "610m-mlm40-42k-5000", "--scale", "toy", "-o", str(out)]) == 0
    text = out.read_text()
    assert "step-5" in text.splitlines()[0]
    assert yaml.safe_load(text)["train"]["checkpoint_steps"] == [1, 2, 5, 10, 20, 40]
    assert cli(["configs", "MLMvsCLM/610m-clm-dec42k-mlm40-64k"]) == 0  # hub prefix ignored
    assert "name: 610m-clm-dec42k-mlm40-64k" in capsys.readouterr().out
    assert cli(["configs", "610m-mlm35-42k"]) == 2
    assert "not one of the paper's 50" in capsys.readouterr().err


@pytest.mark.parametrize("scale", ["paper", "toy"])
def test_cpt_configs_start_from_the_final_export_of_their_base_run(scale):
    for run in registry.RUNS.values():
        if run.cpt_base is None:
            continue
        cfg = registry.config_dict(run, scale, cpt_recipe="separate")  # the default's main runs: below
        base = registry.config_dict(registry.RUNS[run.cpt_base], scale)
        assert cfg["init"] == {"path": f"{base['run_dir']}/hf/step-{base['train']['max_steps']}", "kind": "weights"}
        # ... and read the data after the base run's last sample (docs/data.md).
        assert cfg["data"]["start_sample"] == base["train"]["max_steps"] * base["train"]["global_batch_size"]
        assert base["data"]["start_sample"] == 0
        assert cfg["data"]["path"] == base["data"]["path"]


def test_the_paper_data_subset_holds_the_base_run_and_the_longest_cpt_without_repeats():
    """The arithmetic of docs/choices.md ("data volume"): the furthest sample any paper-scale run
    reads is the 42k base run's 48,384,000 blocks plus 22k CPT steps, all in PAPER_DATA_PATH."""
    import yaml

    from contracts.paper import PAPER_DATA_PATH
    from pretraining import registry

    ends = {}
    for name, (run, _) in registry.released_checkpoints().items():
        config = yaml.safe_load(registry.config_yaml(run, scale="paper"))
        assert config["data"]["path"] == PAPER_DATA_PATH, name
        t = config["train"]
        ends[run] = config["data"].get("start_sample", 0) + t["max_steps"] * t["global_batch_size"]
    furthest = max(ends, key=ends.get)
    assert ends[furthest] == 73_728_000 and furthest.endswith("-mlm40-64k")
    assert ends[furthest] * 2048 == 150_994_944_000  # 151.0B Llama-3 tokens


@pytest.mark.parametrize("scale", ["paper", "toy"])
def test_cpt_branches_recipe_trains_one_run_per_base_and_branches_the_shorter_ones(scale):
    """`--cpt-recipe branches` (the paper's compute table, v4 section 2: "6 models, 26k steps"): per
    base, the 22k CPT run keeps its state where the 2k and 12k runs branch off, each then decays at
    its own end."""
    from contracts.layout import branch_state

    def config(base, cpt_steps):
        run = registry.RUNS[f"610m-{base}-dec42k-mlm40-{42 + cpt_steps}k"]
        return config_from_dict(PretrainConfig, registry.config_dict(run, scale, cpt_recipe="branches"))

    for base in ("clm", "mlm40"):
        main, trained = config(base, 22), {}
        separate = config_from_dict(
            PretrainConfig,
            registry.config_dict(registry.RUNS[main.name.removesuffix("-toy")], scale, cpt_recipe="separate"),
        )
        assert (main.init, main.data.start_sample) == (separate.init, separate.data.start_sample)  # from the base
        for cpt_steps in (2, 12):
            cfg = config(base, cpt_steps)
            assert cfg.schedule.warmup == main.schedule.warmup and cfg.data.start_sample == main.data.start_sample
            branch = cfg.train.max_steps - cfg.schedule.decay - 1  # the next LR is still the peak in both
            if branch > 0:
                assert branch in main.train.branch_steps and cfg.init.kind == "full_state"
                assert cfg.init.path == str(branch_state(main.run_dir, branch))
            else:  # toy 2k: 2 steps, the branch is the base itself
                assert cfg.init == main.init
            trained[cpt_steps] = cfg.train.max_steps - max(branch, 0)
        if scale == "paper":  # 22,000 + 2,001 + 1,001 steps per base, against 36,000 trained separately
            assert main.train.branch_steps == (999, 9999) and main.train.max_steps + sum(trained.values()) == 25_002
        else:  # toy: 22 steps, the 12-step run branches at 9, the 2-step one starts from the base
            assert main.train.branch_steps == (9,)
    separate = registry.config_dict(registry.RUNS["610m-clm-dec42k-mlm40-54k"], scale, cpt_recipe="separate")
    assert separate["init"]["kind"] == "weights" and separate["train"]["branch_steps"] == []


def _cpt(base: str, cpt_steps: int, scale: str = "paper", **options) -> PretrainConfig:
    run = registry.RUNS[f"610m-{base}-dec42k-mlm40-{42 + cpt_steps}k"]
    return config_from_dict(PretrainConfig, registry.config_dict(run, scale, **options))


def test_cpt_literal_recipe_decays_the_last_2000_steps_with_no_warmup_in_26k_steps_per_base():
    """`--cpt-recipe literal` (docs/pretraining.md, "CPT readings"): the paper's "26k steps" per base
    and "decay only in the final 2,000 steps" as written: the 22k run and the 12k branch decay over
    2,000 steps, the 2k model is a 2,000-step decay from the base (LR area 1,000 step-equivalents,
    against 1,400 under `branches`)."""
    from contracts.layout import branch_state
    from pretraining.schedule import wsd_multiplier

    def area(cfg):
        t, s = cfg.train.max_steps, cfg.schedule
        return sum(wsd_multiplier(n, s.warmup, t - s.decay, t) for n in range(1, t + 1))

    main, middle, short = (_cpt("clm", steps, cpt_recipe="literal") for steps in (22, 12, 2))
    assert [(c.schedule.warmup, c.schedule.decay) for c in (main, middle, short)] == [(0, 2000)] * 3
    assert main.train.branch_steps == (9999,) and middle.init.kind == "full_state"
    assert middle.init.path == str(branch_state(main.run_dir, 9999))
    assert short.init == main.init and short.init.kind == "weights"  # the 2k model starts from the base
    assert 22_000 + (12_000 - 9_999) + 2_000 == 26_001  # the paper's 26k, one step per branch more
    # LR areas in peak-LR steps, quoted in docs/pretraining.md
    areas = {
        recipe: [round(area(_cpt("clm", steps, cpt_recipe=recipe)), 1) for steps in (2, 12, 22)]
        for recipe in ("separate", "branches", "literal")
    }
    assert areas == {
        "separate": [1400.0, 10400.0, 20000.0],
        "branches": [1400.0, 10900.0, 20900.0],
        "literal": [999.5, 10999.5, 20999.5],
    }


@pytest.mark.parametrize("recipe", ["separate", "branches", "literal"])
def test_cpt_continued_optimizer_starts_from_the_base_s_last_full_state(recipe):
    from contracts.layout import resume_state

    for scale in ("paper", "toy"):
        base = config_from_dict(PretrainConfig, registry.config_dict(registry.RUNS["610m-mlm40-42k"], scale))
        for steps in (2, 12, 22):
            fresh = _cpt("mlm40", steps, scale, cpt_recipe=recipe)
            continued = _cpt("mlm40", steps, scale, cpt_recipe=recipe, cpt_optimizer="continued")
            if fresh.init.kind == "full_state":  # a branch inherits the main run's optimizer either way
                assert continued.init == fresh.init
                continue
            assert continued.init.kind == "weights_and_optimizer"
            assert continued.init.path == str(resume_state(base.run_dir, base.train.max_steps))
            assert (continued.schedule, continued.data, continued.train) == (fresh.schedule, fresh.data, fresh.train)
    with pytest.raises(ValueError, match="cpt_optimizer 'warm' is not one of fresh, continued"):
        registry.config_dict(registry.RUNS["610m-clm-dec42k-mlm40-44k"], cpt_optimizer="warm")


def test_computing_differences_ignore_places_and_kept_exports_but_not_what_a_run_computes():
    """The check behind reusing a finished run (reproduce.local): a setting a saved config lacks
    counts with its default; paths, exports and trackers are not settings of the computation."""
    import copy

    from pretraining.config import computing_differences

    wanted = registry.config_dict(registry.RUNS["210m-mlm40-42k"], "toy")
    assert computing_differences(wanted, wanted) == []
    moved = copy.deepcopy(wanted)
    moved.update(run_dir="/elsewhere/run", tokenizer="/elsewhere/tokenizer")
    moved["data"].update(path="/elsewhere/shards", cache_dir="/elsewhere/cache")
    moved["train"].update(checkpoint_steps=[5], resume_interval=7)
    moved["loggers"] = {"tensorboard": {}}
    assert computing_differences(moved, wanted) == []
    older = copy.deepcopy(wanted)
    older["train"].pop("loss_average")  # saved before the field existed: computed with its default
    assert wanted["train"]["loss_average"] == "rank"
    assert computing_differences(older, wanted) == [("train.loss_average", "tokens", "rank")]
    other = copy.deepcopy(wanted)
    other["objective"]["mlm_ratio"] = 0.3
    other["optimizer"]["lr"] = 5e-4
    assert [field for field, _, _ in computing_differences(other, wanted)] == ["objective.mlm_ratio", "optimizer.lr"]
