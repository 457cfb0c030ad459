"""`python -m reproduce own-checkpoint MODEL --out DIR`: a checkpoint of your own through the toy
world's 12 tasks, beside its untrained twin and the paper's published rows (issue 90).

Steps, each resumed by a rerun (a finished part is reused, never redone):
  1. the toy world's task data, built once under DIR/data/tasks (6 s; `--data-root` reuses one);
  2. MODEL's untrained twin, DIR/models/<name>-random-init (same config, tokenizer and
     sentence-transformers files, seeded random weights: `pretraining random-init --like`);
  3. both models fine-tuned over the config's LR grid at `--seeds` seeds on the 12 tasks, and
     MODEL scored zero-shot on the 3 IR tasks (its own pooling), into DIR/runs;
  4. `analysis compare` of those runs beside the published rows of Tables 2-5 (DIR/compare:
     compare.md/.csv/.json) and its figure (compare.png/.pdf, `paper_figures compare`).
The run count and an estimate of the time are printed before anything runs (`--dry-run` stops
there); the settings are saved in DIR/own-checkpoint.json; one command at a time per DIR.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from contracts.provenance import atomic_write_json, git_sha, package_versions, utc_now

SETTINGS_FILE = "own-checkpoint.json"
TOY_WORLD_CONFIG = "benchmarks/configs/toy_world.yaml"
IR_TASKS = ("msmarco", "nq", "mldr_en")
# The estimate printed before the runs start: wall seconds per run and worker of a MiniLM-sized
# model (22.7M parameters) in the toy world, on this project's 2-core machine with two workers:
# 75 runs of all-MiniLM-L6-v2 and its twin took 32 min 41 s (2026-11-29, while other work ran on
# the machine; docs/benchmarks.md). A larger model takes longer: the progress bars' own estimates
# take over once runs end.
SECONDS_PER_RUN = 52.0
SECONDS_PER_RUN_SOURCE = "2026-11-29: 75 toy-world runs of all-MiniLM-L6-v2 and its twin, 2 workers, 2 cores"


class OwnCheckpointError(ValueError):
    """A command line or folder this command cannot run with; one line, nothing written."""


@dataclass(frozen=True)
class OwnCheckpointSettings:
    model: str  # the checkpoint folder, absolute
    out: str
    seeds: tuple[int, ...]
    twin_seed: int
    config: str  # the fine-tuning config (its lr_grid is the grid)
    data_root: str
    lrs: tuple[float, ...]
    tables: tuple[int, ...]
    trust_remote_code: bool
    allow_reinitialised_weights: bool


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m reproduce own-checkpoint",
        description="Your checkpoint through the toy world's 12 tasks beside its random twin and the paper's rows.",
    )
    p.add_argument("model", help="a Hugging Face model folder (pretraining fetch-model writes one from a Hub id)")
    p.add_argument("--out", required=True, help="the folder of this comparison (resumed when rerun)")
    p.add_argument("--seeds", type=int, default=1, help="fine-tuning seeds per LR: 0 .. N-1 (default 1)")
    p.add_argument("--twin-seed", type=int, default=17, help="the seed of the twin's random weights (default 17)")
    p.add_argument("--config", default=TOY_WORLD_CONFIG, help=f"fine-tuning config (default {TOY_WORLD_CONFIG})")
    p.add_argument("--data-root", help="the toy world's task data (default: DIR/data/tasks, built if absent)")
    p.add_argument("--tables", default="2,3,4,5", help="the paper's tables to compare with (default 2,3,4,5)")
    p.add_argument("--workers", type=int, default=2, help="models fine-tuned at once, one process each (default 2)")
    p.add_argument("--trust-remote-code", action="store_true", help="the checkpoint ships model code you trust")
    p.add_argument(
        "--allow-reinitialised-weights",
        action="store_true",
        help="run a checkpoint that lacks some backbone weights (re-initialised at random; each record names them)",
    )
    p.add_argument("--dry-run", action="store_true", help="print the runs and the estimate; write nothing")
    return p


def _settings(args) -> OwnCheckpointSettings:
    from analysis.options import table_numbers
    from benchmarks.kinds.checkpoint import ModelLoadError
    from benchmarks.matrix import check_local_models
    from benchmarks.run import config_lr_grid
    from contracts.config import ConfigError

    model = Path(args.model).expanduser()
    if not model.is_dir():
        raise OwnCheckpointError(
            f"{args.model}: not a model folder; give a Hugging Face model folder (`python -m pretraining "
            "fetch-model ORG/NAME --out models/NAME` makes one from a Hub id)"
        )
    try:  # config, weights, tokenizer and the backbone's weights (benchmarks.kinds.loading), as `run` checks them
        check_local_models([str(model)], bool(args.trust_remote_code), bool(args.allow_reinitialised_weights))
    except ModelLoadError as exc:
        raise OwnCheckpointError(str(exc)) from None
    if args.seeds < 1:
        raise OwnCheckpointError(f"--seeds {args.seeds}: give 1 or more")
    if args.workers < 1:
        raise OwnCheckpointError(f"--workers {args.workers}: give 1 or more")
    try:
        tables = table_numbers(args.tables)
    except ValueError as exc:
        raise OwnCheckpointError(str(exc)) from None
    if not Path(args.config).is_file():
        raise OwnCheckpointError(f"--config {args.config}: no such file")
    try:
        lrs = config_lr_grid(args.config)
    except ConfigError as exc:
        raise OwnCheckpointError(str(exc)) from None
    if lrs is None:
        raise OwnCheckpointError(
            f"--config {args.config}: no lr_grid; give a config with one (e.g. {TOY_WORLD_CONFIG})"
        )
    out = Path(args.out).expanduser().absolute()
    data_root = Path(args.data_root).expanduser().absolute() if args.data_root else out / "data" / "tasks"
    if args.data_root and not data_root.is_dir():
        raise OwnCheckpointError(
            f"--data-root {args.data_root}: no such folder (leave it out to build the toy world's)"
        )
    return OwnCheckpointSettings(
        model=str(model.absolute()),
        out=str(out),
        seeds=tuple(range(args.seeds)),
        twin_seed=args.twin_seed,
        config=str(Path(args.config).absolute()),
        data_root=str(data_root),
        lrs=tuple(lrs),
        tables=tables,
        trust_remote_code=bool(args.trust_remote_code),
        allow_reinitialised_weights=bool(args.allow_reinitialised_weights),
    )


def model_name(settings: OwnCheckpointSettings) -> str:
    """MODEL's name in run records (benchmarks.run.run_model_name: `.../MiniLM/model` -> `MiniLM`)."""
    from benchmarks.run import run_model_name

    return run_model_name(settings.model)


