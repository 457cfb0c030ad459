"""Throughput of one pretraining step: the Composer Trainer vs the same step in a plain PyTorch loop.

Both paths run the identical step on identical synthetic packed batches: objective on the batch
(MLM masking with the seeded generator, or CLM labels), forward with block-diagonal attention over
the randomly split windows of each block (or their documents, `--scope document`),
loss at labelled positions only, backward, grad-norm clip 1.0, torch AdamW, WSD multiplier.
`--plain` needs only torch + transformers (no Composer), for GPU machines without it.

FLOPs per step (reported with MFU when the peak is known), both counts of pretraining.flops:
  model FLOPs (`mfu_model`): 6N + attention, N = every parameter except the input embedding (the
             LM head counted at every position, although MLM applies it only at the masked ones);
             what other trainers' MFU usually means
  needed FLOPs (`mfu_needed`): 6 N_body x tokens + 6 x head x labelled tokens + attention: the work
             the step must do (the masked positions under MLM, every target under CLM); what the
             live MFU of the training logs and the GPU goals use
  attention: 12 x layers x (heads x head_dim) x (query, key) pairs that attend (QK^T and AV,
             forward + backward; PaLM appendix B convention): per row the sum of its segments'
             squared lengths (the windows, or their documents under --scope document), 2/3 of the
             full seq_len^2 square in expectation for two random windows; the dense-mask kernel
             computes the whole square, the useful work is the segments'
"""

from __future__ import annotations

import json
import time

import torch

from pretraining.compiling import compile_blocks
from pretraining.data.windows import attention_segments, window_ids
from pretraining.flops import attention_pairs as attended_pairs  # the count SpeedMonitor's MFU uses
from pretraining.flops import counted_flops, flop_shape
from pretraining.kernels import apply_block_kernels, lm_loss, resolve
from pretraining.modeling import MlmClmForLM
from pretraining.objectives import IGNORE_INDEX, SAMPLE_INDEX, WINDOW_IDS, clm_labels, mask_for_mlm, sample_generators
from pretraining.presets import closed_form_parameter_count, config_from_preset
from pretraining.schedule import wsd_multiplier

# Dense bf16 tensor-core spec peaks (FLOP/s, NVIDIA's data sheets) by device-name fragment, most
# specific first: an "H100 PCIe" or "H100 NVL" is not credited with the SXM part's 989
PEAK_BF16 = {
    "H100 PCIe": 756e12,
    "H100 NVL": 835e12,
    "H100": 989e12,
    "H200": 989e12,
    "A100": 312e12,
    "L40S": 362e12,
}


def spec_peak_bf16(device_name: str) -> float | None:
    """The dense bf16 spec peak (FLOP/s) of a device named `device_name`, or None if unknown."""
    return next((v for k, v in PEAK_BF16.items() if k in device_name), None)


BOS, EOS, MASK = 0, 1, 2  # synthetic ids; real runs take them from the tokenizer


