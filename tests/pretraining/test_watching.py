"""Watching a run (docs/watching.md): the `loggers:` section builds Composer's own loggers, checked
before anything is written; SpeedMonitor, LRMonitor reach them with the model's window-aware FLOPs.

tensorboard and mlflow(-skinny) are in requirements.lock (the toy path never imports them), so their
read-back tests run in CI; they skip in an environment without them. wandb does not import with the
lock's protobuf: its wiring is checked through a stand-in `wandb` module (tests/fake_wandb.py) that
records what Composer's WandBLogger hands it."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from contracts.config import ConfigError
from contracts.loggers import DEFAULT_PROJECT, check_logger_section, logger_arguments
from pretraining.flops import FlopShape, attention_pairs, model_flops, needed_flops
from pretraining.train import PretrainError, train
from tests.fake_wandb import fake_wandb, logged_metrics, wandb_calls  # noqa: F401 (fixture)
from tests.pretraining.conftest import TOY_IDS, toy_dataloader, toy_run_config

ROOT = Path(__file__).resolve().parents[2]
SCALARS = ("loss/train/total", "lr-AdamW/group0", "throughput/batches_per_sec", "throughput/device/flops_per_sec")


def _run(cfg):
    return train(cfg, dataloader=toy_dataloader(), token_ids=TOY_IDS)


@pytest.mark.usefixtures("fake_wandb")
def test_a_configured_logger_gets_loss_lr_throughput_and_flops_offline(tmp_path):
    cfg = toy_run_config(tmp_path, loggers={"wandb": {"project": "toy"}}, monitor={"window": 4})
    run_dir = _run(cfg)
    calls = [json.loads(line) for line in wandb_calls(tmp_path).read_text().splitlines()]
    (init,) = [c for c in calls if c["call"] == "init"]
    assert init["kwargs"]["mode"] == "offline" and init["kwargs"]["dir"] == str(run_dir.absolute())
    assert init["kwargs"]["project"] == "toy" and init["kwargs"]["name"] == "toy"
    logged = logged_metrics(tmp_path)
    for key in SCALARS:
        assert key in logged, f"{key} not logged; got {sorted(logged)}"
    losses = [json.loads(line) for line in (run_dir / "loss.jsonl").read_text().splitlines()]
    assert len(losses) == 24  # the file log is written as always
    # Composer counts steps from 0: the tracker's step n - 1 is loss.jsonl's step n, same loss and LR
    # (LRMonitor logs the LR of each step from the second on)
    assert [logged["loss/train/total"][r["step"] - 1] for r in losses] == pytest.approx([r["loss"] for r in losses])
    lrs = logged["lr-AdamW/group0"]
    assert sorted(lrs) == list(range(1, 25))  # at each step's end: the LR of the next step
    assert [lrs[r["step"] - 1] for r in losses[1:]] == pytest.approx([r["lr"] for r in losses[1:]], abs=1e-12)
    # throughput once a window of 4 steps has passed (from step 5), FLOP/s from the model's count
    assert min(logged["throughput/batches_per_sec"]) == 5 and all(
        v > 0 for v in logged["throughput/batches_per_sec"].values()
    )
    assert all(v > 0 for v in logged["throughput/device/flops_per_sec"].values())
    if torch.cuda.is_available():  # MemoryMonitor; MFU against Composer's table of known GPUs
        assert any(key.startswith("memory/") for key in logged)
    else:  # no MemoryMonitor, and no peak to compute an MFU against (none configured)
        assert "throughput/device/mfu" not in logged and not any(key.startswith("memory/") for key in logged)
    assert calls[-1] == {"call": "finish", "exit_code": 0}
    assert "loggers" in yaml.safe_load((run_dir / "config.yaml").read_text())["config"]


@pytest.mark.usefixtures("fake_wandb")
def test_mfu_is_logged_against_a_configured_peak(tmp_path):
    cfg = toy_run_config(tmp_path, loggers={"wandb": {}}, monitor={"window": 3, "peak_flops": 1e9})
    _run(cfg)
    logged = logged_metrics(tmp_path)
    mfu, flops = logged["throughput/device/mfu"], logged["throughput/device/flops_per_sec"]
    assert sorted(mfu) == sorted(flops) == list(range(4, 25))  # a window of 3 steps, then each step
    assert [mfu[s] for s in sorted(mfu)] == pytest.approx([flops[s] / 1e9 for s in sorted(mfu)])
    # issue 82: the same MFU in model FLOPs (the head at every position), over the same window; the
    # MLM step's head runs at its masked positions only, so the model count is the larger
    model_mfu = logged["throughput/device/mfu_model_flops"]
    model_flops_s = logged["throughput/device/model_flops_per_sec"]
    assert sorted(model_mfu) == sorted(model_flops_s) == list(range(4, 25))
    assert [model_mfu[s] for s in sorted(mfu)] == pytest.approx([model_flops_s[s] / 1e9 for s in sorted(mfu)])
    assert all(model_mfu[s] > mfu[s] for s in mfu)


@pytest.mark.usefixtures("fake_wandb")
def test_a_logger_can_be_added_when_a_run_resumes(tmp_path):
    """loggers and monitor are not part of the run's identity (config hash): resuming with a tracker works."""
    from tests.pretraining.conftest import interrupt_at

    cfg = toy_run_config(tmp_path, train={"max_steps": 16, "resume_interval": 4})
    with pytest.raises(KeyboardInterrupt):
        train(cfg, dataloader=toy_dataloader(), token_ids=TOY_IDS, extra_callbacks=[interrupt_at(9)])
    watched = toy_run_config(tmp_path, train={"max_steps": 16, "resume_interval": 4}, loggers={"wandb": {}})
    run_dir = _run(watched)
    assert (run_dir / "FINISHED.json").is_file()
    assert sorted(logged_metrics(tmp_path)["loss/train/total"]) == list(range(8, 16))  # from the step-8 checkpoint


