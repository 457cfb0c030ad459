"""The training DataLoader: batch format, deterministic order, resumption mid-epoch, clear errors."""

import json
from dataclasses import FrozenInstanceError, replace

import numpy as np
import pytest
import torch

from pretraining.data import DataConfig, build_train_dataloader
from pretraining.data.config import DataBudgetError, PreparedDataError, data_budget
from pretraining.data.packing import SamplePacker
from pretraining.data.prepare import MANIFEST, MDS_COLUMNS

SEQ_LEN, EOS = 16, 1


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """Synthetic prepared data: 64 samples whose first token is the sample index (ids < 2**32)."""
    from streaming import MDSWriter

    root = tmp_path_factory.mktemp("shards")
    rng = np.random.default_rng(0)
    packer = SamplePacker(SEQ_LEN)
    samples = []
    while len(samples) < 64:
        doc = np.append(rng.integers(2, 100_000, size=rng.integers(1, 30)), EOS)
        samples.extend(packer.add(doc))
    with MDSWriter(out=str(root), columns=MDS_COLUMNS, compression="zstd", size_limit=1 << 12) as writer:
        for index, sample in enumerate(samples[:64]):
            ids = sample.input_ids.copy()
            ids[0] = 200_000 + index  # tag each sample (Llama-3-sized id)
            writer.write({"input_ids": ids, "doc_lengths": sample.doc_lengths})
    (root / MANIFEST).write_text(json.dumps({"seq_len": SEQ_LEN}))
    return root, samples[:64]


def tags(batches):
    return [int(t) - 200_000 for batch in batches for t in batch["input_ids"][:, 0]]


def first_batches(loader, n):
    """The first n batches of a fresh iteration, stopping there (as a checkpoint interrupts)."""
    seen = []
    for batch in loader:
        seen.append(batch)
        if len(seen) == n:
            return seen
    return seen


def test_batch_format(shards):
    root, samples = shards
    loader, dataset = build_train_dataloader(
        DataConfig(path=str(root), seq_len=SEQ_LEN, min_window=4, shuffle=False), 4
    )
    batch = next(iter(loader))
    assert set(batch) == {"input_ids", "document_ids", "window_ids", "sample_index"}
    assert batch["input_ids"].shape == batch["document_ids"].shape == (4, SEQ_LEN)
    assert batch["sample_index"].tolist() == [0, 1, 2, 3] and batch["sample_index"].dtype == torch.long
    assert batch["input_ids"].dtype == batch["document_ids"].dtype == torch.long
    for row, sample in enumerate(samples[:4]):
        lengths = sample.doc_lengths.astype(int)
        expected = np.repeat(np.arange(len(lengths)), lengths)
        assert batch["document_ids"][row].tolist() == expected.tolist()
        assert batch["input_ids"][row, 1:].tolist() == sample.input_ids[1:].astype(int).tolist()
    assert batch["input_ids"][0, 0].item() == 200_000
    assert len(dataset) == 64


def test_order_is_deterministic_for_a_seed(shards):
    root, _ = shards
    orders = []
    for seed in (7, 7, 8):
        loader, _ = build_train_dataloader(
            DataConfig(path=str(root), seq_len=SEQ_LEN, min_window=4, shuffle_seed=seed), 4
        )
        orders.append(tags(loader))
    assert orders[0] == orders[1] and sorted(orders[0]) == list(range(64))
    assert orders[0] != list(range(64))  # shuffled
    assert orders[2] != orders[0]  # another seed, another order


def test_each_sample_carries_its_global_index_epoch_after_epoch(shards):
    """The index seeding a sample's MLM mask: its id in the prepared data in epoch 0, then
    + 64 (the number of samples) per epoch, so a repeated sample gets a new mask."""
    root, _ = shards
    loader, _ = build_train_dataloader(DataConfig(path=str(root), seq_len=SEQ_LEN, min_window=4, shuffle_seed=3), 4)
    for epoch in range(2):
        batches = list(loader)
        indices = [int(i) for batch in batches for i in batch["sample_index"]]
        assert indices == [epoch * 64 + tag for tag in tags(batches)]


def test_resume_mid_epoch_from_state_dict(shards):
    root, _ = shards
    cfg = DataConfig(path=str(root), seq_len=SEQ_LEN, min_window=4, shuffle_seed=3)
    loader, dataset = build_train_dataloader(cfg, 4)
    full = tags(loader)

    loader, dataset = build_train_dataloader(cfg, 4)
    seen = first_batches(loader, 5)
    state = dataset.state_dict(num_samples=5 * 4, from_beginning=True)  # what Composer saves
    json.dumps(state)  # checkpointable

    resumed_loader, resumed = build_train_dataloader(cfg, 4)
    resumed.load_state_dict(state)
    rest = tags(resumed_loader)
    assert tags(seen) == full[:20]
    assert rest == full[20:]


