"""`python -m pretraining` end to end on the embedded corpus, and its clear errors."""

import json
import shutil

import pytest
import torch
import yaml
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import AutoModel, PreTrainedTokenizerFast

import pretraining
from contracts.layout import FINISHED_FILE
from contracts.paper import TOY_BATCH_SEQUENCES
from pretraining.__main__ import main as cli
from pretraining.config import ConfigError, load_pretrain_config
from tests.pretraining.toy_runs import prepare_embedded_data


@pytest.fixture(scope="module")
def embedded_data(tmp_path_factory):
    return prepare_embedded_data(tmp_path_factory.mktemp("data") / "embedded-64")


def _write_config(tmp_path, data_path, name="e2e", **extra):
    from pretraining import registry

    body = registry.config_dict(
        registry.RUNS["610m-clm-3k-mlm40-12k"], "toy", runs_root=str(tmp_path), data_path=str(data_path)
    )
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
    rows = [json.loads(line) for line in (run_dir / "loss.jsonl").read_text().splitlines()]
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
    PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    ).save_pretrained(tmp_path / "no-mask-tok")
    no_mask = _write_config(tmp_path, embedded_data, name="nomask")
    assert cli(["train", str(no_mask), f"tokenizer={tmp_path / 'no-mask-tok'}"]) == 2
    assert "no mask token" in capsys.readouterr().err
    assert not (tmp_path / "nomask").exists()  # nothing written for a run that cannot start


def test_resume_on_the_streaming_loader_gives_the_uninterrupted_losses(tmp_path, embedded_data):
    from pretraining.train import train
    from tests.pretraining.conftest import interrupt_at

    losses = {}
    for name in ("straight", "resumed"):
        cfg = load_pretrain_config(
            _write_config(tmp_path, embedded_data, name=name),
            ["train.max_steps=8", "objective.switch_at=3", "train.resume_interval=4"],
        )
        if name == "resumed":
            with pytest.raises(KeyboardInterrupt):
                train(cfg, extra_callbacks=[interrupt_at(6)])
        train(cfg)
        losses[name] = [json.loads(line)["loss"] for line in (tmp_path / name / "loss.jsonl").read_text().splitlines()]
    assert len(losses["resumed"]) == 8
    assert losses["resumed"] == pytest.approx(losses["straight"], abs=1e-6)


def test_cpt_reads_the_samples_after_its_base_run_and_resumes_there(tmp_path, embedded_data, capsys):
    """data.start_sample = base steps x batch: the CPT run's first batch is the base run's next one,
    also after an interruption (docs/data.md)."""
    from composer import Callback

    from pretraining.train import train
    from tests.pretraining.conftest import interrupt_at

    class Batches(Callback):
        """The input ids of every step (CLM leaves them as loaded)."""

        def __init__(self):
            self.seen = []

        def after_dataloader(self, state, logger):
            self.seen.append(state.batch["input_ids"].clone())

    clm = ["objective.kind=clm", "objective.switch_at=null"]
    base_batches = Batches()
    base_cfg = load_pretrain_config(_write_config(tmp_path, embedded_data, name="base"), [*clm, "train.max_steps=6"])
    train(base_cfg, extra_callbacks=[base_batches])
    batch = base_cfg.train.global_batch_size  # the toy batch (contracts.paper.TOY_BATCH_SEQUENCES)
    assert f"this run reads samples 0 to {6 * batch - 1} (6 steps x {batch})" in capsys.readouterr().out

    cpt = [
        *clm,
        "train.max_steps=2",
        "schedule.warmup=0",
        "schedule.decay=1",
        "train.resume_interval=1",
        f"data.start_sample={4 * batch}",
        f"init.path={tmp_path / 'base' / 'hf' / 'step-6'}",
    ]
    straight = Batches()
    train(load_pretrain_config(_write_config(tmp_path, embedded_data, name="cpt"), cpt), extra_callbacks=[straight])
    assert f"this run reads samples {4 * batch} to {6 * batch - 1} (2 steps x {batch})" in capsys.readouterr().out
    assert len(straight.seen) == 2
    for cpt_batch, base_batch in zip(straight.seen, base_batches.seen[4:]):
        assert torch.equal(cpt_batch, base_batch)

    resumed = Batches()
    cfg = load_pretrain_config(_write_config(tmp_path, embedded_data, name="cpt-resumed"), cpt)
    with pytest.raises(KeyboardInterrupt):
        train(cfg, extra_callbacks=[interrupt_at(2)])  # resumes from its step-1 checkpoint
    train(cfg, extra_callbacks=[resumed])
    assert len(resumed.seen) == 1 and torch.equal(resumed.seen[0], base_batches.seen[5])
    saved = yaml.safe_load((tmp_path / "cpt" / "config.yaml").read_text())
    assert saved["config"]["data"]["start_sample"] == 4 * batch


