"""benchmarks.reuse: a process loads a task and tokenises its training set once, and a reused input
changes nothing in a run's record (docs/benchmarks.md, "Reuse within a process")."""

from __future__ import annotations

import gzip
import json
import os
import shutil

import pytest

from benchmarks import reuse
from benchmarks.datasets import TOY_DATA_ROOT, load_task_data
from benchmarks.kinds import KindSettings, get_kind
from benchmarks.run import run
from benchmarks.tasks import TASKS
from tests.benchmarks.test_run import _cfg
from tests.benchmarks.tiny import minilm_dir, one_torch_thread, save_tiny_model  # noqa: F401 (autouse fixture)


@pytest.fixture(autouse=True)
def fresh_reuse():
    reuse.clear()
    yield
    reuse.clear()


@pytest.fixture
def mirror(tmp_path):
    """A copy of the toy mirror that a test may change."""
    root = tmp_path / "mirror"
    shutil.copytree(TOY_DATA_ROOT, root)
    return root


def _sst2_train_file(root):
    return root / "nyu-mll" / "glue" / "sst2" / "train.jsonl"


def test_a_task_is_loaded_once_and_each_caller_owns_its_split_record(mirror):
    spec = TASKS["sst2"]
    first = reuse.task_data(spec, mirror)
    first.split_record["added_by_a_run"] = True
    second = reuse.task_data(spec, mirror)
    assert reuse.STATS["data_loaded"] == 1 and reuse.STATS["data_reused"] == 1
    assert "added_by_a_run" not in second.split_record
    fresh = load_task_data(spec, mirror)
    assert second.split_record == fresh.split_record
    assert list(second.train["text"]) == list(fresh.train["text"])
    assert second.reuse_token == first.reuse_token is not None


def test_a_changed_or_preferred_mirror_file_is_loaded_again(mirror):
    spec = TASKS["sst2"]
    reuse.task_data(spec, mirror)
    path = _sst2_train_file(mirror)
    rows = path.read_text().splitlines()
    path.write_text("\n".join(rows[:-1]) + "\n")  # one row fewer
    changed = reuse.task_data(spec, mirror)
    assert reuse.STATS["data_loaded"] == 2
    assert changed.split_record == load_task_data(spec, mirror).split_record
    # the same bytes with another modification time count as changed too
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    reuse.task_data(spec, mirror)
    assert reuse.STATS["data_loaded"] == 3
    reuse.task_data(spec, mirror)
    assert reuse.STATS["data_loaded"] == 3
    # another file of the split appearing (another format of it) counts as a change
    (path.parent / "train.jsonl.gz").write_bytes(gzip.compress(path.read_bytes()))
    reuse.task_data(spec, mirror)
    assert reuse.STATS["data_loaded"] == 4
    reuse.task_data(spec, mirror)  # both files unchanged since: reused
    assert reuse.STATS["data_loaded"] == 4


def test_the_hub_path_is_never_kept(monkeypatch):
    calls = []
    monkeypatch.setattr("benchmarks.datasets.loading.load_task_data", lambda *a, **k: calls.append(a) or "loaded")
    assert reuse.task_data(TASKS["sst2"], None) == "loaded"
    assert reuse.task_data(TASKS["sst2"], None) == "loaded"
    assert len(calls) == 2 and reuse.STATS["data_reused"] == 0


def test_the_tokenizer_fingerprint_follows_content_not_the_folder(tmp_path):
    from transformers import AutoTokenizer

    copy = tmp_path / "copy"
    shutil.copytree(minilm_dir(), copy)
    original = AutoTokenizer.from_pretrained(minilm_dir())
    same = AutoTokenizer.from_pretrained(copy)
    assert reuse.tokenizer_fingerprint(original) == reuse.tokenizer_fingerprint(same) is not None
    original(["a call sets truncation and padding"], truncation=True, max_length=8, padding="max_length")
    assert reuse.tokenizer_fingerprint(original) == reuse.tokenizer_fingerprint(same)
    other_eos = AutoTokenizer.from_pretrained(copy, eos_token="[SEP]")
    assert reuse.tokenizer_fingerprint(other_eos) != reuse.tokenizer_fingerprint(same)
    other_side = AutoTokenizer.from_pretrained(copy, truncation_side="left")
    assert reuse.tokenizer_fingerprint(other_side) != reuse.tokenizer_fingerprint(same)
    slow = AutoTokenizer.from_pretrained(copy, use_fast=False)
    assert reuse.tokenizer_fingerprint(slow) is None