def test_several_workers_give_the_same_samples(shards):
    root, _ = shards
    cfg = DataConfig(path=str(root), seq_len=SEQ_LEN, min_window=4, shuffle=False)
    loader, _ = build_train_dataloader(cfg, 4, num_workers=2)
    assert sorted(tags(loader)) == list(range(64))


def test_missing_shard_directory_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no prepared data.*prepare-data"):
        build_train_dataloader(DataConfig(path=str(tmp_path / "nowhere")), 4)


def test_seq_len_mismatch_is_a_clear_error(shards):
    root, _ = shards
    with pytest.raises(ValueError, match="data.seq_len"):
        build_train_dataloader(DataConfig(path=str(root), seq_len=32), 4)


def test_data_config_defaults_are_explicit():
    cfg = DataConfig(path="x")
    assert (cfg.seq_len, cfg.shuffle, cfg.shuffle_algo, cfg.num_canonical_nodes) == (2048, True, "py1e", 1)
    with pytest.raises(FrozenInstanceError):
        cfg.seq_len = 4


def test_cache_dir_copies_shards_and_leaves_the_prepared_folder_alone(shards, tmp_path):
    import shutil

    root, _ = shards
    prepared = tmp_path / "prepared"
    prepared.mkdir()
    for path in root.iterdir():
        if not path.name.endswith(".mds"):  # decompressed copies made by in-place readers
            shutil.copy(path, prepared / path.name)
    before = sorted(p.name for p in prepared.iterdir())
    loader, _ = build_train_dataloader(
        DataConfig(path=str(prepared), cache_dir=str(tmp_path / "cache"), seq_len=SEQ_LEN, min_window=4, shuffle=False),
        4,
    )
    assert tags(loader) == list(range(64))
    assert any(p.name.endswith(".mds") for p in (tmp_path / "cache").iterdir())
    assert sorted(p.name for p in prepared.iterdir()) == before


def test_start_sample_continues_the_order_after_a_base_run(shards):
    """CPT: a run with start_sample = base steps x batch reads the base run's next samples."""
    root, _ = shards
    base = DataConfig(path=str(root), seq_len=SEQ_LEN, min_window=4, shuffle_seed=3)
    full = tags(build_train_dataloader(base, 4)[0])
    base_run = []
    for step, batch in enumerate(build_train_dataloader(base, 4)[0]):
        base_run.append(batch)
        if step == 4:  # a base run of 5 steps x 4 samples
            break
    continued, dataset = build_train_dataloader(replace(base, start_sample=20), 4)
    rest = tags(continued)
    assert tags(base_run) == full[:20] and rest == full[20:]
    assert not set(rest) & set(tags(base_run))


def test_a_continued_run_resumes_after_its_start(shards):
    """Composer saves state_dict(samples seen by this run, True); the start is added back."""
    root, _ = shards
    cfg = DataConfig(path=str(root), seq_len=SEQ_LEN, min_window=4, shuffle_seed=3, start_sample=20)
    full = tags(build_train_dataloader(replace(cfg, start_sample=0), 4)[0])
    loader, dataset = build_train_dataloader(cfg, 4)
    seen = first_batches(loader, 2)
    state = dataset.state_dict(num_samples=2 * 4, from_beginning=True)
    assert state["epoch"] == 0 and state["sample_in_epoch"] == 28
    resumed_loader, resumed = build_train_dataloader(cfg, 4)  # the CPT config, autoresumed
    resumed.load_state_dict(state)
    assert tags(seen) == full[20:28] and tags(resumed_loader) == full[28:]


def test_data_budget_states_the_epochs_and_refuses_repeats():
    cfg = DataConfig(path="d", start_sample=40)
    assert (
        data_budget(100, cfg, 5, 8)
        == "data: d holds 100 samples; this run reads samples 40 to 79 (5 steps x 8) = 0.8 epochs"
    )
    assert data_budget(100, DataConfig(path="d"), 12, 8).endswith("= 0.96 epochs")
    with pytest.raises(
        DataBudgetError,
        match=r"samples 40 to 119 .* = 1.2 epochs: samples would "
        r"repeat; prepare more documents",
    ):
        data_budget(100, cfg, 10, 8)
    allowed = DataConfig(path="d", start_sample=40, allow_repeats=True)
    assert data_budget(100, allowed, 10, 8).endswith("= 1.2 epochs; samples repeat (data.allow_repeats)")
    with pytest.raises(DataBudgetError, match="start_sample lies beyond the data"):
        data_budget(100, DataConfig(path="d", start_sample=100, allow_repeats=True), 1, 8)
    with pytest.raises(ValueError, match="start_sample must be >= 0"):
        DataConfig(path="d", start_sample=-1)


