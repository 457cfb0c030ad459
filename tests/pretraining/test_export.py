"""Export to Hugging Face directories and weights from Llama-architecture decoders."""
import pytest
import torch
from transformers import AutoModelForMaskedLM, LlamaConfig, LlamaForCausalLM

import pretraining  # noqa: F401
from pretraining.__main__ import main as cli
from pretraining.export import CheckpointError, load_initial_weights
from pretraining.modeling import MlmClmForLM
from pretraining.presets import config_from_preset
from tests.pretraining.conftest import TOY_IDS, toy_dataloader, toy_run_config


def _tiny_llama(tmp_path, **overrides):
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                      rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False, **overrides)
    llama = LlamaForCausalLM(cfg).eval()
    llama.save_pretrained(tmp_path / "llama")
    return llama, tmp_path / "llama"


def test_llama_decoder_weights_map_onto_our_model(tmp_path):
    llama, path = _tiny_llama(tmp_path)
    ours = MlmClmForLM(config_from_preset("toy_s", vocab_size=96)).eval()
    load_initial_weights(ours, path)
    ids = torch.randint(3, 96, (2, 20))
    with torch.no_grad():
        # Same function in causal mode: the key map and RoPE convention agree with transformers.
        assert torch.allclose(ours(ids, is_causal=True).logits, llama(ids).logits, atol=1e-5)


def test_incompatible_sources_are_clear_errors(tmp_path):
    _, path = _tiny_llama(tmp_path, attention_bias=True)
    with pytest.raises(CheckpointError, match="biases"):
        load_initial_weights(MlmClmForLM(config_from_preset("toy_s", vocab_size=96)), path)
    _, path = _tiny_llama(tmp_path / "ok")
    with pytest.raises(CheckpointError, match="shapes differ"):
        load_initial_weights(MlmClmForLM(config_from_preset("toy_m", vocab_size=96)), path)
    with pytest.raises(CheckpointError, match="no such checkpoint"):
        load_initial_weights(MlmClmForLM(config_from_preset("toy_s", vocab_size=96)), tmp_path / "nope")


def test_export_round_trip_gives_the_same_logits(tmp_path, capsys):
    from pretraining.export import read_composer_weights
    from pretraining.train import train

    cfg = toy_run_config(tmp_path, "run", train={"max_steps": 4, "resume_interval": 4},
                         schedule={"warmup": 1, "decay": 1})
    run_dir = train(cfg, dataloader=toy_dataloader(), token_ids=TOY_IDS)
    checkpoint = run_dir / "checkpoints" / "latest-rank0.pt"
    out = tmp_path / "exported"
    assert cli(["export", str(checkpoint), str(out)]) == 0
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {p.name for p in out.iterdir()}

    reference = MlmClmForLM(config_from_preset("toy_s", vocab_size=TOY_IDS.vocab_size)).eval()
    reference.load_state_dict(read_composer_weights(checkpoint))
    reloaded = AutoModelForMaskedLM.from_pretrained(out).eval()
    ids = torch.randint(3, TOY_IDS.vocab_size, (2, 16))
    with torch.no_grad():
        assert torch.equal(reloaded(ids).logits, reference(ids).logits)
    # The step-4 export written during training holds the same weights.
    during = AutoModelForMaskedLM.from_pretrained(run_dir / "hf" / "step-4").eval()
    with torch.no_grad():
        assert torch.equal(during(ids).logits, reference(ids).logits)
    # An export never overwrites.
    assert cli(["export", str(checkpoint), str(out)]) == 2
    assert "refusing to overwrite" in capsys.readouterr().err
