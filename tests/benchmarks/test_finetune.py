"""Composer glue: step budget, schedule, seeding, micro-batching, precision."""

from __future__ import annotations

import pytest
import torch

from benchmarks.finetune import (
    GlobalBatches,
    TrainSettings,
    check_last_batch,
    fit,
    loss_terms,
    rank_share,
    resolve_precision,
    training_steps,
    weight_decay_groups,
)
from benchmarks.kinds import sc
from benchmarks.kinds.common import load_backbone, load_tokenizer
from tests.benchmarks.tiny import one_torch_thread, save_tiny_model  # noqa: F401 (autouse fixture)
from tests.optimizer_lrs import record_step_lrs


def test_step_budget():
    assert training_steps(TrainSettings(lr=1e-4, seed=0), 10_000) == 1000
    assert training_steps(TrainSettings(lr=1e-4, seed=0, max_steps=None, one_epoch=True), 14_041) == 439
    assert training_steps(TrainSettings(lr=1e-4, seed=0, max_steps=5, one_epoch=True), 14_041) == 5
    with pytest.raises(ValueError):
        training_steps(TrainSettings(lr=1e-4, seed=0, max_steps=None), 10)


def test_precision_follows_the_device():
    assert resolve_precision("auto", "cpu") == "fp32"
    assert resolve_precision("auto", "gpu") == "amp_bf16"
    with pytest.raises(ValueError, match="GPU"):
        resolve_precision("amp_bf16", "cpu")


def test_one_rank_takes_the_batches_composer_s_distributed_sampler_gave():
    from torch.utils.data import DataLoader, DistributedSampler

    batches = GlobalBatches(21, 8, seed=3, rank=0, world_size=1)
    before = DataLoader(range(21), batch_size=8, sampler=DistributedSampler(range(21), 1, 0, seed=3))
    for epoch in (0, 1):
        batches.set_epoch(epoch)
        before.sampler.set_epoch(epoch)
        assert list(batches) == [batch.tolist() for batch in before]
    assert len(batches) == 3


@pytest.mark.parametrize("world_size", [2, 4])
def test_step_k_on_several_ranks_covers_the_single_process_batch_k(world_size):
    single = list(GlobalBatches(22, 8, seed=3, rank=0, world_size=1))  # 8, 8, 6
    shares = [list(GlobalBatches(22, 8, seed=3, rank=r, world_size=world_size)) for r in range(world_size)]
    for k, batch in enumerate(single):
        assert sum((share[k] for share in shares), []) == batch  # contiguous shares, in rank order
    assert [len(share[2]) for share in shares] == ([3, 3] if world_size == 2 else [2, 2, 1, 1])
    assert rank_share(range(8), 1, 4) == [2, 3]


def test_a_last_batch_smaller_than_the_world_is_refused_only_when_trained():
    settings = TrainSettings(lr=1e-3, seed=0, batch_size=8, max_steps=3)
    with pytest.raises(ValueError, match="18 training examples leave 2 for the last batch of an epoch, fewer than"):
        check_last_batch(18, settings, 4)
    check_last_batch(18, settings, 2)
    check_last_batch(26, settings, 4)  # 3 steps end before the last batch (2 examples)


def test_loss_terms_count_what_a_module_averages_over():
    labels = torch.tensor([[1, 0, -100], [2, -100, -100]])
    assert loss_terms({"input_ids": torch.zeros(2, 3), "labels": labels}) == 3  # TC: labelled tokens
    assert loss_terms({"input_ids": torch.zeros(2, 3), "labels": torch.tensor([1, 0])}) == 2  # SC
    assert loss_terms({"query_input_ids": torch.zeros(5, 3), "doc_input_ids": torch.zeros(5, 4)}) == 5  # IR


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    path = save_tiny_model(tmp_path_factory.mktemp("ft") / "bert", "bert")
    tokenizer = load_tokenizer(str(path))
    texts = [f"good film number {i}" if i % 2 else f"bad movie take {i}" for i in range(24)]
    features = sc.encode(texts, [i % 2 for i in range(24)], tokenizer, 32, protocol="paper")
    return path, features, sc.Collator(tokenizer.pad_token_id)


def _train(setup, seed=0, **overrides):
    path, features, collate = setup
    torch.manual_seed(123)  # the head init is seeded by the run; here it is fixed for comparison
    module = sc.SequenceClassifier(load_backbone(str(path)), 2)
    settings = TrainSettings(lr=1e-3, seed=seed, batch_size=8, max_steps=6, **overrides)
    info = fit(module, features, collate, settings)
    return module, info


