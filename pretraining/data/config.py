"""DataConfig: where the prepared shards are and how StreamingDataset orders them (no heavy imports)."""
from __future__ import annotations

from dataclasses import dataclass


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

    def __post_init__(self) -> None:
        if self.seq_len < 2:
            raise ValueError(f"seq_len must be >= 2, got {self.seq_len}")
        if self.num_canonical_nodes < 1:
            raise ValueError("num_canonical_nodes must be >= 1")

    @property
    def is_remote(self) -> bool:
        return "://" in self.path
