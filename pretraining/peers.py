"""The pretraining step through the trainer a user would pick instead of ours (issue 82, item 2):
the Hugging Face `Trainer` on the same model class, batches, sequence, batch size and precision as
`pretraining bench` (pretraining/bench.py), timed over the same steps, reported in the bench's row
format (both MFU counts, pretraining.flops) so that `--peers hf-trainer` prints it beside ours.

What is the same: MlmClmForLM of the preset, its seeded initial weights, the bench's synthetic
packed batches with their two random windows per block (segment_ids passed to the model, as our
path does), bf16 autocast where the bench uses it, SDPA/FlexAttention as `--attn` says, AdamW
(lr 5e-4, betas 0.9/0.95, eps 1e-5, weight decay 0.1; fused with `--fused-adamw`), gradient
clipping at 1.0, `torch_compile=True` with `--compile` (Trainer compiles the whole model; our path
compiles the blocks).

What is the Trainer's own, as a user would run it: the MLM masks come from transformers'
DataCollatorForLanguageModeling at `--mlm-ratio` (set to the paper's replacement: every selected
position becomes the mask token, as pretraining.objectives' default; special ids 0/1/2 never
masked), drawn by the collator, not by our per-sample generators; CLM labels are the model class's
own convention (shifted targets within each window, pretraining.objectives.clm_labels: this model
takes labels already shifted, so "the plain causal LM loss" is its loss on those); the loss is the
model's own forward (the reference loss kernel: Trainer calls `model(**batch)`); the LR is constant
after one warmup step (the bench: WSD with one warmup step, constant over a bench's few steps);
Trainer's weight decay skips biases and norms (ours decays every parameter); the sample order is
the Trainer's shuffled sampler. None of these changes the work of a step.

The release's own trainer (EuroBERT's Optimus, branch MLM_vs_CLM) is not a peer here: this
package holds no copy of it and none could be fetched in this session (docs/timings.md, "Peers").
"""

from __future__ import annotations

import copy
import tempfile
import time

import torch

from pretraining.bench import BOS, EOS, MASK, _report, _setup, _sync, build_bench_model, synthetic_batches
from pretraining.data.windows import attention_segments
from pretraining.flops import attention_pairs
from pretraining.objectives import IGNORE_INDEX, WINDOW_IDS, clm_labels
from pretraining.options import PEERS


def run_peer(name: str, args) -> dict:
    """The bench row of peer `name` (one of pretraining.options.PEERS)."""
    if name == "hf-trainer":
        return run_hf_trainer(args)
    raise ValueError(f"unknown peer {name!r}; choose from {', '.join(PEERS)}")