def twin_folder(settings: OwnCheckpointSettings) -> Path:
    return Path(settings.out) / "models" / f"{model_name(settings)}-random-init"


def plan_jobs(settings: OwnCheckpointSettings, check_models: bool = True) -> list[dict]:
    """The fine-tuning jobs of MODEL and its twin (LR grid x seeds x 12 tasks) and MODEL's zero-shot IR runs."""
    from dataclasses import replace

    from benchmarks import matrix
    from benchmarks.run import load_run_config

    values = {
        "model": "-",
        "task": "-",
        "lr": 1.0,
        "seed": 0,
        "data_root": settings.data_root,
        "out": str(Path(settings.out) / "runs"),
        "trust_remote_code": settings.trust_remote_code or None,
        "allow_reinitialised_weights": settings.allow_reinitialised_weights or None,
    }
    base = load_run_config(values, settings.config)
    models = [settings.model, str(twin_folder(settings))]
    jobs = matrix.expand(base, models, None, settings.lrs, settings.seeds, check_models=check_models)
    zero_shot = replace(base, max_steps=0)
    # zero-shot: scored as it is (its own pooling), no training: one run per IR task (LR recorded, unused)
    jobs += matrix.expand(
        zero_shot, [settings.model], list(IR_TASKS), [settings.lrs[0]], [0], check_models=check_models
    )
    return jobs


def _estimate(jobs: list[dict], workers: int) -> str:
    seconds = SECONDS_PER_RUN * len(jobs) / max(1, min(workers, 2))
    return (
        f"about {seconds / 60:.0f} min at {SECONDS_PER_RUN:.0f} s a run on each of {max(1, min(workers, 2))} "
        f"worker(s) ({SECONDS_PER_RUN_SOURCE})"
    )


