"""Export to Hugging Face directories (self-contained, with a model card) and weights from
Llama-architecture decoders."""

import json
import subprocess
import sys
from pathlib import Path

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
    cfg = LlamaConfig(
        vocab_size=96,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
        tie_word_embeddings=False,
        **overrides,
    )
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
    from pretraining.export import read_composer_checkpoint
    from pretraining.train import train

    cfg = toy_run_config(
        tmp_path, "run", train={"max_steps": 4, "resume_interval": 4}, schedule={"warmup": 1, "decay": 1}
    )
    run_dir = train(cfg, dataloader=toy_dataloader(), token_ids=TOY_IDS)
    checkpoint = run_dir / "checkpoints" / "latest-rank0.pt"
    out = tmp_path / "exported"
    assert cli(["export", str(checkpoint), str(out)]) == 0
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {p.name for p in out.iterdir()}

    reference = MlmClmForLM(config_from_preset("toy_s", vocab_size=TOY_IDS.vocab_size)).eval()
    reference.load_state_dict(read_composer_checkpoint(checkpoint)[0])
    reloaded = AutoModelForMaskedLM.from_pretrained(out).eval()
    ids = torch.randint(3, TOY_IDS.vocab_size, (2, 16))
    with torch.no_grad():
        assert torch.equal(reloaded(ids).logits, reference(ids).logits)
    # The step-4 export written during training holds the same weights.
    during = AutoModelForMaskedLM.from_pretrained(run_dir / "hf" / "step-4").eval()
    with torch.no_grad():
        assert torch.equal(during(ids).logits, reference(ids).logits)
    card = (out / "README.md").read_text()
    for fact in (
        "Objective: masked language modeling (MLM) with a masking ratio of 40%",
        "Steps: 4 of a 4-step run",
        "Data: prepared data",
        "arXiv:2507.00994",
        "@inproceedings{gisserotboukhlef2026should",
        "@software{",
        "trust_remote_code=True",
    ):
        assert fact in card, fact
    # An export never overwrites.
    assert cli(["export", str(checkpoint), str(out)]) == 2
    assert "refusing to overwrite" in capsys.readouterr().err


def _toy_s_state(vocab_size: int = 96) -> dict:
    """The `state` of a Composer checkpoint of a toy_s run, as pretraining.train saves it."""
    model = MlmClmForLM(config_from_preset("toy_s", vocab_size=vocab_size))
    weights = {f"model.{k}": v for k, v in model.state_dict().items()}  # Composer's HuggingFaceModel wrapper
    return {"model": weights, "timestamp": {"Timestamp": {"batch": 4}}}


NOT_OURS = {  # (what torch.save wrote, what the one line says it lacks)
    "a-dict": ({"a": 1}, "(no state.model)"),
    "a-list": ([1, 2], "(no state.model)"),
    "no-timestamp": ({"state": {"model": _toy_s_state()["model"]}}, "(no state.timestamp.Timestamp.batch"),
    "step-not-a-number": ({"state": {**_toy_s_state(), "timestamp": {"Timestamp": {"batch": "x"}}}}, "Timestamp"),
    "not-tensors": ({"state": {**_toy_s_state(), "model": {"model.model.embed_tokens.weight": 3}}}, "of type int"),
    "no-embeddings": (
        {"state": {**_toy_s_state(), "model": {"model.other.weight": torch.zeros(2)}}},
        "no model.embed_tokens.weight matrix",
    ),
    "another-preset": ({"state": _toy_s_state()}, "not those of model preset 'toy_m': "),
}


@pytest.mark.parametrize("case", list(NOT_OURS))
def test_export_of_a_torch_save_file_that_is_not_our_checkpoint_is_one_line(tmp_path, capsys, case):
    """Issue 88: `export` of a `torch.save` file that is no Composer checkpoint of ours was a traceback
    (`KeyError: 'timestamp'`, `KeyError: 'model.embed_tokens.weight'`, load_state_dict's many-line
    RuntimeError): one line naming the file, what it lacks and the fix, exit 2, nothing written."""
    saved, lacks = NOT_OURS[case]
    checkpoint = tmp_path / "file.pt"
    torch.save(saved, checkpoint)
    preset = "toy_m" if case == "another-preset" else "toy_s"
    assert cli(["export", str(checkpoint), str(tmp_path / "out"), "--preset", preset]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"export: {checkpoint}: ") and err.count("\n") == 1, err
    assert lacks in err and ("(--preset)" if case == "another-preset" else "pretraining train` wrote") in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.pt"]