def _cli_train(tmp_path, capsys, loggers) -> tuple[int, list[str]]:
    """`python -m pretraining train` of a toy config with this loggers section: exit status, stderr lines."""
    from contracts.config import config_to_dict
    from pretraining.__main__ import main

    body = config_to_dict(toy_run_config(tmp_path, name="cli"))
    body["loggers"] = loggers
    path = tmp_path / "cli.yaml"
    path.write_text(yaml.safe_dump(body))
    capsys.readouterr()
    status = main(["train", str(path)])
    return status, capsys.readouterr().err.strip().splitlines()


@pytest.mark.parametrize(
    "loggers, message",
    [
        ({"tensorbord": {}}, "loggers.tensorbord: unknown logger; use one of ['mlflow', 'tensorboard', 'wandb']"),
        ({"wandb": {"api_key": "abc"}}, "loggers.wandb.api_key: secrets are never written into a saved config"),
        (
            {"mlflow": {"tracking_uri": "https://me:pw@mlflow.example"}},
            "loggers.mlflow.tracking_uri: secrets are never written",
        ),
        # issue 66, item 7: values of the wrong type reached the class unchecked
        ({"tensorboard": {"flush_interval": "often"}}, "loggers.tensorboard.flush_interval: 'often' is not an int"),
        ({"tensorboard": {"flush_interval": True}}, "loggers.tensorboard.flush_interval: True is not an int"),
        ({"mlflow": {"tags": ["a"]}}, "loggers.mlflow.tags: ['a'] is not a dict or null"),
        ({"mlflow": {"tracking_uri": 3}}, "loggers.mlflow.tracking_uri: 3 is not a str or null"),
    ],
)
def test_a_bad_logger_section_is_one_line_before_anything_is_written(tmp_path, capsys, loggers, message):
    status, lines = _cli_train(tmp_path, capsys, loggers)
    assert status == 2 and len(lines) == 1 and message in lines[0], lines
    assert not (tmp_path / "cli").exists()


@pytest.mark.usefixtures("fake_wandb")
def test_a_logger_argument_composer_does_not_take_is_one_line(tmp_path):
    cfg = toy_run_config(tmp_path, loggers={"wandb": {"projekt": "x"}})
    with pytest.raises(
        PretrainError, match=r"^loggers\.wandb\.projekt: not an argument of composer\.loggers\.WandBLogger"
    ):
        _run(cfg)
    assert not (tmp_path / "toy").exists()