def test_fit_is_seeded_and_microbatching_matches_the_full_batch(setup):
    a, info = _train(setup)
    b, _ = _train(setup)
    c, _ = _train(setup, device_microbatch_size=3)
    d, _ = _train(setup, seed=1)
    assert info["steps"] == 6 and info["precision"] == "fp32" and info["device"] == "cpu"
    pa, pb, pc, pd = (dict(m.named_parameters()) for m in (a, b, c, d))
    assert all(torch.equal(pa[n], pb[n]) for n in pa), "same seed, same weights"
    # 8 = 3 + 3 + 2: Composer weights each micro-batch loss by its share of the batch
    assert all(torch.allclose(pa[n], pc[n], atol=1e-5) for n in pa), "accumulation = full batch"
    assert any(not torch.equal(pa[n], pd[n]) for n in pa), "another seed shuffles differently"


def test_schedule_warms_up_then_decays_to_zero(setup):
    lrs = []
    path, features, collate = setup
    module = sc.SequenceClassifier(load_backbone(str(path)), 2)
    fit(
        module,
        features,
        collate,
        TrainSettings(lr=1e-3, seed=0, batch_size=8, max_steps=20),
        callbacks=[record_step_lrs(lrs)],
    )
    # 10% of 20 steps = 2 warmup steps, then linear decay to 0: optimizer step n (1-based) runs at
    # the schedule's value at n, so the first step is above 0, the second at the peak, the last at 0.
    multiplier = [n / 2 if n < 2 else 1 - (n - 2) / 18 for n in range(1, 21)]
    assert lrs == pytest.approx([1e-3 * m for m in multiplier])
    assert lrs[0] == pytest.approx(5e-4) and lrs[1] == pytest.approx(1e-3) and lrs[-1] == 0.0


def test_hf_schedule_gives_the_trainer_s_lambdalr_lrs_and_steps_per_epoch(setup):
    """`release_quirks` (docs/protocol.md, Choice 22): the LR of every update as the Hugging Face
    Trainer's get_linear_schedule_with_warmup under LambdaLR gives it (update 1 at 0, warmup
    ceil(10%), the last update above 0), and its steps per epoch (micro-batches of 4, rounded down)."""
    import math

    from transformers import get_linear_schedule_with_warmup

    from benchmarks.finetune import training_steps

    lrs = []
    path, features, collate = setup
    module = sc.SequenceClassifier(load_backbone(str(path)), 2)
    settings = TrainSettings(lr=1e-3, seed=0, batch_size=8, max_steps=15, hf_schedule=True)
    fit(module, features, collate, settings, callbacks=[record_step_lrs(lrs)])
    weight = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([weight], lr=1e-3)
    scheduler = get_linear_schedule_with_warmup(optimizer, math.ceil(0.1 * 15), 15)
    expected = []
    for _ in range(15):
        expected.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert lrs == pytest.approx(expected)
    assert lrs[0] == 0.0 and lrs[2] == pytest.approx(1e-3) and lrs[-1] > 0
    # an epoch of 100 examples in batches of 32: 4 steps, the Trainer's 25 micro-batches // 8 = 3
    epoch = dict(lr=1e-3, seed=0, batch_size=32, max_steps=None, one_epoch=True)
    assert training_steps(TrainSettings(**epoch), 100) == 4
    assert training_steps(TrainSettings(**epoch, hf_schedule=True), 100) == 3
    exact = TrainSettings(**epoch, hf_schedule=True)
    assert training_steps(exact, 96) == 3 == training_steps(TrainSettings(**epoch), 96)


