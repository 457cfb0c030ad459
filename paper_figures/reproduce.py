"""Reproduce a figure or table end to end: data -> pretraining -> fine-tuning -> analysis -> figures.

`python -m paper_figures reproduce --figure N | --table N --scale toy` reproduces the *study* the
figure or table belongs to (paper_figures.studies: masking, data-efficiency, biphasic,
masking-after-clm, cpt), orchestrating the stages' own Python APIs in one process:

  1. data         pretraining.data.prepare.prepare_data on the embedded corpus (seq 128), once
  2. pretraining  the pretraining.registry runs that produce the study's checkpoints (CPT bases
                  first), at toy scale renamed with the toy size and steps / 1,000
                  (`610m-clm-dec42k-mlm40-44k` -> `toy_m-clm-dec42-mlm40-44`) so every run record
                  carries its pretraining description; pretraining.train.train exports each
                  checkpoint as a Hugging Face folder (`hf/step-<step>`, intermediate ones included)
  3. fine-tuning  benchmarks.matrix.expand + benchmarks.run.run on the committed toy datasets
                  (benchmarks/configs/toy.yaml) over the chosen LRs and seeds
  4. analysis     analysis.aggregate.aggregate_runs -> cells.csv, analysis.tables.write_tables (the
                  study's tables, toy runs in the rows of the checkpoints they stand in for),
                  analysis.audit.run_audit, and the study's figures from our runs next to the
                  published ones

Caching and resuming come from the stages: prepared data with a manifest is reused, a pretraining
run with FINISHED.json is skipped (an interrupted one autoresumes from its last checkpoint), a
fine-tuning run with record.json is skipped (an interrupted one is redone). The analysis and the
figures are redone only when the set of records changed (`analysis_inputs.json`).

`--slurm` (always at `--scale paper`) writes the same DAG as Slurm jobs instead (`SlurmWriter`):
a data job, one (multi-node, Composer-launched, requeueable, autoresuming) pretraining job per
run (a CPT run after its base's job), the benchmarks.matrix job arrays of each checkpoint, and a
final analysis job, chained with `--dependency`, each running in the Apptainer image
(`--no-container`: the same commands bare); cluster specifics come from one YAML file
(`ClusterConfig`, configs/cluster.example.yaml).
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from contracts.config import ConfigError, config_from_dict, config_to_dict
from contracts.model_names import parse_model_name
from contracts.paper import DATASETS, FINETUNE_LRS, FINETUNE_SEEDS, MASKING_RATIOS, PAPER_SIZES
from contracts.provenance import atomic_write_json, atomic_write_text, stable_hash, utc_now

REPO_ROOT = Path(__file__).resolve().parent.parent
CONFIG_DIR = Path(__file__).resolve().parent / "configs"
TOY_SIZES = ("toy_s", "toy_m", "toy_l")
ALL_TASKS = tuple(d.id for d in DATASETS)
# Toy defaults, measured on a 2-core CPU to end in about 10 minutes (see the README).
DEFAULT_LRS = (1e-4, 5e-4)
DEFAULT_SEEDS = (0, 1)
# Per scale: the defaults of the options not given (paper: the paper's full protocol).
SCALE_DEFAULTS = {
    "toy": {"lrs": DEFAULT_LRS, "seeds": DEFAULT_SEEDS,
            "finetune_config": str(REPO_ROOT / "benchmarks" / "configs" / "toy.yaml"),
            "data_root": str(REPO_ROOT / "benchmarks" / "datasets" / "toy")},
    "paper": {"lrs": FINETUNE_LRS, "seeds": FINETUNE_SEEDS,
              "finetune_config": str(REPO_ROOT / "benchmarks" / "configs" / "paper.yaml"),
              "data_root": None},
}
# Reduced mode (CI, tests): 1 size x (MLM-20, MLM-40, CLM), 12 tasks, 1 LR x 2 seeds, 8 steps.
REDUCED = {"sizes": ("toy_s",), "ratios": (0.2, 0.4), "lrs": (5e-4,), "seeds": (0, 1),
           "pretrain_steps": 8}
STAGE_NAMES = ("data", "pretraining", "fine-tuning", "analysis")
RECYCLE_AFTER = 4  # fine-tuning chunks (of 12 runs) per worker process before a fresh one


class ReproduceError(ValueError):
    """Bad options or a stage that failed; one line saying what and how to fix it."""


@dataclass(frozen=True)
class ReproduceConfig:
    """Everything one reproduction depends on; saved as `<out>/reproduce.yaml`."""

    out: str
    study: str = "masking"  # paper_figures.studies.STUDIES: which figures and tables, hence which models
    scale: Literal["toy", "paper"] = "toy"
    # Subsets of the study's checkpoints (None: all of them). sizes/ratios/clm: the masking study only.
    sizes: tuple[str, ...] | None = None
    ratios: tuple[float, ...] | None = None
    clm: bool = True  # the CLM model of each size (Figure 3's dashed reference)
    checkpoints: tuple[str, ...] | None = None  # by paper name (610m-clm-42k) or toy name (toy_m-clm-42)
    tasks: tuple[str, ...] = ALL_TASKS
    lrs: tuple[float, ...] = DEFAULT_LRS
    seeds: tuple[int, ...] = DEFAULT_SEEDS
    pretrain_steps: int | None = None  # masking study: length of its 42k runs (None: toy 42, paper 42,000)
    finetune_steps: int | None = None  # None: the fine-tuning config's max_steps
    finetune_config: str = SCALE_DEFAULTS["toy"]["finetune_config"]
    data_root: str | None = SCALE_DEFAULTS["toy"]["data_root"]  # None: the Hub
    data_dir: str | None = None  # prepared pretraining data; None: <out>/data/embedded-128 (toy)
    runs_dir: str | None = None  # pretraining run directories; None: <out>/pretraining
    workers: int = 2  # local processes for fine-tuning (each with `threads` torch threads)
    threads: int = 1
    reps: int = 1000  # bootstrap replicates of the analysis

    def __post_init__(self):
        from paper_figures.studies import STUDIES, StudyError

        if self.study not in STUDIES:
            raise ValueError(f"study {self.study!r}: give one of {','.join(STUDIES)}")
        masking_only = {"sizes": self.sizes is not None, "ratios": self.ratios is not None,
                        "clm": not self.clm, "pretrain_steps": self.pretrain_steps is not None}
        misused = [k for k, given in masking_only.items() if given and self.study != "masking"]
        if misused:
            raise ValueError(f"{misused[0]} selects models of the masking study (Figures 2, 3, 5); study "
                             f"{self.study} takes --checkpoints instead")
        known = TOY_SIZES if self.scale == "toy" else PAPER_SIZES
        if self.sizes is not None and (not self.sizes or any(s not in known for s in self.sizes)):
            raise ValueError(f"sizes {list(self.sizes)}: give some of {','.join(known)} at scale {self.scale}")
        if self.ratios is not None and (not self.ratios or any(r not in MASKING_RATIOS for r in self.ratios)):
            raise ValueError(f"ratios {list(self.ratios)}: give some of {','.join(map(str, MASKING_RATIOS))}")
        bad = [t for t in self.tasks if t not in ALL_TASKS]
        if bad or not self.tasks:
            raise ValueError(f"tasks {bad or []}: give some of {','.join(ALL_TASKS)}")
        if not self.lrs or any(not lr > 0 for lr in self.lrs):
            raise ValueError(f"lrs {list(self.lrs)}: give learning rates > 0")
        if not self.seeds or any(s < 0 for s in self.seeds):
            raise ValueError(f"seeds {list(self.seeds)}: give seeds >= 0")
        if self.finetune_steps is not None and self.finetune_steps < 1:
            raise ValueError(f"finetune_steps {self.finetune_steps} must be >= 1")
        if self.pretrain_steps is not None and self.pretrain_steps < 4:
            raise ValueError(f"pretrain_steps {self.pretrain_steps} must be >= 4 (2 warmup + 2 decay steps)")
        if self.workers < 1 or self.threads < 1:
            raise ValueError("workers and threads must be >= 1")
        try:
            if not study_checkpoints(self):
                raise ValueError("the options select no checkpoint of the study")
        except StudyError as exc:
            raise ValueError(str(exc)) from None


# --- paths -----------------------------------------------------------------------------------------
def _out(cfg: ReproduceConfig) -> Path:
    return Path(cfg.out).absolute()


def data_dir(cfg: ReproduceConfig) -> Path:
    return Path(cfg.data_dir).absolute() if cfg.data_dir else _out(cfg) / "data" / "embedded-128"


def pretraining_dir(cfg: ReproduceConfig) -> Path:
    return Path(cfg.runs_dir).absolute() if cfg.runs_dir else _out(cfg) / "pretraining"


def finetune_dir(cfg: ReproduceConfig) -> Path:
    return _out(cfg) / "finetune"


# --- the DAG ---------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=64)  # asked for once per model and run while writing the DAG; configs are frozen
def study_checkpoints(cfg: ReproduceConfig) -> tuple:
    """The study's checkpoints (paper_figures.studies.Checkpoint) that this reproduction fine-tunes."""
    from paper_figures.studies import STUDIES, checkpoints

    chosen = checkpoints(STUDIES[cfg.study], cfg.scale, cfg.pretrain_steps, cfg.checkpoints)
    if cfg.study != "masking":
        return tuple(chosen)
    keep = []
    for ckpt in chosen:  # sizes are the scale's (toy_s or 210m), as the names are
        desc = parse_model_name(ckpt.name)
        wanted_ratio = cfg.clm if desc.objective == "clm" else desc.masking_ratio in (cfg.ratios or MASKING_RATIOS)
        if (cfg.sizes is None or desc.size in cfg.sizes) and wanted_ratio:
            keep.append(ckpt)
    return tuple(keep)


