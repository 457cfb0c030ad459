"""`benchmarks run`: every task end to end on the toy data, records, skip/no-overwrite, errors."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import re
import shutil
from dataclasses import fields
from pathlib import Path

import pytest
import yaml

from benchmarks.datasets import TOY_DATA_ROOT
from benchmarks.run import CONFIG_DIR, RunConfig, RunError, load_run_config, run
from benchmarks.tasks import TASKS
from contracts.config import ConfigError
from contracts.layout import finetune_run_dir, format_lr
from contracts.run_record import PROTOCOLS, RunRecord
from contracts.run_store import iter_records_in
from tests.benchmarks.tiny import one_torch_thread, save_tiny_model  # noqa: F401 (autouse fixture)
from tests.fake_wandb import fake_wandb, logged_metrics, wandb_calls  # noqa: F401 (fixture)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("run")
    return {
        "bert": save_tiny_model(root / "bert", "bert"),
        "llama": save_tiny_model(root / "llama", "llama"),
        "out": root / "runs",
    }


def _cfg(model, out, task, **kw) -> RunConfig:
    values = {
        "model": str(model),
        "task": task,
        "lr": 1e-3,
        "seed": 0,
        "data_root": str(TOY_DATA_ROOT),
        "out": str(out),
        **kw,
    }
    return load_run_config(values, CONFIG_DIR / "toy.yaml")


# Every task under both protocols, 1-9 s each on the shared module's toy model (fast tier).
END_TO_END = [pytest.param(task, protocol) for protocol in PROTOCOLS for task in TASKS]


@pytest.mark.parametrize("task, protocol", END_TO_END)
def test_every_task_runs_end_to_end_on_toy_data_under_both_protocols(tiny, task, protocol):
    cfg = _cfg(tiny["bert"], tiny["out"] / protocol, task, max_steps=2, protocol=protocol)
    record, _ = run(cfg)
    spec = TASKS[task]
    path = cfg.run_dir / "record.json"
    assert path.is_file() and (cfg.run_dir / "config.yaml").is_file()
    again = RunRecord.from_dict(json.loads(path.read_text()), str(path))
    assert again == record
    assert (record.model, record.dataset, record.task_type) == ("bert", task, spec.task_type)
    assert (record.lr, record.seed) == (1e-3, 0)
    assert record.train_set == spec.train_set
    assert record.test_instance_scores and all(0 <= s <= 100 for s in record.test_instance_scores)
    assert record.provenance["source"] == "benchmarks" and record.provenance["config_hash"]
    assert (record.protocol, record.metric) == (protocol, spec.metric_under(protocol))
    assert record.provenance["metric"] == record.metric
    assert record.provenance["max_length"] == (63 if protocol == "paper" else 64)  # paper: 99% of 64
    assert record.provenance["weights_dtype"] == "float32"  # bf16 weights only with bf16 on a GPU
    (other,) = set(PROTOCOLS) - {protocol}
    if spec.task_type == "QA":  # a span and a set of positions are different predictions
        assert record.other_scores is None and record.scores_under(other) is None
    else:  # the same predictions scored with the other protocol's metric
        assert set(record.other_scores) == {other}
        mirrored = record.scores_under(other)
        assert (mirrored.protocol, mirrored.metric) == (other, spec.metric_under(other))
        assert len(mirrored.test_instance_scores) == len(record.test_instance_scores)
        if spec.task_type == "SC":
            assert mirrored.test_score == record.test_score
    paper = protocol == "paper"  # the protocol's choices where the release and the convention part
    choices = record.provenance["protocol_choices"]
    assert choices["head"] == (None if spec.task_type == "IR" else "package")  # BERT ships no head class
    assert choices["tc_whitespace_tokens"] == (("next_word" if paper else "ignore") if spec.task_type == "TC" else None)
    assert choices["release_quirks"] is paper  # LR at update 1, steps per epoch, QA positions (Choice 22)
    trains = "trained_model" not in record.provenance  # NQ and MLDR evaluate the MS MARCO model
    exempt = ("layernorm_and_bias" if paper else "one_dim") if trains else None  # Choice 23
    assert choices["weight_decay_exempt"] == exempt
    if spec.task_type == "IR":
        assert choices["ir_eval_encoding"] == ("sentence_transformers" if paper else "as_training")
        assert choices["ir_eval_max_length"] == 64  # paper: sentence-transformers caps at L, not 99% of it
        model_dir = finetune_run_dir(cfg.out, "bert", "msmarco", 1e-3, 0) / "model"
        evaluated = all(
            (finetune_run_dir(cfg.out, "bert", t, 1e-3, 0) / "record.json").is_file() for t in ("nq", "mldr_en")
        )
        # the MS MARCO run saves the IR model; it is removed once nq and mldr_en have records
        assert (model_dir / "config.json").is_file() != evaluated
        assert record.provenance["splits"]["candidate_pool"] == "qrels_pool_all_splits"
        if task != "msmarco":
            assert record.provenance["trained_model"] == str(model_dir)
            assert "train" not in record.provenance
        if task == "nq":  # its query halves are drawn with the run's seed
            splits = record.provenance["splits"]
            assert (splits["query_split_seed"], splits["query_split_seed_from"]) == (0, "seed")
    else:
        assert record.provenance["train"]["steps"] == 2
        assert record.provenance["train"]["max_grad_norm"] == choices["max_grad_norm"] == 1.0


def test_an_ir_evaluation_may_encode_otherwise_than_its_ms_marco_run(tiny, tmp_path):
    """How NQ/MLDR texts are encoded is the evaluation's own setting; the MS MARCO model is reused."""
    run(_cfg(tiny["bert"], tmp_path, "nq", max_steps=1))
    record, computed = run(_cfg(tiny["bert"], tmp_path, "mldr_en", max_steps=1, ir_eval_encoding="as_training"))
    assert computed and record.provenance["protocol_choices"]["ir_eval_encoding"] == "as_training"
    assert record.provenance["protocol_choices"]["ir_eval_max_length"] == 63  # the training inputs: 99%