@pytest.mark.parametrize("task", ["sst2", "conll2003", "squad_v2", "msmarco"])
def test_training_features_are_built_once_per_tokenizer_content_and_equal_fresh_ones(mirror, task, tmp_path):
    from transformers import AutoTokenizer

    shutil.copytree(minilm_dir(), tmp_path / "copy")
    spec = TASKS[task]
    kind = get_kind(spec.task_type)
    settings = KindSettings(max_length=32, ir_model_dir=str(tmp_path / "a"))
    first, collate = reuse.training_features(
        kind, reuse.task_data(spec, mirror), AutoTokenizer.from_pretrained(minilm_dir()), settings
    )
    # another model's folder with the same tokenizer, another retriever folder: reused
    settings_b = KindSettings(max_length=32, ir_model_dir=str(tmp_path / "b"))
    second, _ = reuse.training_features(
        kind, reuse.task_data(spec, mirror), AutoTokenizer.from_pretrained(tmp_path / "copy"), settings_b
    )
    assert reuse.STATS["features_built"] == 1 and reuse.STATS["features_reused"] == 1
    assert second is not first and second == first
    fresh, _ = kind.training_features(
        load_task_data(spec, mirror), AutoTokenizer.from_pretrained(minilm_dir()), settings
    )
    assert json.dumps(second, sort_keys=True) == json.dumps(fresh, sort_keys=True)
    assert collate(second[:2]).keys() == collate(fresh[:2]).keys()
    # another length, another tokenizer content: built anew
    reuse.training_features(
        kind, reuse.task_data(spec, mirror), AutoTokenizer.from_pretrained(minilm_dir()), KindSettings(max_length=16)
    )
    left = AutoTokenizer.from_pretrained(minilm_dir(), truncation_side="left")
    reuse.training_features(kind, reuse.task_data(spec, mirror), left, settings)
    assert reuse.STATS["features_built"] == 3


def test_a_large_training_set_or_unkept_data_is_loaded_and_tokenised_every_time(mirror, monkeypatch):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(minilm_dir())
    spec, settings = TASKS["sst2"], KindSettings(max_length=32)
    kind = get_kind(spec.task_type)
    monkeypatch.setattr(reuse, "MAX_TRAIN_ROWS", 10)
    for _ in range(2):
        data = reuse.task_data(spec, mirror)
        assert data.reuse_token is None
        reuse.training_features(kind, data, tokenizer, settings)
    assert reuse.STATS["data_loaded"] == reuse.STATS["data_reused"] == 0  # loaded each time, not kept
    monkeypatch.setattr(reuse, "MAX_TRAIN_ROWS", 10**6)
    for _ in range(2):  # data not from reuse.task_data carries no reuse token
        reuse.training_features(kind, load_task_data(spec, mirror), tokenizer, settings)
    assert reuse.STATS["features_built"] == reuse.STATS["features_reused"] == 0


def test_least_recently_used_entries_go_first(mirror, monkeypatch):
    monkeypatch.setattr(reuse, "MAX_ENTRIES", 2)
    for task in ("sst2", "mnli", "sst2", "qqp", "sst2", "mnli"):
        reuse.task_data(TASKS[task], mirror)
    # sst2 loaded, mnli loaded, sst2 reused, qqp loaded (mnli out), sst2 reused, mnli loaded again
    assert (reuse.STATS["data_loaded"], reuse.STATS["data_reused"]) == (4, 2)


@pytest.mark.e2e  # twice twelve fine-tuning runs, over 30 s
def test_runs_with_reused_inputs_write_the_records_of_fresh_ones(tmp_path, monkeypatch):
    """Two models sharing a tokenizer, every task kind: the second model's runs reuse the loaded
    data and training features and score exactly as when each run loads and tokenises anew."""
    models = [save_tiny_model(tmp_path / name, "bert", seed=seed) for name, seed in (("one", 0), ("two", 1))]
    tasks = ("sst2", "conll2003", "squad", "msmarco", "nq")

    def records(out):
        found = {}
        for model in models:
            for task in tasks:
                cfg = _cfg(model, out, task, max_steps=2)
                record, _ = run(cfg)
                found[(model.name, task)] = {k: v for k, v in record.to_dict().items() if k != "provenance"}
        return found

    reused = records(tmp_path / "reused")
    assert reuse.STATS["data_reused"] >= len(tasks) and reuse.STATS["features_reused"] == 4  # nq trains nothing
    monkeypatch.setattr(reuse, "task_data", lambda spec, root, **kw: load_task_data(spec, root, **kw))
    reuse.clear()
    fresh = records(tmp_path / "fresh")
    assert reuse.STATS["features_reused"] == 0
    assert reused == fresh