def model_names(cfg: ReproduceConfig) -> list[str]:
    """The fine-tuned models: `toy_s-mlm20-42`, `toy_m-clm-42-5`, ... (names contracts.model_names parses)."""
    return [c.name for c in study_checkpoints(cfg)]


def _checkpoint(cfg: ReproduceConfig, name: str):
    for ckpt in study_checkpoints(cfg):
        if ckpt.name == name:
            return ckpt
    raise ReproduceError(f"{name} is not a checkpoint of this reproduction: {', '.join(model_names(cfg))}")


def pretraining_runs(cfg: ReproduceConfig) -> dict[str, str]:
    """Run directory name at this scale -> registry run, CPT bases before their CPT runs."""
    from paper_figures.studies import runs_to_train, scaled_name

    return {scaled_name(run, cfg.scale, cfg.pretrain_steps): run for run in runs_to_train(study_checkpoints(cfg))}


def pretraining_config(cfg: ReproduceConfig, name: str) -> dict:
    """The registry's config of the run `name` (e.g. `toy_m-mlm40-42`) at this scale, renamed so that
    every run record carries its pretraining description (and shortened by --pretrain-steps)."""
    from pretraining import registry
    from paper_figures.studies import scale_steps, scaled_name

    runs = pretraining_runs(cfg)
    if name not in runs:
        raise ReproduceError(f"{name} is not a pretraining run of this reproduction: {', '.join(runs)}")
    run = registry.RUNS[runs[name]]
    body = registry.config_dict(run, cfg.scale, runs_root=str(pretraining_dir(cfg)),
                                data_path=str(data_dir(cfg)))
    body["name"] = name  # toy: `toy_s-mlm40-42` rather than the registry's `210m-mlm40-42k-toy`
    body["run_dir"] = str(pretraining_dir(cfg) / name)
    if run.cpt_base is not None:  # the decayed base, under its name at this scale
        base = registry.RUNS[run.cpt_base]
        base_dir = scaled_name(base.name, cfg.scale, cfg.pretrain_steps)
        steps = scale_steps(base.max_steps, cfg.scale, cfg.pretrain_steps)
        body["init"]["path"] = str(pretraining_dir(cfg) / base_dir / "hf" / f"step-{steps}")
        body["data"]["start_sample"] = steps * body["train"]["global_batch_size"]  # after the base's data
    if cfg.pretrain_steps:  # the masking study's 42k runs, shortened
        body["train"]["max_steps"] = cfg.pretrain_steps
        body["train"]["checkpoint_steps"] = [s for s in body["train"]["checkpoint_steps"] if s < cfg.pretrain_steps]
    exports = {c.step for c in study_checkpoints(cfg) if c.run_name == name} - {body["train"]["max_steps"]}
    body["train"]["checkpoint_steps"] = sorted(set(body["train"]["checkpoint_steps"]) | exports)
    if cfg.scale == "toy":
        body["train"]["progress_bar"] = False  # one bar over the runs instead
    return body


def model_path(cfg: ReproduceConfig, name: str) -> Path:
    ckpt = _checkpoint(cfg, name)
    return pretraining_dir(cfg) / ckpt.run_name / "hf" / f"step-{ckpt.step}"