def synthetic_batches(n: int, batch: int, seq_len: int, vocab: int, doc_len: int, seed: int = 0):
    """Packed batches {input_ids, document_ids, window_ids} with documents of random length ~ doc_len,
    each block split at a random point into two windows (as the data loader does)."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        ids = torch.randint(3, vocab, (batch, seq_len), generator=g)
        lengths = torch.randint(max(2, doc_len // 2), doc_len * 3 // 2 + 1, (batch, seq_len), generator=g)
        docs = torch.empty(batch, seq_len, dtype=torch.long)
        for b in range(batch):
            ends = torch.cumsum(lengths[b], 0)
            docs[b] = torch.searchsorted(ends, torch.arange(seq_len), right=True)
            starts = torch.nonzero(torch.diff(docs[b], prepend=docs[b, :1] - 1)).flatten()
            ids[b, starts] = BOS
        index = torch.arange(i * batch, (i + 1) * batch)
        pieces = [torch.bincount(row).numpy() for row in docs]  # as the loader: early end at a document end
        windows = window_ids(index.tolist(), seq_len, "random_split", seed, min(12, seq_len // 2), pieces)
        windows = torch.from_numpy(windows)
        out.append({"input_ids": ids, "document_ids": docs, WINDOW_IDS: windows, SAMPLE_INDEX: index})
    return out


def apply_objective(batch: dict, objective: str, ratio: float, vocab: int, scope: str = "window") -> dict:
    """What ObjectiveAlgorithm makes of a batch (pretraining/train.py), without Composer."""
    segments = attention_segments(batch[WINDOW_IDS], batch["document_ids"], scope)
    if objective == "mlm":
        ids, labels = mask_for_mlm(
            batch["input_ids"], sample_generators(0, batch[SAMPLE_INDEX]), ratio, MASK, (BOS, EOS, MASK), vocab
        )
    else:
        ids, labels = batch["input_ids"], clm_labels(batch["input_ids"], segments)
    return {"input_ids": ids, "segment_ids": segments, "labels": labels}


def _setup(args):
    device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    bf16 = args.precision == "bf16" or (args.precision == "auto" and device == "cuda")
    cfg = config_from_preset(
        args.preset,
        vocab_size=args.vocab_size if args.preset.startswith("toy") else None,
        is_causal=args.objective == "clm",
        attention_backend=args.attn,
    )
    return device, bf16, cfg


def build_bench_model(args, cfg, device):
    """The model as train.build_trainer makes it: seeded weights on the device, the block kernels
    swapped in, then the blocks compiled; with the loss kernel resolved for the device."""
    kernels = resolve(args.loss_kernel, args.block_kernels, device)
    torch.manual_seed(0)
    with torch.device(device):  # initialised where it trains: a 610m model takes seconds to initialise on a CPU
        model = MlmClmForLM(cfg)
    apply_block_kernels(model, kernels.blocks)
    if args.compile:  # the body has static shapes; the labelled-position head does not
        compile_blocks(model.model)
    return model, kernels


def bench_optimizer(model, fused: bool = False):
    """The bench's (and the GPU check's parity runs') AdamW: the paper's settings; `fused`: torch's
    fused implementation (optimizer.fused), else its default (foreach)."""
    return torch.optim.AdamW(
        model.parameters(), lr=5e-4, betas=(0.9, 0.95), eps=1e-5, weight_decay=0.1, fused=True if fused else None
    )


def _reset_peak_memory(device):
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()


def _peak_memory_gib(device):
    return round(torch.cuda.max_memory_allocated() / 2**30, 2) if device == "cuda" else None


def _sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


class PlainLoop:
    """The plain PyTorch loop's state; `step()` runs the next step (objective, forward at the
    labelled positions with the loss kernel, backward, clip 1.0, AdamW, WSD multiplier)."""

    def __init__(self, args):
        self.args = args
        self.device, self.bf16, self.cfg = _setup(args)
        self.model, self.kernels = build_bench_model(args, self.cfg, self.device)
        _reset_peak_memory(self.device)
        self.optimizer = bench_optimizer(self.model, args.fused_adamw)
        self.total = args.warmup_steps + args.steps
        self.batches = synthetic_batches(self.total, args.batch_size, args.seq_len, self.cfg.vocab_size, args.doc_len)
        self.index = 0

    def sync(self) -> None:
        _sync(self.device)

    def step(self) -> None:
        args, device = self.args, self.device
        raw = self.batches[self.index % len(self.batches)]
        self.index += 1
        batch = apply_objective(raw, args.objective, args.mlm_ratio, self.cfg.vocab_size, args.scope)
        batch = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
        for group in self.optimizer.param_groups:
            group["lr"] = 5e-4 * wsd_multiplier(min(self.index, self.total), 1, self.total, self.total)  # as AtStepEnd
        with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=self.bf16):
            loss = lm_loss(self.model, batch, args.objective == "clm", self.kernels.loss)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)


def run_plain(args) -> dict:
    loop = PlainLoop(args)
    pairs = _timed_pairs(loop.batches, args)
    for _ in range(args.warmup_steps):
        loop.step()
    loop.sync()
    start = time.perf_counter()
    for _ in range(args.steps):
        loop.step()
    loop.sync()
    seconds = time.perf_counter() - start
    labelled = timed_labelled_tokens(loop.batches, args, loop.cfg.vocab_size)
    return _report(args, loop.cfg, loop.device, loop.bf16, "plain", seconds, pairs, loop.kernels, labelled)


def run_composer(args) -> dict:
    from composer import Callback, Trainer
    from composer.algorithms import GradientClipping
    from composer.core import DataSpec

    from pretraining.objectives import TokenIds
    from pretraining.schedule import AtStepEnd, WSDScheduler
    from pretraining.train import ComposerLM, ObjectiveAlgorithm, _num_tokens, close_trainer

    device, bf16, cfg = _setup(args)
    model, kernels = build_bench_model(args, cfg, device)  # the plain loop's initial weights
    _reset_peak_memory(device)
    total = args.warmup_steps + args.steps
    batches = synthetic_batches(total, args.batch_size, args.seq_len, cfg.vocab_size, args.doc_len)
    timing = {}

    class Timer(Callback):
        def after_dataloader(self, state, logger):
            if int(state.timestamp.batch) == args.warmup_steps:
                _sync(device)
                timing["start"] = time.perf_counter()

        def batch_end(self, state, logger):
            if int(state.timestamp.batch) == total:
                _sync(device)
                timing["end"] = time.perf_counter()

    ids = TokenIds(mask=MASK, special=(BOS, EOS, MASK), vocab_size=cfg.vocab_size)
    trainer = Trainer(
        model=ComposerLM(model, kernels.loss),
        train_dataloader=DataSpec(batches, get_num_tokens_in_batch=_num_tokens),
        max_duration=f"{total}ba",
        optimizers=bench_optimizer(model, args.fused_adamw),
        schedulers=AtStepEnd(WSDScheduler(1, total, total)),
        step_schedulers_every_batch=True,
        algorithms=[
            ObjectiveAlgorithm(args.objective, None, args.mlm_ratio, (1.0, 0.0, 0.0), ids, 0, args.scope),
            GradientClipping(clipping_type="norm", clipping_threshold=1.0),
        ],
        callbacks=[Timer()],
        device="gpu" if device == "cuda" else "cpu",
        precision="amp_bf16" if bf16 else "fp32",
        accumulate_train_batch_on_tokens=True,
        device_train_microbatch_size=args.batch_size,
        progress_bar=False,
        seed=0,
    )
    trainer.fit()
    close_trainer(trainer)  # also drops Composer's atexit reference, so the model can be freed
    pairs, labelled = _timed_pairs(batches, args), timed_labelled_tokens(batches, args, cfg.vocab_size)
    return _report(args, cfg, device, bf16, "composer", timing["end"] - timing["start"], pairs, kernels, labelled)


def _effective_attention(requested: str, device: str) -> str:
    if requested != "flash_attention_2":
        return requested
    from transformers.utils import is_flash_attn_2_available

    usable = device == "cuda" and is_flash_attn_2_available()
    return requested if usable else "sdpa (flash-attn 2 not available)"


def _timed_pairs(batches: list[dict], args) -> int:
    """Attended (query, key) pairs over the timed steps (the batches after the untimed warmup)."""
    timed = batches[args.warmup_steps :]
    return sum(attended_pairs(attention_segments(b[WINDOW_IDS], b["document_ids"], args.scope)) for b in timed)


def timed_labelled_tokens(batches: list[dict], args, vocab: int) -> int:
    """Positions the LM head runs at over the timed steps: the labels apply_objective gives each
    timed batch (the same seeded masks the step draws: pretraining.objectives.sample_generators)."""
    total = 0
    for raw in batches[args.warmup_steps :]:
        labels = apply_objective(raw, args.objective, args.mlm_ratio, vocab, args.scope)["labels"]
        total += int((labels != IGNORE_INDEX).sum())
    return total


def _report(args, cfg, device, bf16, path, seconds, pairs: int, kernels, labelled: int) -> dict:
    counts = closed_form_parameter_count(cfg)
    shape = flop_shape(cfg)
    tokens = args.steps * args.batch_size * args.seq_len
    n = counts["total"] - counts["embedding"]
    flops_6n = 6 * n * tokens
    flops_attn = counted_flops(shape, 0, 0, pairs)
    flops_model = counted_flops(shape, tokens, tokens, pairs)  # == 6N + attention
    flops_needed = counted_flops(shape, tokens, labelled, pairs)
    row = {
        "path": path + ("+compile" if args.compile else ""),
        "preset": args.preset,
        "objective": args.objective,
        "device": device,
        "device_name": torch.cuda.get_device_name() if device == "cuda" else "cpu",
        "precision": "bf16" if bf16 else "fp32",
        "attn": _effective_attention(args.attn, device),
        "loss_kernel": kernels.loss,
        "block_kernels": kernels.blocks,
        "fused_adamw": args.fused_adamw,
        "torch": torch.__version__,
        "batch_size": args.batch_size,
        "seq_len": args.seq_len,
        "steps": args.steps,
        "seconds": round(seconds, 4),
        "tokens_per_s": round(tokens / seconds, 1),
        "params_N": n,
        "flops_6N_per_s": flops_6n / seconds,
        "flops_attention_per_s": flops_attn / seconds,
        "flops_model_per_s": flops_model / seconds,
        "flops_needed_per_s": flops_needed / seconds,
        "needed_over_model": round(flops_needed / flops_model, 4),
        "labelled_share": round(labelled / tokens, 4),  # positions the LM head runs at
        "attended_share": round(pairs / (tokens * args.seq_len), 4),  # of the full seq_len^2 square
    }
    if device == "cuda":  # torch's allocator peak since the model was built (weights, states, activations)
        row["peak_gpu_memory_gib"] = _peak_memory_gib(device)
    peak = args.peak_tflops * 1e12 if args.peak_tflops else None
    if peak is None and device == "cuda":
        peak = spec_peak_bf16(row["device_name"])
    if peak:
        row["peak_flops"] = peak
        row["mfu_6N"] = round(flops_6n / seconds / peak, 4)
        row["mfu_model"] = round(flops_model / seconds / peak, 4)  # 6N + attention
        row["mfu_needed"] = round(flops_needed / seconds / peak, 4)
    return row


def _median_row(rows: list[dict]) -> dict:
    ordered = sorted(rows, key=lambda r: r["tokens_per_s"])
    row = dict(ordered[len(ordered) // 2])
    row["tokens_per_s_all"] = [r["tokens_per_s"] for r in rows]
    return row


def _release_memory() -> None:
    """Free the finished path's model and optimizer before the next is built (GPU peaks stay per path)."""
    import gc

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


