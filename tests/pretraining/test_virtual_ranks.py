"""Virtual ranks (issue 56): the paper configs' `train.loss_average: rank` (each of the release's
192 ranks' mean loss, the ranks' gradients averaged) on fewer GPUs, by microbatches of exactly one
release rank's batch (`train.device_microbatch_size = global_batch_size / train.release_ranks`).

Composer's per-sample accumulation weights each microbatch's mean loss by its samples over the
rank's batch, so equal microbatches give each the same weight, as DDP gives each rank: one process
with 8 microbatches of 1 sample takes the same losses and gradients as 8 launched ranks of 1
sample each (docs/pretraining.md, "Schedule and optimizer"). The token average over the same
microbatches differs, which is what the comparison would catch.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

from contracts.config import ConfigError
from pretraining.config import TrainConfig
from pretraining.train import PretrainError, check_virtual_ranks_fit
from tests.pretraining.test_multirank import launch, rendezvous_log
from tests.pretraining.toy_runs import prepare_embedded_data, record_gradients_spec, write_toy_mlm_config

# 8 ranks (16 until issue 64): the equality is per microbatch and rank, so 8 prove what 16 did, and
# each launched rank is a process importing torch and Composer on the 2 test cores
RANKS, STEPS = 8, 3


def test_a_microbatch_under_rank_averaging_is_one_release_rank():
    paper = TrainConfig(loss_average="rank", device_microbatch_size=6)  # 1,152 / 192 GPUs
    assert (paper.global_batch_size, paper.release_ranks) == (1152, 192)
    assert TrainConfig(loss_average="rank", device_microbatch_size=12, global_batch_size=2304).device_microbatch_size
    assert TrainConfig(loss_average="rank", device_microbatch_size=None).device_microbatch_size is None
    assert TrainConfig(loss_average="tokens", device_microbatch_size=5).device_microbatch_size == 5
    with pytest.raises(ValueError, match=r"set train\.device_microbatch_size: 6 \(got 12\), null .* tokens$"):
        TrainConfig(loss_average="rank", device_microbatch_size=12)
    with pytest.raises(ValueError, match=r"global_batch_size 26 is not a multiple of it; set .*: null"):
        TrainConfig(loss_average="rank", device_microbatch_size=1, global_batch_size=26)
    with pytest.raises(ValueError, match=r"train\.release_ranks must be >= 1"):
        TrainConfig(release_ranks=0)


def test_a_paper_config_with_another_microbatch_is_refused_in_one_line_before_anything_is_written(tmp_path):
    from pretraining.config import load_pretrain_config
    from pretraining.registry import write_config

    config = write_config("610m-clm-42k", tmp_path / "run.yaml", runs_root=str(tmp_path / "runs"))
    assert load_pretrain_config(config, ["train.device_microbatch_size=6"]).train.device_microbatch_size == 6
    with pytest.raises(ConfigError) as refused:
        load_pretrain_config(config, ["train.device_microbatch_size=4"])
    assert "\n" not in str(refused.value) and "device_microbatch_size: 6 (got 4)" in str(refused.value)
    assert not (tmp_path / "runs").exists()


def test_every_rank_must_hold_whole_virtual_ranks():
    """8 GPUs hold 24 release ranks each; 5 would hold 38.4 (a smaller last microbatch weighs less)."""
    paper = TrainConfig(loss_average="rank", device_microbatch_size=6)
    for world in (1, 8, 16, 192):
        check_virtual_ranks_fit(paper, world)
    with pytest.raises(
        PretrainError,
        match=(
            r"needs a world size that divides 192, got 5 ranks: "
            r"launch 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 192 ranks"
        ),
    ):
        check_virtual_ranks_fit(paper, 5)
    check_virtual_ranks_fit(TrainConfig(loss_average="rank"), 5)  # whole per-rank batches: real ranks


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return prepare_embedded_data(tmp_path_factory.mktemp("virtual-ranks") / "data")


def _config(data: Path, name: str, **train) -> Path:
    root = data.parent
    path = write_toy_mlm_config(
        root / f"{name}.yaml",
        data,
        root / name,
        steps=STEPS,
        resume_interval=STEPS,
        decay=1,
        callbacks=[record_gradients_spec(root / f"{name}-gradients", STEPS)],
        batch=RANKS,
        release_ranks=RANKS,
        **train,
    )
    config = yaml.safe_load(path.read_text())
    config["optimizer"]["grad_clip_norm"] = 0.0  # the raw averaged gradients, compared below
    path.write_text(yaml.safe_dump(config))
    return path


def _outcome(data: Path, name: str) -> tuple[list[float], list[dict[str, torch.Tensor]]]:
    run_dir = data.parent / name
    rows = [json.loads(line) for line in (run_dir / "loss.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(1, STEPS + 1))
    gradients = [load_file(data.parent / f"{name}-gradients" / f"step-{n}.safetensors") for n in range(1, STEPS + 1)]
    return [r["loss"] for r in rows], gradients


def _train_here(config: Path) -> None:
    from pretraining.config import load_pretrain_config
    from pretraining.train import train

    train(load_pretrain_config(config), trust_callbacks=True)


@pytest.mark.e2e
@pytest.mark.multiprocess
def test_one_process_of_8_microbatches_equals_8_ranks_on_losses_and_gradients(data):
    _train_here(_config(data, "virtual", loss_average="rank", device_microbatch_size=1))
    launched = _config(data, "launched", loss_average="rank")
    launch(RANKS, launched, rendezvous_log=rendezvous_log(data.parent / "launched"), timeout=900)
    _train_here(_config(data, "token-mean", loss_average="tokens", device_microbatch_size=1))

    (virtual_losses, virtual_grads), (launched_losses, launched_grads) = (
        _outcome(data, "virtual"),
        _outcome(data, "launched"),
    )
    assert virtual_losses == pytest.approx(launched_losses, rel=1e-6, abs=1e-6)
    for step, (ours, theirs) in enumerate(zip(virtual_grads, launched_grads, strict=True), start=1):
        assert ours.keys() == theirs.keys() and ours
        for key in ours:
            difference = (ours[key] - theirs[key]).abs().max().item()
            assert difference <= 1e-6, f"step {step}, {key}: gradients differ by {difference:.2e}"
    # the token mean weights the 8 samples by their masked tokens: another loss, another gradient
    token_losses, token_grads = _outcome(data, "token-mean")
    assert abs(token_losses[0] - launched_losses[0]) > 1e-4
    assert max((token_grads[0][k] - launched_grads[0][k]).abs().max().item() for k in token_grads[0]) > 1e-5