def _build_task_data(root: Path) -> str:
    from benchmarks.datasets import make_toy

    if root.is_dir():
        return f"task data: {root} (reused)"
    root.parent.mkdir(parents=True, exist_ok=True)
    partial = root.with_name(root.name + ".partial")
    import shutil

    shutil.rmtree(partial, ignore_errors=True)
    make_toy.write(partial, make_toy.DEFAULT_SEED, world=True)
    partial.rename(root)
    return f"task data: {root} (the toy world's 12 tasks, built)"


def _make_twin(settings: OwnCheckpointSettings) -> str:
    from pretraining.export import export_random_twin

    twin = twin_folder(settings)
    if twin.is_dir():
        return f"random twin: {twin} (reused)"
    twin.parent.mkdir(parents=True, exist_ok=True)
    export_random_twin(settings.model, twin, seed=settings.twin_seed, trust_remote_code=settings.trust_remote_code)
    return f"random twin: {twin} (seed {settings.twin_seed})"


def _run_jobs(jobs: list[dict], workers: int) -> dict[str, list[str]]:
    """Each model's jobs in order in one process (its MS MARCO runs before the IR runs that read
    them), up to `workers` models at once; a progress bar over all runs."""
    from benchmarks import matrix

    by_model: dict[str, list[dict]] = {}
    for job in jobs:
        by_model.setdefault(job["config"]["model"] + str(job["config"]["max_steps"]), []).append(job)
    groups = list(by_model.values())
    if workers <= 1 or len(groups) == 1:
        return matrix.run_local(jobs)
    import concurrent.futures
    import multiprocessing

    outcome: dict[str, list[str]] = {"done": [], "skipped": [], "failed": [], "at_chance": []}
    context = multiprocessing.get_context("spawn")  # torch is loaded here: no fork of its threads
    with concurrent.futures.ProcessPoolExecutor(min(workers, len(groups)), mp_context=context) as pool:
        futures = [pool.submit(_run_group, group) for group in groups]
        for future in concurrent.futures.as_completed(futures):
            for key, values in future.result().items():
                outcome[key] += values
    return outcome


def _run_group(jobs: list[dict]) -> dict[str, list[str]]:
    import torch

    from benchmarks import matrix

    torch.set_num_threads(1)  # one core per model: two models share the machine's two
    return matrix.run_local(jobs, progress=True)


def own_checkpoint(argv: list[str]) -> int:
    from analysis.cli import main as analysis_main
    from contracts.locks import FolderInUse, folder_lock
    from paper_figures.cli import main as figures_main

    args = build_parser().parse_args(argv)
    settings = _settings(args)
    out = Path(settings.out)
    twin_exists = twin_folder(settings).is_dir()
    jobs = plan_jobs(settings, check_models=twin_exists)
    trained = sum(1 for j in jobs if j["config"]["max_steps"] != 0)
    print(
        f"own-checkpoint: {len(jobs)} runs ({trained} fine-tuning runs: 2 models x 12 tasks x "
        f"{len(settings.lrs)} LRs x {len(settings.seeds)} seed(s), MS MARCO trained once per LR and seed for "
        f"NQ and MLDR; {len(jobs) - trained} zero-shot IR runs of {model_name(settings)}); "
        f"{_estimate(jobs, args.workers)}"
    )
    if args.dry_run:
        return 0
    try:
        with folder_lock(out, name=".own-checkpoint.lock", job="own-checkpoint"):
            atomic_write_json(
                out / SETTINGS_FILE,
                {
                    **asdict(settings),
                    "written": utc_now(),
                    "git_sha": git_sha(),
                    "package_versions": package_versions(),
                },
            )
            print(_build_task_data(Path(settings.data_root)))
            print(_make_twin(settings))
            outcome = _run_jobs(plan_jobs(settings), args.workers)
    except FolderInUse as exc:
        raise OwnCheckpointError(str(exc)) from None
    from benchmarks.matrix import report_outcome

    if report_outcome(outcome):
        print("own-checkpoint: rerun the same command to retry the failed runs", file=sys.stderr)
        return 1
    compare = out / "compare"
    tables = ",".join(map(str, settings.tables))
    status = analysis_main(["compare", str(out / "runs"), "--published", "--tables", tables, "--out", str(compare)])
    if status == 0:
        status = figures_main(["compare", str(compare)])
    return status


def main(argv: list[str]) -> int:
    try:
        return own_checkpoint(argv)
    except OwnCheckpointError as exc:
        print(f"reproduce own-checkpoint: error: {exc}", file=sys.stderr)
        return 2
