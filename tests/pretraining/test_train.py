"""Short Composer runs on CPU: every objective learns, the switch flips, resume is exact."""

import json

import pytest
from composer import Callback

from pretraining.schedule import wsd_multiplier
from pretraining.train import PretrainError, train
from tests.optimizer_lrs import record_step_lrs
from tests.pretraining.conftest import TOY_IDS, interrupt_at, toy_dataloader, toy_run_config


def _losses(run_dir):
    return [json.loads(line) for line in (run_dir / "loss.jsonl").read_text().splitlines()]


def _run(cfg, **kwargs):
    return train(cfg, dataloader=toy_dataloader(), token_ids=TOY_IDS, **kwargs)


def _decreases(rows):
    losses = [r["loss"] for r in rows]
    return sum(losses[-3:]) / 3 < 0.8 * sum(losses[:3]) / 3


@pytest.mark.parametrize("objective", [{"kind": "clm"}, {"kind": "mlm", "mlm_ratio": 0.4}])
def test_single_objective_runs_learn_and_export(tmp_path, objective):
    cfg = toy_run_config(tmp_path, objective=objective, train={"checkpoint_steps": [8, 16]})
    used = []
    run_dir = _run(cfg, extra_callbacks=[record_step_lrs(used)])
    rows = _losses(run_dir)
    assert [r["step"] for r in rows] == list(range(1, 25))
    assert {r["objective"] for r in rows} == {objective["kind"]}
    assert _decreases(rows)
    # Optimizer step n (1-based) runs at exactly lr x wsd(n) (warmup 3, decay 5 of 24 steps): the
    # first above 0, the third at the peak, the last at 0; the log holds the LRs used.
    expected = [5e-3 * wsd_multiplier(n, 3, 19, 24) for n in range(1, 25)]
    assert used == pytest.approx(expected) and [r["lr"] for r in rows] == pytest.approx(used)
    assert 0 < used[0] < used[1] < used[2] == pytest.approx(5e-3) and used[-1] == 0.0
    assert sorted(p.name for p in (run_dir / "hf").iterdir()) == ["step-16", "step-24", "step-8"]
    assert (run_dir / "config.yaml").exists() and (run_dir / "FINISHED.json").exists()


def test_finished_run_is_never_overwritten(tmp_path):
    cfg = toy_run_config(tmp_path, train={"max_steps": 8, "resume_interval": 4})
    _run(cfg)
    with pytest.raises(PretrainError, match="finished run"):
        _run(cfg)


def test_biphasic_run_switches_objective_and_attention(tmp_path):
    cfg = toy_run_config(tmp_path, objective={"kind": "clm_then_mlm", "switch_at": 12}, train={"max_steps": 30})
    seen = []

    class Spy(Callback):
        def before_forward(self, state, logger):
            seen.append(
                (
                    int(state.timestamp.batch),
                    state.model.is_causal,
                    int((state.batch["input_ids"] == TOY_IDS.mask).sum()),
                )
            )

    rows = _losses(_run(cfg, extra_callbacks=[Spy()]))
    assert [r["objective"] for r in rows] == ["clm"] * 12 + ["mlm"] * 18
    assert all(causal and masks == 0 for step, causal, masks in seen if step < 12)
    assert all(not causal and masks > 0 for step, causal, masks in seen if step >= 12)
    assert _decreases(rows[:12]) and _decreases(rows[12:])
    # One schedule spans both phases: no re-warmup at the switch.
    assert rows[11]["lr"] == rows[12]["lr"] == pytest.approx(5e-3)


def test_stop_and_resume_gives_the_losses_of_an_uninterrupted_run(tmp_path):
    objective = {"kind": "clm_then_mlm", "switch_at": 10}
    reference = _losses(_run(toy_run_config(tmp_path, "straight", objective=objective)))
    cfg = toy_run_config(tmp_path, "resumed", objective=objective)
    with pytest.raises(KeyboardInterrupt):
        _run(cfg, extra_callbacks=[interrupt_at(13)])  # last resume checkpoint: step 8
    resumed = _losses(_run(cfg))
    assert [r["step"] for r in resumed] == list(range(1, 25))
    assert [r["loss"] for r in resumed] == pytest.approx([r["loss"] for r in reference], abs=1e-6)
    assert [r["lr"] for r in resumed] == pytest.approx([r["lr"] for r in reference], abs=1e-12)


