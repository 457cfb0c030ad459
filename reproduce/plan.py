"""The options of one reproduction (`ReproduceConfig`) and its DAG: which checkpoints, which
pretraining runs (and their configs), where everything goes, which fine-tuning jobs. No stage runs
here; reproduce.local runs the DAG in this process, reproduce.slurm writes it as Slurm jobs.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from contracts.config import config_to_dict
from contracts.layout import branch_state, export_dir
from contracts.loggers import check_logger_section
from contracts.model_names import parse_model_name, replicate_name, split_replicate
from contracts.paper import (
    DATASETS,
    FINETUNE_LRS,
    FINETUNE_SEEDS,
    MASKING_RATIOS,
    PAPER_SIZES,
    PRETRAIN_STEPS,
    TOY_SEQ_LEN,
    TOY_SIZE,
    TOY_SIZES,
    WARMUP_STEPS,
)
from contracts.provenance import atomic_write_text, stable_hash
from reproduce.studies import STUDIES, StudyError, checkpoints, runs_to_train, scale_steps, scaled_name

REPO_ROOT = Path(__file__).resolve().parent.parent
CONFIG_DIR = Path(__file__).resolve().parent / "configs"
ALL_TASKS = tuple(d.id for d in DATASETS)
# `data_root` of the toy scale: the toy world's tasks, written by the data stage next to the world
# corpus the toy models are pretrained on (benchmarks.datasets.make_toy, docs/reproduce.md).
TOY_WORLD = "toy-world"
WORLD_DOCUMENTS = 8_500  # toy-world pages (~560k tokens: the masking study's runs read 520k)
# The toy data-efficiency study (Figure 4): runs of 1,000 steps, where the paper's 42k-step arc shows
# at toy scale (docs/reproduce.md, "Toy data efficiency"), on a world large enough that no sample
# repeats (1,000 steps x 26 x 80 tokens = 2.08M tokens; 34,000 pages of ~66 tokens; the runs keep
# `data.allow_repeats: false`, so a repeat would stop them), at two sizes, twice each.
TOY_DATA_EFFICIENCY_STEPS = 1_000
DATA_EFFICIENCY_WORLD_DOCUMENTS = 34_000
TOY_DATA_EFFICIENCY_SIZES = ("toy_s", "toy_m")
TOY_DATA_EFFICIENCY_REPLICATES = 2
# Its checkpoints (paper steps): the paper's 1k and 2k fall inside the toy warmup (24 and 48 of 48
# steps) and 40k sits next to the final 42k (952 and 1,000 steps): leaving them out keeps the study
# within 12 minutes on 2 cores; --checkpoints asks for any of the seven
TOY_DATA_EFFICIENCY_CHECKPOINTS = (5_000, 10_000, 20_000, PRETRAIN_STEPS)
WORLD_VOCAB_SIZE = 1024  # byte-level BPE trained on the world corpus (common words whole, names in pieces)
# The masking study's toy runs (Figure 3): long enough that every toy size learns the toy world with
# either objective (MLM needed about twice CLM's tokens; docs/reproduce.md, "Toy learning"); the
# other studies keep the paper's steps / 1,000.
TOY_PRETRAIN_STEPS = 250
# Resume checkpoints of those runs every this many steps (the registry's toy runs: every 10).
TOY_RESUME_EVERY = 25
# Toy defaults: one LR and one seed of the toy world's fine-tuning, measured on a 2-core CPU to keep
# `make reproduce-figure3` under 10 minutes (docs/timings.md).
DEFAULT_LRS = (2e-3,)
DEFAULT_SEEDS = (0,)
# Per scale: the defaults of the options not given (paper: the paper's full protocol).
SCALE_DEFAULTS = {
    "toy": {
        "lrs": DEFAULT_LRS,
        "seeds": DEFAULT_SEEDS,
        "finetune_config": str(REPO_ROOT / "benchmarks" / "configs" / "toy_world.yaml"),
        "data_root": TOY_WORLD,
    },
    "paper": {
        "lrs": FINETUNE_LRS,
        "seeds": FINETUNE_SEEDS,
        "finetune_config": str(REPO_ROOT / "benchmarks" / "configs" / "paper.yaml"),
        "data_root": None,
    },
}
# Reduced mode (CI, tests): toy_s x (MLM-20, MLM-40, CLM) and its random initialisation, 12 tasks,
# the toy defaults otherwise (150 pretraining steps, 1 LR x 1 seed).
REDUCED = {"sizes": ("toy_s",), "ratios": (0.2, 0.4)}


class ReproduceError(ValueError):
    """Bad options or a stage that failed; one line saying what and how to fix it."""


@dataclass(frozen=True)
class ReproduceConfig:
    """Everything one reproduction depends on; saved as `<out>/reproduce.yaml`."""

    out: str
    study: str = "masking"  # reproduce.studies.STUDIES: which figures and tables, hence which models
    scale: Literal["toy", "paper"] = "toy"
    # Subsets of the study's checkpoints (None: all of them). ratios/clm: the masking study only;
    # sizes: the masking study, and the data-efficiency study's sizes (default toy_s,toy_m; paper 610m).
    sizes: tuple[str, ...] | None = None
    ratios: tuple[float, ...] | None = None
    clm: bool = True  # the CLM model of each size (Figure 3's dashed reference)
    checkpoints: tuple[str, ...] | None = None  # by paper name (610m-clm-42k) or toy name (toy_m-clm-42)
    tasks: tuple[str, ...] = ALL_TASKS
    lrs: tuple[float, ...] = DEFAULT_LRS
    seeds: tuple[int, ...] = DEFAULT_SEEDS
    # masking and data-efficiency studies: length of their 42k runs, other step counts keeping their
    # share (None: toy TOY_PRETRAIN_STEPS and TOY_DATA_EFFICIENCY_STEPS, paper 42,000)
    pretrain_steps: int | None = None
    # Also fine-tune the untrained model of each size of the study (`<size>-random-init`, drawn on
    # Figure 3 as the reference pretraining must beat). None: in the toy masking study.
    random_init: bool | None = None
    finetune_steps: int | None = None  # None: the fine-tuning config's max_steps
    finetune_config: str = SCALE_DEFAULTS["toy"]["finetune_config"]
    # Local task mirror (TOY_WORLD: the toy world's, written by the data stage); None: the Hub
    data_root: str | None = SCALE_DEFAULTS["toy"]["data_root"]
    data_dir: str | None = None  # prepared pretraining data; None: <out>/data/world-128 (toy)
    runs_dir: str | None = None  # pretraining run directories; None: <out>/pretraining
    workers: int = 2  # local processes for fine-tuning (each with `threads` torch threads)
    threads: int = 1
    reps: int = 1000  # bootstrap replicates of the analysis
    # Pretraining runs per configuration (docs/reproduce.md, "Pretraining replicates"): run k >= 2 is
    # `<name>-rep<k>` with other init and data-order seeds; the analysis then estimates the
    # pretraining SD per task type (analysis.claims.pretraining_variance) in its claims report.
    pretrain_replicates: int = 1
    # CPT runs (docs/pretraining.md, "Continued pretraining"): `branches`, one continued run per base
    # with decay branches, as the paper's compute table implies; `separate`, each length on its own;
    # `literal`, branches with no warmup and 2,000-step decays ("CPT readings")
    cpt_recipe: str = "branches"
    # the CPT runs' optimizer: `fresh` AdamW, or `continued` from the base's last resume checkpoint
    cpt_optimizer: str = "fresh"
    # Experiment trackers of every pretraining and fine-tuning run (contracts.loggers, docs/watching.md)
    loggers: dict[str, Any] = field(default_factory=dict, hash=False)  # (a dict: not hashable)

    def __post_init__(self):
        if self.study not in STUDIES:
            raise ValueError(f"study {self.study!r}: give one of {','.join(STUDIES)}")
        for option, given in (("sizes", self.sizes is not None), ("pretrain_steps", self.pretrain_steps is not None)):
            if given and self.study not in ("masking", "data-efficiency"):
                raise ValueError(
                    f"{option} applies to the masking and data-efficiency studies (the sizes, the length of "
                    f"their 42k runs); study {self.study} takes --checkpoints instead"
                )
        masking_only = {
            "ratios": self.ratios is not None,
            "clm": not self.clm,
        }
        misused = [k for k, given in masking_only.items() if given and self.study != "masking"]
        if misused:
            raise ValueError(
                f"{misused[0]} selects models of the masking study (Figures 2, 3, 5); study "
                f"{self.study} takes --checkpoints instead"
            )
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
        if self.random_init and self.scale != "toy":
            raise ValueError("random_init fine-tunes untrained toy models: it needs scale toy")
        if self.data_root == TOY_WORLD and self.scale != "toy":
            raise ValueError(f"data_root {TOY_WORLD!r} is the toy world's task mirror: it needs scale toy")
        if self.workers < 1 or self.threads < 1:
            raise ValueError("workers and threads must be >= 1")
        from pretraining.registry import CPT_OPTIMIZERS, CPT_RECIPES  # here: the package imports torch

        if self.cpt_recipe not in CPT_RECIPES:
            raise ValueError(f"cpt_recipe {self.cpt_recipe!r}: give one of {', '.join(CPT_RECIPES)}")
        if self.cpt_optimizer not in CPT_OPTIMIZERS:
            raise ValueError(f"cpt_optimizer {self.cpt_optimizer!r}: give one of {', '.join(CPT_OPTIMIZERS)}")
        if self.pretrain_replicates < 1:
            raise ValueError(
                f"pretrain_replicates {self.pretrain_replicates} must be >= 1 (1: one run per configuration)"
            )
        check_logger_section(self.loggers)
        try:
            if not study_checkpoints(self):
                raise ValueError("the options select no checkpoint of the study")
        except StudyError as exc:
            raise ValueError(str(exc)) from None


# --- paths -----------------------------------------------------------------------------------------
def out_dir(cfg: ReproduceConfig) -> Path:
    return Path(cfg.out).absolute()


def data_dir(cfg: ReproduceConfig) -> Path:
    """The prepared pretraining data (toy: the world corpus, packed)."""
    if cfg.data_dir:
        return Path(cfg.data_dir).absolute()
    return out_dir(cfg) / "data" / (f"world-{TOY_SEQ_LEN}" if cfg.scale == "toy" else "fineweb-edu")


def world_dir(cfg: ReproduceConfig) -> Path:
    """Toy scale: the toy world beside the prepared data: `world.jsonl` (the corpus), `tokenizer/`
    (trained on it) and `tasks/` (the task mirror, benchmarks.datasets.make_toy --world)."""
    return data_dir(cfg).parent / TOY_WORLD


def shard_cache_dir(cfg: ReproduceConfig, run: str) -> Path:
    """Toy scale: the copy of the shards that pretraining run `run` reads (`data.cache_dir`):
    streaming allows one reader of a local folder at a time, and toy runs train side by side."""
    return data_dir(cfg).parent / "cache" / run


def tokenizer_path(cfg: ReproduceConfig) -> str | None:
    """The pretraining tokenizer: toy, the world's; paper, None (the registry's Llama-3)."""
    return str(world_dir(cfg) / "tokenizer") if cfg.scale == "toy" else None


def task_data_root(cfg: ReproduceConfig) -> str | None:
    """Where fine-tuning reads the tasks: the toy world's mirror, another local mirror, or None (the Hub)."""
    return str(world_dir(cfg) / "tasks") if cfg.data_root == TOY_WORLD else cfg.data_root


