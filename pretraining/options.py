"""Names of the settings the command line offers as choices, and the options of `python -m
pretraining bench`, free of torch: `--help` and the parsers load no model code (issue 77).
pretraining.kernels checks the kernel names against these tuples."""

from __future__ import annotations

# pretraining.modeling.ATTENTION_BACKENDS: modeling.py is copied verbatim into every export as its
# remote code, so it keeps its own tuple (tests/pretraining/test_cli.py checks they are equal).
ATTENTION_BACKENDS = ("sdpa", "flex_attention", "flash_attention_2")
LOSS_KERNELS = ("reference", "chunked", "liger")
BLOCK_KERNELS = ("reference", "torch", "liger")


PEERS = ("hf-trainer",)  # `pretraining bench --peers`: the trainers pretraining/peers.py runs


class PeersError(ValueError):
    """A `--peers` value naming a trainer that is not a peer, or one peer twice."""


def parse_peers(value) -> tuple[str, ...]:
    """`--peers` (comma-separated text, or names already split) as known peers, each named once: a
    repeated name was timed twice into one row, and the ratio went to the row before it, our own
    (`ours_over_peer: 1.0`, issue 88). Checked before torch is imported."""
    names = value.split(",") if isinstance(value, str) else list(value or ())
    names = [str(name).strip() for name in names if str(name).strip()]
    unknown = [name for name in names if name not in PEERS]
    if unknown:
        raise PeersError(f"--peers {','.join(unknown)}: not a peer; choose from {', '.join(PEERS)}")
    repeated = [name for name in dict.fromkeys(names) if names.count(name) > 1]
    if repeated:
        raise PeersError(f"--peers {','.join(names)}: {', '.join(repeated)} named more than once; name each peer once")
    return tuple(names)


def add_bench_arguments(parser) -> None:
    parser.add_argument("--preset", default="toy_m", help="model preset (toy_s/m/l, 210m, 610m, 1b)")
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--steps", type=int, default=20, help="timed steps")
    parser.add_argument("--warmup-steps", type=int, default=3, help="untimed steps first")
    parser.add_argument("--objective", choices=["mlm", "clm"], default="mlm")
    parser.add_argument("--mlm-ratio", type=float, default=0.4)
    parser.add_argument("--vocab-size", type=int, default=8192, help="toy presets only")
    parser.add_argument("--doc-len", type=int, default=512, help="mean packed document length")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    parser.add_argument(
        "--precision", choices=["auto", "fp32", "bf16"], default="auto", help="auto: bf16 autocast on CUDA, fp32 on CPU"
    )
    parser.add_argument("--attn", choices=ATTENTION_BACKENDS, default="sdpa")
    parser.add_argument("--scope", choices=["window", "document"], default="window", help="attention segments")
    parser.add_argument("--plain", action="store_true", help="plain PyTorch loop only (no Composer)")
    parser.add_argument(
        "--peers",
        default="",
        help="comma-separated trainers to time on the same step: hf-trainer (the Hugging Face Trainer, "
        "pretraining/peers.py); each row gets its tokens/s ratio to ours",
    )
    parser.add_argument(
        "--compile",
        action="store_true",
        help="torch.compile the transformer blocks in both paths, as train.compile (the head stays eager)",
    )
    parser.add_argument(
        "--loss-kernel", choices=LOSS_KERNELS, default="reference", help="LM head + loss, as train.loss_kernel"
    )
    parser.add_argument(
        "--block-kernels", choices=BLOCK_KERNELS, default="reference", help="RMSNorm/SwiGLU/RoPE: model.block_kernels"
    )
    parser.add_argument("--fused-adamw", action="store_true", help="torch AdamW fused=True, as optimizer.fused")
    parser.add_argument("--peak-tflops", type=float, help="device peak for MFU (default: known GPUs)")
    parser.add_argument("--repeats", type=int, default=1, help="runs per path (median reported)")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--json", help="also write the results here")
