"""Subcommands prepare-data and verify-data, for `python -m pretraining` (and `python -m pretraining.data`).

`register(subparsers)` adds both to an argparse sub-parser group; each sets `func(args) -> int`.
With `--for-run RUN.yaml` both also check that the data holds the samples that run reads
(pretraining.data.config.data_budget; docs/data.md).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from dataclasses import replace

from contracts.config import ConfigError, apply_overrides, config_from_dict, load_config

# Command-line flags that map onto PrepareConfig fields (a YAML --config is read first).
_PREPARE_FLAGS = {
    "input": "inputs",
    "hf_dataset": "hf_dataset",
    "hf_config": "hf_config",
    "hf_split": "hf_split",
    "hf_revision": "hf_revision",
    "tokenizer": "tokenizer",
    "seq_len": "seq_len",
    "bos": "bos",
    "max_documents": "max_documents",
    "text_column": "text_column",
    "size_limit": "size_limit",
    "workers": "workers",
}


def _load_run(path: str | None):
    """The run config named by --for-run (None without the flag)."""
    if path is None:
        return None
    from pretraining.config import load_pretrain_config

    return load_pretrain_config(path)


def _budget(run, data_dir: str, samples: int) -> str:
    """The data budget line of `run` over the prepared data in `data_dir` (DataBudgetError)."""
    from pretraining.data.config import data_budget

    return data_budget(samples, replace(run.data, path=str(data_dir)), run.train.max_steps, run.train.global_batch_size)


def _context_line(context: dict) -> str:
    """The own-document share of attention keys of these data, beside the FineWeb-Edu estimate."""
    from pretraining.data.context import FINEWEB_EDU_ASSUMPTION, describe, fineweb_edu_estimate

    reference = fineweb_edu_estimate()
    return (
        f"context over the first {context['samples']:,} samples split into windows as pretraining splits them: "
        f"{describe(context)}; FineWeb-Edu at 2,048, estimated: {100 * reference['own_document_key_share']:.0f}% "
        f"({FINEWEB_EDU_ASSUMPTION})"
    )


def _prepare(args: argparse.Namespace) -> int:
    from contracts.hub import HubError
    from contracts.provenance import DiskFullError
    from pretraining.data.config import DataBudgetError
    from pretraining.data.prepare import PrepareConfig, PrepareError, prepare_data
    from pretraining.tokenizer import TokenizerError

    # Flags become overrides (JSON is valid YAML, so paths need no quoting); key=value ones win.
    flags = {key: getattr(args, flag) for flag, key in _PREPARE_FLAGS.items()}
    flags["out"] = args.out
    overrides = [f"{key}={json.dumps(value)}" for key, value in flags.items() if value is not None]
    overrides += args.overrides
    try:
        run = _load_run(args.for_run)
        if args.config:
            cfg = load_config(PrepareConfig, args.config, overrides)
        else:
            cfg = config_from_dict(PrepareConfig, apply_overrides({}, overrides), "prepare-data")
        manifest = prepare_data(cfg, progress=False if args.no_progress else None)
    except (ConfigError, PrepareError, TokenizerError, HubError, DiskFullError) as exc:
        print(f"prepare-data: {exc}", file=sys.stderr)
        return 2
    c = manifest["counts"]
    print(
        f"prepare-data: {c['documents']} documents, {c['tokens']} tokens -> {c['samples']} samples "
        f"of {manifest['seq_len']} = {c['tokens_in_samples']} tokens written ({c['leftover_tokens']} leftover "
        f"tokens dropped) in {manifest['seconds']} s; wrote {cfg.out}"
    )
    print(f"prepare-data: {_context_line(manifest['context'])}")
    if run is not None:
        try:
            print(f"prepare-data: {args.for_run}: {_budget(run, cfg.out, c['samples'])}")
        except DataBudgetError as exc:
            print(f"prepare-data: {args.for_run}: {exc} (the prepared data stays in {cfg.out})", file=sys.stderr)
            return 2
    return 0


def _verify(args: argparse.Namespace) -> int:
    from pretraining.data.config import DataBudgetError
    from pretraining.data.verify import DataVerificationError, verify_prepared

    try:
        run = _load_run(args.for_run)
    except ConfigError as exc:
        print(f"verify-data: {exc}", file=sys.stderr)
        return 2
    try:
        report = verify_prepared(args.dir, num_samples=args.samples, decode_text=not args.no_decode)
        budget = _budget(run, args.dir, report.samples) if run is not None else None
    except (DataVerificationError, DataBudgetError) as exc:
        where = f"{args.for_run}: " if isinstance(exc, DataBudgetError) else ""
        print(f"verify-data: FAILED: {where}{exc}", file=sys.stderr)
        return 1
    for index, text in zip(report.checked_samples, report.previews):
        print(f"sample {index}: {text[:120]!r}")
    print(
        f"verify-data: OK: {report.shards} shards (sizes and hashes match index.json), {report.samples} "
        f"samples, {len(report.checked_samples)} decoded and checked"
    )
    print(f"verify-data: {_context_line(report.context)}")
    if budget is not None:
        print(f"verify-data: {args.for_run}: {budget}")
    return 0


def register(subparsers) -> None:
    prep = subparsers.add_parser(
        "prepare-data",
        help="tokenize FineWeb-Edu-schema text into packed MDS shards",
        description="Tokenize documents, append eos (bos per --bos), pack into --seq-len samples "
        "with document boundaries, write MDS shards (zstd, sha1+xxh64) and manifest.json.",
    )
    prep.add_argument("--out", required=True, help="output folder (must not hold finished data)")
    prep.add_argument("--config", help="YAML with PrepareConfig fields; flags and key=value override it")
    prep.add_argument("--input", nargs="+", help="parquet/jsonl files, folders or globs; 'embedded' = shipped corpus")
    prep.add_argument("--hf-dataset", help="hub dataset id, e.g. HuggingFaceFW/fineweb-edu")
    prep.add_argument("--hf-config", help="hub config name, e.g. sample-100BT")
    prep.add_argument("--hf-split")
    prep.add_argument("--hf-revision", help="branch, tag or commit of the hub dataset (default main, resolved once)")
    prep.add_argument("--tokenizer", help="tokenizer folder or hub id; 'embedded' (default) = shipped BPE")
    prep.add_argument("--seq-len", type=int)
    prep.add_argument("--bos", choices=["none", "document"], help="prepend bos to each document (default none)")
    prep.add_argument("--max-documents", type=int)
    prep.add_argument("--text-column")
    prep.add_argument("--size-limit", help="shard size before compression, e.g. 64mb")
    prep.add_argument("--workers", type=int, help="processes over contiguous groups of input files (default 1)")
    prep.add_argument("--no-progress", action="store_true", help="no progress bar")
    prep.add_argument(
        "--for-run", metavar="RUN.yaml", help="training config: check that the data holds the samples it reads"
    )
    prep.add_argument("overrides", nargs="*", metavar="key=value", help="any PrepareConfig field")
    prep.set_defaults(func=_prepare)

    ver = subparsers.add_parser("verify-data", help="check prepared shards against index.json and manifest.json")
    ver.add_argument("dir", help="a prepare-data output folder")
    ver.add_argument("--samples", type=int, default=8, help="samples to decode and check (default 8)")
    ver.add_argument("--no-decode", action="store_true", help="do not load the tokenizer for text previews")
    ver.add_argument(
        "--for-run", metavar="RUN.yaml", help="training config: check that the data holds the samples it reads"
    )
    ver.set_defaults(func=_verify)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    parser = argparse.ArgumentParser(prog="python -m pretraining.data")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)