class _Pull(torch.nn.Module):
    """A loss whose gradient is (3, 4), of norm 5, at every step."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(2))

    def forward(self, batch):
        return (self.weight * torch.tensor([3.0, 4.0])).sum()


def _stepped_gradients(max_grad_norm):
    """The gradient each of 3 optimizer steps updated the weights with: read by a step post-hook
    (Composer calls step(closure), which computes the gradient inside the step; the next batch
    zeroes it), registered once Composer has the optimizer."""
    from composer import Callback

    seen = []

    class StepGradients(Callback):
        def fit_start(self, state, logger):
            state.optimizers[0].register_step_post_hook(
                lambda optimizer, args, kwargs: seen.append(
                    torch.cat([p.grad.flatten() for g in optimizer.param_groups for p in g["params"]]).clone()
                )
            )

    features = [{"input_ids": [1]}] * 12
    collate = lambda chunk: {"input_ids": torch.tensor([f["input_ids"] for f in chunk])}  # noqa: E731
    settings = TrainSettings(lr=1e-3, seed=0, batch_size=4, max_steps=3, max_grad_norm=max_grad_norm)
    info = fit(_Pull(), features, collate, settings, callbacks=[StepGradients()])
    assert info["max_grad_norm"] == max_grad_norm and len(seen) == 3
    return seen


def test_the_gradient_norm_is_clipped_at_one_before_each_optimizer_step():
    """As the HF Trainer's default max_grad_norm 1.0, which the released runs kept (docs/protocol.md)."""
    for grad in _stepped_gradients(1.0):
        assert grad.tolist() == pytest.approx([0.6, 0.8]) and grad.norm().item() == pytest.approx(1.0)
    for grad in _stepped_gradients(None):  # no clipping: the gradient as computed, norm 5
        assert grad.tolist() == pytest.approx([3.0, 4.0]) and grad.norm().item() == pytest.approx(5.0)
    for grad in _stepped_gradients(10.0):  # a norm below the threshold is left as it is
        assert grad.norm().item() == pytest.approx(5.0)


def _decay_by_name(module, exempt: str) -> tuple[set[str], set[str]]:
    names = {id(p): n for n, p in module.named_parameters()}
    decay, no_decay = weight_decay_groups(module, exempt)
    return {names[id(p)] for p in decay}, {names[id(p)] for p in no_decay}


@pytest.mark.parametrize("arch", ["llama", "bert"])
def test_paper_weight_decay_exempts_what_the_pinned_trainer_exempts(tmp_path, arch):
    """`layernorm_and_bias` (paper, docs/protocol.md Choice 23) = `Trainer.get_decay_parameter_names`
    of transformers 4.48.3, the release's pin: transformers' own `get_parameter_names` with only
    nn.LayerNorm forbidden (no name patterns, which later releases added), then names without
    "bias". A Llama backbone's RMSNorm gains decay there; `one_dim` exempts them."""
    from torch import nn
    from transformers.trainer_pt_utils import get_parameter_names

    module = sc.SequenceClassifier(load_backbone(str(save_tiny_model(tmp_path / arch, arch))), 2)
    pinned = {n for n in get_parameter_names(module, [nn.LayerNorm]) if "bias" not in n}
    decay, exempt = _decay_by_name(module, "layernorm_and_bias")
    assert decay == pinned and not decay & exempt and decay | exempt == {n for n, _ in module.named_parameters()}
    gains = {n for n, p in module.named_parameters() if p.ndim == 1 and "bias" not in n}
    assert gains, "the backbone has norm gains"
    if arch == "llama":  # RMSNorm: not an nn.LayerNorm, so its gains decay under the pinned Trainer
        assert gains <= decay
    else:  # BERT's LayerNorm gains are exempt either way
        assert not gains & decay
    one_dim_decay, one_dim_exempt = _decay_by_name(module, "one_dim")
    assert one_dim_decay == {n for n, p in module.named_parameters() if p.ndim >= 2} and gains <= one_dim_exempt
    with pytest.raises(ValueError, match="weight_decay_exempt must be one of one_dim, layernorm_and_bias"):
        weight_decay_groups(module, "norms")


def test_fit_hands_the_optimizer_the_decay_groups_of_its_setting(tmp_path):
    from composer import Callback

    seen = []

    class OptimizerGroups(Callback):
        def fit_start(self, state, logger):
            for group in state.optimizers[0].param_groups:
                seen.append((group["weight_decay"], {id(p) for p in group["params"]}))

    path = save_tiny_model(tmp_path / "llama", "llama")
    tokenizer = load_tokenizer(str(path))
    features = sc.encode([f"text {i}" for i in range(8)], [i % 2 for i in range(8)], tokenizer, 16, protocol="paper")
    for exempt in ("layernorm_and_bias", "one_dim"):
        module = sc.SequenceClassifier(load_backbone(str(path)), 2)
        settings = TrainSettings(lr=1e-3, seed=0, batch_size=8, max_steps=1, weight_decay_exempt=exempt)
        fit(module, features, sc.Collator(tokenizer.pad_token_id), settings, callbacks=[OptimizerGroups()])
        names = {id(p): n for n, p in module.named_parameters()}
        groups = [(decay_rate, {names[i] for i in ids}) for decay_rate, ids in seen]
        assert groups == [(0.1, _decay_by_name(module, exempt)[0]), (0.0, _decay_by_name(module, exempt)[1])]
        seen.clear()
