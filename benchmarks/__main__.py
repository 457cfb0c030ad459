"""`python -m benchmarks`: fine-tune and evaluate checkpoints on the paper's 12 tasks.

  run      one (model, task, lr, seed) run -> <out>/<model>/<task>/lr<lr>_sd<seed>/record.json
  matrix   models x tasks x LRs x seeds as a job list, run locally (--local) or as Slurm job arrays
  job      one Slurm array task of a job list (used by the generated script)
  score    score prediction files with a task's metric (--protocol paper|standard)
  export-st  the IR model of an MS MARCO run -> a sentence-transformers folder (docs/export.md)
  fetch-data the tasks' data from the Hub into a local mirror for offline jobs (--check DIR verifies one;
             docs/cluster.md)
Runs use the paper's evaluation protocol unless `--set protocol=standard` (docs/protocol.md).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from contracts.layout import IR_MODEL_DIR, MAX_SEED, RECORD_FILE
from contracts.provenance import atomic_write_text


def _csv(kind):
    def parse(text: str):
        items = [x.strip() for x in text.split(",") if x.strip()]
        return [kind(x) for x in items]

    return parse


def _seed(text: str) -> int:
    """A fine-tuning seed: an integer numpy and torch accept (0 .. 2**32 - 1), else argparse's one line."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text[:40]!r}") from None
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"{text[:40]}: a seed is between 0 and {MAX_SEED}")
    return value


def _add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--data-root", help="local dataset mirror <root>/<hub_id>/<config|default>/<split>.jsonl (default: the Hub)"
    )
    p.add_argument("--out", default="runs", help="runs directory (default: runs)")
    p.add_argument("--max-steps", type=int, help="step budget (default: the task's: 1000, CoNLL/UNER one epoch)")
    p.add_argument("--batch-size", type=int, help="sequences per step (default 32)")
    p.add_argument(
        "--micro-batch",
        type=int,
        dest="device_microbatch_size",
        help="device micro-batch (gradient accumulation; IR: GradCache chunk)",
    )
    p.add_argument("--max-length", type=int, help="max tokens per input (default: the model maximum)")
    p.add_argument("--config", help="YAML config (default: benchmarks/configs/paper.yaml)")
    p.add_argument(
        "--set", action="append", default=[], metavar="FIELD=VALUE", help="override one config field (repeatable)"
    )
    p.add_argument(
        "--trust-remote-code",
        action="store_true",
        default=None,
        help="let checkpoints run the model code they ship (config.json auto_map), e.g. the "
        "paper's released checkpoints; only for code you trust (config field trust_remote_code)",
    )
    p.add_argument(
        "--allow-reinitialised-weights",
        action="store_true",
        default=None,
        help="fine-tune a checkpoint that lacks backbone weights, which transformers re-initialises at random "
        "(refused otherwise; the record names them in provenance.loading_report; config field "
        "allow_reinitialised_weights)",
    )


def _run_values(args) -> dict:
    return {
        "data_root": args.data_root,
        "out": args.out,
        "max_steps": args.max_steps,
        "batch_size": args.batch_size,
        "device_microbatch_size": args.device_microbatch_size,
        "max_length": args.max_length,
        "trust_remote_code": args.trust_remote_code,
        "allow_reinitialised_weights": args.allow_reinitialised_weights,
    }


def cmd_run(args) -> int:
    from benchmarks.run import load_run_config, run

    values = {
        "model": args.model,
        "task": args.task,
        "lr": args.lr,
        "seed": args.seed,
        "model_name": args.model_name,
        **_run_values(args),
    }
    cfg = load_run_config(values, args.config, args.set)
    record, computed = run(cfg)
    state = "done" if computed else "skipped (complete record exists)"
    print(
        f"{cfg.run_dir / RECORD_FILE}: {state}; protocol {record.protocol} ({record.metric}): "
        f"validation {record.validation_score:.2f}, test {record.test_score:.2f}"
    )
    from benchmarks.chance import chance_warning

    warning = chance_warning(record, str(cfg.run_dir))
    if warning:
        print(warning, file=sys.stderr)
    return 0