def pretrain_length(cfg: ReproduceConfig) -> int | None:
    """The length of the masking study's 42k runs at this scale (None: the registry's)."""
    if cfg.pretrain_steps is not None:
        return cfg.pretrain_steps
    if cfg.scale == "toy" and cfg.study == "data-efficiency":
        return TOY_DATA_EFFICIENCY_STEPS
    return TOY_PRETRAIN_STEPS if cfg.scale == "toy" and cfg.study == "masking" else None


def world_documents(cfg: ReproduceConfig) -> int:
    """Pages of the toy world: enough for the study's longest run to read no sample twice (runs up to
    the masking study's 250 steps read the default world; the data-efficiency study's longer ones
    the larger world)."""
    longer = cfg.study == "data-efficiency" and (pretrain_length(cfg) or 0) > TOY_PRETRAIN_STEPS
    return DATA_EFFICIENCY_WORLD_DOCUMENTS if longer else WORLD_DOCUMENTS


def study_sizes(cfg: ReproduceConfig) -> tuple[str, ...] | None:
    """The paper sizes the data-efficiency study trains (None: the study's own, every other study)."""
    if cfg.study != "data-efficiency":
        return None
    toy_to_paper = {toy: paper for paper, toy in TOY_SIZE.items()}
    chosen = cfg.sizes or (TOY_DATA_EFFICIENCY_SIZES if cfg.scale == "toy" else ("610m",))
    return tuple(toy_to_paper.get(s, s) for s in chosen)