def test_a_run_directory_holds_one_protocol_and_the_nq_split_seed_can_be_fixed(tiny, tmp_path):
    run(_cfg(tiny["bert"], tmp_path, "sst2", max_steps=1))
    with pytest.raises(RunError, match="under protocol 'paper'; write protocol 'standard' runs to another --out"):
        run(_cfg(tiny["bert"], tmp_path, "sst2", max_steps=1, protocol="standard"))
    record, _ = run(_cfg(tiny["bert"], tmp_path, "nq", max_steps=1, seed=3, ir_query_split_seed=5))
    splits = record.provenance["splits"]
    assert (splits["query_split_seed"], splits["query_split_seed_from"]) == (5, "ir_query_split_seed")
    with pytest.raises(RunError, match="msmarco/lr1e-03_sd3/record.json: holds a complete run under protocol"):
        run(_cfg(tiny["bert"], tmp_path, "mldr_en", max_steps=1, seed=3, protocol="standard"))


def test_a_complete_run_is_reused_only_with_the_settings_it_was_made_with(tiny, tmp_path):
    first, _ = run(_cfg(tiny["bert"], tmp_path, "sst2", max_steps=1))
    # where and how it was computed may change: the record is reused as it is
    moved_model = tmp_path / "moved-model"
    shutil.copytree(tiny["bert"], moved_model)
    again, computed = run(_cfg(moved_model, tmp_path, "sst2", max_steps=1, model_name=Path(tiny["bert"]).name))
    assert not computed and again == first
    reused, computed = run(_cfg(tiny["bert"], tmp_path, "sst2", max_steps=1, device_microbatch_size=2))
    assert not computed and reused == first
    # what it measures may not: a longer run would otherwise silently return the 1-step score
    record_path = finetune_run_dir(tmp_path, Path(tiny["bert"]).name, "sst2", 1e-3, 0) / "record.json"
    before = record_path.read_bytes()
    with pytest.raises(
        RunError,
        match=r"sst2/lr1e-03_sd0/record.json: holds a complete run with max_steps=1 .*"
        r"this run has max_steps=3: write it to another --out, or remove .*lr1e-03_sd0 to redo it",
    ):
        run(_cfg(tiny["bert"], tmp_path, "sst2", max_steps=3))
    with pytest.raises(RunError, match="with batch_size=8 .* this run has batch_size=4"):
        run(_cfg(tiny["bert"], tmp_path, "sst2", max_steps=1, batch_size=4))
    with pytest.raises(RunError, match="with max_grad_norm=1.0 .* this run has max_grad_norm=0.5"):
        run(_cfg(tiny["bert"], tmp_path, "sst2", max_steps=1, max_grad_norm=0.5))
    assert record_path.read_bytes() == before
    # an IR evaluation reuses the MS MARCO model of its (lr, seed) only if trained with its settings
    run(_cfg(tiny["bert"], tmp_path, "nq", max_steps=1))
    with pytest.raises(RunError, match="msmarco/lr1e-03_sd0/record.json: holds a complete run with max_steps=1"):
        run(_cfg(tiny["bert"], tmp_path, "mldr_en", max_steps=2))
    _, computed = run(_cfg(tiny["bert"], tmp_path, "mldr_en", max_steps=1, ir_top_k=50, eval_batch_size=16))
    assert computed  # evaluation settings of its own


