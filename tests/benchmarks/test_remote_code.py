"""The harness on checkpoints that ship their own model code (like the paper's released ones),
behind the one remote-code switch; their own task heads (`head: own`)."""

from __future__ import annotations

import json

import pytest

from benchmarks.__main__ import main as cli
from benchmarks.datasets import TOY_DATA_ROOT
from benchmarks.kinds.checkpoint import ModelLoadError
from benchmarks.kinds.common import load_backbone, model_load_error
from benchmarks.run import CONFIG_DIR, load_run_config, run
from tests.benchmarks.tiny import one_torch_thread, save_remote_code_model  # noqa: F401 (autouse fixture)


@pytest.fixture(scope="module")
def released_style(tmp_path_factory):
    return save_remote_code_model(tmp_path_factory.mktemp("remote") / "sl_model_checkpoint")


@pytest.fixture(scope="module")
def with_heads(tmp_path_factory):
    """Its code also ships SLModelFor{Sequence,Token}Classification and ...ForQuestionAnswering."""
    return save_remote_code_model(tmp_path_factory.mktemp("remote") / "sl_model_heads", heads=True)


@pytest.fixture(scope="module")
def unlisted_heads(tmp_path_factory):
    """Its code defines the head classes, but auto_map names only AutoConfig and AutoModel."""
    return save_remote_code_model(tmp_path_factory.mktemp("remote") / "sl_model_unlisted", heads=True, list_heads=False)


def _values(model, out, **kw):
    return {
        "model": str(model),
        "task": "sst2",
        "lr": 1e-3,
        "seed": 0,
        "data_root": str(TOY_DATA_ROOT),
        "out": str(out),
        "max_steps": 2,
        **kw,
    }


def test_the_checkpoint_really_needs_its_shipped_code(released_style):
    config = json.loads((released_style / "config.json").read_text())
    assert config["model_type"] == "sl_model" and config["auto_map"]["AutoModel"] == "modeling_sl_model.SLModel"
    assert (released_style / "modeling_sl_model.py").is_file()
    backbone = load_backbone(str(released_style), trust_remote_code=True)
    assert type(backbone.model).__module__.startswith("transformers_modules.")


def test_the_harness_fine_tunes_a_remote_code_checkpoint_with_the_switch(released_style, tmp_path):
    record, computed = run(
        load_run_config(_values(released_style, tmp_path, trust_remote_code=True), CONFIG_DIR / "toy.yaml")
    )
    assert computed and record.dataset == "sst2" and record.provenance["train"]["steps"] == 2
    assert 0 <= record.test_score <= 100 and record.test_instance_scores