def _prepared_copy(root, target, keep=None):
    """A prepared folder holding the compressed shards of `root` (the first `keep` samples' shards)."""
    import shutil

    from streaming import MDSWriter, StreamingDataset

    target.mkdir()
    if keep is None:
        for path in root.iterdir():
            if not path.name.endswith(".mds"):
                shutil.copy(path, target / path.name)
        return target
    source = StreamingDataset(local=str(root), shuffle=False, batch_size=1)
    with MDSWriter(out=str(target), columns=MDS_COLUMNS, compression="zstd", size_limit=1 << 12) as writer:
        for i in range(keep):
            writer.write(source[i])
    return target


def test_a_cache_filled_from_other_data_is_emptied_and_refilled_from_the_new_source(shards, tmp_path):
    """Issue 56 item 3: a cache_dir filled from data A, then a run on data B with the same cache
    trains on B (it trained on A's cached index and shards before)."""
    from pretraining.data.cache_binding import CACHE_SOURCE

    root, _ = shards
    big = _prepared_copy(root, tmp_path / "big")
    small = _prepared_copy(root, tmp_path / "small", keep=16)
    cache = tmp_path / "cache"
    cfg = DataConfig(path=str(big), cache_dir=str(cache), seq_len=SEQ_LEN, min_window=4, shuffle=False)
    assert len(tags(build_train_dataloader(cfg, 4)[0])) == 64
    assert json.loads((cache / CACHE_SOURCE).read_text())["source"] == str(big.resolve())
    loader, dataset = build_train_dataloader(replace(cfg, path=str(small)), 4)
    assert dataset.num_samples == 16 and tags(loader) == list(range(16))
    assert json.loads((cache / CACHE_SOURCE).read_text())["source"] == str(small.resolve())
    # the same source again: the cache is used as it is
    before = {p.name: p.stat().st_mtime_ns for p in cache.iterdir()}
    assert len(tags(build_train_dataloader(replace(cfg, path=str(small)), 4)[0])) == 16
    assert {p.name: p.stat().st_mtime_ns for p in cache.iterdir() if p.name in before} == before


def test_a_cache_folder_that_is_not_ours_is_refused_in_one_line(shards, tmp_path):

    root, _ = shards
    data = _prepared_copy(root, tmp_path / "data")
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "index.json").write_text('{"shards": [], "version": 2}')
    (cache / "precious.txt").write_text("keep me")
    cfg = DataConfig(path=str(data), cache_dir=str(cache), seq_len=SEQ_LEN, min_window=4, shuffle=False)
    with pytest.raises(PreparedDataError, match="not a cache of data.path") as info:
        build_train_dataloader(cfg, 4)
    assert "\n" not in str(info.value) and (cache / "precious.txt").read_text() == "keep me"
    # a cache of this very source made before the check (no .source.json) is adopted, not refused
    adopted = tmp_path / "adopted"
    adopted.mkdir()
    (adopted / "index.json").write_bytes((data / "index.json").read_bytes())
    loader, _ = build_train_dataloader(replace(cfg, cache_dir=str(adopted)), 4)
    assert len(tags(loader)) == 64


def test_a_forged_cache_marker_does_not_empty_a_folder_with_other_files(shards, tmp_path):
    """Issue 66, item 2: any folder holding a `.source.json` with the two expected keys, used as
    data.cache_dir, was emptied (a thesis.tex beside it vanished). A bound cache is emptied only when
    it holds what a cache holds; otherwise one line, nothing removed."""
    from pretraining.data.cache_binding import CACHE_SOURCE

    root, _ = shards
    data = _prepared_copy(root, tmp_path / "data")
    folder = tmp_path / "thesis"
    folder.mkdir()
    (folder / CACHE_SOURCE).write_text(json.dumps({"source": "/elsewhere", "index_sha256": "0" * 64}))
    (folder / "thesis.tex").write_text("\\documentclass{article}")
    (folder / "figures").mkdir()
    cfg = DataConfig(path=str(data), cache_dir=str(folder), seq_len=SEQ_LEN, min_window=4, shuffle=False)
    with pytest.raises(PreparedDataError, match="holds files a streaming cache does not") as info:
        build_train_dataloader(cfg, 4)
    assert "\n" not in str(info.value) and "figures, thesis.tex" in str(info.value)
    assert (folder / "thesis.tex").read_text() == "\\documentclass{article}" and (folder / "figures").is_dir()