def test_a_tracker_package_that_does_not_import_is_one_line(tmp_path, monkeypatch):
    """As wandb < 0.19 (Composer 0.32.1's range) does with protobuf 7: found, but its import fails."""
    package = tmp_path / "broken_site" / "wandb"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise ImportError(\"cannot import name 'Deprecated'\")\n")
    monkeypatch.syspath_prepend(str(package.parent))
    monkeypatch.delitem(sys.modules, "wandb", raising=False)
    cfg = toy_run_config(tmp_path, loggers={"wandb": {}})
    with pytest.raises(
        PretrainError, match=r"^loggers\.wandb: the wandb package is installed but does not import"
    ) as err:
        _run(cfg)
    assert "ImportError: cannot import name 'Deprecated'" in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "toy").exists()


def test_a_missing_tracker_package_is_one_line_with_the_install_line(tmp_path, capsys, monkeypatch):
    """A machine without tensorboard (the lock installs it; a user's own environment may not)."""
    find_spec = importlib.util.find_spec
    absent = lambda name, *a: None if name == "tensorboard" else find_spec(name, *a)  # noqa: E731
    monkeypatch.setattr(importlib.util, "find_spec", absent)
    status, (line,) = _cli_train(tmp_path, capsys, {"tensorboard": {}})
    assert status == 2
    assert (
        "loggers.tensorboard: the tensorboard package is not installed here; pip install 'mosaicml[tensorboard]=="
        in line
    )
    assert not (tmp_path / "cli").exists()


def test_offline_defaults_and_checks_are_pure(tmp_path):
    assert logger_arguments("tensorboard", {}, tmp_path) == {"log_dir": str(tmp_path / "tensorboard")}
    mlflow = logger_arguments("mlflow", {}, tmp_path)
    assert mlflow["tracking_uri"] == (tmp_path / "mlruns").as_uri() and mlflow["tracking_uri"].startswith("file:")
    assert logger_arguments("mlflow", {"tracking_uri": "rel/store"}, tmp_path)["tracking_uri"].startswith("file:///")
    wandb = logger_arguments("wandb", {"init_kwargs": {"mode": "disabled"}}, tmp_path)
    assert wandb["init_kwargs"] == {"mode": "disabled", "dir": str(tmp_path)}
    check_logger_section({"mlflow": {"tracking_uri": "file:///scratch/mlruns"}, "tensorboard": None})
    with pytest.raises(ValueError, match=r"loggers\.wandb\.init_kwargs\.settings\.api_key"):
        check_logger_section({"wandb": {"init_kwargs": {"settings": {"api_key": "x"}}}})
    with pytest.raises(ConfigError, match=r"loggers\.wandb: expected a mapping"):
        toy_run_config(tmp_path, loggers={"wandb": "offline"})


def test_flops_count_attention_over_the_windows_not_the_block():
    shape = FlopShape(layers=2, attention_width=8, body_parameters=100, head_parameters=50)
    segments = torch.tensor([[0, 0, 0, 1], [0, 1, 1, 2]])  # windows of 3+1 and 1+2+1 tokens
    assert attention_pairs(segments) == (9 + 1) + (1 + 4 + 1)
    labels = torch.tensor([[5, -100, -100, 7], [-100, -100, 3, -100]])
    expected = 6 * 100 * 8 + 6 * 50 * 3 + 12 * 2 * 8 * 16
    assert needed_flops(shape, segments, labels) == expected
    # the model-FLOPs count (6N + attention): the head at all 8 positions, not the 3 labelled
    assert model_flops(shape, segments) == expected + 6 * 50 * (8 - 3)
    whole = torch.zeros(2, 4, dtype=torch.long)  # one window per block: the dense count
    assert attention_pairs(whole) == 2 * 16


def test_flops_of_the_model_match_its_parameter_count():
    from pretraining.flops import flop_shape
    from pretraining.presets import config_from_preset, count_parameters_on_meta

    config = config_from_preset("610m")
    shape = flop_shape(config)
    counts = count_parameters_on_meta(config)
    assert shape.body_parameters == counts["body"] and shape.head_parameters == counts["lm_head"]
    assert shape.layers == 26 and shape.attention_width == 1152


