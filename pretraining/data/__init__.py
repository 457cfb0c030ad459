"""Pretraining data: prepare-data (text -> packed MDS shards), verify-data, and the train loader.

`pretraining.data.packing` and `pretraining.data.config` import neither streaming nor torch; the
loader imports them only when `build_train_dataloader` is called.
"""

from pretraining.data.config import DataConfig


def build_train_dataloader(data_cfg: DataConfig, device_batch_size: int, num_workers: int = 0):
    """(DataLoader, StreamingDataset) yielding {"input_ids", "document_ids", "window_ids"}
    LongTensor[B, L] and {"sample_index"} LongTensor[B]."""
    from pretraining.data.loader import build_train_dataloader as build

    return build(data_cfg, device_batch_size, num_workers)


__all__ = ["DataConfig", "build_train_dataloader"]