def test_cpt_continues_from_a_decayed_checkpoint(tmp_path):
    base = _run(toy_run_config(tmp_path, "base", objective={"kind": "clm"}))
    short = dict(train={"max_steps": 16}, schedule={"warmup": 2, "decay": 4})
    for source in [base / "hf" / "step-24", base / "checkpoints" / "latest-rank0.pt"]:
        name = "cpt-" + ("pt" if source.suffix else "hf")
        rows = _losses(_run(toy_run_config(tmp_path, name, init={"path": str(source)}, **short)))
        assert rows[0]["step"] == 1 and rows[0]["lr"] == pytest.approx(2.5e-3) and _decreases(rows)
    fresh = _losses(_run(toy_run_config(tmp_path, "fresh", **short)))
    assert rows[-1]["loss"] < fresh[-1]["loss"]  # the CLM weights give MLM a head start


class OptimizerMoments(Callback):
    """Records {parameter name: (AdamW step, exp_avg, exp_avg_sq)} when fit starts (after any load)
    and ends."""

    def __init__(self):
        self.at = {}

    def _record(self, state, when):
        optimizer = state.optimizers[0]
        self.at[when] = {
            name: tuple(
                optimizer.state[param][key].clone() if key != "step" else float(optimizer.state[param][key])
                for key in ("step", "exp_avg", "exp_avg_sq")
            )
            for name, param in state.model.named_parameters()
            if param in optimizer.state
        }

    def fit_start(self, state, logger):
        self._record(state, "start")

    def fit_end(self, state, logger):
        self._record(state, "end")


def test_cpt_that_continues_the_base_optimizer_starts_at_step_0_with_its_adamw_state(tmp_path):
    """`init.kind: weights_and_optimizer` (`configs --cpt-optimizer continued`, docs/pretraining.md
    "CPT readings"): the base's last resume checkpoint gives the weights and the AdamW moments and
    step counts; the step, schedule and data position are the CPT run's own. A fresh-optimizer CPT
    from the same weights takes the same first loss and then another path; a continued CPT stopped
    and resumed (autoresume loads everything of its own checkpoint) equals an uninterrupted one."""
    import torch

    base_moments = OptimizerMoments()
    base = _run(toy_run_config(tmp_path, "base", objective={"kind": "clm"}), extra_callbacks=[base_moments])
    short = dict(train={"max_steps": 8, "resume_interval": 4}, schedule={"warmup": 0, "decay": 8})
    continued = {"kind": "weights_and_optimizer", "path": str(base / "checkpoints" / "ba24-rank0.pt")}
    moments = OptimizerMoments()
    rows = _losses(_run(toy_run_config(tmp_path, "continued", init=continued, **short), extra_callbacks=[moments]))
    assert [r["step"] for r in rows] == list(range(1, 9))  # step 0, not the base's 24
    assert [r["lr"] for r in rows] == pytest.approx([5e-3 * wsd_multiplier(n, 0, 0, 8) for n in range(1, 9)])
    ended, started = base_moments.at["end"], moments.at["start"]
    assert ended.keys() == started.keys() and ended
    for name, (step, exp_avg, exp_avg_sq) in started.items():
        assert step == ended[name][0] == 24.0  # AdamW's bias correction continues the base's count
        assert torch.equal(exp_avg, ended[name][1]) and torch.equal(exp_avg_sq, ended[name][2]), name
    fresh = _losses(_run(toy_run_config(tmp_path, "fresh", init={"path": str(base / "hf" / "step-24")}, **short)))
    assert rows[0]["loss"] == pytest.approx(fresh[0]["loss"], abs=1e-6)  # the same weights and batch
    assert abs(rows[1]["loss"] - fresh[1]["loss"]) > 1e-4  # another optimizer state, another update
    stopped = toy_run_config(tmp_path, "stopped", init=continued, **short)
    with pytest.raises(KeyboardInterrupt):
        _run(stopped, extra_callbacks=[interrupt_at(6)])  # last resume checkpoint: step 4
    resumed = _losses(_run(stopped))
    assert [r["step"] for r in resumed] == list(range(1, 9))
    assert [r["loss"] for r in resumed] == pytest.approx([r["loss"] for r in rows], abs=1e-6)
    cleaned = toy_run_config(
        tmp_path, "cleaned", init={**continued, "path": str(base / "checkpoints" / "ba9-rank0.pt")}
    )
    with pytest.raises(PretrainError, match="init.kind weights_and_optimizer needs an existing Composer checkpoint"):
        _run(cleaned)
    assert not cleaned.run_dir.exists()


