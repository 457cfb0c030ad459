"""Shared fixtures of the pretraining tests: a tiny in-memory packed dataset in the data
pipeline's batch format (`input_ids`, `document_ids`, `window_ids` LongTensor[B, L]) and tiny configs."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from pretraining.data.windows import window_ids
from pretraining.objectives import TokenIds

# Toy models are far too small for intra-op threads to pay off; one thread is faster on 2 cores.
torch.set_num_threads(1)

# Toy vocabulary: 0..3 are specials (bos, eos = pad, mask), 4.. regular tokens.
BOS, EOS, MASK, VOCAB = 0, 1, 2, 96
TOY_IDS = TokenIds(mask=MASK, special=(BOS, EOS, MASK), vocab_size=VOCAB)


class PackedToyDataset(Dataset):
    """Deterministic packed samples: documents 'bos w w w ... eos' of a learnable pattern.

    Each document counts up from a random start (mod the regular vocabulary), so both CLM and MLM
    losses can fall quickly in a few steps.
    """

    def __init__(self, num_samples: int = 256, seq_len: int = 32, seed: int = 0):
        g = torch.Generator().manual_seed(seed)
        self.samples = []
        for _ in range(num_samples):
            ids, docs, doc = [], [], 0
            while len(ids) < seq_len:
                length = int(torch.randint(4, 14, (1,), generator=g))
                start = int(torch.randint(0, VOCAB - 4, (1,), generator=g))
                body = [4 + (start + k) % (VOCAB - 4) for k in range(length)]
                for token in [BOS, *body, EOS]:
                    ids.append(token)
                    docs.append(doc)
                doc += 1
            self.samples.append((torch.tensor(ids[:seq_len]), torch.tensor(docs[:seq_len])))

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, index):
        ids, docs = self.samples[index]
        (windows,) = window_ids([index], len(ids), "random_split", seed=0, min_window=4)  # as the real loader
        return {"input_ids": ids, "document_ids": docs, "window_ids": torch.from_numpy(windows), "sample_index": index}


def toy_dataloader(batch_size: int = 8, seq_len: int = 32, num_samples: int = 256) -> DataLoader:
    return DataLoader(PackedToyDataset(num_samples, seq_len), batch_size=batch_size, shuffle=False)


@pytest.fixture
def toy_batch():
    return next(iter(toy_dataloader()))


def toy_run_config(tmp_path, name="toy", **sections):
    """A PretrainConfig for a tiny CPU run in tmp_path/name; `sections` update the default sections."""
    from contracts.config import config_from_dict
    from pretraining.config import PretrainConfig

    data = {
        "name": name,
        "run_dir": str(tmp_path / name),
        "tokenizer": "embedded",
        "data": {"path": str(tmp_path / "unused-data")},  # the tests inject an in-memory loader
        # Attention per document: the in-memory documents are short counting runs whose MLM signal
        # lies inside the document (over windows of several documents MLM needs ~2.5x the steps);
        # window attention, the default, is trained on real text by test_cli and test_multirank.
        "model": {"preset": "toy_s", "attention_scope": "document"},
        "objective": {"kind": "mlm", "mlm_ratio": 0.4},
        "optimizer": {"lr": 5e-3},
        "schedule": {"warmup": 3, "decay": 5},
        "train": {"max_steps": 24, "global_batch_size": 8, "resume_interval": 8, "progress_bar": False, "seed": 3},
    }
    for key, value in sections.items():
        data[key] = {**data.get(key, {}), **value} if isinstance(value, dict) else value
    return config_from_dict(PretrainConfig, data, "toy_run_config")


def interrupt_at(step: int):
    """A Composer callback raising at the end of `step`, as a preemption would (Composer imported
    here so that this conftest stays importable without it)."""
    from composer import Callback

    class Interrupt(Callback):
        def batch_end(self, state, logger):
            if int(state.timestamp.batch) == step:
                raise KeyboardInterrupt("simulated preemption")

    return Interrupt()