@pytest.mark.skipif(
    importlib.util.find_spec("tensorboard") is None,
    reason="tensorboard not installed (optional: pip install 'mosaicml[tensorboard]')",
)
def test_tensorboard_event_files_hold_loss_lr_and_throughput(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    cfg = toy_run_config(tmp_path, loggers={"tensorboard": {}}, monitor={"window": 4})
    run_dir = _run(cfg)
    events = EventAccumulator(str(run_dir / "tensorboard" / cfg.name)).Reload()  # Composer: <log_dir>/<run name>
    tags = set(events.Tags()["scalars"])
    assert set(SCALARS) <= tags, sorted(tags)
    losses = [json.loads(line)["loss"] for line in (run_dir / "loss.jsonl").read_text().splitlines()]
    scalars = events.Scalars("loss/train/total")
    assert [e.step for e in scalars] == list(range(24)) and [e.value for e in scalars] == pytest.approx(
        losses, rel=1e-6
    )


@pytest.mark.skipif(
    importlib.util.find_spec("mlflow") is None, reason="mlflow not installed (optional: pip install 'mosaicml[mlflow]')"
)
def test_an_mlflow_file_store_records_the_same_metrics(tmp_path):
    from mlflow.tracking import MlflowClient

    cfg = toy_run_config(tmp_path, loggers={"mlflow": {}}, monitor={"window": 4})  # the default experiment
    run_dir = _run(cfg)
    client = MlflowClient(tracking_uri=(run_dir / "mlruns").as_uri())
    (run,) = client.search_runs([client.get_experiment_by_name(DEFAULT_PROJECT).experiment_id])
    keys = set(run.data.metrics)
    assert set(SCALARS) <= keys, sorted(keys)
    history = sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, "loss/train/total"))
    losses = [json.loads(line)["loss"] for line in (run_dir / "loss.jsonl").read_text().splitlines()]
    assert [step for step, _ in history] == list(range(24)) and [v for _, v in history] == pytest.approx(losses)

    # docs/watching.md's read-back block, as a user runs it in a new shell (no MLFLOW_ALLOW_FILE_STORE)
    text = (ROOT / "docs" / "watching.md").read_text()
    block = text.split("<!-- mlflow read-back -->\n```bash\n", 1)[1].split("```", 1)[0]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    read = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block.replace("/scratch/me/mlruns", str(run_dir / "mlruns"))],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert read.returncode == 0, read.stderr[-2000:]
    assert DEFAULT_PROJECT in read.stdout and run.info.run_name in read.stdout, read.stdout
    assert f"{losses[-1]:.6f}"[:6] in read.stdout, read.stdout  # the last loss, as pandas prints it
    refused = subprocess.run(
        ["mlflow", "experiments", "search"], env={**env, "MLFLOW_TRACKING_URI": (run_dir / "mlruns").as_uri()},
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert "MLFLOW_ALLOW_FILE_STORE=true" in refused.stderr  # why the block sets it


def test_an_mlflow_server_that_does_not_answer_is_one_line_before_anything_is_written(tmp_path, capsys, monkeypatch):
    """Issue 66, item 7: a logger pointed at an MLflow server that accepts and never answers did not
    return within 150 s (MLflow's defaults: 120 s a request, 7 retries), then a traceback. Our
    defaults are 30 s and 2 retries (MLFLOW_HTTP_REQUEST_*; a user's own values win: 1 s, 1 retry
    here), and the failure is one line naming the logger."""
    import socket
    import threading

    from pretraining.monitoring import MLFLOW_HTTP_DEFAULTS

    server, held, stop = socket.create_server(("127.0.0.1", 0)), [], threading.Event()
    server.settimeout(0.1)

    def accept_and_stay_silent():
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept_and_stay_silent, daemon=True)
    thread.start()
    for variable, value in zip(MLFLOW_HTTP_DEFAULTS, ("1", "1", "0")):
        monkeypatch.setenv(variable, value)
    try:
        uri = f"http://127.0.0.1:{server.getsockname()[1]}"
        status, lines = _cli_train(tmp_path, capsys, {"mlflow": {"tracking_uri": uri}})
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        server.close()
    assert status == 2 and len(lines) == 1, lines
    assert "loggers.mlflow: composer.loggers.MLFlowLogger could not start (MlflowException: " in lines[0]
    assert "Max retries exceeded" in lines[0] and not (tmp_path / "cli").exists()
    assert os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] == "1"  # the user's value kept