def test_biphasic_branch_from_a_pre_decay_clm_checkpoint_equals_the_single_run(tmp_path):
    objective = {"kind": "clm_then_mlm", "switch_at": 8}
    single = _losses(_run(toy_run_config(tmp_path, "single", objective=objective)))
    base = _run(toy_run_config(tmp_path, "clm", objective={"kind": "clm"}, train={"keep_resume_checkpoints": -1}))
    branch = toy_run_config(
        tmp_path,
        "branch",
        objective=objective,
        init={"kind": "full_state", "path": str(base / "checkpoints" / "ba8-rank0.pt")},
    )
    rows = _losses(_run(branch))
    assert [r["step"] for r in rows] == list(range(9, 25))
    assert [r["loss"] for r in rows] == pytest.approx([r["loss"] for r in single[8:]], abs=1e-6)


def test_fsdp_is_a_parallelism_config_for_multi_gpu_runs(tmp_path, monkeypatch):
    from pretraining import train as train_module

    cfg = toy_run_config(tmp_path, train={"fsdp": True, "device": "gpu"})
    assert train_module.parallelism_config(cfg) is None  # one process: nothing to shard
    monkeypatch.setattr(train_module.dist, "get_world_size", lambda: 8)
    with pytest.raises(PretrainError, match="train.fsdp needs GPUs"):
        train_module.parallelism_config(toy_run_config(tmp_path, train={"fsdp": True, "device": "cpu"}))
    fsdp = train_module.parallelism_config(cfg)["fsdp"]
    assert fsdp["sharding_strategy"] == "FULL_SHARD" and fsdp["state_dict_type"] == "full"
    from composer.utils.parallelism import FSDPConfig

    FSDPConfig(**fsdp)  # Composer accepts it
    assert train_module.parallelism_config(toy_run_config(tmp_path, train={"fsdp": False})) is None


@pytest.mark.e2e  # inductor compiles C++ kernels: ~40 s on 2 cores
def test_compiled_body_trains_and_exports_under_the_usual_names(tmp_path):
    eager = _losses(_run(toy_run_config(tmp_path, "eager", train={"max_steps": 3}, schedule={"warmup": 1, "decay": 1})))
    run_dir = _run(
        toy_run_config(
            tmp_path, "compiled", train={"max_steps": 3, "compile": True}, schedule={"warmup": 1, "decay": 1}
        )
    )
    compiled = _losses(run_dir)
    assert [r["loss"] for r in compiled] == pytest.approx([r["loss"] for r in eager], rel=1e-3)
    from safetensors.torch import load_file

    keys = load_file(run_dir / "hf" / "step-3" / "model.safetensors").keys()
    assert "model.layers.0.self_attn.q_proj.weight" in keys and not any("_orig_mod" in k for k in keys)


def test_paper_preset_refuses_a_tokenizer_larger_than_its_embedding(tmp_path):
    from pretraining.objectives import TokenIds

    cfg = toy_run_config(tmp_path, model={"preset": "210m"})
    with pytest.raises(PretrainError, match="embedding rows"):
        train(cfg, dataloader=toy_dataloader(), token_ids=TokenIds(mask=2, special=(0, 1, 2), vocab_size=200_000))
    assert not cfg.run_dir.exists()  # nothing written for a run that cannot start


def test_a_world_size_that_does_not_divide_the_global_batch_is_one_clear_error():
    from pretraining.train import per_rank_batch_size

    assert per_rank_batch_size(1152, 192) == 6 and per_rank_batch_size(8, 1) == 8
    with pytest.raises(
        PretrainError,
        match=r"train.global_batch_size 1152 is not divisible by the world size "
        r"5 \(ranks launched\): launch a number of ranks that divides it",
    ):
        per_rank_batch_size(1152, 5)