class BenchArgumentError(ValueError):
    pass


def main(args, run_peer=None) -> int:
    """The bench; `run_peer(name, args)` (pretraining.peers.run_peer, passed by the CLI so that this
    module does not import the peers, which import it) times each of `--peers`."""
    for option, value, least in (
        ("--steps", args.steps, 1),
        ("--warmup-steps", args.warmup_steps, 0),
        ("--repeats", args.repeats, 1),
        ("--batch-size", args.batch_size, 1),
        ("--seq-len", args.seq_len, 2),
    ):
        if value < least:
            raise BenchArgumentError(f"{option} {value}: must be at least {least}")
    from pretraining.options import parse_peers

    peers = parse_peers(getattr(args, "peers", ""))  # the CLI parsed them already; a library caller's
    if peers and run_peer is None:
        raise BenchArgumentError("--peers: no peer runner given (python -m pretraining bench passes one)")
    if args.threads:
        torch.set_num_threads(args.threads)
    runs = {"plain": [], "composer": [], **{p: [] for p in peers}}
    for _ in range(args.repeats):  # interleaved, so load changes hit every path alike
        runs["plain"].append(run_plain(args))
        _release_memory()
        if not args.plain:
            runs["composer"].append(run_composer(args))
            _release_memory()
        for peer in peers:
            runs[peer].append(run_peer(peer, args))
            _release_memory()
    rows = [_median_row(r) for r in runs.values() if r]
    ours = rows[1] if not args.plain else rows[0]
    if not args.plain:
        rows[1]["composer_overhead"] = round(rows[0]["tokens_per_s"] / rows[1]["tokens_per_s"], 3)
    for row in rows[len(rows) - len(peers) :] if peers else []:
        # ours: the Composer row (the plain loop's with --plain)
        row["ours_over_peer"] = round(ours["tokens_per_s"] / row["tokens_per_s"], 3)
        row["ours_path"] = ours["path"]
    for row in rows:
        print(json.dumps(row))
    if args.json:
        from contracts.provenance import atomic_write_text

        atomic_write_text(args.json, json.dumps(rows, indent=2))
    return 0
