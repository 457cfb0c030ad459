"""DataConfig: where the prepared shards are and how StreamingDataset orders them (no heavy imports),
and the check that a run's samples fit in the prepared data (docs/data.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


class DataBudgetError(ValueError):
    """Prepared data that holds fewer samples than a run reads; the message names the fix."""


class PreparedDataError(ValueError):
    """Prepared data whose files do not match its index.json (missing, cut short); found before a
    run writes anything. The message names the file and the fix."""


@dataclass(frozen=True)
class DataConfig:
    """Reading prepared data (the output of `prepare-data`) for training.

    `path` is a local folder or a remote URL (s3://, gs://, ...). A local folder is read in place
    (streaming decompresses each shard next to its .zstd file) unless `cache_dir` is set; a remote
    one, or a local one with `cache_dir`, is copied shard by shard into `cache_dir`. Datasets alive
    at the same time in one process need distinct cache_dirs. The sample order is a function of
    (shards, shuffle_seed, shuffle_algo, shuffle_block_size, num_canonical_nodes) only, so it stays
    the same on any number of GPUs as long as num_canonical_nodes stays fixed (streaming's default
    depends on the node count) and the global batch size is constant.
    """

    path: str
    cache_dir: str | None = None  # None: local path read in place; remote path -> <tmp>/mlm-vs-clm-mds/<hash>
    seq_len: int = 2048
    shuffle: bool = True
    shuffle_seed: int = 17
    shuffle_algo: str = "py1e"
    shuffle_block_size: int | None = None  # None: streaming's default
    num_canonical_nodes: int = 1
    predownload: int | None = None  # None: streaming's default (8 x batch size)
    cache_limit: str | None = None  # e.g. "100gb": evict shards of a remote dataset beyond this
    download_retry: int = 2
    download_timeout: float = 60.0
    drop_last: bool = True
    start_sample: int = 0  # first sample of the order this run reads (CPT: base steps x batch)
    allow_repeats: bool = False  # True: a run may read the data for more than one epoch
    # Each block of seq_len tokens is split at a random point into two windows of min_window..
    # seq_len - min_window tokens (the release), or kept whole ("fixed"); the split of a block is
    # seeded by (shuffle_seed, its sample index) (pretraining/data/windows.py). The first window
    # ends early at a document end at most window_early_end tokens before the split (the release's
    # packer; 0: always at the split).
    windows: Literal["random_split", "fixed"] = "random_split"
    min_window: int = 12
    window_early_end: int = 12

    def __post_init__(self) -> None:
        if self.seq_len < 2:
            raise ValueError(f"seq_len must be >= 2, got {self.seq_len}")
        if self.num_canonical_nodes < 1:
            raise ValueError("num_canonical_nodes must be >= 1")
        if self.start_sample < 0:
            raise ValueError(f"data.start_sample must be >= 0, got {self.start_sample}")
        if not 0 <= self.window_early_end < self.seq_len:
            raise ValueError(
                f"data.window_early_end {self.window_early_end} is not in [0, data.seq_len {self.seq_len}); "
                "use 12 (the release) or 0 (split exactly at the drawn point)"
            )
        if self.windows == "random_split" and not 1 <= self.min_window <= self.seq_len // 2:
            raise ValueError(
                f"data.min_window {self.min_window}: two windows of at least that many tokens must fit in "
                f"data.seq_len {self.seq_len}; lower it or set data.windows=fixed"
            )

    @property
    def is_remote(self) -> bool:
        return "://" in self.path


def data_budget(available: int, cfg: DataConfig, steps: int, global_batch_size: int) -> str:
    """One line saying which samples a run of `steps` x `global_batch_size` reads out of the
    `available` prepared ones, and in how many epochs. DataBudgetError when it needs more than one
    epoch and `cfg.allow_repeats` is off, or when `start_sample` lies beyond the first epoch (a
    base run that itself repeated data cannot be continued exactly)."""
    start, end = cfg.start_sample, cfg.start_sample + steps * global_batch_size
    epochs = end / available if available else float("inf")
    line = (
        f"data: {cfg.path} holds {available:,} samples; this run reads samples "
        f"{start:,} to {end - 1:,} ({steps:,} steps x {global_batch_size:,}) = {epochs:.3g} epochs"
    )
    if start >= available:
        raise DataBudgetError(
            f"{line}: data.start_sample lies beyond the data, so the run it "
            "continues read it more than once and cannot be continued exactly; "
            "prepare data that holds the base run's and this run's samples before "
            "training the base run"
        )
    if end > available and not cfg.allow_repeats:
        raise DataBudgetError(
            f"{line}: samples would repeat; prepare more documents (e.g. a larger "
            "--max-documents or --hf-config), shorten the run, or set "
            "data.allow_repeats=true"
        )
    return line + ("; samples repeat (data.allow_repeats)" if end > available else "")