def test_a_checkpoint_of_another_model_config_is_one_clear_error(tmp_path):
    from pretraining.export import CheckpointError

    base = _run(toy_run_config(tmp_path, "small", train={"max_steps": 8}, schedule={"warmup": 1, "decay": 1}))
    checkpoint = base / "checkpoints" / "ba8-rank0.pt"
    other = toy_run_config(
        tmp_path, "bigger", model={"preset": "toy_m"}, init={"kind": "full_state", "path": str(checkpoint)}
    )
    with pytest.raises(CheckpointError) as error:
        _run(other)
    message = str(error.value)
    assert message.startswith(
        f"{checkpoint}: written by another model config: model.preset is 'toy_s' "
        f"there, 'toy_m' here ({base / 'config.yaml'})"
    )
    assert "load it with that run's model.preset and tokenizer" in message
    assert not other.run_dir.exists()  # nothing written for a run that cannot start


def test_a_decay_branch_from_a_kept_state_equals_the_run_that_decays_there(tmp_path):
    """CPT as one run per base with decay branches (docs/pretraining.md, "The 50 checkpoints"):
    the main run keeps its full state at step 11 (train.branch_steps) past its resume
    checkpoints' pruning, and a branch from it that decays over steps 13-16 gives the losses and
    LRs of a run that was 16 steps long from the start. (The state after step 11 holds the LR of
    step 12, still the peak in both schedules; the branch's own schedule sets the later ones.)"""
    from contracts.layout import branch_state

    schedule = {"warmup": 2, "decay": 4}
    straight = _losses(_run(toy_run_config(tmp_path, "straight", train={"max_steps": 16}, schedule=schedule)))
    main = _run(toy_run_config(tmp_path, "main", train={"branch_steps": [11]}, schedule=schedule))
    kept = branch_state(main, 11)
    assert kept.is_file() and not (main / "checkpoints" / kept.name).exists()  # pruned there, kept here
    assert not list(kept.parent.glob("*partial*"))
    branch = toy_run_config(
        tmp_path, "branch", train={"max_steps": 16}, schedule=schedule, init={"kind": "full_state", "path": str(kept)}
    )
    rows = _losses(_run(branch))
    assert [r["step"] for r in rows] == list(range(12, 17))
    assert [r["loss"] for r in rows] == pytest.approx([r["loss"] for r in straight[11:]], abs=1e-6)
    assert [r["lr"] for r in rows] == pytest.approx([r["lr"] for r in straight[11:]], abs=1e-12)
    with pytest.raises(ValueError, match="branch_steps"):
        toy_run_config(tmp_path, "bad", train={"branch_steps": [24]})


def test_loss_averaged_per_rank_is_the_release_setting_and_on_one_rank_the_token_mean(tmp_path, monkeypatch):
    """`train.loss_average: rank` hands Composer per-sample (not per-token) accumulation, so each rank's
    whole-batch mean loss is weighted alike over ranks, as the released trainer; on one rank the two
    readings are the same loss (docs/pretraining.md, "Schedule and optimizer")."""
    import pretraining.train as train_module

    settings = []

    class Recording(train_module.Trainer):
        def __init__(self, *args, **kwargs):
            settings.append(kwargs["accumulate_train_batch_on_tokens"])
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(train_module, "Trainer", Recording)
    runs = {
        average: _losses(_run(toy_run_config(tmp_path, name=average, train={"loss_average": average})))
        for average in ("tokens", "rank")
    }
    assert settings == [True, False]
    assert [r["loss"] for r in runs["rank"]] == pytest.approx([r["loss"] for r in runs["tokens"]], rel=1e-6)


def test_loss_averaged_per_rank_with_microbatches_is_refused(tmp_path):
    from contracts.config import ConfigError

    # microbatches under `rank` are virtual ranks of the release's batch (tests/pretraining/test_virtual_ranks.py)
    with pytest.raises(ConfigError, match=r"train\.global_batch_size 8 is not a multiple of it; set .*: null"):
        toy_run_config(tmp_path, train={"loss_average": "rank", "device_microbatch_size": 2})
    assert not (tmp_path / "toy").exists()


def test_composer_looks_up_its_commit_hash_once_per_process_not_at_every_checkpoint(tmp_path, monkeypatch):
    from composer.utils import collect_env

    lookups = []
    monkeypatch.setattr(collect_env, "get_composer_commit_hash", lambda: lookups.append(1) or "abc")
    cfg = toy_run_config(tmp_path, train={"checkpoint_steps": [4, 8, 12, 16]})
    run_dir = _run(cfg)
    assert (run_dir / "hf").is_dir()
    metadata = collect_env.get_composer_env_dict()
    assert metadata["composer_commit_hash"] == "abc"
    assert len(lookups) == 1  # every checkpoint's metadata (4 kept + resume ones) asked it
