"""The training DataLoader over prepared shards: StreamingDataset + a packed-sample collate.

Resumption mid-epoch is streaming's: Composer saves `dataset.state_dict(samples_seen, True)` in its
checkpoints and calls `load_state_dict` on resume; the next iteration skips what was seen.
Starting at `data.start_sample` (continued pretraining) uses the same mechanism: the dataset is
given the state "epoch 0, sample start_sample" before it is iterated (streaming's documented
mid-epoch resumption), and the states it saves count from sample 0 of the epoch.
Shared memory: streaming names its shared memory per dataset with a prefix, which each node's local
leader chooses here (pretraining/data/shm_prefix.py); a process that may inherit stale blocks from a
killed run should call `streaming.base.util.clean_stale_shared_memory()` once at start-up, before
creating any dataset (never while one is alive: it also removes live blocks).
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path

import numpy as np
import torch
from streaming import StreamingDataset
from torch.utils.data import DataLoader

from pretraining.data.cache_binding import bind_cache_on_leader
from pretraining.data.config import DataConfig, PreparedDataError
from pretraining.data.format import MANIFEST, MdsIndexError, check_index, present_shard_files
from pretraining.data.packing import document_ids
from pretraining.data.shm_prefix import leader_chosen_shm_prefix
from pretraining.data.windows import EARLY_END, window_ids
from pretraining.objectives import SAMPLE_INDEX, WINDOW_IDS


class PackedCollator:
    """Samples {"input_ids", "doc_lengths", "sample_index"} -> {"input_ids", "document_ids",
    "window_ids"} LongTensor[B, L] and {"sample_index"} LongTensor[B].

    document_ids numbers the documents of each sample 0, 1, 2, ... (a position's document);
    window_ids the windows of its block (0, then 1 after the random split point; all 0 for
    `fixed` windows): the objective turns them into attention segments (model.attention_scope).
    sample_index seeds each row's MLM mask (pretraining/objectives.py) and its split point.
    """

    def __init__(
        self, seq_len: int, windows: str = "fixed", seed: int = 0, min_window: int = 12, early_end: int = EARLY_END
    ) -> None:
        self.seq_len, self.windows, self.seed, self.min_window = seq_len, windows, seed, min_window
        self.early_end = early_end

    def __call__(self, samples: list[dict]) -> dict[str, torch.Tensor]:
        for sample in samples:
            if len(sample["input_ids"]) != self.seq_len:
                raise ValueError(
                    f"a sample has {len(sample['input_ids'])} tokens but data.seq_len is "
                    f"{self.seq_len}: prepare the data with this seq_len or change the config"
                )
        input_ids = np.stack([s["input_ids"] for s in samples]).astype(np.int64)
        doc_ids = np.stack([document_ids(s["doc_lengths"]) for s in samples])
        indices = [int(s[SAMPLE_INDEX]) for s in samples]
        lengths = [s["doc_lengths"] for s in samples]
        windows = window_ids(indices, self.seq_len, self.windows, self.seed, self.min_window, lengths, self.early_end)
        return {
            "input_ids": torch.from_numpy(input_ids),
            "document_ids": torch.from_numpy(doc_ids),
            WINDOW_IDS: torch.from_numpy(windows),
            SAMPLE_INDEX: torch.tensor(indices, dtype=torch.int64),
        }


def _streaming_locations(cfg: DataConfig) -> tuple[str | None, str]:
    """(remote, local) for StreamingDataset, with clear errors for missing or mismatched data."""
    if cfg.is_remote:
        cache = cfg.cache_dir or str(
            Path(tempfile.gettempdir()) / "mlm-vs-clm-mds" / hashlib.sha256(cfg.path.encode()).hexdigest()[:16]
        )
        return cfg.path, cache
    root = Path(cfg.path)
    if not (root / "index.json").is_file():
        raise FileNotFoundError(
            f"no prepared data at {root} (index.json missing): run `python -m pretraining prepare-data "
            f"--out {root} ...` first, or set data.path to its output folder"
        )
    check_shard_sizes(root)
    manifest = root / MANIFEST
    if manifest.is_file():
        from contracts.bounded import LARGE, BoundedReadError, read_text

        try:  # bounded (issue 56): it lists the input files, so LARGE
            prepared_len = json.loads(read_text(manifest, LARGE))["seq_len"]
        except BoundedReadError as exc:
            raise PreparedDataError(f"{exc}: prepare the data again") from None
        if prepared_len != cfg.seq_len:
            raise PreparedDataError(
                f"{root} holds samples of {prepared_len} tokens but data.seq_len is "
                f"{cfg.seq_len}: set data.seq_len={prepared_len} or prepare the data again"
            )
    if cfg.cache_dir is not None:  # copy (e.g. from a shared file system) into a node-local cache
        return str(root), cfg.cache_dir
    return None, str(root)


def check_shard_sizes(root: Path) -> None:
    """Every shard that index.json names is on disk with the size it records (its compressed file,
    or the raw file streaming decompresses beside it): a copy cut short or a missing shard is found
    before a run writes anything, in one line, not as an IndexError from a sample in the middle of
    training (docs/reliability.md). Only sizes, so it costs a stat per shard at any scale; contents
    (hashes) are what `verify-data` checks."""
    from contracts.bounded import LARGE, BoundedReadError, read_text

    index = root / "index.json"
    try:
        body = json.loads(read_text(index, LARGE))
        check_index(body, str(index))  # names and columns, before any shard is touched (issue 78)
        shards = body["shards"]
    except BoundedReadError as exc:
        raise PreparedDataError(f"{exc}: prepare the data again") from None
    except MdsIndexError as exc:
        raise PreparedDataError(str(exc)) from None
    except (json.JSONDecodeError, RecursionError, KeyError, TypeError) as exc:
        raise PreparedDataError(f"{index} is not an MDS index ({exc}): prepare the data again") from None
    for shard in shards:
        files, present = present_shard_files(root, shard, str(index))
        if not present:
            raise PreparedDataError(
                f"{root}: shard {files[0]['basename'] if files else '?'} named in index.json is missing: "
                "the copy is incomplete; copy or prepare the data again"
            )
        for info, path, size in present:
            if size != info["bytes"]:
                raise PreparedDataError(
                    f"{path}: {size} bytes, index.json records {info['bytes']}: the file is cut short or "
                    f"replaced; check the folder with `python -m pretraining verify-data {root}` and copy "
                    "or prepare the data again"
                )


class ContinuedStreamingDataset(StreamingDataset):
    """A StreamingDataset whose first epoch starts at sample `start_sample` of its order.

    Composer counts the samples of the epoch from where this run started and saves
    `state_dict(count, from_beginning=True)`; the start is added back so that a resumed run
    continues at the right sample. Later epochs (data.allow_repeats) start at 0 as usual.

    Each sample also carries its global index, `epoch * num_samples + its id in the prepared
    data`: the same on every rank and whatever the number of ranks, so MLM masks seeded from it
    do not depend on how the samples are spread over ranks (docs/pretraining.md).
    """

    def __init__(self, *, start_sample: int = 0, **kwargs) -> None:
        super().__init__(**kwargs)
        self.start_sample = start_sample
        self.location = kwargs.get("remote") or kwargs.get("local")
        if start_sample:
            self.load_state_dict(
                {
                    "epoch": 0,
                    "sample_in_epoch": start_sample,
                    "num_canonical_nodes": self.num_canonical_nodes,
                    "shuffle_seed": self.shuffle_seed,
                }
            )

    def get_item(self, sample_id: int, retry: int = 7) -> dict:
        try:
            sample = super().get_item(sample_id, retry)
        except (IndexError, ValueError) as exc:  # a shard whose contents are not what index.json says
            raise PreparedDataError(
                f"{self.location}: sample {sample_id} cannot be read ({type(exc).__name__}: {exc}): the prepared "
                f"data is corrupted; check it with `python -m pretraining verify-data {self.location}` and prepare "
                "it again (remove the decompressed .mds files streaming wrote beside the shards, or the cache_dir)"
            ) from exc
        epoch = max(0, self.next_epoch - 1)  # streaming pre-increments next_epoch as an epoch starts
        return {**sample, SAMPLE_INDEX: epoch * self.num_samples + sample_id}

    def state_dict(self, num_samples: int, from_beginning: bool) -> dict:
        state = super().state_dict(num_samples, from_beginning)
        if from_beginning and state["epoch"] == 0:
            state["sample_in_epoch"] += self.start_sample
        return state


def build_train_dataset(cfg: DataConfig, device_batch_size: int) -> StreamingDataset:
    remote, local = _streaming_locations(cfg)
    if remote is not None:  # a cache copies the source: bound to it, never stale (cache_binding)
        bind_cache_on_leader(local, remote, cfg.is_remote, cfg.download_timeout)
    # The node's local leader alone picks the shared-memory prefix (pretraining/data/shm_prefix.py).
    with leader_chosen_shm_prefix():
        return ContinuedStreamingDataset(
            start_sample=cfg.start_sample,
            remote=remote,
            local=local,
            batch_size=device_batch_size,
            shuffle=cfg.shuffle,
            shuffle_seed=cfg.shuffle_seed,
            shuffle_algo=cfg.shuffle_algo,
            shuffle_block_size=cfg.shuffle_block_size,
            num_canonical_nodes=cfg.num_canonical_nodes,
            predownload=cfg.predownload,
            cache_limit=cfg.cache_limit,
            download_retry=cfg.download_retry,
            download_timeout=cfg.download_timeout,
        )


def build_train_dataloader(
    cfg: DataConfig, device_batch_size: int, num_workers: int = 0
) -> tuple[DataLoader, StreamingDataset]:
    if device_batch_size < 1:
        raise ValueError("device_batch_size must be >= 1")
    dataset = build_train_dataset(cfg, device_batch_size)
    loader = DataLoader(
        dataset,
        batch_size=device_batch_size,
        collate_fn=PackedCollator(cfg.seq_len, cfg.windows, cfg.shuffle_seed, cfg.min_window, cfg.window_early_end),
        num_workers=num_workers,
        drop_last=cfg.drop_last,
        pin_memory=torch.cuda.is_available(),
        persistent_workers=num_workers > 0,
    )
    return loader, dataset
