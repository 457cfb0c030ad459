"""What each release-faithful setting of the `paper` protocol changes, measured on the toy world
(docs/protocol.md, "Measured on the toy world"): the same fine-tuning runs with the release's value
of one setting and with the value the harness used before (issue 28), all else the paper's.

    python -m benchmarks.protocol_deltas --world WORLD --model CKPT --out OUT [--lr 2e-3] [--seed 0]
        [--trust-remote-code]

WORLD is a toy world (`reproduce.world`: `tasks/`, `world.jsonl`), CKPT a checkpoint pretrained on it
(the commands that made the one of docs/protocol.md are there). Settings:
- max_grad_norm 1.0 / null (every task), ir_eval_encoding sentence_transformers / as_training (IR),
  on CKPT;
- head own / package (SC, TC, QA) on a copy of CKPT that ships EuroBERT-style heads (`own_heads`:
  the release's own head classes are not public);
- tc_whitespace_tokens next_word / ignore (TC) on CKPT, whose GPT-2-style tokenizer makes few
  whitespace-only tokens, and on an untrained toy_s with a Llama-3-style tokenizer trained on the
  world (`llama3_style_tokenizer`), which splits " 1996" into " ", "199", "6".
The released setting's runs of a seed `--noise-seed` give the seed-to-seed spread to read the deltas
against. Writes OUT/deltas.csv and prints the table of docs/protocol.md.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

from contracts.bounded import SMALL, read_json_object

CONFIG = Path(__file__).resolve().parent / "configs" / "toy_world.yaml"
# setting -> (the release's value, ours before, the task types it touches)
SETTINGS = {
    "max_grad_norm": (1.0, None, ("SC", "TC", "QA", "IR")),
    "ir_eval_encoding": ("sentence_transformers", "as_training", ("IR",)),
    "head": ("own", "package", ("SC", "TC", "QA")),
    "tc_whitespace_tokens": ("next_word", "ignore", ("TC",)),
}
# Llama-3's pre-tokenizer split (its tokenizer.json): digits in runs of 1-3, without the space
# before them, so " 1996" becomes " ", "199", "6".
LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# Task heads shipped as remote code beside a checkpoint of ours, written as EuroBERT's remote code
# writes them (EuroBertForSequenceClassification: mean pooling, dense, GELU, linear;
# EuroBertForTokenClassification: linear), the closest public stand-in for the release's
# SLModelFor* classes (docs/protocol.md, "Choices" 21).
_OWN_HEADS = """
from torch import nn
from transformers.modeling_outputs import SequenceClassifierOutput, TokenClassifierOutput

from .modeling_mlmclm import MlmClmModel, MlmClmPreTrainedModel


class _WithBiases(MlmClmPreTrainedModel):
    def _init_weights(self, module):  # as EuroBERT's: our body has no biases, its heads do
        super()._init_weights(module)
        if isinstance(module, nn.Linear) and module.bias is not None:
            module.bias.data.zero_()

    def get_input_embeddings(self):
        return self.model.embed_tokens


class MlmClmForSequenceClassification(_WithBiases):
    def __init__(self, config):
        super().__init__(config)
        self.model = MlmClmModel(config)
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = nn.GELU()
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    def forward(self, input_ids, attention_mask=None, **kwargs):
        hidden = self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(1) / mask.sum(1)
        return SequenceClassifierOutput(logits=self.classifier(self.activation(self.dense(pooled))))


class MlmClmForTokenClassification(_WithBiases):
    def __init__(self, config):
        super().__init__(config)
        self.model = MlmClmModel(config)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    def forward(self, input_ids, attention_mask=None, **kwargs):
        hidden = self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return TokenClassifierOutput(logits=self.classifier(hidden))