def test_train_refuses_to_repeat_samples(tmp_path, embedded_data, capsys):
    samples = json.loads((embedded_data / "manifest.json").read_text())["counts"]["samples"]
    config = _write_config(tmp_path, embedded_data, name="long")
    steps = samples // TOY_BATCH_SEQUENCES + 1  # the toy batch
    assert cli(["train", str(config), f"train.max_steps={steps}"]) == 2
    err = capsys.readouterr().err
    assert f"holds {samples:,} samples" in err and "samples would repeat" in err and "allow_repeats" in err
    assert cli(["train", str(config), "data.start_sample=100000000"]) == 2
    assert "start_sample lies beyond the data" in capsys.readouterr().err
    assert not (tmp_path / "long").exists()


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_settings_found_wrong_late_are_one_line_before_anything_is_written(tmp_path, embedded_data, capsys):
    """optimizer.lr=-1 reached torch.optim and train.resume_interval=0 the first step, both after
    config.yaml was written; a shard cut short was an IndexError mid-training (docs/reliability.md)."""
    config = _write_config(tmp_path, embedded_data)
    for override, message in (
        ("optimizer.lr=-1", "optimizer.lr must be > 0, got -1.0"),
        ("train.resume_interval=0", "train.resume_interval must be >= 1"),
        ("train.keep_resume_checkpoints=0", "train.keep_resume_checkpoints must be >= 1, or -1"),
    ):
        assert cli(["train", str(config), override]) == 2
        assert message in _one_line(capsys)
    cut = tmp_path / "cut"
    shutil.copytree(embedded_data, cut)
    shard = next(cut.glob("*.mds.zstd"))
    shard.write_bytes(shard.read_bytes()[:1000])
    assert cli(["train", str(_write_config(tmp_path, cut, name="cut-run"))]) == 2
    assert f"{shard}: 1000 bytes, index.json records" in _one_line(capsys)
    assert not (tmp_path / "e2e").exists() and not (tmp_path / "cut-run").exists()


def test_a_failed_attempt_that_saved_nothing_does_not_hold_its_run_dir_to_its_config(tmp_path, embedded_data, capsys):
    from contracts.config import save_resolved_config

    config = _write_config(tmp_path, embedded_data)
    fixed = ["train.max_steps=4", "objective.switch_at=2", "train.checkpoint_steps=[4]"]
    run_dir = tmp_path / "e2e"
    save_resolved_config(load_pretrain_config(config, [*fixed, "optimizer.lr=0.5"]), run_dir)  # the failed attempt
    (run_dir / "checkpoints").mkdir()
    (run_dir / "checkpoints" / "ba2-rank0.pt").write_bytes(b"saved state")
    assert cli(["train", str(config), *fixed]) == 2  # a checkpoint of the other config: refused, as before
    refusal = _one_line(capsys)
    assert "holds an unfinished run of another config (optimizer.lr 0.5 there, " in refusal  # the field named
    assert "here; hash " in refusal and "(and " not in refusal  # the only difference
    shutil.rmtree(run_dir / "checkpoints")
    assert cli(["train", str(config), *fixed]) == 0  # nothing saved: the corrected command runs
    assert "saved no checkpoint or weights; starting this config afresh" in capsys.readouterr().out
    assert (run_dir / FINISHED_FILE).exists() and len((run_dir / "loss.jsonl").read_text().splitlines()) == 4


