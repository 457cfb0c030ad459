"""The kernel options of issue 68 (pretraining/kernels.py): each equals the reference on a CPU
(fp32 within 1e-5), swaps keep the parameters and their names, Liger's fallbacks are recorded and
a Liger that cannot run on a GPU is one clear error; a Composer run with every CPU option learns
and records what it ran."""

from __future__ import annotations

import json

import pytest
import torch
import yaml

from pretraining import kernels
from pretraining.kernels import (
    KernelError,
    apply_block_kernels,
    chunked_loss,
    lm_loss,
    reference_loss,
    resolve,
)
from pretraining.modeling import MlmClmForLM, RMSNorm
from pretraining.presets import config_from_preset
from tests.pretraining.conftest import TOY_IDS, toy_dataloader, toy_run_config


def _head_case(rows=300, hidden=48, vocab=700, seed=0):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(rows, hidden, generator=g)
    w = torch.randn(vocab, hidden, generator=g) * 0.2
    y = torch.randint(0, vocab, (rows,), generator=g)
    return h, w, y


def _loss_and_grads(fn, h, w, y, **kwargs):
    h, w = h.clone().requires_grad_(), w.clone().requires_grad_()
    loss = fn(h, w, y, **kwargs)
    loss.backward()
    return loss.detach(), h.grad, w.grad


@pytest.mark.parametrize("chunk_rows", [1, 64, 299, 300, 4096])  # one row, uneven, exact, one chunk
def test_the_chunked_loss_and_its_gradients_equal_the_reference_in_fp32(chunk_rows):
    h, w, y = _head_case()
    ref = _loss_and_grads(reference_loss, h, w, y)
    got = _loss_and_grads(chunked_loss, h, w, y, chunk_rows=chunk_rows)
    for a, b in zip(ref, got):
        assert torch.allclose(a, b, atol=1e-5, rtol=1e-5), (a - b).abs().max()


def test_the_chunked_loss_under_bf16_autocast_matches_the_reference_within_bf16_rounding():
    h, w, y = _head_case()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ref = _loss_and_grads(reference_loss, h, w, y)
        got = _loss_and_grads(chunked_loss, h, w, y, chunk_rows=100)
    assert got[0].dtype == torch.float32 and abs(float(ref[0] - got[0])) < 1e-3 * float(ref[0])
    assert got[1].dtype == h.dtype and got[2].dtype == w.dtype  # gradients in the parameters' dtype
    assert torch.allclose(ref[2], got[2], atol=2e-3)


def test_the_chunked_loss_never_holds_more_than_a_chunk_of_logits(monkeypatch):
    seen = []
    real = torch.logsumexp

    def recording(x, dim):
        seen.append(tuple(x.shape))
        return real(x, dim=dim)

    monkeypatch.setattr(kernels.torch, "logsumexp", recording)
    h, w, y = _head_case(rows=250, vocab=500)
    chunked_loss(h, w, y, chunk_rows=64)
    assert seen == [(64, 500)] * 3 + [(58, 500)]


def _toy_model(seed=0):
    torch.manual_seed(seed)
    return MlmClmForLM(config_from_preset("toy_s", vocab_size=96))


def test_torch_rms_norm_blocks_equal_the_reference_and_keep_the_parameter_names():
    model = _toy_model()
    names = list(model.state_dict())
    x = torch.randint(4, 96, (2, 24))
    labels = torch.where(torch.rand(2, 24) < 0.4, x, torch.full_like(x, -100))
    before = model(x, labels=labels)
    swapped = apply_block_kernels(model, "torch")
    assert swapped == 2 * model.config.num_hidden_layers + 1  # two norms a block and the final one
    assert all(isinstance(m, RMSNorm) and type(m) is not RMSNorm for m in model.modules() if isinstance(m, RMSNorm))
    after = model(x, labels=labels)
    assert list(model.state_dict()) == names
    assert torch.allclose(before.loss, after.loss, atol=1e-5) and torch.allclose(before.logits, after.logits, atol=1e-5)
    assert apply_block_kernels(model, "reference") == swapped and {type(m) for m in model.modules()} >= {RMSNorm}
    assert not any(type(m).__name__.startswith("TorchRMSNorm") for m in model.modules())