@pytest.mark.parametrize("damage", ["remove", "garble"])
def test_a_record_without_its_config_is_not_reused_unchecked(tiny, tmp_path, damage):
    """A record.json whose config.yaml is gone or unreadable used to be reused as it was: a run
    with other settings would have returned its score. Now it is one clear error, and nothing is
    rewritten."""
    run(_cfg(tiny["bert"], tmp_path, "sst2", max_steps=1))
    run_dir = finetune_run_dir(tmp_path, Path(tiny["bert"]).name, "sst2", 1e-3, 0)
    if damage == "remove":
        (run_dir / "config.yaml").unlink()
    else:
        (run_dir / "config.yaml").write_text("config: [not, a, mapping\n")
    before = (run_dir / "record.json").read_bytes()
    with pytest.raises(RunError, match=r"record.json: holds a complete run without a readable config.yaml .* restore"):
        run(_cfg(tiny["bert"], tmp_path, "sst2", max_steps=3))
    assert (run_dir / "record.json").read_bytes() == before


@pytest.mark.parametrize("field", ["max_grad_norm", "ir_eval_encoding", "tc_whitespace_tokens", "head"])
def test_a_run_saved_before_a_setting_existed_is_not_reused_as_if_equal(tiny, tmp_path, field):
    """Issue 35 item 9: a config.yaml without a setting (written before gradient clipping, the IR
    encoding, the TC whitespace rule or the head choice existed) was reused as if its value were
    this run's, so an old unclipped run counted as a clipped one."""
    run(_cfg(tiny["bert"], tmp_path, "sst2", max_steps=1))
    run_dir = finetune_run_dir(tmp_path, Path(tiny["bert"]).name, "sst2", 1e-3, 0)
    saved = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert saved["settings_version"] == 1
    del saved["config"][field]
    (run_dir / "config.yaml").write_text(yaml.safe_dump(saved, sort_keys=False))
    with pytest.raises(RunError, match=f"holds a complete run made before the setting {field} existed"):
        run(_cfg(tiny["bert"], tmp_path, "sst2", max_steps=1))

    saved["config"][field] = yaml.safe_load(yaml.safe_dump(getattr(_cfg(tiny["bert"], tmp_path, "sst2"), field)))
    saved["settings_version"] = 0  # a setting that changed meaning without a new field
    (run_dir / "config.yaml").write_text(yaml.safe_dump(saved, sort_keys=False))
    with pytest.raises(RunError, match="saved under settings version 0 .* this package's is 1"):
        run(_cfg(tiny["bert"], tmp_path, "sst2", max_steps=1))