def finetune_jobs(cfg: ReproduceConfig, name: str | None = None, check_models: bool = True) -> list[dict]:
    """benchmarks.matrix job dicts for every model (or `name`) x task x LR x seed."""
    from benchmarks import matrix
    from benchmarks.run import load_run_config

    values = {"model": "-", "task": "-", "lr": 1.0, "seed": 0, "out": str(finetune_dir(cfg)),
              "data_root": cfg.data_root, "max_steps": cfg.finetune_steps}
    base = load_run_config(values, cfg.finetune_config)
    jobs = []
    for model in [name] if name else model_names(cfg):
        jobs += matrix.expand(replace(base, model_name=model), [str(model_path(cfg, model))],
                              list(cfg.tasks), list(cfg.lrs), list(cfg.seeds), check_models=check_models)
    return jobs


# --- workers ---------------------------------------------------------------------------------------
def _init_worker(threads: int) -> None:
    import torch

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    torch.set_num_threads(threads)
    import logging

    logging.getLogger("composer").setLevel(logging.ERROR)


def _pretrain_one(body: dict) -> tuple[str, str]:
    from pretraining.config import RunConfig
    from pretraining.export import export_checkpoint
    from pretraining.train import FINISHED, train

    run_cfg = config_from_dict(RunConfig, body, f"pretraining config of {body['name']}")
    run_dir = Path(run_cfg.run_dir)
    state = "skipped" if (run_dir / FINISHED).exists() else "done"
    if state == "done":
        train(run_cfg)
    final = run_dir / "hf" / f"step-{run_cfg.train.max_steps}"
    if not (final / "config.json").exists():  # written by training; redone from the last checkpoint if lost
        export_checkpoint(run_dir, final)
    return body["name"], state


def _finetune_chunk(jobs: list[dict]) -> dict[str, list[str]]:
    from benchmarks.matrix import run_local

    return run_local(jobs, progress=False)


def _map(fn, items: list, cfg: ReproduceConfig, desc: str, unit: str, weights=None):
    """fn over items, in this process (workers 1) or a spawn pool; one tqdm bar; results in order done."""
    from tqdm import tqdm

    weights = weights or [1] * len(items)
    bar = tqdm(total=sum(weights), desc=desc, unit=unit, file=sys.stderr, dynamic_ncols=True)
    results = []
    try:
        if cfg.workers == 1 or len(items) <= 1:
            _init_worker(cfg.threads)
            for item, weight in zip(items, weights):
                results.append(fn(item))
                bar.update(weight)
        else:
            import multiprocessing as mp

            ctx = mp.get_context("spawn")
            # A fresh process every few items: memory grows by about 20 MB per fine-tuning run in a
            # long-lived process (11 GB after 500 runs), so workers are recycled.
            with ctx.Pool(min(cfg.workers, len(items)), initializer=_init_worker, initargs=(cfg.threads,),
                          maxtasksperchild=RECYCLE_AFTER) as pool:
                pending = {pool.apply_async(fn, (item,)): weight for item, weight in zip(items, weights)}
                while pending:
                    for handle in [h for h in pending if h.ready()]:
                        results.append(handle.get())
                        bar.update(pending.pop(handle))
                    time.sleep(0.05)
                pool.close()  # let the workers exit (leaving the `with` would SIGTERM them)
                pool.join()
    finally:
        bar.close()
    return results


# --- stages ----------------------------------------------------------------------------------------
def stage_data(cfg: ReproduceConfig) -> str:
    from pretraining.data.prepare import MANIFEST, PrepareConfig, prepare_data

    out = data_dir(cfg)
    if (out / MANIFEST).exists():
        return f"data: reusing {out}"
    manifest = prepare_data(PrepareConfig(out=str(out), inputs=("embedded",), tokenizer="embedded",
                                          seq_len=128))
    return f"data: {manifest['counts']['samples']} samples of 128 tokens -> {out}"


def stage_pretraining(cfg: ReproduceConfig) -> str:
    import yaml

    from pretraining.config import RunConfig

    bodies = []
    for name in pretraining_runs(cfg):  # CPT bases first: their final export is the CPT runs' init
        body = pretraining_config(cfg, name)
        config_from_dict(RunConfig, body, f"pretraining config of {name}")  # validate before any work
        _write_if_changed(_out(cfg) / "configs" / "pretraining" / f"{name}.yaml",
                          yaml.safe_dump(body, sort_keys=False))
        bodies.append(body)
    # In this process, one run after the other, with the threads of all workers: streaming's shared
    # memory allows one reader of a local data folder at a time (parallel runs would each need
    # their own data.cache_dir copy, as the Slurm jobs have).
    results = _map(_pretrain_one, bodies, replace(cfg, workers=1, threads=cfg.workers * cfg.threads),
                   "pretraining", "run")
    for name in model_names(cfg):
        if not (model_path(cfg, name) / "config.json").is_file():
            raise ReproduceError(f"{model_path(cfg, name)} (the export of {name}) is missing although its run "
                                 "finished: delete that run's folder and rerun to train it again")
    done = sum(state == "done" for _, state in results)
    return f"pretraining: {done} trained, {len(results) - done} reused -> {pretraining_dir(cfg)}"


def stage_finetune(cfg: ReproduceConfig) -> str:
    jobs = finetune_jobs(cfg)
    jobs_text = "".join(json.dumps(j, sort_keys=True) + "\n" for j in jobs)
    _write_if_changed(finetune_dir(cfg) / "jobs.jsonl", jobs_text)  # the `benchmarks matrix` job list
    # Chunks of one (model, lr, seed): the IR runs of a chunk share its MS MARCO model.
    chunks: dict[tuple, list[dict]] = {}
    for job in jobs:
        c = job["config"]
        chunks.setdefault((c["model_name"], c["lr"], c["seed"]), []).append(job)
    todo = [c for c in chunks.values() if not all(_has_record(j) for j in c)]
    skipped = len(jobs) - sum(len(c) for c in todo)
    outcomes = _map(_finetune_chunk, todo, cfg, "fine-tuning", "run", [len(c) for c in todo]) if todo else []
    failed = [f for o in outcomes for f in o["failed"]]
    done = sum(len(o["done"]) for o in outcomes)
    skipped += sum(len(o["skipped"]) for o in outcomes)
    if failed:
        raise ReproduceError(f"{len(failed)} fine-tuning run(s) failed, first: {failed[0]}; rerun to retry "
                             "them (finished runs are kept)")
    return f"fine-tuning: {done} runs done, {skipped} reused -> {finetune_dir(cfg)}"


def _has_record(job: dict) -> bool:
    from benchmarks.run import RunConfig

    return (config_from_dict(RunConfig, job["config"], job["id"]).run_dir / "record.json").is_file()


