"""`python -m pretraining` end to end on the embedded corpus, and its clear errors."""
import json

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import AutoModel, PreTrainedTokenizerFast

import pretraining  # noqa: F401
from contracts.layout import FINISHED_FILE
from pretraining.__main__ import main as cli
from pretraining.config import ConfigError, load_pretrain_config


@pytest.fixture(scope="module")
def embedded_data(tmp_path_factory):
    out = tmp_path_factory.mktemp("data") / "embedded-64"
    assert cli(["prepare-data", "--input", "embedded", "--seq-len", "64", "--max-documents", "30",
                "--out", str(out), "--no-progress"]) == 0
    return out


def _write_config(tmp_path, data_path, name="e2e", **extra):
    from pretraining import registry

    body = registry.config_dict(registry.RUNS["610m-clm-3k-mlm40-12k"],
                                "toy", runs_root=str(tmp_path), data_path=str(data_path))
    body["name"], body["run_dir"] = name, str(tmp_path / name)
    body["data"]["seq_len"] = 64
    body["model"]["preset"] = "toy_s"
    body["train"].update(progress_bar=False, **extra)
    import yaml
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(body))
    return path


def test_train_end_to_end_on_the_embedded_corpus(tmp_path, embedded_data, capsys):
    config = _write_config(tmp_path, embedded_data)
    assert cli(["train", str(config), "train.max_steps=8", "objective.switch_at=3"]) == 0
    run_dir = tmp_path / "e2e"
    rows = [json.loads(l) for l in (run_dir / "loss.jsonl").read_text().splitlines()]
    assert [r["objective"] for r in rows] == ["clm"] * 3 + ["mlm"] * 5
    assert (run_dir / FINISHED_FILE).exists()
    model = AutoModel.from_pretrained(run_dir / "hf" / "step-8")  # tokenizer files saved too
    assert (run_dir / "hf" / "step-8" / "tokenizer.json").exists() and model.config.vocab_size == 8192
    # Never overwrite a finished run.
    assert cli(["train", str(config), "train.max_steps=8", "objective.switch_at=3"]) == 2
    assert "finished run" in capsys.readouterr().err


def test_clear_errors(tmp_path, embedded_data, capsys):
    config = _write_config(tmp_path, embedded_data)
    with pytest.raises(ConfigError, match="train.max_step: unknown key"):
        load_pretrain_config(config, ["train.max_step=3"])
    assert cli(["train", str(config), "optimizer.betaz=1"]) == 2
    assert "unknown key" in capsys.readouterr().err

    missing = _write_config(tmp_path, tmp_path / "no-such-shards", name="missing")
    assert cli(["train", str(missing)]) == 2
    assert "no prepared data" in capsys.readouterr().err

    backend = Tokenizer(models.WordLevel({"<s>": 0, "</s>": 1, "a": 2, "<unk>": 3}, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<s>", eos_token="</s>",
                            unk_token="<unk>").save_pretrained(tmp_path / "no-mask-tok")
    no_mask = _write_config(tmp_path, embedded_data, name="nomask")
    assert cli(["train", str(no_mask), f"tokenizer={tmp_path / 'no-mask-tok'}"]) == 2
    assert "no mask token" in capsys.readouterr().err
    assert not (tmp_path / "nomask").exists()  # nothing written for a run that cannot start


def test_resume_on_the_streaming_loader_gives_the_uninterrupted_losses(tmp_path, embedded_data):
    from pretraining.train import train
    from tests.pretraining.conftest import interrupt_at

    losses = {}
    for name in ("straight", "resumed"):
        cfg = load_pretrain_config(_write_config(tmp_path, embedded_data, name=name),
                              ["train.max_steps=8", "objective.switch_at=3", "train.resume_interval=4"])
        if name == "resumed":
            with pytest.raises(KeyboardInterrupt):
                train(cfg, extra_callbacks=[interrupt_at(6)])
        train(cfg)
        losses[name] = [json.loads(l)["loss"] for l in (tmp_path / name / "loss.jsonl").read_text().splitlines()]
    assert len(losses["resumed"]) == 8
    assert losses["resumed"] == pytest.approx(losses["straight"], abs=1e-6)