@pytest.mark.usefixtures("fake_wandb")
def test_a_fine_tuning_run_logs_to_its_configured_tracker_and_is_reused_without_it(tiny, tmp_path):
    """loggers: (docs/watching.md) builds Composer's logger for the training; the record does not
    depend on it, so a run made with a tracker is reused without one."""
    record, _ = run(_cfg(tiny["bert"], tmp_path, "sst2", max_steps=4, loggers={"wandb": {"project": "ft"}}))
    init = json.loads(wandb_calls(tmp_path).read_text().splitlines()[0])
    run_dir = finetune_run_dir(tmp_path, Path(tiny["bert"]).name, "sst2", 1e-3, 0)
    assert init["kwargs"] == {
        "project": "ft",
        "mode": "offline",
        "dir": str(run_dir.absolute()),
        "name": init["kwargs"]["name"],
    }
    logged = logged_metrics(tmp_path)
    assert sorted(logged["loss/train/total"]) == [0, 1, 2, 3]
    assert logged["loss/train/total"][3] == pytest.approx(record.provenance["train"]["final_train_loss"])
    assert sorted(logged["throughput/batches_per_sec"]) == [3, 4]  # a window of half the run's 4 steps
    assert "lr-AdamW/group0" in logged
    again, computed = run(_cfg(tiny["bert"], tmp_path, "sst2", max_steps=4))
    assert not computed and again == record
    with pytest.raises(ConfigError, match=r"loggers\.tensorbord: unknown logger"):
        _cfg(tiny["bert"], tmp_path / "other", "sst2", loggers={"tensorbord": {}})


@pytest.mark.skipif(
    any(importlib.util.find_spec(name) is None for name in ("tensorboard", "mlflow")),
    reason="tensorboard and mlflow are in requirements.lock; a user's own environment may lack them",
)
def test_trackers_find_a_fine_tuning_run_by_its_model_task_lr_and_seed(tiny, tmp_path):
    """Issue 53, item 6: the run is named `<model>/<task>/lr<LR>_sd<SEED>`; MLflow holds it with
    those as params and tags, and TensorBoard (one event file, where Composer opened a new one at
    each flush: one per epoch here) under that path; both have the loss of every step and the final
    validation and test metric, equal to the record's. MLflow had failed outright: its file store,
    made as the logger was built, was removed as a leftover of the run folder."""
    from mlflow.tracking import MlflowClient
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    loggers = {"tensorboard": {}, "mlflow": {"experiment_name": "ft"}}
    record, _ = run(_cfg(tiny["bert"], tmp_path, "sst2", max_steps=12, loggers=loggers))
    run_dir = finetune_run_dir(tmp_path, Path(tiny["bert"]).name, "sst2", 1e-3, 0)
    name = f"{Path(tiny['bert']).name}/sst2/lr1e-03_sd0"
    (event_file,) = (run_dir / "tensorboard").rglob("events.out.tfevents*")
    assert event_file.parent == run_dir / "tensorboard" / name
    events = EventAccumulator(str(event_file.parent)).Reload()
    assert [e.step for e in events.Scalars("loss/train/total")] == list(range(12))
    assert events.Scalars("metrics/validation/accuracy")[-1].value == pytest.approx(record.validation_score)
    assert events.Scalars("metrics/test/accuracy")[-1].value == pytest.approx(record.test_score)

    client = MlflowClient(tracking_uri=(run_dir / "mlruns").as_uri())
    found = client.search_runs(
        [client.get_experiment_by_name("ft").experiment_id],
        filter_string=f"params.model = '{Path(tiny['bert']).name}' and params.task = 'sst2' and params.seed = '0' "
        "and params.lr = '0.001' and tags.task_type = 'SC' and tags.protocol = 'paper'",
    )
    assert len(found) == 1 and found[0].info.run_name == name
    metrics = found[0].data.metrics
    assert metrics["metrics/validation/accuracy"] == pytest.approx(record.validation_score)
    assert metrics["metrics/test/accuracy"] == pytest.approx(record.test_score)
    history = client.get_metric_history(found[0].info.run_id, "loss/train/total")
    assert sorted(m.step for m in history) == list(range(12))