def cmd_matrix(args) -> int:
    from benchmarks import matrix
    from benchmarks.run import load_run_config

    matrix.check_sbatch_options(args.sbatch_option)  # before the job list is written
    base = load_run_config(
        {"model": "-", "task": "-", "lr": 1.0, "seed": 0, **_run_values(args)}, args.config, args.set
    )
    from benchmarks.run import config_lr_grid

    lrs = args.lrs if args.lrs is not None else config_lr_grid(args.config)  # None: the paper's grid
    jobs = matrix.expand(base, args.models, args.tasks, lrs, args.seeds)
    problems = matrix.preflight(jobs) if args.slurm_script else []  # the jobs run offline: data and models here?
    if problems:
        raise matrix.MatrixError(matrix.not_ready(problems))
    jobs_path = Path(args.jobs_file or Path(args.out) / "jobs.jsonl")
    matrix.write_jobs(jobs, jobs_path)
    sizes = matrix.array_sizes(jobs)
    print(f"{jobs_path}: {len(jobs)} runs (" + ", ".join(f"{g} array {n}" for g, n in sizes.items()) + ")")
    if args.slurm_script:
        text = matrix.slurm_script(jobs_path, jobs, args.array_throttle, Path(args.out), args.sbatch_option)
        path = atomic_write_text(args.slurm_script, text)
        path.chmod(0o755)
        print(f"{path}: submit with `bash {path}`")
        return 0
    return matrix.report_outcome(matrix.run_local(jobs, progress=not args.no_progress))


def cmd_job(args) -> int:
    from benchmarks import matrix

    return matrix.run_array_task(matrix.read_jobs(Path(args.jobs)), args.group, args.index)


def export_run(run_dir: Path, out: Path) -> Path:
    """The IR model of a complete MS MARCO run -> sentence-transformers folder, with the run's
    max_length, prefixes, remote-code switch and input protocol."""

    from benchmarks.export_st import (
        SENTENCE_TRANSFORMERS_DIR,
        ExportError,
        run_export_inputs,
        save_sentence_transformer,
    )
    from benchmarks.run import IR_TRAIN_TASK, existing_record
    from benchmarks.tasks import get_task
    from contracts.config import saved_config

    record = existing_record(run_dir / RECORD_FILE)
    if record is None:
        raise ExportError(f"{run_dir}: no {RECORD_FILE}; give a complete run directory")
    config = saved_config(run_dir)
    if config["task"] != IR_TRAIN_TASK:
        raise ExportError(f"{run_dir}: not an {IR_TRAIN_TASK} run; only the {IR_TRAIN_TASK} runs train an IR model")
    if not (run_dir / IR_MODEL_DIR).is_dir():
        if (run_dir / SENTENCE_TRANSFORMERS_DIR).is_dir():  # the run exported it itself (issue 90)
            raise ExportError(
                f"{run_dir}: its {IR_MODEL_DIR}/ was removed once nq and mldr_en were evaluated, but the run "
                f"wrote the sentence-transformers model itself: use {run_dir / SENTENCE_TRANSFORMERS_DIR} "
                "(copy it where you want it); nothing written"
            )
        raise ExportError(
            f"{run_dir}: its {IR_MODEL_DIR}/ was removed once nq and mldr_en were evaluated; rerun "
            "it with save_weights: true to keep it (save_sentence_transformers: true writes the "
            "sentence-transformers folder during the run instead)"
        )
    spec = get_task(IR_TRAIN_TASK)
    max_length, eos_only = run_export_inputs(config, record.provenance)
    return save_sentence_transformer(
        run_dir / IR_MODEL_DIR,
        out,
        max_length,
        spec.query_prefix,
        spec.doc_prefix,
        config.get("trust_remote_code", False),
        eos_only=eos_only,
    )


def cmd_export_st(args) -> int:
    out = export_run(Path(args.run_dir), Path(args.out))
    print(f"{out}: load with SentenceTransformer({str(out)!r}, trust_remote_code=...) (see its README.md)")
    return 0