def test_a_config_cannot_import_code_from_outside_composer_and_ours_unless_trusted(tmp_path, embedded_data, capsys):
    """`train.callbacks: [{factory: os:system, ...}]` ran its command before any check (docs/reliability.md)."""
    from pretraining.train import PretrainError, train

    marker = tmp_path / "RAN"
    hostile = [{"factory": "os:system", "kwargs": {"command": f"touch {marker}"}}]
    config = _write_config(tmp_path, embedded_data, callbacks=hostile)
    assert cli(["train", str(config)]) == 2
    line = _one_line(capsys)
    assert f"{config}: train.callbacks: factory 'os:system' is outside Composer" in line and "--trust-callbacks" in line
    with pytest.raises(PretrainError, match="--trust-callbacks"):
        train(load_pretrain_config(config))
    assert not marker.exists() and not (tmp_path / "e2e").exists()
    from pretraining.config import check_callbacks

    ours = load_pretrain_config(config, ["train.callbacks=[{factory: 'composer.callbacks:SpeedMonitor'}]"])
    check_callbacks(ours.train.callbacks, trust=False)  # Composer's (and this package's) need no flag


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"windw_size": 5}, "kwargs ['windw_size'] do not fit its arguments"),  # a misspelt argument
        ({"window_size": "five"}, "refused its kwargs"),  # a value of the wrong type
    ],
)
def test_callback_arguments_that_do_not_fit_are_one_line_before_the_run(tmp_path, embedded_data, capsys, kwargs, says):
    """Issue 66, item 7: a callback argument the class does not take was a 26-line TypeError."""
    callbacks = [{"factory": "composer.callbacks:SpeedMonitor", "kwargs": kwargs}]
    config = _write_config(tmp_path, embedded_data, callbacks=callbacks)
    assert cli(["train", str(config)]) == 2
    line = _one_line(capsys)
    assert "train.callbacks factory 'composer.callbacks:SpeedMonitor'" in line and says in line, line
    assert not (tmp_path / "e2e").exists()  # before the run folder is made


def test_a_config_cannot_write_a_module_into_the_checkout_and_then_import_it(tmp_path, embedded_data, capsys):
    """Issue 56: any `module:attribute` of our packages was called with the config's kwargs, so
    `contracts.provenance:atomic_write_text` wrote `pretraining/pwn_cb.py` without --trust-callbacks,
    and a second config naming `pretraining.pwn_cb:x` imported and ran it."""
    from pathlib import Path

    from pretraining.train import PretrainError, train

    planted = Path(pretraining.__file__).parent / "pwn_cb.py"
    marker = tmp_path / "RAN"
    write = [
        {
            "factory": "contracts.provenance:atomic_write_text",
            "kwargs": {"path": str(planted), "text": f"import pathlib\npathlib.Path({str(marker)!r}).touch()\nx = 1\n"},
        }
    ]
    try:
        config = _write_config(tmp_path, embedded_data, callbacks=write, name="write")
        assert cli(["train", str(config)]) == 2
        assert "outside Composer's and this package's callback modules" in _one_line(capsys)
        with pytest.raises(PretrainError, match="--trust-callbacks"):  # the Python API, not only the CLI
            train(load_pretrain_config(config))
        assert not planted.exists()
        run = _write_config(tmp_path, embedded_data, callbacks=[{"factory": "pretraining.pwn_cb:x"}], name="run")
        assert cli(["train", str(run)]) == 2
        assert "pretraining.pwn_cb:x" in _one_line(capsys)
        # a trusted module's function (not a Callback class) is refused after its import, before its call
        from pretraining.config import load_pretrain_config as load
        from pretraining.train import configured_callbacks

        speed = load(config, ["train.callbacks=[{factory: 'composer.callbacks:SpeedMonitor'}]"]).train.callbacks
        assert type(configured_callbacks(speed)[0]).__name__ == "SpeedMonitor"
        spec = type(speed[0])(factory="pretraining.monitoring:monitor_callbacks", kwargs={"window": 1})
        with pytest.raises(PretrainError, match="not a Callback class"):
            configured_callbacks([spec])
    finally:
        planted.unlink(missing_ok=True)
    assert not marker.exists()