def test_a_failed_run_keeps_its_error_beside_it_until_it_is_redone(tiny, tmp_path, monkeypatch):
    """error.txt (first line: type and message) is what `reproduce status` shows for a failed run."""
    import benchmarks.finetune

    def out_of_memory(*args, **kwargs):
        raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB\nmore detail")

    monkeypatch.setattr(benchmarks.finetune, "fit", out_of_memory)
    with pytest.raises(RuntimeError, match="CUDA out of memory"):
        run(_cfg(tiny["bert"], tmp_path, "sst2", max_steps=1))
    run_dir = finetune_run_dir(tmp_path, Path(tiny["bert"]).name, "sst2", 1e-3, 0)
    error = (run_dir / "error.txt").read_text()
    assert error.splitlines()[0] == "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"
    assert "Traceback (most recent call last)" in error and not (run_dir / "record.json").exists()
    monkeypatch.undo()
    _, computed = run(_cfg(tiny["bert"], tmp_path, "sst2", max_steps=1))
    assert computed and not (run_dir / "error.txt").exists() and (run_dir / "record.json").is_file()


def test_one_epoch_stops_every_task_after_a_pass_over_its_training_split(tiny, tmp_path):
    """`one_epoch: true` (the toy world's budget) ends a task after one pass, capped at max_steps;
    unset, only CoNLL and UNER do (as released)."""
    # toy SST-2: 320 rows, 5% carved out as validation -> 304 training rows, 5 batches of 64; paper
    # counts the epoch as the release's Trainer did: 76 micro-batches of 4 // 16 accumulated = 4
    record, _ = run(_cfg(tiny["bert"], tmp_path / "epoch", "sst2", batch_size=64, max_steps=7, one_epoch=True))
    assert record.provenance["train"]["steps"] == 4 and record.provenance["train"]["n_examples"] == 304
    exact = _cfg(tiny["bert"], tmp_path / "exact", "sst2", batch_size=64, max_steps=7, one_epoch=True)
    record, _ = run(dataclasses.replace(exact, release_quirks=False))
    assert record.provenance["train"]["steps"] == 5
    capped, _ = run(_cfg(tiny["bert"], tmp_path / "capped", "sst2", batch_size=64, max_steps=3, one_epoch=True))
    assert capped.provenance["train"]["steps"] == 3
    released, _ = run(_cfg(tiny["bert"], tmp_path / "released", "sst2", batch_size=64, max_steps=7))
    assert released.provenance["train"]["steps"] == 7
    # CoNLL: one epoch as released (320 sentences -> 5 batches of 64) unless asked otherwise
    conll, _ = run(_cfg(tiny["bert"], tmp_path / "released", "conll2003", batch_size=64, max_steps=7))
    assert conll.provenance["train"]["steps"] == 5
    longer, _ = run(_cfg(tiny["bert"], tmp_path / "longer", "conll2003", batch_size=64, max_steps=7, one_epoch=False))
    assert longer.provenance["train"]["steps"] == 7


@pytest.mark.parametrize("task", ["sst2", "squad_v2", "conll2003", "msmarco"])
def test_a_decoder_made_bidirectional_runs_too_with_micro_batches(tiny, tmp_path, task):
    """Micro-batches of 3 out of 8: Composer accumulation (SC/TC/QA), gradient caching (IR)."""
    record, computed = run(_cfg(tiny["llama"], tmp_path, task, max_steps=2, device_microbatch_size=3))
    assert computed and record.model == "llama"
    expected = 8 if task == "msmarco" else 3  # IR keeps the batch whole for Composer
    assert record.provenance["train"]["device_microbatch_size"] == expected


def test_complete_record_is_never_overwritten_and_partial_runs_are_redone(tiny, tmp_path):
    cfg = _cfg(tiny["bert"], tmp_path, "sst2", max_steps=1)
    first, computed = run(cfg)
    path = cfg.run_dir / "record.json"
    before = path.read_bytes(), path.stat().st_mtime_ns
    second, computed_again = run(cfg)
    assert computed and not computed_again and second == first
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before
    # an interrupted run (directory without record) is cleared and redone
    other = _cfg(tiny["bert"], tmp_path, "sst2", max_steps=1, seed=1)
    other.run_dir.mkdir(parents=True)
    (other.run_dir / "half_written.tmp").write_text("x")
    record, computed = run(other)
    assert computed and not (other.run_dir / "half_written.tmp").exists()
    assert sorted(r.seed for r in iter_records_in([tmp_path])) == [0, 1]