def _record_files(cfg: ReproduceConfig) -> list[Path]:
    from benchmarks.run import RunConfig

    files = [config_from_dict(RunConfig, j["config"], j["id"]).run_dir / "record.json" for j in finetune_jobs(cfg)]
    return sorted(files)


def stand_ins(cfg: ReproduceConfig) -> dict[str, str]:
    """Our model name -> the paper checkpoint it stands in for (toy scale; empty at paper scale)."""
    return {c.name: c.paper_name for c in study_checkpoints(cfg) if c.name != c.paper_name}


def cpt_run_dirs(cfg: ReproduceConfig) -> list[Path]:
    """The CPT pretraining runs of this reproduction (their loss.jsonl is Figure 12)."""
    from pretraining.registry import RUNS

    return [pretraining_dir(cfg) / name for name, run in pretraining_runs(cfg).items() if RUNS[run].cpt_base]


def _figures(cfg: ReproduceConfig) -> list[int]:
    from paper_figures.studies import STUDIES

    return [n for n in STUDIES[cfg.study].figures if n != 12 or cpt_run_dirs(cfg)]


def _figure_files(cfg: ReproduceConfig) -> list[str]:
    from paper_figures.cli import CELL_FIGURES

    names = []
    for number in _figures(cfg):
        names.append(f"figure{number}")
        if f"figure{number}" in CELL_FIGURES:  # the paper prints the numbers of these (not of 5, 7, 12)
            names.append(f"figure{number}_published")
    return names


def draw_figures(cfg: ReproduceConfig, cells, records, folder: Path, sources: list[str]) -> list[str]:
    """The study's figures from our cells / records (toy runs drawn as the paper checkpoints they stand
    in for, and said so on the figure), each next to the published one where the paper has the numbers.
    Returns one summary per figure."""
    from dataclasses import replace as replace_record

    from analysis.published import load_published_cells
    from paper_figures.cli import CELL_FIGURES, LOG_FIGURES, RUN_FIGURES
    from paper_figures.output import save_figure
    from pretraining.registry import TOY_SIZE

    renamed = stand_ins(cfg)
    back = {paper: ours for ours, paper in renamed.items()}
    cells = cells.assign(model=cells["model"].map(lambda m: renamed.get(m, m)))
    records = [replace_record(r, model=renamed[r.model], pretraining=parse_model_name(renamed[r.model]))
               if r.model in renamed else r for r in records]
    paper_sizes = tuple(s for s in PAPER_SIZES if cfg.sizes is None or s in cfg.sizes or TOY_SIZE[s] in cfg.sizes)
    summaries = []
    for number in _figures(cfg):
        name, kwargs = f"figure{number}", {}
        if number in (2, 3):
            kwargs["sizes"] = paper_sizes
        if number == 3:
            kwargs["ratios"] = cfg.ratios or MASKING_RATIOS
        if number == 5 and cfg.scale == "toy":  # the paper's [1e-5, 1e-4] holds at most one toy LR
            kwargs["lr_range"] = (min(cfg.lrs), max(cfg.lrs))
        if name in LOG_FIGURES:  # our runs' training logs, under our names
            fig, points = LOG_FIGURES[name]([str(p) for p in cpt_run_dirs(cfg)])
        elif name in RUN_FIGURES:
            fig, points = RUN_FIGURES[name](records, **kwargs)
        else:
            fig, points = CELL_FIGURES[name](cells, **kwargs)
        if renamed:
            fig.suptitle(f"{fig.get_suptitle()}\n[toy runs: toy_s/m/l stand in for 210M/610M/1B, "
                         "steps / 1,000]", fontsize=11)
            # cells and records were renamed to paper names; Figure 12 reads our run folders directly
            points.insert(6, "stand_in_for", points["model"].map(lambda m: m if m in back else renamed.get(m)))
            points["model"] = points["model"].map(lambda m: back.get(m, m))
        value = "mean" if "mean" in points else "std"
        drawn = int(points[value].notna().sum())
        save_figure(fig, points, folder, name, {"source": "runs", "runs": sources, "scale": cfg.scale,
                                                "study": cfg.study, "stand_ins": renamed, **kwargs})
        summaries.append(f"{name} {drawn}/{len(points)} points")
        if name in CELL_FIGURES:
            fig, published = CELL_FIGURES[name](load_published_cells())
            save_figure(fig, published, folder, f"{name}_published", {"source": "published"})
            _side_by_side(folder, name, "our toy runs" if renamed else "our runs")
    return summaries


def stage_analysis(cfg: ReproduceConfig) -> str:
    """Records -> runs.jsonl, cells.csv, tables/, audit/, figure/ (skipped when nothing changed)."""
    from analysis.aggregate import aggregate_runs
    from analysis.audit import run_audit
    from analysis.tables import write_tables
    from contracts.run_record import RunRecord, write_run_records
    from paper_figures.studies import STUDIES

    out, study = _out(cfg), STUDIES[cfg.study]
    files = _record_files(cfg)
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise ReproduceError(f"{len(missing)} of {len(files)} run records are missing, e.g. {missing[0]}: "
                             "finish the fine-tuning stage first")
    inputs = {"config": config_to_dict(cfg),
              "records": [[str(f), f.stat().st_mtime_ns, f.stat().st_size] for f in files]}
    stamp = out / "analysis_inputs.json"
    expected = [out / "runs.jsonl", out / "cells.csv", out / "tables" / "tables.md", out / "audit" / "audit.md",
                *(out / "figure" / f"{name}.png" for name in _figure_files(cfg))]
    if stamp.exists() and json.loads(stamp.read_text()).get("hash") == stable_hash(inputs) \
            and all(p.exists() for p in expected):
        return f"analysis: unchanged records, reusing {out / 'cells.csv'}, tables, audit and figures"
    records = [RunRecord.from_dict(json.loads(f.read_text()), str(f)) for f in files]
    write_run_records(out / "runs.jsonl", records)
    cells = aggregate_runs(records, reps=cfg.reps)
    atomic_write_text(out / "cells.csv", cells.to_csv(index=False))
    renamed = stand_ins(cfg)
    source = f"{cfg.scale}-scale reproduction run records {out / 'runs.jsonl'}"
    if renamed:
        source += " (toy runs in the rows of the paper checkpoints they stand in for: Checkpoint = our run)"
    write_tables(cells, out / "tables", source=source, only=study.tables,
                 rename={paper: ours for ours, paper in renamed.items()})
    summary = run_audit(cells, out / "audit", sources=[str(out / "runs.jsonl")])
    figures = draw_figures(cfg, cells, records, out / "figure", [str(out / "runs.jsonl")])
    atomic_write_json(stamp, {"hash": stable_hash(inputs), **inputs})
    c = summary["cells"]
    return (f"analysis: {len(records)} records -> {len(cells)} cells; {', '.join(figures)}; tables "
            f"{', '.join(map(str, study.tables)) or '(none: extra tables only)'}; audit: {c['match']} match, "
            f"{c['mismatch']} mismatch, {c['missing']} missing of {c['published']} published cells -> {out}")