"""
OWN_HEAD_CLASSES = {
    "AutoModelForSequenceClassification": "modeling_heads.MlmClmForSequenceClassification",
    "AutoModelForTokenClassification": "modeling_heads.MlmClmForTokenClassification",
}


def llama3_style_tokenizer(texts, vocab_size: int = 2048):
    """A byte-level BPE like the world's (pretraining.tokenizer.train_embedded) but split as Llama-3's."""
    from pretraining.tokenizer.train_embedded import train_byte_level_bpe

    return train_byte_level_bpe(texts, vocab_size, split_pattern=LLAMA3_SPLIT)


def own_heads(model: Path, out: Path) -> Path:
    """A copy of checkpoint `model` (ours) whose code also ships SC/TC heads (auto_map)."""
    if not out.exists():
        shutil.copytree(model, out)
        (out / "modeling_heads.py").write_text(_OWN_HEADS)
        config = read_json_object(out / "config.json", SMALL)
        config["auto_map"] = {**config["auto_map"], **OWN_HEAD_CLASSES}
        (out / "config.json").write_text(json.dumps(config, indent=2))
    return out


def llama3_style_model(world: Path, out: Path) -> Path:
    """An untrained toy_s (pretraining.export.export_random_init) with a Llama-3-style tokenizer of the world."""
    from pretraining.export import export_random_init

    model = out / "toy_s-random-init-llama3-split"
    if not model.exists():
        texts = [json.loads(line)["text"] for line in (world / "world.jsonl").open()]
        llama3_style_tokenizer(texts).save_pretrained(out / "llama3-split-tokenizer")
        export_random_init("toy_s", model, tokenizer=str(out / "llama3-split-tokenizer"))
    return model


def whitespace_tokens(model: Path, data_root: Path) -> tuple[int, int]:
    """(whitespace-only tokens, all tokens) of the TC test sentences as `paper` inputs, with `model`'s tokenizer."""
    from benchmarks.datasets import load_task_data
    from benchmarks.kinds.common import load_tokenizer, tokenize
    from benchmarks.tasks import tasks_of

    tokenizer, spaces, tokens = load_tokenizer(str(model)), 0, 0
    for spec in tasks_of("TC"):
        test = load_task_data(spec, data_root, roles=("test",)).split("test")
        texts = [" ".join(words) for words in test["tokens"]]
        enc = tokenize(tokenizer, texts, 10**6, protocol="paper", return_offsets_mapping=True)
        for text, offsets in zip(texts, enc["offset_mapping"]):
            tokens += len(offsets)
            spaces += sum(1 for start, end in offsets if start < end <= len(text) and text[start:end].isspace())
    return spaces, tokens


def _score(
    model: Path, name: str, task: str, out: Path, lr: float, seed: int, data_root: Path, set_: list, trust: bool
) -> float:
    from benchmarks.run import load_run_config, run

    values = {"model": str(model), "model_name": name, "task": task, "lr": lr, "seed": seed}
    values.update({"out": str(out), "data_root": str(data_root), "trust_remote_code": trust})
    record, _ = run(load_run_config(values, CONFIG, set_))
    return record.test_score


def checkpoints(world: Path, model: Path, name: str, out: Path, trust: bool = False) -> dict[str, dict[str, Path]]:
    """setting -> {name: checkpoint} it is measured on (module doc). The `head` setting runs the
    model code a copy of `model` ships (its own heads, and so the code `model` ships too): only
    with `trust` (--trust-remote-code)."""
    untrained = llama3_style_model(world, out / "models")
    models = {
        "max_grad_norm": {name: model},
        "ir_eval_encoding": {name: model},
        "tc_whitespace_tokens": {name: model, untrained.name: untrained},
    }
    if trust:
        heads = f"{name}-own-heads"
        models["head"] = {heads: own_heads(model, out / "models" / heads)}
    return models