def test_runs_keep_config_and_record_and_weights_only_when_asked(tiny, tmp_path):
    from safetensors.torch import load_file

    from benchmarks.__main__ import export_run
    from benchmarks.export_st import ExportError

    plain = _cfg(tiny["bert"], tmp_path / "plain", "sst2", max_steps=1)
    run(plain)
    assert sorted(p.name for p in plain.run_dir.iterdir()) == ["config.yaml", "record.json"]
    kept = _cfg(tiny["bert"], tmp_path / "kept", "sst2", max_steps=1, save_weights=True)
    run(kept)
    assert (kept.run_dir / "model" / "config.json").is_file()
    assert (kept.run_dir / "model" / "model.safetensors").is_file()
    assert set(load_file(kept.run_dir / "model" / "head.safetensors")) == {"head.weight", "head.bias"}
    # IR: the MS MARCO model lives until nq and mldr_en are evaluated, or for good with save_weights
    for out, keep in ((tmp_path / "plain", False), (tmp_path / "kept", True)):
        model_dir = finetune_run_dir(out, "bert", "msmarco", 1e-3, 0) / "model"
        run(_cfg(tiny["bert"], out, "nq", max_steps=1, save_weights=keep))
        assert (model_dir / "config.json").is_file(), "mldr_en still needs it"
        run(_cfg(tiny["bert"], out, "mldr_en", max_steps=1, save_weights=keep))
        assert model_dir.is_dir() == keep and not model_dir.with_name("model.removing").exists()
        assert sorted(p.name for p in model_dir.parent.iterdir()) == sorted(
            ["config.yaml", "record.json"] + (["model"] if keep else [])
        )
    with pytest.raises(ExportError, match="model/ was removed once nq and mldr_en were evaluated; rerun it"):
        export_run(finetune_run_dir(tmp_path / "plain", "bert", "msmarco", 1e-3, 0), tmp_path / "st")


