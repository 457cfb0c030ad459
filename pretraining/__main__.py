"""`python -m pretraining {prepare-data,verify-data,train,configs,export,random-init,bench,gpu-check,fetch-model}`."""

from __future__ import annotations

import argparse
import logging
import sys


def _train(args) -> int:
    from contracts.config import ConfigError
    from pretraining.config import check_callbacks, load_pretrain_config

    try:
        cfg = load_pretrain_config(args.config, args.overrides)
        check_callbacks(cfg.train.callbacks, args.trust_callbacks, f"{args.config}: train.callbacks")
    except ConfigError as exc:
        print(f"train: {exc}", file=sys.stderr)
        return 2
    from contracts.locks import FolderInUse
    from contracts.provenance import DiskFullError
    from pretraining.export import CheckpointError
    from pretraining.tokenizer import TokenizerError
    from pretraining.train import PretrainError, train

    try:
        run_dir = train(cfg, trust_checkpoints=args.trust_checkpoint, trust_callbacks=args.trust_callbacks)
    except (PretrainError, CheckpointError, TokenizerError, FileNotFoundError, DiskFullError, FolderInUse) as exc:
        print(f"train: {args.config}: {exc}", file=sys.stderr)
        return 2
    from contracts.layout import EXPORTS_DIR, LOSS_LOG_FILE

    print(f"train: finished {cfg.name}; weights in {run_dir / EXPORTS_DIR}, losses in {run_dir / LOSS_LOG_FILE}")
    return 0


def _configs(args) -> int:
    from pretraining import registry

    if args.list:
        for name, (run, step) in sorted(registry.released_checkpoints().items()):
            note = "" if name == run else f"  (step {step} of run {run})"
            print(name + note)
        return 0
    if not args.name:
        print("configs: give a checkpoint NAME or --list", file=sys.stderr)
        return 2
    kwargs = {
        "scale": args.scale,
        "runs_root": args.runs_root,
        "cpt_recipe": args.cpt_recipe,
        "cpt_optimizer": args.cpt_optimizer,
    }
    if args.data_path:
        kwargs["data_path"] = args.data_path
    if args.tokenizer:
        kwargs["tokenizer"] = args.tokenizer
    try:
        if args.output:
            print(f"configs: wrote {registry.write_config(args.name, args.output, **kwargs)}")
        else:
            print(registry.config_yaml(args.name, **kwargs), end="")
    except KeyError as exc:
        print(f"configs: {exc.args[0]}", file=sys.stderr)
        return 2
    return 0


def _write_export(command: str, write, note: str) -> int:
    """Run `write()` (returns the folder written); a CheckpointError is a one-line error, exit 2."""
    from pretraining.export import CheckpointError

    try:
        out = write()
    except CheckpointError as exc:
        print(f"{command}: {exc}", file=sys.stderr)
        return 2
    print(f"{command}: wrote {out} ({note})")
    return 0


def _export(args) -> int:
    from pretraining.export import export_checkpoint

    return _write_export(
        "export",
        lambda: export_checkpoint(
            args.checkpoint,
            args.out,
            tokenizer=args.tokenizer,
            preset=args.preset,
            trust_checkpoint=args.trust_checkpoint,
        ),
        "self-contained: `AutoModel.from_pretrained(path, trust_remote_code=True)`; see its README.md and "
        "docs/export.md",
    )


def _random_init(args) -> int:
    from pretraining.export import export_random_init, export_random_twin

    if args.like:
        if args.preset or args.tokenizer:
            print(
                "random-init: --like takes the config and tokenizer of PATH: give no preset or --tokenizer",
                file=sys.stderr,
            )
            return 2
        return _write_export(
            "random-init",
            lambda: export_random_twin(args.like, args.out, seed=args.seed, trust_remote_code=args.trust_remote_code),
            f"untrained twin of {args.like}, seed {args.seed}; fine-tune it as any checkpoint",
        )
    if not args.preset:
        print("random-init: give a PRESET (e.g. toy_s) or --like PATH", file=sys.stderr)
        return 2
    return _write_export(
        "random-init",
        lambda: export_random_init(args.preset, args.out, tokenizer=args.tokenizer or "embedded", seed=args.seed),
        f"untrained {args.preset}, seed {args.seed}; fine-tune it as any export",
    )


def _bench(args) -> int:
    from pretraining.options import parse_peers

    args.peers = parse_peers(args.peers)  # a bad or repeated name: one line before torch is imported
    from pretraining.bench import main
    from pretraining.peers import run_peer

    return main(args, run_peer)