def cmd_fetch_data(args) -> int:
    from benchmarks.datasets import fetch
    from contracts.paper import DATASETS

    tasks = args.tasks or [d.id for d in DATASETS]
    if args.check:
        problems = fetch.check_mirror(args.check, args.tasks)
        for line in problems:
            print(f"fetch-data: FAILED: {line}", file=sys.stderr)
        if problems:
            return 1
        manifest = fetch.read_manifest(Path(args.check))
        files = len(manifest["mirror"]) if args.tasks is None else len({f for t in tasks for f in manifest["tasks"][t]})
        print(
            f"fetch-data: {args.check}: OK: {files} files match the manifest (sha256); tasks: "
            + ", ".join(t for t in manifest["tasks"] if args.tasks is None or t in tasks)
        )
        return 0
    revisions = {}
    for item in args.revision:
        repo, sep, rev = item.partition("=")
        if not sep or not repo or not rev:
            raise fetch.FetchError(f"--revision {item!r}: give REPO=REVISION, e.g. nyu-mll/glue=<commit sha>")
        revisions[repo] = rev
    if args.no_progress:
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
    manifest = fetch.fetch_data(args.out, tasks, revisions, keep_downloads=args.keep_downloads)
    print(
        f"fetch-data: {args.out}: {len(manifest['tasks'])} tasks ({', '.join(manifest['tasks'])}), "
        f"{len(manifest['mirror'])} files; verify offline with `python -m benchmarks fetch-data --check {args.out}`"
    )
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log each step")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("run", help="fine-tune and evaluate one (model, task, lr, seed)")
    p.add_argument("--model", required=True, help="local Hugging Face model folder or hub id")
    p.add_argument(
        "--task",
        required=True,
        help="task id: sst2 qqp mnli ontonotes5 conll2003 uner squad squad_v2 record nq msmarco mldr_en",
    )
    p.add_argument("--lr", type=float, required=True)
    p.add_argument("--seed", type=_seed, required=True)
    p.add_argument("--model-name", help="name in records and run paths (default: last part of --model)")
    _add_run_options(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("matrix", help="expand models x tasks x LRs x seeds; run locally or write a Slurm script")
    p.add_argument("--models", required=True, type=_csv(str), help="comma-separated model folders / hub ids")
    p.add_argument("--tasks", type=_csv(str), help="comma-separated task ids (default: the paper's 12)")
    p.add_argument(
        "--lrs",
        type=_csv(float),
        help="comma-separated LR grid (default: the config's lr_grid, else the paper's 1e-5,2e-5,5e-5,1e-4,2e-4,5e-4)",
    )
    p.add_argument("--seeds", type=_csv(_seed), help="comma-separated seeds (default: 0,1,2,3,4)")
    p.add_argument("--jobs-file", help="where the JSONL job list goes (default: <out>/jobs.jsonl)")
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--local", action="store_true", help="run every job here, in order (resumable)")
    mode.add_argument("--slurm-script", help="write a Slurm job-array submit script to this file")
    p.add_argument("--array-throttle", type=int, help="at most N array tasks at once (%%N)")
    p.add_argument(
        "--sbatch-option",
        action="append",
        default=[],
        metavar="OPTION",
        help="an #SBATCH line for every array task, e.g. --sbatch-option=--gres=gpu:1",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    _add_run_options(p)
    p.set_defaults(func=cmd_matrix)

    p = sub.add_parser("job", help="run the jobs of one Slurm array task (used by the generated script)")
    p.add_argument("--jobs", required=True)
    p.add_argument("--group", required=True, choices=("finetune", "ir_train", "ir_eval"))
    p.add_argument("--index", required=True, type=int)
    p.set_defaults(func=cmd_job)

    p = sub.add_parser("export-st", help="save the IR model of an MS MARCO run as a sentence-transformers folder")
    p.add_argument("run_dir", help="an MS MARCO run directory (<out>/<model>/msmarco/lr<lr>_sd<seed>)")
    p.add_argument("out", help="output folder (must not exist)")
    p.set_defaults(func=cmd_export_st)

    p = sub.add_parser(
        "fetch-data",
        help="download the tasks' data into a local mirror (--data-root) for offline jobs; --check verifies one",
    )
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--out", help="mirror folder to fetch into (created; a rerun continues and skips what is there)")
    where.add_argument("--check", metavar="DIR", help="verify the mirror DIR against its manifest.json, offline")
    p.add_argument("--tasks", type=_csv(str), help="comma-separated task ids (default: the paper's 12)")
    p.add_argument(
        "--revision",
        action="append",
        default=[],
        metavar="REPO=REV",
        help="fetch this Hub repo at a branch, tag or commit (default: main, resolved to its commit once)",
    )
    p.add_argument("--keep-downloads", action="store_true", help="keep the raw downloads in DIR/.downloads")
    p.add_argument("--no-progress", action="store_true", help="no download progress bars")
    p.set_defaults(func=cmd_fetch_data)

    try:
        from benchmarks import scoring
    except ImportError:
        scoring = None
    if scoring is not None and hasattr(scoring, "register"):
        scoring.register(sub)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    if not args.verbose:
        logging.getLogger("benchmarks").setLevel(logging.INFO)
    from contracts.cli import run_command

    return run_command(None, lambda: args.func(args))


if __name__ == "__main__":
    sys.exit(main())
