"""The model: preset sizes, attention switch, document isolation, HF registration."""

import pytest
import torch
import torch.nn.functional as F
from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoModelForMaskedLM

import pretraining  # noqa: F401  (registers the model type with the Auto classes)
from pretraining.modeling import MlmClmForLM, MlmClmModel, position_ids_from_segment_ids
from pretraining.presets import PRESETS, closed_form_parameter_count, config_from_preset, count_parameters_on_meta


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_preset_parameter_count_matches_closed_form(name):
    cfg = config_from_preset(name, vocab_size=None if PRESETS[name].vocab else 96)
    assert count_parameters_on_meta(cfg) == closed_form_parameter_count(cfg)


def test_paper_presets_have_the_table_1_shapes_and_sizes():
    cfg = config_from_preset("610m")
    assert (
        cfg.num_hidden_layers,
        cfg.hidden_size,
        cfg.intermediate_size,
        cfg.num_attention_heads,
        cfg.num_key_value_heads,
    ) == (26, 1152, 4096, 18, 6)
    assert (cfg.vocab_size, cfg.max_position_embeddings, cfg.rms_norm_eps, cfg.rope_theta, cfg.initializer_range) == (
        128256,
        2048,
        1e-5,
        10000.0,
        0.02,
    )
    # 210m and 610m name embedding + body (the untied LM head comes on top); the "1b" shapes give
    # 1.19B that way and 0.97B without the embedding (documented in the readme).
    sizes = {n: count_parameters_on_meta(config_from_preset(n)) for n in ("210m", "610m", "1b")}
    for name, expected in {"210m": 210e6, "610m": 610e6}.items():
        without_head = sizes[name]["total"] - sizes[name]["lm_head"]
        assert abs(without_head - expected) / expected < 0.01, (name, without_head)
    assert abs(sizes["1b"]["body"] - 1e9) / 1e9 < 0.04


def _tiny(is_causal=False, seed=0):
    torch.manual_seed(seed)
    return MlmClmForLM(config_from_preset("toy_s", vocab_size=50, is_causal=is_causal)).eval()


def test_causal_and_bidirectional_attention_really_differ():
    model = _tiny()
    ids = torch.randint(4, 50, (1, 12))
    changed = ids.clone()
    changed[0, -1] = (ids[0, -1] + 1 - 4) % 46 + 4  # change only the last token
    with torch.no_grad():
        causal = [model(x, is_causal=True).logits for x in (ids, changed)]
        bidir = [model(x, is_causal=False).logits for x in (ids, changed)]
    assert torch.allclose(causal[0][:, :-1], causal[1][:, :-1], atol=1e-6)  # the past cannot see it
    assert not torch.allclose(bidir[0][:, :-1], bidir[1][:, :-1], atol=1e-4)  # everyone sees it
    assert not torch.allclose(causal[0], bidir[0], atol=1e-4)


@pytest.mark.parametrize("is_causal", [False, True])
def test_block_diagonal_mask_isolates_segments_and_restarts_positions(is_causal):
    model = _tiny(is_causal=is_causal)
    doc_a, doc_b = torch.randint(4, 50, (1, 5)), torch.randint(4, 50, (1, 7))
    packed = torch.cat([doc_a, doc_b], dim=1)
    segment_ids = torch.tensor([[0] * 5 + [1] * 7])
    with torch.no_grad():
        together = model(packed, segment_ids=segment_ids).logits
        alone_a = model(doc_a).logits
        alone_b = model(doc_b).logits
    # Each segment gives exactly what it gives alone (no leak, positions restart at 0).
    assert torch.allclose(together[:, :5], alone_a, atol=1e-5)
    assert torch.allclose(together[:, 5:], alone_b, atol=1e-5)
    # Without segment ids, segment b sees segment a.
    with torch.no_grad():
        leaky = model(packed).logits
    assert not torch.allclose(leaky[:, 5:], alone_b, atol=1e-4)


def test_position_ids_restart_in_each_segment():
    docs = torch.tensor([[0, 0, 0, 1, 1, 2, 2, 2, 2]])
    assert position_ids_from_segment_ids(docs).tolist() == [[0, 1, 2, 0, 1, 0, 1, 2, 3]]


def test_padding_mask_gives_the_unpadded_result():
    model = _tiny()
    ids = torch.randint(4, 50, (1, 6))
    padded = torch.cat([ids, torch.ones(1, 3, dtype=torch.long)], dim=1)
    mask = torch.tensor([[1] * 6 + [0] * 3])
    with torch.no_grad():
        assert torch.allclose(model(padded, attention_mask=mask).logits[:, :6], model(ids).logits, atol=1e-5)


def test_loss_is_computed_at_labelled_positions_only():
    model = _tiny()
    ids = torch.randint(4, 50, (2, 10))
    labels = torch.full_like(ids, -100)
    labels[0, 3], labels[1, 7] = 11, 12
    out = model(ids, labels=labels)
    with torch.no_grad():
        full = model(ids).logits
    assert out.logits.shape == (2, 50)
    expected = F.cross_entropy(torch.stack([full[0, 3], full[1, 7]]), torch.tensor([11, 12]))
    assert torch.allclose(out.loss, expected, atol=1e-5)
    assert model(ids, labels=torch.full_like(ids, -100)).loss.item() == 0.0


def test_auto_classes_load_a_saved_model_without_remote_code(tmp_path):
    model = _tiny()
    model.save_pretrained(tmp_path)
    assert AutoConfig.from_pretrained(tmp_path).model_type == "mlmclm_llama"
    ids = torch.randint(4, 50, (1, 8))
    with torch.no_grad():
        reference = model(ids).logits
        for auto in (AutoModelForMaskedLM, AutoModelForCausalLM):
            assert torch.allclose(auto.from_pretrained(tmp_path)(ids).logits, reference, atol=1e-6)
        base = AutoModel.from_pretrained(tmp_path)
        assert isinstance(base, MlmClmModel)
        assert torch.allclose(base(ids).last_hidden_state, model.model(ids).last_hidden_state, atol=1e-6)


def test_initialisation_std_is_0_02_and_norms_start_at_one():
    model = MlmClmForLM(config_from_preset("toy_l", vocab_size=4096))
    for name, p in model.named_parameters():
        if p.ndim == 2:
            assert abs(p.std().item() - 0.02) < 0.002, name
        else:
            assert torch.all(p == 1.0), name