def measure(
    world: Path,
    models: dict[str, dict[str, Path]],
    out: Path,
    lr: float,
    seed: int,
    noise_seed: int | None,
    trust: bool = False,
) -> list[dict]:
    """One row per (setting, checkpoint, task it touches): test scores under both values."""
    from benchmarks.tasks import TASKS

    data_root = world / "tasks"
    rows = []
    for setting, (released, before, types) in SETTINGS.items():
        for name, checkpoint in models.get(setting, {}).items():
            for task, spec in TASKS.items():
                if spec.task_type not in types:
                    continue
                ours_before = [f"{setting}={'null' if before is None else before}"]
                score = _score(checkpoint, name, task, out / "released", lr, seed, data_root, [], trust)
                old = _score(checkpoint, name, task, out / f"before-{setting}", lr, seed, data_root, ours_before, trust)
                noise = None
                if noise_seed is not None:
                    other = _score(checkpoint, name, task, out / "released", lr, noise_seed, data_root, [], trust)
                    noise = abs(other - score)
                rows.append(
                    {
                        "setting": setting,
                        "released": released,
                        "before": before,
                        "model": name,
                        "task": task,
                        "released_score": round(score, 2),
                        "before_score": round(old, 2),
                        "delta": round(score - old, 2),
                        "seed_spread": None if noise is None else round(noise, 2),
                    }
                )
    return rows


def table(rows: list[dict]) -> str:
    """Markdown: one row per (setting, model), the per-task deltas and their mean absolute value."""
    lines = [
        "| setting: released / ours before | model | delta per task (released - before) "
        "| mean abs delta | mean seed spread |",
        "|---|---|---|---|---|",
    ]
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        groups.setdefault((row["setting"], row["model"]), []).append(row)
    for (setting, model), group in groups.items():
        first = group[0]
        label = f"`{setting}`: {first['released']} / {'null' if first['before'] is None else first['before']}"
        deltas = ", ".join(f"{r['task']} {r['delta']:+.2f}" for r in group)
        mean_abs = sum(abs(r["delta"]) for r in group) / len(group)
        spreads = [r["seed_spread"] for r in group if r["seed_spread"] is not None]
        spread = f"{sum(spreads) / len(spreads):.2f}" if spreads else "-"
        lines.append(f"| {label} | {model} | {deltas} | {mean_abs:.2f} | {spread} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    import pandas as pd
    import torch

    parser = argparse.ArgumentParser(prog="python -m benchmarks.protocol_deltas", description=__doc__.split("\n")[0])
    parser.add_argument("--world", required=True, type=Path, help="toy world folder (tasks/, world.jsonl)")
    parser.add_argument("--model", required=True, type=Path, help="a checkpoint pretrained on it")
    parser.add_argument("--model-name", help="its name in the runs and the table (default: its folder's)")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--lr", type=float, default=2e-3, help="fine-tuning LR (toy default 2e-3)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--noise-seed", type=int, default=1, help="a second seed of the released runs (-1: none)")
    parser.add_argument(
        "--trust-remote-code",
        action="store_true",
        help="let --model run the model code it ships (needed for a checkpoint of another model type, and for "
        "the `head` setting, which runs a copy of it with heads in its code); only for code you trust",
    )
    args = parser.parse_args(argv)
    for path in (args.world / "tasks", args.world / "world.jsonl", args.model / "config.json"):
        if not path.exists():
            parser.error(f"{path} does not exist: --world is a toy world folder, --model a checkpoint folder")
    from benchmarks.kinds.checkpoint import ModelLoadError, check_remote_code

    try:  # before anything is written or loaded (docs/reliability.md)
        check_remote_code(str(args.model), args.trust_remote_code)
    except ModelLoadError as exc:
        print(f"protocol_deltas: {exc}", file=sys.stderr)
        return 2
    if not args.trust_remote_code:
        print("protocol_deltas: setting `head` skipped: it runs code shipped with a checkpoint (--trust-remote-code)")
    torch.set_num_threads(1)
    started = time.time()
    noise_seed = None if args.noise_seed < 0 else args.noise_seed
    trust = args.trust_remote_code
    models = checkpoints(args.world, args.model, args.model_name or args.model.name, args.out, trust)
    rows = measure(args.world, models, args.out, args.lr, args.seed, noise_seed, trust)
    pd.DataFrame(rows).to_csv(args.out / "deltas.csv", index=False)
    print(table(rows))
    for name, model in models["tc_whitespace_tokens"].items():
        spaces, tokens = whitespace_tokens(model, args.world / "tasks")
        print(f"{name}: {spaces} whitespace-only tokens of {tokens} in the TC test sentences")
    print(f"{len(rows)} task rows in {time.time() - started:.0f} s -> {args.out / 'deltas.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
