"""The harness on checkpoints that ship their own model code (like the paper's released ones),
behind the one remote-code switch."""

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