def test_export_of_a_checkpoint_of_the_preset_it_names_is_written(tmp_path, capsys):
    """The check above refuses nothing a toy_s run saves (the round trip above is the real run's)."""
    checkpoint = tmp_path / "file.pt"
    torch.save({"state": _toy_s_state()}, checkpoint)
    assert cli(["export", str(checkpoint), str(tmp_path / "out"), "--preset", "toy_s"]) == 0, capsys.readouterr().err
    assert json.loads((tmp_path / "out" / "config.json").read_text())["vocab_size"] == 96


# --- self-contained exports: loading where this package is not installed ------------------------

# Run with `python -I` from an empty folder, this loads an export through the three Auto classes
# with plain transformers. A finder refusing our top-level packages stands for "not installed"
# whatever the install mode (editable or not) of the environment running the tests.
_WITHOUT_PACKAGE = r"""
import importlib.abc, sys
OURS = {"pretraining", "benchmarks", "contracts", "analysis", "paper_figures"}

class NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in OURS:
            raise ModuleNotFoundError(f"No module named {name!r}")

sys.meta_path.insert(0, NotInstalled())
try:
    import pretraining  # noqa: F401
    raise SystemExit("pretraining is importable")
except ModuleNotFoundError:
    pass
import torch
from transformers import AutoModel, AutoModelForCausalLM, AutoModelForMaskedLM, AutoTokenizer

path, out = sys.argv[1], sys.argv[2]
ids = AutoTokenizer.from_pretrained(path)(["a short text to encode", "and another one"],
                                          padding=True, return_tensors="pt")
encoder = AutoModel.from_pretrained(path, trust_remote_code=True).eval()
mlm = AutoModelForMaskedLM.from_pretrained(path, trust_remote_code=True).eval()
clm = AutoModelForCausalLM.from_pretrained(path, trust_remote_code=True, is_causal=True).eval()
with torch.no_grad():
    result = {"input_ids": ids["input_ids"], "attention_mask": ids["attention_mask"],
              "hidden": encoder(**ids).last_hidden_state, "mlm": mlm(**ids).logits,
              "clm": clm(**ids).logits, "clm_by_argument": mlm(**ids, is_causal=True).logits,
              "modules": [type(m).__module__ for m in (encoder, mlm, clm)]}
assert not any(name.split(".")[0] in OURS for name in sys.modules)
torch.save(result, out)
"""


def _tiny_export(tmp_path):
    from contracts.config import config_to_dict
    from pretraining.export import save_hf_directory
    from pretraining.tokenizer import load_tokenizer

    tokenizer = load_tokenizer("embedded")
    torch.manual_seed(0)
    model = MlmClmForLM(config_from_preset("toy_s", vocab_size=len(tokenizer), is_causal=True)).eval()
    metadata = {"name": "tiny", "step": 3, "run_config": config_to_dict(toy_run_config(tmp_path))}
    return model, save_hf_directory(model, None, tmp_path / "exported", tokenizer, metadata)