def toy_tokenizer(vocab_size: int):
    """A tokenizer of the bench's synthetic ids (BOS 0, EOS 1, MASK 2, then one token per id): what
    DataCollatorForLanguageModeling needs (the mask and special ids, the vocabulary's size)."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    names = {BOS: "<s>", EOS: "</s>", MASK: "<mask>"}
    vocab = {names.get(i, f"t{i}"): i for i in range(vocab_size)}
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(WordLevel(vocab, unk_token="</s>")),
        bos_token="<s>",
        eos_token="</s>",
        mask_token="<mask>",
        pad_token="</s>",  # the blocks are full: nothing is padded
        model_input_names=["input_ids"],  # no attention_mask: the windows come as segment_ids
    )
    assert len(tokenizer) == vocab_size and tokenizer.mask_token_id == MASK
    return tokenizer


class CountingCollator:
    """The peer's collator (MLM: transformers' at the ratio; CLM: the model's shifted labels), with
    segment_ids from each sample's windows; counts the labelled positions and attended pairs of
    every batch it makes, for the FLOPs of the timed steps."""

    def __init__(self, objective: str, ratio: float, vocab_size: int, seed: int = 0):
        from transformers import DataCollatorForLanguageModeling

        self.objective = objective
        self.mlm = DataCollatorForLanguageModeling(
            toy_tokenizer(vocab_size), mlm_probability=ratio, mask_replace_prob=1.0, random_replace_prob=0.0, seed=seed
        )
        self.labelled: list[int] = []
        self.pairs: list[int] = []

    def __call__(self, samples: list[dict]) -> dict:
        segments = torch.stack([s["segment_ids"] for s in samples])
        if self.objective == "mlm":
            batch = dict(self.mlm([{"input_ids": s["input_ids"]} for s in samples]))
        else:
            ids = torch.stack([s["input_ids"] for s in samples])
            batch = {"input_ids": ids, "labels": clm_labels(ids, segments)}
        batch["segment_ids"] = segments
        self.labelled.append(int((batch["labels"] != IGNORE_INDEX).sum()))
        self.pairs.append(attention_pairs(segments))
        return batch


def run_hf_trainer(args) -> dict:
    """One timed run of the Hugging Face Trainer peer; a row of `pretraining bench` (path
    `hf-trainer`, `+compile` with torch_compile) with both MFU counts where the peak is known."""
    from transformers import PrinterCallback, Trainer, TrainerCallback, TrainingArguments

    device, bf16, cfg = _setup(args)
    built = copy.copy(args)
    built.compile, built.loss_kernel = False, "reference"  # Trainer compiles the model itself
    model, kernels = build_bench_model(built, cfg, device)
    total = args.warmup_steps + args.steps
    batches = synthetic_batches(total, args.batch_size, args.seq_len, cfg.vocab_size, args.doc_len)
    samples = [
        {"input_ids": ids, "segment_ids": seg}
        for b in batches
        for ids, seg in zip(b["input_ids"], attention_segments(b[WINDOW_IDS], b["document_ids"], args.scope))
    ]
    collator = CountingCollator(args.objective, args.mlm_ratio, cfg.vocab_size)
    timing: dict[str, float] = {}

    class Timer(TrainerCallback):
        def on_step_begin(self, targs, state, control, **kwargs):
            if state.global_step == args.warmup_steps:
                _sync(device)
                timing["start"] = time.perf_counter()

        def on_step_end(self, targs, state, control, **kwargs):
            if state.global_step == total:
                _sync(device)
                timing["end"] = time.perf_counter()

    losses: list[float] = []

    class Losses(TrainerCallback):
        def on_log(self, targs, state, control, logs=None, **kwargs):
            if logs and "loss" in logs:
                losses.append(float(logs["loss"]))

    with tempfile.TemporaryDirectory(prefix="hf-peer-") as scratch:
        training = TrainingArguments(
            output_dir=scratch,
            per_device_train_batch_size=args.batch_size,
            max_steps=total,
            learning_rate=5e-4,
            adam_beta1=0.9,
            adam_beta2=0.95,
            adam_epsilon=1e-5,
            weight_decay=0.1,
            max_grad_norm=1.0,
            lr_scheduler_type="constant_with_warmup",
            warmup_steps=1,
            optim="adamw_torch_fused" if args.fused_adamw else "adamw_torch",
            bf16=bf16,
            torch_compile=bool(args.compile),
            use_cpu=device == "cpu",
            remove_unused_columns=False,
            dataloader_num_workers=0,
            logging_steps=1,
            logging_strategy="steps",
            save_strategy="no",
            report_to="none",
            disable_tqdm=True,
            seed=0,
        )
        trainer = Trainer(
            model=model,
            args=training,
            train_dataset=samples,
            data_collator=collator,
            callbacks=[Timer(), Losses()],
        )
        trainer.remove_callback(PrinterCallback)  # its log lines would mix with the bench's JSON rows
        trainer.train()
    timed = slice(args.warmup_steps, total)
    row = _report(
        args,
        cfg,
        device,
        bf16,
        "hf-trainer",
        timing["end"] - timing["start"],
        sum(collator.pairs[timed]),
        kernels,
        sum(collator.labelled[timed]),
    )
    row["loss_kernel"] = "reference (the model's forward, as Trainer calls it)"
    row["final_loss"] = losses[-1] if losses else None
    import transformers

    row["transformers"] = transformers.__version__
    return row