def test_the_swapped_blocks_share_one_class_so_regional_compilation_reuses_one_graph():
    model = _toy_model()
    apply_block_kernels(model, "torch")
    assert len({type(block.input_layernorm) for block in model.model.layers}) == 1


def test_lm_loss_with_each_loss_kernel_equals_the_models_own_loss():
    model = _toy_model()
    x = torch.randint(4, 96, (2, 24))
    labels = torch.where(torch.rand(2, 24, generator=torch.Generator().manual_seed(1)) < 0.4, x, -100)
    batch = {"input_ids": x, "segment_ids": torch.zeros_like(x), "labels": labels}
    ref = lm_loss(model, batch, False, "reference")
    assert torch.allclose(ref, model(**batch, is_causal=False).loss)
    assert torch.allclose(lm_loss(model, batch, False, "chunked"), ref, atol=1e-5)
    nothing = {**batch, "labels": torch.full_like(x, -100)}
    zero = lm_loss(model, nothing, False, "chunked")
    assert float(zero) == 0.0 and zero.requires_grad  # as the model's: a zero that keeps the graph


def test_liger_falls_back_on_a_cpu_and_says_so_and_bad_names_are_one_line():
    cpu = resolve("liger", "liger", "cpu")
    assert (cpu.loss, cpu.blocks) == ("chunked", "torch") and len(cpu.notes) == 2
    assert resolve("reference", "reference", "gpu").notes == ()
    with pytest.raises(KernelError, match="train.loss_kernel 'fused'.*reference, chunked, liger"):
        resolve("fused", "reference", "cpu")
    with pytest.raises(KernelError, match="model.block_kernels 'apex'"):
        resolve("reference", "apex", "cpu")


def test_liger_on_a_gpu_where_it_does_not_import_is_an_error_not_a_silent_fallback(monkeypatch):
    monkeypatch.setattr(kernels, "liger_importable", lambda: "ModuleNotFoundError: No module named 'liger_kernel'")
    with pytest.raises(KernelError, match="train.loss_kernel liger: liger_kernel does not import.*pip install"):
        resolve("liger", "reference", "gpu")
    with pytest.raises(KernelError, match="model.block_kernels liger"):
        resolve("reference", "liger", "cuda")


def test_a_run_with_every_cpu_kernel_option_learns_and_records_what_it_ran(tmp_path):
    from pretraining.train import train

    cfg = toy_run_config(
        tmp_path,
        model={"preset": "toy_s", "attention_scope": "document", "block_kernels": "liger"},
        optimizer={"lr": 5e-3, "fused": True},
        train={
            "max_steps": 24,
            "global_batch_size": 8,
            "resume_interval": 8,
            "progress_bar": False,
            "seed": 3,
            "loss_kernel": "liger",
        },
    )
    reference = train(toy_run_config(tmp_path, "reference"), dataloader=toy_dataloader(), token_ids=TOY_IDS)
    run_dir = train(cfg, dataloader=toy_dataloader(), token_ids=TOY_IDS)
    saved = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert saved["resolved_kernels"]["loss"] == "chunked" and saved["resolved_kernels"]["blocks"] == "torch"
    assert any("needs CUDA" in note for note in saved["resolved_kernels"]["notes"])
    assert saved["config"]["train"]["loss_kernel"] == "liger" and saved["config"]["optimizer"]["fused"] is True

    def losses(folder):
        return [json.loads(line)["loss"] for line in (folder / "loss.jsonl").read_text().splitlines()]

    # the same arithmetic as the reference run up to float rounding: the same curve
    assert losses(run_dir) == pytest.approx(losses(reference), rel=1e-4)
    assert sum(losses(run_dir)[-3:]) < 0.8 * sum(losses(run_dir)[:3])