def test_an_export_loads_with_plain_transformers_where_our_package_is_absent(tmp_path):
    model, path = _tiny_export(tmp_path)
    auto_map = json.loads((path / "config.json").read_text())["auto_map"]
    assert auto_map["AutoModelForCausalLM"] == "modeling_mlmclm.MlmClmForLM"
    scratch = tmp_path / "elsewhere"
    scratch.mkdir()
    env = {
        "HF_MODULES_CACHE": str(tmp_path / "hf_modules"),
        "HF_HUB_OFFLINE": "1",
        "PATH": "/usr/bin:/bin",
        "OMP_NUM_THREADS": "1",
    }
    done = subprocess.run(
        [sys.executable, "-I", "-c", _WITHOUT_PACKAGE, str(path), str(tmp_path / "out.pt")],
        cwd=scratch,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    theirs = torch.load(tmp_path / "out.pt")
    assert all(m.startswith("transformers_modules.") for m in theirs["modules"])  # the shipped code ran
    ids, mask = theirs["input_ids"], theirs["attention_mask"]
    assert not bool(mask.all())  # padding is part of the comparison
    with torch.no_grad():
        bidirectional = model(ids, attention_mask=mask, is_causal=False).logits
        causal = model(ids, attention_mask=mask, is_causal=True).logits
        hidden = model.model(ids, attention_mask=mask, is_causal=False).last_hidden_state
    # Exported for encoder use: bidirectional by default although the model was trained causal.
    assert torch.allclose(theirs["hidden"], hidden, atol=1e-6)
    assert torch.allclose(theirs["mlm"], bidirectional, atol=1e-6)
    assert torch.allclose(theirs["clm"], causal, atol=1e-6)
    assert torch.allclose(theirs["clm_by_argument"], causal, atol=1e-6)
    assert not torch.allclose(causal, bidirectional, atol=1e-4)


def test_with_our_package_imported_remote_and_local_code_give_the_same_model(tmp_path):
    _, path = _tiny_export(tmp_path)
    local = AutoModelForMaskedLM.from_pretrained(path).eval()
    remote = AutoModelForMaskedLM.from_pretrained(path, trust_remote_code=True).eval()
    assert type(local) is MlmClmForLM and type(remote).__module__.startswith("transformers_modules.")
    ids = torch.randint(4, local.config.vocab_size, (2, 12))
    with torch.no_grad():
        assert torch.equal(local(ids).logits, remote(ids).logits)


def test_the_shipped_model_code_is_a_copy_of_the_package_file(tmp_path):
    from pretraining import modeling
    from pretraining.export import REMOTE_CODE_FILE

    _, path = _tiny_export(tmp_path)
    assert (path / REMOTE_CODE_FILE).read_bytes() == Path(modeling.__file__).read_bytes()


def test_random_init_export_holds_the_weights_a_run_starts_from(tmp_path, capsys):
    from safetensors.torch import load_file

    from pretraining.tokenizer import load_tokenizer
    from pretraining.train import build_model

    for objective in ({"kind": "mlm", "mlm_ratio": 0.4}, {"kind": "clm"}):
        cfg = toy_run_config(tmp_path, objective=objective, train={"seed": 17})
        start = build_model(cfg, len(load_tokenizer("embedded"))).state_dict()
        out = tmp_path / f"init-{objective['kind']}"
        assert cli(["random-init", "toy_s", str(out)]) == 0
        saved = load_file(out / "model.safetensors")
        assert saved.keys() == start.keys()
        assert all(torch.equal(saved[k], start[k]) for k in start)
        assert json.loads((out / "pretraining.json").read_text())["random_init"]["seed"] == 17
        assert "Not pretrained" in (out / "README.md").read_text()
    assert cli(["random-init", "toy_s", str(out)]) == 2  # never overwrites
    assert "exists; refusing to overwrite" in capsys.readouterr().err


def test_an_export_ships_euro_bert_style_task_heads(tmp_path):
    """Issue 37: our exports name their head classes in auto_map (so `head: own` finds them,
    benchmarks.kinds.checkpoint.own_head_source); in-process and shipped code build the same heads,
    and the SC head is mean pooling over the real tokens -> dense -> GELU -> classifier."""
    from transformers import (
        AutoModelForQuestionAnswering,
        AutoModelForSequenceClassification,
        AutoModelForTokenClassification,
    )

    from benchmarks.kinds.checkpoint import own_head_source

    _, path = _tiny_export(tmp_path)
    ids = torch.randint(4, 100, (2, 9))
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    for auto, name in [
        (AutoModelForSequenceClassification, "MlmClmForSequenceClassification"),
        (AutoModelForTokenClassification, "MlmClmForTokenClassification"),
        (AutoModelForQuestionAnswering, "MlmClmForQuestionAnswering"),
    ]:
        found = own_head_source(str(path), auto.__name__)
        assert (found.class_name, found.module, found.found_by) == (name, "modeling_mlmclm", "auto_map")
        torch.manual_seed(1)
        local = auto.from_pretrained(path, num_labels=3).eval()
        torch.manual_seed(1)
        remote = auto.from_pretrained(path, num_labels=3, trust_remote_code=True).eval()
        assert type(local).__name__ == type(remote).__name__ == name
        assert type(remote).__module__.startswith("transformers_modules.")
        with torch.no_grad():
            a, b = local(ids, attention_mask=mask), remote(ids, attention_mask=mask)
        assert all(torch.equal(x, y) for x, y in zip(a.to_tuple(), b.to_tuple()))
    sc = AutoModelForSequenceClassification.from_pretrained(path, num_labels=3).eval()
    assert sc.dense.bias.abs().sum() == 0 and sc.classifier.bias.abs().sum() == 0  # zeroed, not left unset
    with torch.no_grad():
        hidden = sc.model(ids[1:, :6]).last_hidden_state.mean(1)
        assert torch.allclose(
            sc(ids, attention_mask=mask).logits[1], sc.classifier(sc.activation(sc.dense(hidden)))[0], atol=1e-5
        )


def test_an_export_gets_the_usual_file_modes_for_a_team(tmp_path):
    """Issue 89: save_pretrained left model.safetensors 0600, so a teammate's fine-tuning job could not
    read the owner's export (its loader said 'No such file'). Every file gets 0666 minus the umask."""
    import os

    previous = os.umask(0o002)
    try:
        _, folder = _tiny_export(tmp_path)
    finally:
        os.umask(previous)
    modes = {p.name: p.stat().st_mode & 0o777 for p in folder.iterdir() if p.is_file()}
    assert modes["model.safetensors"] == 0o664 and set(modes.values()) == {0o664}, modes