TRUST_HELP = (
    "unpickle Composer checkpoints fully (init.path, resume, export); by default only the classes our "
    "checkpoints hold are allowed, as a file from elsewhere could run code (docs/pretraining.md)"
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pretraining", description="Pretrain the paper's encoders (CLM, MLM, biphasic, CPT)."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    from pretraining.data.cli import register as register_data

    register_data(sub)  # prepare-data, verify-data
    from pretraining.fetch_model import register as register_fetch_model

    register_fetch_model(sub)  # fetch-model

    train = sub.add_parser("train", help="train or resume one run from a YAML config")
    train.add_argument("config", help="YAML PretrainConfig (see `configs`)")
    train.add_argument("overrides", nargs="*", metavar="key=value", help="e.g. train.max_steps=100")
    train.add_argument("--trust-checkpoint", action="store_true", help=TRUST_HELP)
    train.add_argument(
        "--trust-callbacks",
        action="store_true",
        help="let train.callbacks name modules outside Composer and this package; naming one imports and "
        "calls it, which runs its code: only for configs you trust (docs/pretraining.md)",
    )
    train.set_defaults(func=_train)

    configs = sub.add_parser("configs", help="write the config of one of the paper's 50 checkpoints")
    configs.add_argument("name", nargs="?", help="released name, e.g. 610m-clm-10k-mlm40-42k")
    configs.add_argument("--list", action="store_true", help="list the 50 names")
    configs.add_argument("--scale", choices=["paper", "toy"], default="paper")
    configs.add_argument(
        "--cpt-recipe",
        choices=["separate", "branches", "literal"],
        default="branches",
        help="CPT runs: one run per base with decay branches (default, the paper's compute table), each "
        "length from the base (separate), or branches with no warmup and 2,000-step decays (literal; "
        "docs/pretraining.md, 'CPT readings')",
    )
    configs.add_argument(
        "--cpt-optimizer",
        choices=["fresh", "continued"],
        default="fresh",
        help="CPT runs: a fresh AdamW (default), or the base's AdamW state from its last checkpoint (continued)",
    )
    configs.add_argument("--runs-root", default="runs", help="folder holding run directories")
    configs.add_argument("--data-path", help="prepared data folder (data.path)")
    configs.add_argument("--tokenizer", help="tokenizer name or path")
    configs.add_argument("-o", "--output", help="write here instead of stdout")
    configs.set_defaults(func=_configs)

    export = sub.add_parser("export", help="Composer checkpoint (or run dir) -> Hugging Face directory")
    export.add_argument("checkpoint", help="a .pt checkpoint, or a run dir (its latest checkpoint)")
    export.add_argument("out", help="output directory (must not exist)")
    export.add_argument("--tokenizer", help="default: the run config's tokenizer")
    export.add_argument("--preset", help="default: the run config's model.preset")
    export.add_argument("--trust-checkpoint", action="store_true", help=TRUST_HELP)
    export.set_defaults(func=_export)

    random_init = sub.add_parser(
        "random-init", help="the untrained model of a preset, or of any HF checkpoint (--like), as an export"
    )
    random_init.add_argument("preset", nargs="?", help="e.g. toy_s or 210m (not with --like)")
    random_init.add_argument("out", help="output directory (must not exist)")
    random_init.add_argument("--tokenizer", help="default: the embedded toy tokenizer (not with --like)")
    random_init.add_argument(
        "--like", metavar="PATH", help="the random twin of this HF model folder: its config, tokenizer, ST pooling"
    )
    random_init.add_argument(
        "--trust-remote-code", action="store_true", help="with --like: build a model whose folder ships its code"
    )
    random_init.add_argument("--seed", type=int, default=17, help="default 17, the seed of the registry's runs")
    random_init.set_defaults(func=_random_init)

    bench = sub.add_parser("bench", help="tokens/s of a pretraining step: Composer vs plain PyTorch")
    from pretraining.options import add_bench_arguments

    add_bench_arguments(bench)
    bench.set_defaults(func=_bench)
    from pretraining.gpu_check.runner import register as register_gpu_check

    register_gpu_check(sub)  # gpu-check
    return parser


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    args = build_parser().parse_args(argv)
    from contracts.cli import run_command

    return run_command(args.command, lambda: args.func(args))


if __name__ == "__main__":
    sys.exit(main())