def test_a_truncated_record_or_a_full_disk_is_a_clear_error_and_earlier_records_stay(tiny, tmp_path, monkeypatch):
    import errno
    import os

    from contracts import provenance
    from contracts.run_record import RunRecordError

    done = _cfg(tiny["bert"], tmp_path, "sst2", max_steps=1)
    run(done)
    record = done.run_dir / "record.json"
    complete = record.read_text()
    record.write_text(complete[: len(complete) // 2])
    with pytest.raises(RunRecordError, match=f"{record}: not valid JSON .*truncated"):
        run(done)
    record.write_text(complete)
    real_fsync = os.fsync

    def record_disk_full(fd):  # the disk fills up while the next run writes its record
        if ".record.json." in os.readlink(f"/proc/self/fd/{fd}"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_fsync(fd)

    monkeypatch.setattr(provenance.os, "fsync", record_disk_full)
    other = _cfg(tiny["bert"], tmp_path, "sst2", max_steps=1, seed=1)
    with pytest.raises(provenance.DiskFullError, match=f"{other.run_dir / 'record.json'}: not written, no space"):
        run(other)
    assert sorted(p.name for p in other.run_dir.iterdir()) == ["config.yaml"]  # an interrupted run: redone
    assert record.read_text() == complete
    monkeypatch.undo()
    assert run(other)[1] and len(list(iter_records_in([tmp_path]))) == 2


def test_release_style_names_carry_their_pretraining(tiny, tmp_path):
    cfg = _cfg(tiny["bert"], tmp_path, "sst2", max_steps=1, model_name="610m-mlm40-42k")
    record, _ = run(cfg)
    assert record.pretraining.objective == "mlm" and record.pretraining.masking_ratio == 0.4
    assert cfg.run_dir == tmp_path / "610m-mlm40-42k" / "sst2" / "lr1e-03_sd0"
    hub = RunConfig(model="MLMvsCLM/610m-clm-10k-mlm40-42k", task="sst2", lr=2e-5, seed=3, out="r")
    assert hub.name == "610m-clm-10k-mlm40-42k" and hub.run_dir == Path("r/610m-clm-10k-mlm40-42k/sst2/lr2e-05_sd3")


def test_lr_names_match_the_release():
    assert [format_lr(x) for x in (1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4)] == [
        "1e-05",
        "2e-05",
        "5e-05",
        "1e-04",
        "2e-04",
        "5e-04",
    ]
    assert format_lr(3.5e-5) == "3.5e-05"


def test_paper_config_file_equals_the_defaults():
    paper = yaml.safe_load((CONFIG_DIR / "paper.yaml").read_text())
    defaults = {f.name: f.default for f in fields(RunConfig) if f.name in paper}
    assert set(paper) == set(defaults)
    assert {k: tuple(v) if isinstance(v, list) else v for k, v in paper.items()} == defaults


def test_cli_errors_are_one_line(tiny, tmp_path, cli):
    empty = tmp_path / "no_weights"
    empty.mkdir()
    (empty / "config.json").write_text("{}")
    cases = [
        (["run", "--model", str(tiny["bert"]), "--task", "nope", "--lr", "1e-4", "--seed", "0"], "unknown task 'nope'"),
        (
            ["run", "--model", str(empty), "--task", "sst2", "--lr", "1e-4", "--seed", "0", "--out", str(tmp_path)],
            "has no weights",
        ),
        (["run", "--model", str(tiny["bert"]), "--task", "sst2", "--lr", "0", "--seed", "0"], "lr must be > 0"),
        (["matrix", "--models", str(tiny["bert"]), "--lrs", "", "--out", str(tmp_path), "--local"], "empty LR grid"),
        (
            ["matrix", "--models", str(tiny["bert"]), "--tasks", "sst2,bogus", "--out", str(tmp_path), "--local"],
            "unknown task 'bogus'",
        ),
        (["matrix", "--models", str(empty), "--out", str(tmp_path), "--local"], "has no weights"),
    ]
    for argv, message in cases:
        result = cli("benchmarks", *argv, cwd=ROOT)
        assert result.returncode == 2, (argv, result.stderr[-2000:])
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], result.stderr
    assert not list(tmp_path.rglob("record.json"))


def test_cli_run_writes_then_skips(tiny, tmp_path, cli):
    argv = [
        "run",
        "--model",
        str(tiny["bert"]),
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
        "--max-steps",
        "1",
        "--batch-size",
        "4",
        "--max-length",
        "32",
        "--set",
        "eval_batch_size=16",
    ]
    first = cli("benchmarks", *argv, cwd=ROOT)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "done" in first.stdout
    second = cli("benchmarks", *argv, cwd=ROOT)
    assert second.returncode == 0 and "skipped" in second.stdout
    saved = yaml.safe_load((tmp_path / "bert/sst2/lr1e-03_sd0/config.yaml").read_text())
    assert saved["config"]["max_length"] == 32 and saved["config"]["eval_batch_size"] == 16 and saved["git_sha"]


def test_a_world_size_that_does_not_divide_the_batch_is_refused_before_writing(tiny, tmp_path, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "3")  # as composer -n 3 / torchrun set it
    cfg = _cfg(tiny["bert"], tmp_path, "sst2", max_steps=1)  # toy.yaml: batch_size 8
    message = (
        "batch_size 8 (the batch over all ranks) is not divisible by the world size 3 (ranks launched): "
        "launch a number of ranks that divides it (1, 2, 4, 8)"
    )
    with pytest.raises(RunError, match=re.escape(message)):
        run(cfg)
    assert not tmp_path.joinpath("bert").exists()


def test_a_model_name_that_leaves_out_is_refused_before_anything_is_written(tiny, tmp_path, capsys):
    """`--model-name ../../../x` wrote its record outside --out (docs/reliability.md)."""
    from benchmarks.__main__ import main

    out = tmp_path / "a" / "b" / "out"
    argv = ["run", "--model", str(tiny["bert"]), "--task", "sst2", "--lr", "1e-3", "--seed", "0", "--max-steps", "1"]
    argv += ["--data-root", str(TOY_DATA_ROOT), "--out", str(out)]
    for name in ("../../../x", "..", "a/b", "x\ny"):
        assert main([*argv, "--model-name", name]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"model name {name!r} (model_name) is not one folder name" in err[0], err
    assert not list(tmp_path.rglob("*.json")) and not list(tmp_path.rglob("config.yaml"))