def _toy_warmup(length: int) -> int:
    """The warmup (= decay) of a toy run of `length` steps: 2k of 42k, as the paper's."""
    return min(max(2, round(length * WARMUP_STEPS / PRETRAIN_STEPS)), length // 2)


def pretraining_dir(cfg: ReproduceConfig) -> Path:
    return Path(cfg.runs_dir).absolute() if cfg.runs_dir else out_dir(cfg) / "pretraining"


def finetune_dir(cfg: ReproduceConfig) -> Path:
    return out_dir(cfg) / "finetune"


# --- the DAG ---------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=64)  # asked for once per model and run while writing the DAG; configs are frozen
def study_checkpoints(cfg: ReproduceConfig) -> tuple:
    """The study's checkpoints (reproduce.studies.Checkpoint) that this reproduction fine-tunes."""
    chosen = checkpoints(STUDIES[cfg.study], cfg.scale, pretrain_length(cfg), cfg.checkpoints, study_sizes(cfg))
    keep = list(chosen)
    if cfg.study == "data-efficiency" and cfg.scale == "toy" and cfg.checkpoints is None:
        keep = [c for c in chosen if parse_model_name(c.paper_name).checkpoint_step in TOY_DATA_EFFICIENCY_CHECKPOINTS]
    if cfg.study == "masking":
        keep = []
        for ckpt in chosen:  # sizes are the scale's (toy_s or 210m), as the names are
            desc = parse_model_name(ckpt.name)
            wanted_ratio = cfg.clm if desc.objective == "clm" else desc.masking_ratio in (cfg.ratios or MASKING_RATIOS)
            if (cfg.sizes is None or desc.size in cfg.sizes) and wanted_ratio:
                keep.append(ckpt)
    return tuple(keep) + tuple(
        replace(
            c,
            name=replicate_name(c.name, k),
            paper_name=replicate_name(c.paper_name, k),
            run_name=replicate_name(c.run_name, k),
        )
        for k in range(2, cfg.pretrain_replicates + 1)
        for c in keep
    )


def model_names(cfg: ReproduceConfig) -> list[str]:
    """The pretrained models: `toy_s-mlm20-150`, `toy_m-clm-42-5`, ... (names contracts.model_names parses)."""
    return [c.name for c in study_checkpoints(cfg)]


RANDOM_INIT_SUFFIX = "-random-init"


def random_init_models(cfg: ReproduceConfig) -> dict[str, str]:
    """`toy_s-random-init` -> toy_s for every size of the study's models, when this reproduction
    fine-tunes untrained models too (`random_init`; names outside the release grammar: their records
    carry no pretraining description)."""
    default = cfg.scale == "toy" and cfg.study in ("masking", "data-efficiency")  # the toy figures' reference
    if not (cfg.random_init if cfg.random_init is not None else default):
        return {}
    sizes = dict.fromkeys(parse_model_name(c.name).size for c in study_checkpoints(cfg))
    return {f"{size}{RANDOM_INIT_SUFFIX}": size for size in sizes}


def random_init_seed(cfg: ReproduceConfig, size: str) -> int:
    """The seed of the study's pretraining runs of `size`: their untrained model is exactly the
    weights those runs start from."""
    for run in pretraining_runs(cfg):
        if parse_model_name(run).size == size:
            return pretraining_config(cfg, run)["train"]["seed"]
    raise ReproduceError(f"no pretraining run of size {size} in this reproduction: {', '.join(pretraining_runs(cfg))}")


def finetuned_models(cfg: ReproduceConfig) -> list[str]:
    """Every model the fine-tuning stage runs: the pretrained ones, then the untrained references."""
    return model_names(cfg) + list(random_init_models(cfg))


def _checkpoint(cfg: ReproduceConfig, name: str):
    for ckpt in study_checkpoints(cfg):
        if ckpt.name == name:
            return ckpt
    raise ReproduceError(f"{name} is not a model of this reproduction: {', '.join(finetuned_models(cfg))}")


def pretraining_runs(cfg: ReproduceConfig) -> dict[str, str]:
    """Run directory name at this scale -> registry run, CPT bases before their CPT runs; then the same
    runs again per replicate (`-rep<k>`)."""
    runs = runs_to_train(
        [c for c in study_checkpoints(cfg) if split_replicate(c.name)[1] == 1], cfg.cpt_recipe, cfg.scale
    )
    return {
        replicate_name(scaled_name(run, cfg.scale, pretrain_length(cfg)), k): run
        for k in range(1, cfg.pretrain_replicates + 1)
        for run in runs
    }


def is_cpt_branch(body: dict) -> bool:
    """A run config that continues another run's kept full state (a CPT decay branch): it trains
    after that run (reproduce.local's third wave; a Slurm dependency on that run's job)."""
    return body["init"].get("kind") == "full_state" and body["init"].get("path") is not None


def starts_from(cfg: ReproduceConfig, name: str) -> str | None:
    """The run (directory name here, same replicate) whose output the run `name` starts from: a CPT
    decay branch's main CPT run, another CPT run's base; None for a run from scratch."""
    from pretraining import registry

    run = registry.RUNS[pretraining_runs(cfg)[name]]
    source = registry.cpt_branch_of(run, cfg.scale, cfg.cpt_recipe) or (
        registry.RUNS[run.cpt_base] if run.cpt_base is not None else None
    )
    if source is None:
        return None
    return replicate_name(scaled_name(source.name, cfg.scale, pretrain_length(cfg)), split_replicate(name)[1])


REPLICATE_SEED_STEP = 1000  # run k's init and data-order seeds: the registry's + 1000 (k - 1)


def pretraining_config(cfg: ReproduceConfig, name: str) -> dict:
    """The registry's config of the run `name` (e.g. `toy_m-mlm40-42`) at this scale, renamed so that
    every run record carries its pretraining description (and shortened by --pretrain-steps)."""
    from pretraining import registry
    from pretraining.config import TrainConfig
    from pretraining.data.config import DataConfig

    runs = pretraining_runs(cfg)
    if name not in runs:
        raise ReproduceError(f"{name} is not a pretraining run of this reproduction: {', '.join(runs)}")
    run = registry.RUNS[runs[name]]
    body = registry.config_dict(
        run,
        cfg.scale,
        runs_root=str(pretraining_dir(cfg)),
        data_path=str(data_dir(cfg)),
        tokenizer=tokenizer_path(cfg),
        cpt_recipe=cfg.cpt_recipe,
        cpt_optimizer=cfg.cpt_optimizer,
    )
    body["name"] = name  # toy: `toy_s-mlm40-150` rather than the registry's `210m-mlm40-42k-toy`
    if cfg.loggers:
        body["loggers"] = dict(cfg.loggers)
    body["run_dir"] = str(pretraining_dir(cfg) / name)
    replicate = split_replicate(name)[1]
    if replicate > 1:  # another pretraining run of the configuration: other init and data order
        body["train"]["seed"] = body["train"].get("seed", TrainConfig.seed) + REPLICATE_SEED_STEP * (replicate - 1)
        body["data"]["shuffle_seed"] = body["data"].get(
            "shuffle_seed", DataConfig.shuffle_seed
        ) + REPLICATE_SEED_STEP * (replicate - 1)
    length = pretrain_length(cfg)
    source = starts_from(cfg, name)  # of the same replicate, under its name at this scale
    if is_cpt_branch(body):  # the main CPT run's kept state
        body["init"]["path"] = str(
            branch_state(pretraining_dir(cfg) / source, registry.cpt_branch_step(run, cfg.scale, cfg.cpt_recipe))
        )
    elif source is not None:  # the decayed base's final export (or its last full state: continued optimizer)
        steps = scale_steps(registry.RUNS[run.cpt_base].max_steps, cfg.scale, length)
        body["init"] = registry.cpt_init(pretraining_dir(cfg) / source, steps, cfg.cpt_optimizer)
        body["data"]["start_sample"] = steps * body["train"]["global_batch_size"]  # after the base's data
    if length:  # the masking study's 42k runs, another length: the WSD phases keep their share
        body["train"]["max_steps"] = length
        body["train"]["checkpoint_steps"] = [s for s in body["train"]["checkpoint_steps"] if s < length]
        body["schedule"]["warmup"] = body["schedule"]["decay"] = _toy_warmup(length)
        if cfg.scale == "toy":  # each save writes weights and optimizer state (seconds over 15 runs)
            body["train"]["resume_interval"] = max(TOY_RESUME_EVERY, length // 10)
    exports = {c.step for c in study_checkpoints(cfg) if c.run_name == name} - {body["train"]["max_steps"]}
    if cfg.scale == "toy":  # only the steps this study fine-tunes: each export is a full fp32 copy (disk)
        body["train"]["checkpoint_steps"] = sorted(exports)
        body["train"]["progress_bar"] = False  # one bar over the runs instead
    else:  # the registry's steps too: a paper run's exports are kept for every study that reads them
        body["train"]["checkpoint_steps"] = sorted(set(body["train"]["checkpoint_steps"]) | exports)
    return body


def model_path(cfg: ReproduceConfig, name: str) -> Path:
    """The Hugging Face folder fine-tuned as `name`: a run's export, or an untrained model's."""
    if name in random_init_models(cfg):
        return pretraining_dir(cfg) / name
    ckpt = _checkpoint(cfg, name)
    return export_dir(pretraining_dir(cfg) / ckpt.run_name, ckpt.step)


def finetune_jobs(cfg: ReproduceConfig, name: str | None = None, check_models: bool = True) -> list[dict]:
    """benchmarks.matrix job dicts for every model (or `name`) x task x LR x seed."""
    from benchmarks import matrix
    from benchmarks.run import load_run_config

    values = {
        "model": "-",
        "task": "-",
        "lr": 1.0,
        "seed": 0,
        "out": str(finetune_dir(cfg)),
        "data_root": task_data_root(cfg),
        "max_steps": cfg.finetune_steps,
        **({"loggers": dict(cfg.loggers)} if cfg.loggers else {}),
    }
    base = load_run_config(values, cfg.finetune_config)
    jobs = []
    for model in [name] if name else finetuned_models(cfg):
        jobs += matrix.expand(
            replace(base, model_name=model),
            [str(model_path(cfg, model))],
            list(cfg.tasks),
            list(cfg.lrs),
            list(cfg.seeds),
            check_models=check_models,
        )
    return jobs


def stand_ins(cfg: ReproduceConfig) -> dict[str, str]:
    """Our model name -> the paper checkpoint it stands in for (toy scale; empty at paper scale)."""
    return {c.name: c.paper_name for c in study_checkpoints(cfg) if c.name != c.paper_name}


def cpt_run_dirs(cfg: ReproduceConfig) -> list[Path]:
    """The CPT pretraining runs of this reproduction (their loss.jsonl is Figure 12)."""
    from pretraining.registry import RUNS

    return [pretraining_dir(cfg) / name for name, run in pretraining_runs(cfg).items() if RUNS[run].cpt_base]


def write_if_changed(path: Path, text: str) -> None:
    """Write `text` to `path` unless it already holds it. What is there is read at most as far as
    the new text's size (issue 78: a FIFO hung `resubmit`'s remedy, a link to /dev/zero filled the
    memory); anything but a regular file or a link is refused in one line, nothing written."""
    import os
    import stat

    data = text.encode()
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        atomic_write_text(path, text)
        return
    if not (stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode)):
        raise ReproduceError(f"{path}: not a regular file (a folder, FIFO or device); remove it and rerun")
    same = False
    if stat.S_ISREG(info.st_mode) and info.st_size == len(data):
        # no blocking, no link followed: a file swapped for a FIFO or a link since the lstat is not read
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as handle:
            same = stat.S_ISREG(os.fstat(fd).st_mode) and handle.read(len(data) + 1) == data
    if not same:  # a link is replaced by the file (the rename does not follow it)
        atomic_write_text(path, text)


def write_reproduce_config(cfg: ReproduceConfig) -> Path:
    """`<out>/reproduce.yaml`: the resolved config (`--config` reads it back, e.g. in the analysis job)."""
    import yaml

    body = config_to_dict(cfg)
    path = out_dir(cfg) / "reproduce.yaml"
    text = f"# python -m reproduce, config hash {stable_hash(body)}\n" + yaml.safe_dump(body, sort_keys=False)
    write_if_changed(path, text)
    return path