def test_a_shard_corrupted_within_its_size_is_one_line_not_a_traceback(tmp_path, embedded_data, capsys):
    """Same size as index.json records, other contents: an IndexError traceback mid-training."""
    bad = tmp_path / "bad"
    shutil.copytree(embedded_data, bad)
    for raw in bad.glob("*.mds"):  # streaming's decompressed copies: read the corrupted archive instead
        raw.unlink()
    shard = next(bad.glob("*.mds.zstd"))
    data = bytearray(shard.read_bytes())
    data[1000:1100] = b"x" * 100
    shard.write_bytes(bytes(data))
    config = _write_config(tmp_path, bad, name="bad-run")
    assert cli(["train", str(config), "train.max_steps=4", "objective.switch_at=2"]) == 2
    line = _one_line(capsys)
    assert f"{bad}: sample" in line and "cannot be read" in line and "verify-data" in line, line


def test_a_global_batch_of_zero_is_one_line_before_anything_is_written(tmp_path, capsys):
    """Issue 35 item 14: it was a traceback from the data loader, after the data was opened."""
    config = _write_config(tmp_path, tmp_path / "no-data", name="zero")
    assert cli(["train", str(config), "train.global_batch_size=0"]) == 2
    err = capsys.readouterr().err
    assert "train.global_batch_size 0 must be >= 1" in err and err.count("\n") == 1, err
    assert not (tmp_path / "zero").exists()


def test_the_cli_choices_are_the_names_the_model_and_kernels_check():
    """pretraining.options keeps the choices free of torch (issue 77); modeling.py keeps its own
    tuple (it is copied verbatim into exports), so the two must not drift."""
    from pretraining import kernels, modeling, options

    assert options.ATTENTION_BACKENDS == modeling.ATTENTION_BACKENDS
    assert kernels.LOSS_KERNELS is options.LOSS_KERNELS and kernels.BLOCK_KERNELS is options.BLOCK_KERNELS


@pytest.mark.parametrize(
    "first, then",
    [
        ("import pretraining", "import transformers"),
        ("import transformers", "import pretraining"),
        ("import pretraining.modeling", "pass"),  # modeling.py imports transformers while it loads
    ],
)
def test_importing_pretraining_registers_the_model_type_whatever_comes_first(first, then):
    """The registration waits for transformers (pretraining/__init__.py); a fresh interpreter is the
    boundary under test: `import pretraining` alone loads no torch, and the Auto classes know the
    model type once transformers is imported, before or after, or by modeling.py itself."""
    import subprocess
    import sys

    script = "\n".join(
        [
            "import sys",
            first,
            "assert 'torch' not in sys.modules, 'torch loaded'" if first == "import pretraining" else "",
            then,
            "from transformers import AutoConfig, AutoModel",
            "from transformers.models.auto.configuration_auto import CONFIG_MAPPING",
            "assert 'mlmclm_llama' in CONFIG_MAPPING",
            "config = AutoConfig.for_model('mlmclm_llama', hidden_size=16, intermediate_size=32,"
            " num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1, vocab_size=32)",
            "print(type(AutoModel.from_config(config)).__name__)",
        ]
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "MlmClmModel"