def _side_by_side(folder: Path, name: str, label: str) -> None:
    """<name>_vs_published.png: our figure (left) next to the published one (right)."""
    import matplotlib.image as mpimg
    from matplotlib.figure import Figure

    from io import BytesIO

    from contracts.provenance import atomic_write_bytes

    ours, paper = mpimg.imread(folder / f"{name}.png"), mpimg.imread(folder / f"{name}_published.png")
    fig = Figure(figsize=(22, 7.5), layout="constrained")
    for ax, image, title in zip(fig.subplots(1, 2), (ours, paper), (label, "published (the paper's tables)")):
        ax.imshow(image)
        ax.set_title(title)
        ax.axis("off")
    buffer = BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    atomic_write_bytes(folder / f"{name}_vs_published.png", buffer.getvalue())


def _write_if_changed(path: Path, text: str) -> None:
    if not (path.exists() and path.read_text() == text):
        atomic_write_text(path, text)


STAGES = (("data", stage_data), ("pretraining", stage_pretraining), ("fine-tuning", stage_finetune),
          ("analysis", stage_analysis))


# --- Slurm: the same DAG as batch jobs ----------------------------------------------------------------
@dataclass(frozen=True)
class ClusterConfig:
    """Cluster specifics of `--slurm` / `--scale paper` (one YAML file, see configs/cluster.example.yaml)."""

    partition: str
    image: str  # the Apptainer image (`make container`)
    data_dir: str  # prepared pretraining data (data.path); prepared by the first job if it lacks manifest.json
    runs_dir: str  # pretraining run directories (checkpoints, hf exports)
    hf_cache: str  # HF_HOME inside the jobs: the hub's tokenizer and datasets, pre-downloaded (jobs run offline)
    # Each pretraining job copies the shards it reads into <data_cache_dir>/<run name> on its nodes
    # (node-local; streaming's cache), so concurrent jobs never share (or race to decompress) shard
    # files. null: read `data_dir` in place (only safe for one job at a time).
    data_cache_dir: str | None = "/tmp/mlm-vs-clm-mds"
    data_cache_limit: str | None = None  # e.g. "500gb": streaming evicts shards beyond this
    account: str | None = None
    qos: str | None = None
    gpus_per_node: int = 8  # 0: CPU jobs (no --gpus, no Composer launcher), e.g. a local test cluster
    cpus_per_gpu: int = 8
    cpus_per_task: int = 2  # CPU jobs (gpus_per_node 0) and the data / analysis jobs
    pretraining_nodes: int = 24  # nodes of each pretraining job (24 x 8 = the paper's 192 GPUs)
    # CPU jobs (gpus_per_node 0): ranks per node of a pretraining job; > 1 launches them as the GPU
    # jobs are (srun, one Composer launcher per node, gloo), e.g. to exercise the multi-rank path
    cpu_ranks_per_node: int = 1
    pretraining_time: str = "48:00:00"  # a job hitting it is requeued and resumes (autoresume)
    finetune_time: str = "04:00:00"
    analysis_time: str = "02:00:00"
    data_time: str = "48:00:00"
    array_throttle: int | None = None  # at most N fine-tuning array tasks of one array at once
    master_port: int = 29500
    python: str = "python"  # inside the image (or on the nodes with --no-container)
    binds: tuple[str, ...] = ()  # more paths to bind into the container
    sbatch_options: tuple[str, ...] = ()  # more #SBATCH options for every job, e.g. "--constraint=a100"
    prepare_data_args: tuple[str, ...] = (
        "--hf-dataset", "HuggingFaceFW/fineweb-edu", "--hf-config", "sample-100BT",
        "--tokenizer", "meta-llama/Meta-Llama-3-8B")  # toy scale: --input embedded (the shipped corpus)

    def __post_init__(self):
        if self.gpus_per_node < 0 or min(self.pretraining_nodes, self.cpus_per_task, self.cpu_ranks_per_node) < 1:
            raise ValueError("gpus_per_node must be >= 0, pretraining_nodes, cpus_per_task and "
                             "cpu_ranks_per_node >= 1")


def load_cluster_config(path: str | Path) -> ClusterConfig:
    from contracts.config import load_config

    return load_config(ClusterConfig, path)


def default_cluster_file() -> Path:
    mine = CONFIG_DIR / "cluster.yaml"
    return mine if mine.exists() else CONFIG_DIR / "cluster.example.yaml"


def _q(text) -> str:
    import shlex

    return shlex.quote(str(text))