def test_without_the_switch_it_is_a_one_line_error_naming_it(released_style, tmp_path, capsys):
    cfg = load_run_config(_values(released_style, tmp_path), CONFIG_DIR / "toy.yaml")
    assert cfg.trust_remote_code is False  # off unless asked for
    with pytest.raises(ModelLoadError, match="--trust-remote-code"):
        run(cfg)
    argv = [
        "run",
        "--model",
        str(released_style),
        "--task",
        "sst2",
        "--lr",
        "1e-3",
        "--seed",
        "0",
        "--data-root",
        str(TOY_DATA_ROOT),
        "--out",
        str(tmp_path),
        "--config",
        str(CONFIG_DIR / "toy.yaml"),
    ]
    assert cli(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "--trust-remote-code" in lines[0] and "trust_remote_code: true" in lines[0]
    assert not list(tmp_path.iterdir())  # refused before anything is written
    assert cli(["matrix", "--models", str(released_style), "--tasks", "sst2", "--out", str(tmp_path), "--local"]) == 2
    assert "--trust-remote-code" in capsys.readouterr().err
    # The flag is the switch: `matrix` takes it too, and it reaches every job's config.
    jobs = tmp_path / "jobs.jsonl"
    assert (
        cli(
            [
                "matrix",
                "--models",
                str(released_style),
                "--tasks",
                "sst2",
                "--lrs",
                "1e-3",
                "--seeds",
                "0",
                "--out",
                str(tmp_path),
                "--jobs-file",
                str(jobs),
                "--slurm-script",
                str(tmp_path / "s.sh"),
                "--trust-remote-code",
                "--data-root",
                str(TOY_DATA_ROOT),
            ]
        )
        == 0
    )
    assert json.loads(jobs.read_text().splitlines()[0])["config"]["trust_remote_code"] is True


def test_a_hub_checkpoint_refused_by_transformers_gets_the_same_message():
    refused = ValueError(
        "The repository org/model contains custom code which must be executed to correctly "
        "load the model.\nPlease pass the argument `trust_remote_code=True` to allow custom code."
    )
    assert "--trust-remote-code" in str(model_load_error("org/model", refused, trust_remote_code=False))
    other = OSError("org/model is not a local folder and is not a valid model identifier\nmore")
    assert str(model_load_error("org/model", other, trust_remote_code=False)) == (
        "cannot load model org/model: org/model is not a local folder and is not a valid model identifier"
    )


@pytest.mark.parametrize(
    "task, protocol, head_class",
    [
        ("sst2", "paper", "SLModelForSequenceClassification"),
        ("conll2003", "paper", "SLModelForTokenClassification"),
        ("squad", "paper", "SLModelForTokenClassification"),  # 2 labels: inside / outside the answer
        ("squad", "standard", "SLModelForQuestionAnswering"),
    ],
)
def test_head_own_fine_tunes_the_checkpoint_s_own_task_class(with_heads, tmp_path, task, protocol, head_class):
    """`paper` takes the checkpoint's own head where it ships one (the released configs load
    AutoModelFor...; docs/protocol.md); the saved model is that class, with no head of ours."""
    head = None if protocol == "paper" else "own"  # paper: by default; standard: when asked
    values = _values(with_heads, tmp_path, task=task, trust_remote_code=True, save_weights=True, protocol=protocol)
    cfg = load_run_config({**values, "head": head}, CONFIG_DIR / "toy.yaml")
    record, computed = run(cfg)
    assert computed and record.provenance["protocol_choices"]["head"] == "own"
    saved = json.loads((cfg.run_dir / "model" / "config.json").read_text())
    assert saved["architectures"] == [head_class] and not (cfg.run_dir / "model" / "head.safetensors").exists()
    assert 0 <= record.test_score <= 100


def test_paper_takes_a_head_the_code_defines_though_auto_map_omits_it(unlisted_heads, tmp_path):
    """The released harness registered its model type's heads with the Auto classes, so they
    resolved without auto_map naming them (docs/protocol.md, Choice 21): `paper` does the same,
    and the record names the class, its module and the sha256 of the file it came from."""
    from benchmarks.kinds.checkpoint import own_head_source

    config = json.loads((unlisted_heads / "config.json").read_text())
    assert sorted(config["auto_map"]) == ["AutoConfig", "AutoModel"]
    sha = sha256_of(unlisted_heads / "modeling_sl_model.py")
    found = own_head_source(str(unlisted_heads), "AutoModelForSequenceClassification")
    assert (found.class_name, found.module, found.sha256, found.found_by) == (
        "SLModelForSequenceClassification",
        "modeling_sl_model",
        sha,
        "modeling_code",
    )
    values = _values(unlisted_heads, tmp_path, trust_remote_code=True, save_weights=True)
    cfg = load_run_config(values, CONFIG_DIR / "toy.yaml")
    assert cfg.protocol == "paper" and cfg.head is None
    record, computed = run(cfg)
    assert computed and record.provenance["protocol_choices"]["head"] == "own"
    assert record.provenance["head_source"] == {
        "class": "SLModelForSequenceClassification",
        "module": "modeling_sl_model",
        "sha256": sha,
        "found_by": "modeling_code",
    }
    saved = json.loads((cfg.run_dir / "model" / "config.json").read_text())
    assert saved["architectures"] == ["SLModelForSequenceClassification"]


def test_without_an_own_head_class_paper_uses_ours_and_standard_by_default(
    with_heads, released_style, tmp_path, capsys
):
    import benchmarks.kinds.sc

    for model, protocol in ((released_style, "paper"), (with_heads, "standard")):
        values = _values(model, tmp_path / protocol, trust_remote_code=True, save_weights=True, protocol=protocol)
        record, _ = run(load_run_config(values, CONFIG_DIR / "toy.yaml"))
        assert record.provenance["protocol_choices"]["head"] == "package"
        source = record.provenance["head_source"]
        assert (source["class"], source["module"], source["found_by"]) == (
            "SequenceClassifier",
            "benchmarks.kinds.sc",
            "package",
        )
        assert source["sha256"] == sha256_of(benchmarks.kinds.sc.__file__)
        run_dir = load_run_config(values, CONFIG_DIR / "toy.yaml").run_dir
        assert (run_dir / "model" / "head.safetensors").is_file()  # our linear head
        said = [line for line in capsys.readouterr().out.splitlines() if line.startswith("head:")]
        fallback = (
            f"head: {model}: uses this package's head (the checkpoint ships no AutoModelForSequenceClassification "
            "class of its own)"
        )
        # one line where paper falls back to ours, none where standard asks for ours
        assert said == ([fallback] if protocol == "paper" else [])


def sha256_of(path) -> str:
    import hashlib
    from pathlib import Path

    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_head_own_on_a_checkpoint_without_the_class_is_one_line_naming_both(released_style, tmp_path, capsys):
    cfg = load_run_config(
        _values(released_style, tmp_path, trust_remote_code=True, head="own"), CONFIG_DIR / "toy.yaml"
    )
    with pytest.raises(ModelLoadError, match="ships no AutoModelForSequenceClassification class"):
        run(cfg)
    argv = ["run", "--model", str(released_style), "--task", "squad", "--lr", "1e-3", "--seed", "0"]
    argv += ["--data-root", str(TOY_DATA_ROOT), "--out", str(tmp_path), "--trust-remote-code"]
    assert cli([*argv, "--set", "head=own", "--set", "protocol=standard"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert str(released_style) in line and "ships no AutoModelForQuestionAnswering class" in line
    assert "head: package" in line  # the fix
    assert not list(tmp_path.iterdir())  # refused before anything is written


def test_an_own_head_gives_the_checkpoint_class_logits_on_the_same_body(with_heads):
    """The own TC class (a linear layer on the body, like ours) loads the same body weights; with
    our head set to its weights, both give the same logits: `head: own` only swaps the head."""
    import torch

    from benchmarks.kinds import tc

    own = load_backbone(
        str(with_heads), trust_remote_code=True, task_class="AutoModelForTokenClassification", num_labels=3
    )
    assert type(own.model).__name__ == "SLModelForTokenClassification"
    ours = tc.TokenClassifier(load_backbone(str(with_heads), trust_remote_code=True), 3).eval()
    ours.head.load_state_dict(own.model.classifier.state_dict())
    batch = {"input_ids": torch.tensor([[101, 2023, 2003, 102, 0]]), "attention_mask": torch.tensor([[1, 1, 1, 1, 0]])}
    with torch.no_grad():
        logits = tc.TokenClassifier(own, 3, own_head=True).eval().logits(batch)
        assert logits.shape == (1, 5, 3) and torch.allclose(logits, ours.logits(batch), atol=1e-6)


def test_protocol_deltas_runs_no_shipped_code_unless_asked(tmp_path, capsys):
    """It passed trust_remote_code=True to every run: a tampered modeling file in --model ran
    without the user asking (docs/reliability.md)."""
    from benchmarks import protocol_deltas

    model = save_remote_code_model(tmp_path / "tampered")
    marker = tmp_path / "RAN"
    modeling = model / "modeling_sl_model.py"
    modeling.write_text(f"open({str(marker)!r}, 'w').close()\n" + modeling.read_text())
    world = tmp_path / "world"
    (world / "tasks").mkdir(parents=True)
    (world / "world.jsonl").write_text('{"text": "a b c"}\n')
    out = tmp_path / "deltas"
    assert protocol_deltas.main(["--world", str(world), "--model", str(model), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--trust-remote-code" in err[0], err
    assert not marker.exists() and not out.exists()
    # a checkpoint of ours loads without its shipped code; the `head` setting, which runs it, is left out
    models = protocol_deltas.checkpoints(world, tmp_path / "ours", "ours", out)
    assert "head" not in models and not (out / "models" / "ours-own-heads").exists()