class SlurmWriter:
    """Writes `<out>/slurm/*`: one script per job and `submit.sh`, which submits them chained."""

    def __init__(self, cfg: ReproduceConfig, cluster: ClusterConfig, container: bool = True):
        self.cfg, self.cluster, self.container = cfg, cluster, container
        self.dir = _out(cfg) / "slurm"
        self.logs = self.dir / "slurm_logs"  # where the benchmarks.matrix scripts log too

    # what every job runs its commands through
    def binds(self) -> list[str]:
        c = self.cluster
        paths = [REPO_ROOT, _out(self.cfg), data_dir(self.cfg), pretraining_dir(self.cfg), c.hf_cache,
                 *c.binds]
        if self.cfg.data_root:
            paths.append(self.cfg.data_root)
        return list(dict.fromkeys(str(Path(p)) for p in paths))

    def prefix(self) -> str:
        """`apptainer exec --nv --bind ... IMAGE` (nothing with --no-container)."""
        if not self.container:
            return ""
        nv = "--nv " if self.cluster.gpus_per_node > 0 else ""
        return (f"apptainer exec {nv}--cleanenv --bind {_q(','.join(self.binds()))} --pwd {_q(REPO_ROOT)} "
                f"{_q(self.cluster.image)} ")

    def check_paths(self) -> None:
        """Paths go unquoted into `srun bash -c '...'` and `--bind a,b`: keep them plain."""
        import re

        for path in [*self.binds(), self.cluster.image, self.cluster.python]:
            if not re.fullmatch(r"[\w@%+=:./-]+", str(path)):
                raise ReproduceError(f"path {path!r} (cluster config or --out) has characters the generated "
                                     "scripts cannot carry (spaces, quotes, commas): use a plain path")

    def environment(self) -> list[str]:
        c = self.cluster
        env = {"HF_HOME": c.hf_cache, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
               "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
        if c.gpus_per_node == 0:
            env["OMP_NUM_THREADS"] = "1"
        lines = [f"export {k}={_q(v)}" for k, v in env.items()]
        if self.container:  # --cleanenv: pass them explicitly
            lines += [f"export APPTAINERENV_{k}={_q(v)}" for k, v in env.items()]
        return lines

    def header(self, job_name: str, time_limit: str, extra: list[str]) -> list[str]:
        c = self.cluster
        opts = [f"--job-name={job_name}", f"--partition={c.partition}", f"--time={time_limit}",
                f"--output={self.logs}/%x_%j.out"]
        opts += [f"--account={c.account}"] if c.account else []
        opts += [f"--qos={c.qos}"] if c.qos else []
        return ["#!/bin/bash", *[f"#SBATCH {o}" for o in opts + extra + list(c.sbatch_options)]]

    def body_start(self) -> list[str]:
        return ["set -euo pipefail", f"cd {_q(REPO_ROOT)}", *self.environment(), ""]

    # the jobs
    def data_script(self) -> str:
        c, out = self.cluster, data_dir(self.cfg)
        args = ["--input", "embedded", "--seq-len", "128"] if self.cfg.scale == "toy" else \
            [*c.prepare_data_args, "--seq-len", "2048"]
        cmd = f"{self.prefix()}{_q(c.python)} -m pretraining prepare-data {' '.join(map(_q, args))} --out {_q(out)}"
        lines = self.header("mlmclm-data", c.data_time, [f"--cpus-per-task={c.cpus_per_task}"]) + \
            self.body_start() + [
                f"if [[ -f {_q(out / 'manifest.json')} ]]; then echo 'data: reusing {out}'; exit 0; fi",
                cmd]
        return "\n".join(lines) + "\n"

    def pretraining_script(self, name: str, config_path: Path) -> str:
        c = self.cluster
        run_dir = pretraining_dir(self.cfg) / name
        gpu = c.gpus_per_node > 0
        ranks_per_node = c.gpus_per_node if gpu else c.cpu_ranks_per_node
        launcher = gpu or ranks_per_node > 1
        extra = ["--requeue", "--signal=B:USR1@600"]
        if gpu:
            extra += [f"--nodes={c.pretraining_nodes}", "--ntasks-per-node=1", f"--gpus-per-node={c.gpus_per_node}",
                      f"--cpus-per-task={c.cpus_per_gpu * c.gpus_per_node}"]
        elif launcher:
            extra += [f"--nodes={c.pretraining_nodes}", "--ntasks-per-node=1",
                      f"--cpus-per-task={c.cpus_per_task * ranks_per_node}"]
        else:
            extra += ["--nodes=1", "--ntasks=1", f"--cpus-per-task={c.cpus_per_task}"]
        lines = self.header(f"mlmclm-pt-{name}", c.pretraining_time, extra) + self.body_start() + [
            "# Requeued (node failure, preemption, or the USR1 sent 10 min before the time limit), the job",
            "# runs again with the same run_dir: Composer's autoresume continues from the last checkpoint.",
            'trap \'echo "time limit near: requeue $SLURM_JOB_ID"; scontrol requeue "$SLURM_JOB_ID"\' USR1',
            f"if [[ -f {_q(run_dir / 'FINISHED.json')} ]]; then echo 'pretraining: {name} is finished'; exit 0; fi",
        ]
        train = f"-m pretraining train {_q(config_path)}"
        if launcher:
            world = c.pretraining_nodes * ranks_per_node
            lines += [
                'MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
                "export MASTER_ADDR",
                f"srun --kill-on-bad-exit=1 bash -c '{self.prefix()}composer -n {ranks_per_node} "
                f"--world_size {world} --node_rank \"$SLURM_NODEID\" --master_addr \"$MASTER_ADDR\" "
                f"--master_port {c.master_port} {train}' &",
            ]
        else:
            lines.append(f"{self.prefix()}{_q(c.python)} {train} &")
        lines += ["wait $!  # in the background so that the USR1 trap runs during training"]
        return "\n".join(lines) + "\n"

    def python_wrapper(self) -> str:
        """`$PYTHON` of the benchmarks.matrix array scripts: python inside the image."""
        return "\n".join(["#!/bin/bash", "# python of the fine-tuning array tasks (benchmarks.matrix scripts)",
                          *self.environment(), f'exec {self.prefix()}{_q(self.cluster.python)} "$@"']) + "\n"

    def analysis_script(self, config_path: Path) -> str:
        c = self.cluster
        lines = self.header("mlmclm-analysis", c.analysis_time, [f"--cpus-per-task={c.cpus_per_task}"]) + \
            self.body_start() + [
                f"{self.prefix()}{_q(c.python)} -m paper_figures reproduce --config {_q(config_path)} "
                "--stage analysis"]
        return "\n".join(lines) + "\n"

    def finetune_options(self) -> list[str]:
        c = self.cluster
        opts = [f"--partition={c.partition}", f"--time={c.finetune_time}"]
        opts += [f"--account={c.account}"] if c.account else []
        opts += [f"--qos={c.qos}"] if c.qos else []
        opts += [f"--gpus=1", f"--cpus-per-task={c.cpus_per_gpu}"] if c.gpus_per_node else \
            [f"--cpus-per-task={c.cpus_per_task}"]
        return opts + list(c.sbatch_options)

    def write(self) -> dict:
        """Write every script and `submit.sh`; returns {"submit": path, "commands": [...], counts}."""
        import yaml

        from benchmarks import matrix
        from paper_figures.studies import scaled_name
        from pretraining.registry import RUNS

        cfg, out = self.cfg, _out(self.cfg)
        self.check_paths()
        self.logs.mkdir(parents=True, exist_ok=True)
        config_path = _write_reproduce_config(cfg)
        scripts = {"data": self.dir / "data.sbatch"}
        _write_if_changed(scripts["data"], self.data_script())
        python = self.dir / "python.sh"
        _write_if_changed(python, self.python_wrapper())
        python.chmod(0o755)
        commands = ["cd " + _q(self.dir), f"mkdir -p {_q(self.logs)}",
                    "data=$(sbatch --parsable data.sbatch)", "data=${data%%;*}"]
        after_finetune, n_runs, n_tasks = [], 0, 0
        runs = pretraining_runs(cfg)
        run_var = {}
        for i, name in enumerate(runs):
            body = pretraining_config(cfg, name)
            if self.cluster.data_cache_dir:
                body["data"]["cache_dir"] = f"{self.cluster.data_cache_dir}/{name}"
                body["data"]["cache_limit"] = self.cluster.data_cache_limit
            run_config = out / "configs" / "pretraining" / f"{name}.yaml"
            _write_if_changed(run_config, yaml.safe_dump(body, sort_keys=False))
            pt = self.dir / f"pretrain_{name}.sbatch"
            _write_if_changed(pt, self.pretraining_script(name, run_config))
            base = RUNS[runs[name]].cpt_base
            # a CPT run starts from its base's final export: after the base's job, not just the data
            after = f'"${run_var[scaled_name(base, cfg.scale, cfg.pretrain_steps)]}"' if base else '"$data"'
            run_var[name] = f"pt{i}"
            commands += [f"pt{i}=$(sbatch --parsable --dependency=afterok:{after} {pt.name})", f"pt{i}=${{pt{i}%%;*}}"]
        for j, ckpt in enumerate(study_checkpoints(cfg)):
            jobs = finetune_jobs(cfg, ckpt.name, check_models=False)
            jobs_path = finetune_dir(cfg) / "jobs" / f"{ckpt.name}.jsonl"
            _write_if_changed(jobs_path, "".join(json.dumps(j, sort_keys=True) + "\n" for j in jobs))
            ft = self.dir / f"finetune_{ckpt.name}.sh"
            _write_if_changed(ft, matrix.slurm_script(jobs_path, jobs, self.cluster.array_throttle, self.dir,
                                                      self.finetune_options(), python=str(python)))
            n_runs += len(jobs)
            throttle = f"%{self.cluster.array_throttle}" if self.cluster.array_throttle else ""
            for group, size in matrix.array_sizes(jobs).items():
                if size == 0:
                    continue
                dep = f'aftercorr:"$ir_train{j}" --kill-on-invalid-dep=yes' if group == "ir_eval" \
                    else f'afterok:"${run_var[ckpt.run_name]}"'
                var = f"{group}{j}"
                commands += [f"{var}=$(sbatch --parsable --job-name=mlmclm-{group}-{ckpt.name} --array=0-{size - 1}"
                             f"{throttle} --dependency={dep} {ft.name} {group})", f"{var}=${{{var}%%;*}}"]
                after_finetune.append(f'"${var}"')
                n_tasks += size
        analysis = self.dir / "analysis.sbatch"
        _write_if_changed(analysis, self.analysis_script(config_path))
        commands += [f"analysis=$(sbatch --parsable --dependency=afterok:{':'.join(after_finetune)} "
                     f"{analysis.name})", "analysis=${analysis%%;*}",
                     'echo "submitted: data $data, pretraining' + "".join(f" ${v}" for v in run_var.values()) +
                     ', analysis $analysis"']
        submit = self.dir / "submit.sh"
        _write_if_changed(submit, "\n".join([
            "#!/bin/bash",
            f"# Study {cfg.study} at scale {cfg.scale}: data -> {len(runs)} pretraining jobs -> fine-tuning arrays "
            f"of {len(study_checkpoints(cfg))} checkpoints ({n_runs} runs) -> analysis, chained with --dependency.",
            "# Written by `python -m paper_figures reproduce`; run with bash to submit (from a login node).",
            "set -euo pipefail", *commands]) + "\n")
        return {"submit": submit, "commands": commands, "pretraining_jobs": len(runs),
                "checkpoints": len(study_checkpoints(cfg)), "finetune_runs": n_runs, "finetune_array_tasks": n_tasks}


def _write_reproduce_config(cfg: ReproduceConfig) -> Path:
    """`<out>/reproduce.yaml`: the resolved config (`--config` reads it back, e.g. in the analysis job)."""
    import yaml

    body = config_to_dict(cfg)
    path = _out(cfg) / "reproduce.yaml"
    _write_if_changed(path, f"# paper_figures reproduce, config hash {stable_hash(body)}\n"
                            + yaml.safe_dump(body, sort_keys=False))
    return path


def reproduce(cfg: ReproduceConfig, log=print, stages=STAGE_NAMES) -> dict:
    """Run (or resume) the stages here; returns {stage: seconds}. Writes `<out>/reproduce.yaml`."""
    if cfg.scale != "toy" and set(stages) != {"analysis"}:
        raise ReproduceError(f"scale {cfg.scale} pretrains on a cluster: use --slurm (or --dry-run) with "
                             "--cluster FILE; only --stage analysis runs here")
    out = _out(cfg)
    out.mkdir(parents=True, exist_ok=True)
    _write_reproduce_config(cfg)
    timings = {}
    for name, stage in STAGES:
        if name not in stages:
            continue
        t0 = time.perf_counter()
        log(stage(cfg))
        timings[name] = round(time.perf_counter() - t0, 2)
    log(f"reproduce: done in {sum(timings.values()):.1f} s ({', '.join(f'{k} {v:.1f} s' for k, v in timings.items())})"
        f"; figures and tables: {out / 'figure'}, {out / 'tables'}")
    if set(stages) == set(STAGE_NAMES):
        atomic_write_json(out / "timings.json", {"finished": utc_now(), "seconds": timings})
    return timings


def reproduce_slurm(cfg: ReproduceConfig, cluster_file: str | Path, dry_run: bool = False,
                    container: bool = True, log=print) -> dict:
    """Write the Slurm scripts of the DAG; submit them unless `dry_run` (then print the sbatch commands)."""
    import subprocess

    cluster = load_cluster_config(cluster_file)
    cfg = replace(cfg, data_dir=cfg.data_dir or cluster.data_dir, runs_dir=cfg.runs_dir or cluster.runs_dir)
    _out(cfg).mkdir(parents=True, exist_ok=True)
    written = SlurmWriter(cfg, cluster, container).write()
    log(f"slurm: study {cfg.study}: wrote {written['pretraining_jobs']} pretraining jobs, {written['checkpoints']} "
        f"checkpoints x {written['finetune_runs'] // max(1, written['checkpoints'])} = {written['finetune_runs']} fine-tuning runs "
        f"in {written['finetune_array_tasks']} array tasks, data and analysis jobs -> {written['submit'].parent}")
    if dry_run:
        log("slurm: dry run, not submitted; the sbatch commands (bash " + str(written["submit"]) + " runs them):")
        for line in written["commands"]:
            log("  " + line)
        return written
    if Path(cluster_file).resolve() == (CONFIG_DIR / "cluster.example.yaml").resolve():
        raise ReproduceError(f"{cluster_file} is the example cluster config: copy it to "
                             f"{CONFIG_DIR / 'cluster.yaml'} (or pass --cluster FILE) and set your partition, "
                             "image and paths before submitting")
    result = subprocess.run(["bash", str(written["submit"])], capture_output=True, text=True)
    if result.returncode != 0:
        raise ReproduceError(f"submitting {written['submit']} failed: {result.stderr.strip().splitlines()[-1:]}")
    log(result.stdout.strip())
    written["submitted"] = result.stdout.strip()
    return written


# --- CLI -------------------------------------------------------------------------------------------
def _csv(kind):
    def parse(text: str):
        return tuple(kind(x.strip()) for x in text.split(",") if x.strip())
    return parse


def build_parser() -> argparse.ArgumentParser:
    from paper_figures.studies import STUDIES

    studies = "; ".join(f"{s.name}: Figures {', '.join(map(str, s.figures))}"
                        + (f", Tables {s.tables[0]}-{s.tables[-1]}" if s.tables else "") for s in STUDIES.values())
    p = argparse.ArgumentParser(
        prog="python -m paper_figures reproduce",
        description="Reproduce a figure or table end to end: prepare data, pretrain the models of its study "
                    "(from pretraining.registry), fine-tune them on the 12 datasets, aggregate, draw its "
                    "figures (next to the published ones), tabulate, audit. Toy scale runs here (cached: a "
                    "rerun reuses finished runs and records; an interrupted run resumes); --slurm / --scale "
                    f"paper writes Slurm jobs for a cluster. Studies: {studies}.")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--figure", type=int, help="a figure number (default 3); its study is reproduced")
    which.add_argument("--table", type=int, help="a table number (2-17); its study is reproduced")
    p.add_argument("--scale", choices=["toy", "paper"], default=None, help="toy (default) or paper")
    p.add_argument("--out", help="output folder (created; reused on reruns; default OUT_ROOT/<study>)")
    p.add_argument("--out-root", default="outputs", help="where the default output folder goes (outputs)")
    p.add_argument("--config", help="a reproduce.yaml written by an earlier invocation (replaces the options)")
    p.add_argument("--stage", choices=["all", "data", "pretraining", "fine-tuning", "analysis"], default="all",
                   help="run one stage only (here; the earlier stages must be finished)")
    p.add_argument("--reduced", action="store_true",
                   help="CI mode of Figure 3: toy_s x (MLM-20, MLM-40, CLM), 1 LR x 2 seeds, 8 pretraining steps")
    p.add_argument("--checkpoints", type=_csv(str),
                   help="a subset of the study's checkpoints, by paper name (610m-clm-42k-5000) or toy name")
    p.add_argument("--sizes", type=_csv(str), help="masking study: sizes (toy default toy_s,toy_m,toy_l; "
                                                  "paper 210m,610m,1b)")
    p.add_argument("--ratios", type=_csv(float), help="masking study: masking ratios (default 0.2,0.3,0.4,0.5)")
    p.add_argument("--no-clm", dest="clm", action="store_false", default=None,
                   help="masking study: skip the CLM references")
    p.add_argument("--tasks", type=_csv(str), help="fine-tuning tasks (default the 12)")
    p.add_argument("--lrs", type=_csv(float), help=f"fine-tuning LRs (toy default {','.join(map(str, DEFAULT_LRS))}; "
                                                   "paper the 6 of the grid)")
    p.add_argument("--seeds", type=_csv(int), help=f"fine-tuning seeds (toy default "
                                                   f"{','.join(map(str, DEFAULT_SEEDS))}; paper 0-4)")
    p.add_argument("--pretrain-steps", type=int, help="masking study: steps per model (default toy 42, paper 42000)")
    p.add_argument("--finetune-steps", type=int, help="fine-tuning steps per run (default: the scale's config)")
    p.add_argument("--runs-dir", help="pretraining run folders (default OUT/pretraining; share one between "
                                      "studies to reuse their common runs)")
    p.add_argument("--workers", type=int, help="local fine-tuning processes (default 2)")
    p.add_argument("--threads", type=int, help="torch threads per process (default 1)")
    p.add_argument("--reps", type=int, help="bootstrap replicates (default 1000)")
    slurm = p.add_argument_group("Slurm (always at --scale paper)")
    slurm.add_argument("--slurm", action="store_true", help="write (and submit) Slurm jobs instead of running here")
    slurm.add_argument("--cluster", help="cluster YAML (default paper_figures/configs/cluster.yaml, else "
                                         "cluster.example.yaml)")
    slurm.add_argument("--dry-run", action="store_true", help="write the scripts, print the sbatch commands, "
                                                              "submit nothing")
    slurm.add_argument("--no-container", dest="container", action="store_false",
                       help="run the same commands without apptainer (python on the nodes)")
    return p


def config_from_args(args) -> ReproduceConfig:
    from paper_figures.studies import StudyError, study_for

    if args.config:
        from contracts.config import load_config

        return load_config(ReproduceConfig, args.config)
    try:
        study = study_for(table=args.table) if args.table is not None else study_for(figure=args.figure or 3)
    except StudyError as exc:
        raise ReproduceError(str(exc)) from None
    scale = args.scale or "toy"
    out = args.out or str(Path(args.out_root) / study.name)
    values = {"out": out, "study": study.name, "scale": scale, **SCALE_DEFAULTS[scale]}
    if args.reduced:
        if scale != "toy" or study.name != "masking":
            raise ReproduceError("--reduced is the toy-scale CI mode of Figure 3 (masking study); for another "
                                 "study give a subset with --checkpoints, --tasks, --lrs and --seeds")
        values.update(REDUCED)
    for key in ("sizes", "ratios", "clm", "checkpoints", "tasks", "lrs", "seeds", "pretrain_steps",
                "finetune_steps", "runs_dir", "workers", "threads", "reps"):
        value = getattr(args, key)
        if value is not None:
            values[key] = value
    return config_from_dict(ReproduceConfig, values, "reproduce options")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        cfg = config_from_args(args)
        if args.slurm or args.dry_run or (cfg.scale == "paper" and args.stage == "all"):
            reproduce_slurm(cfg, args.cluster or default_cluster_file(), dry_run=args.dry_run,
                            container=args.container)
        else:
            reproduce(cfg, stages=STAGE_NAMES if args.stage == "all" else (args.stage,))
    except (ConfigError, ReproduceError) as exc:
        print(f"reproduce: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
