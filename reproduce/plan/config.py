"""The options of one reproduction (`ReproduceConfig`, saved as OUT/reproduce.yaml) and where its
folders go. What the options select (checkpoints, pretraining runs, fine-tuning jobs) is the study
plan, built once from them by reproduce.plan.builder; no stage runs here."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from contracts.config import config_to_dict
from contracts.loggers import check_logger_section
from contracts.paper import (
    CPT_OPTIMIZERS,
    CPT_RECIPES,
    DATASETS,
    FINETUNE_LRS,
    FINETUNE_SEEDS,
    MASKING_RATIOS,
    PAPER_CENTRE_LR,
    PAPER_SIZES,
    PRETRAIN_STEPS,
    TOY_SEQ_LEN,
    TOY_SIZE,
    TOY_SIZES,
    WARMUP_STEPS,
)
from contracts.provenance import atomic_write_text, stable_hash
from reproduce.plan.studies import STUDIES

REPO_ROOT = Path(__file__).resolve().parents[2]
CONFIG_FILE = "reproduce.yaml"  # the study's options, in its folder
CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs"
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
        # A value given twice planned its runs twice (issue 88: `--sizes toy_s,toy_s` of the
        # data-efficiency study planned 780 fine-tuning runs for 204)
        for name in ("sizes", "ratios", "checkpoints", "tasks", "lrs", "seeds"):
            values = list(getattr(self, name) or ())
            repeated = [v for v in dict.fromkeys(values) if values.count(v) > 1]
            if repeated:
                raise ValueError(
                    f"{name} {','.join(map(str, values))}: {', '.join(map(str, repeated))} given more than once; "
                    "give each once"
                )
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
        if self.cpt_recipe not in CPT_RECIPES:
            raise ValueError(f"cpt_recipe {self.cpt_recipe!r}: give one of {', '.join(CPT_RECIPES)}")
        if self.cpt_optimizer not in CPT_OPTIMIZERS:
            raise ValueError(f"cpt_optimizer {self.cpt_optimizer!r}: give one of {', '.join(CPT_OPTIMIZERS)}")
        if self.pretrain_replicates < 1:
            raise ValueError(
                f"pretrain_replicates {self.pretrain_replicates} must be >= 1 (1: one run per configuration)"
            )
        check_logger_section(self.loggers)
        # which checkpoints the options select is checked where they are looked up, once: build_plan


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


def shard_cache_root(cfg: ReproduceConfig) -> Path:
    """Toy scale: where each pretraining run's copy of the shards goes (shard_cache_dir)."""
    return data_dir(cfg).parent / "cache"


def shard_cache_dir(cfg: ReproduceConfig, run: str) -> Path:
    """Toy scale: the copy of the shards that pretraining run `run` reads (`data.cache_dir`):
    streaming allows one reader of a local folder at a time, and toy runs train side by side."""
    return shard_cache_root(cfg) / run


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


RECORDED_FOLDERS = ("runs_dir", "data_dir", "data_root", "finetune_config")  # besides `out`


def with_absolute_folders(cfg: ReproduceConfig, **defaults: str | None) -> ReproduceConfig:
    """`cfg` with every folder it records absolute (issue 88: one rule, locally as on Slurm): `out`,
    and each of RECORDED_FOLDERS (`defaults` fill those not given, e.g. a cluster's runs_dir), each
    against the current folder (os.path.abspath: `../out` given elsewhere is recorded as the folder
    itself); the toy world's `data_root` is a name, kept."""
    import dataclasses
    import os

    def absolute(key: str, value: str | None) -> str | None:
        value = value or defaults.get(key)
        return value if not value or (key == "data_root" and value == TOY_WORLD) else os.path.abspath(value)

    return dataclasses.replace(
        cfg, out=os.path.abspath(cfg.out), **{key: absolute(key, getattr(cfg, key)) for key in RECORDED_FOLDERS}
    )


def study_config_at(folder: Path, cfg: ReproduceConfig) -> ReproduceConfig:
    """A study's recorded config read where the study is now: `out` is its folder. A study records its
    folders absolute (with_absolute_folders); an older one's relative entry is read by one rule
    (docs/reproduce.md, "Folders a study records"): against the study's folder, never the current one
    (issue 78: `--clean` run from the checkout on a moved study resolved its relative `out` there and
    cleaned another study)."""
    import dataclasses

    from contracts.paths import resolve_recorded

    def read(key: str, value: str | None) -> str | None:
        kept = not value or (key == "data_root" and value == TOY_WORLD)
        return value if kept else str(resolve_recorded(folder, value))

    return dataclasses.replace(
        cfg, out=str(Path(folder).absolute()), **{key: read(key, getattr(cfg, key)) for key in RECORDED_FOLDERS}
    )


def relative_folder_notes(folder: Path, recorded: ReproduceConfig) -> list[str]:
    """Lines for the folders an older study recorded relative (`recorded`: its reproduce.yaml as
    written) that do not exist where the one rule puts them: said, never replaced by another folder."""
    notes = []
    for key in ("runs_dir", "data_dir"):
        value = getattr(recorded, key)
        if value and not Path(value).is_absolute():
            where = study_config_at(folder, recorded)
            if not Path(getattr(where, key)).exists():
                notes.append(
                    f"{Path(folder) / CONFIG_FILE}: {key} {value!r} is relative, read against the study's folder "
                    f"as {getattr(where, key)}, which does not exist: write the folder's absolute path there"
                )
    return notes


def write_reproduce_config(cfg: ReproduceConfig) -> Path:
    """`<out>/reproduce.yaml`: the resolved config (`--config` reads it back, e.g. in the analysis job)."""
    import yaml

    body = config_to_dict(cfg)
    path = out_dir(cfg) / CONFIG_FILE
    text = f"# python -m reproduce, config hash {stable_hash(body)}\n" + yaml.safe_dump(body, sort_keys=False)
    write_if_changed(path, text)
    return path


def rescaled(cfg: ReproduceConfig, scale: str, out: str | None = None) -> ReproduceConfig:
    """The same design at another scale (`reproduce --config FILE --scale toy`, issue 91: a budget's
    paper-scale reproduce.yaml run here first): the sizes mapped (contracts.paper.TOY_SIZE), the
    scale's fine-tuning config and data, the LR grid moved by the ratio of the scales' default LRs
    (its shape kept: the paper's 1e-5 .. 5e-4 around 5e-5 becomes 4e-4 .. 2e-2 around the toy's
    2e-3), seeds, replicates, ratios and tasks unchanged; written to `out` (default `<out>-<scale>`,
    so a toy run never lands in the paper study's folder)."""
    from dataclasses import replace

    if scale == cfg.scale:
        return cfg if out is None else replace(cfg, out=out)
    to_toy = scale == "toy"
    sizes = TOY_SIZE if to_toy else {toy: paper for paper, toy in TOY_SIZE.items()}
    factor = DEFAULT_LRS[0] / PAPER_CENTRE_LR if to_toy else PAPER_CENTRE_LR / DEFAULT_LRS[0]
    defaults = SCALE_DEFAULTS[scale]
    return replace(
        cfg,
        out=out or f"{cfg.out.rstrip('/')}-{scale}",
        scale=scale,
        sizes=None if cfg.sizes is None else tuple(sizes[s] for s in cfg.sizes),
        lrs=tuple(float(f"{lr * factor:.6g}") for lr in cfg.lrs),
        finetune_config=defaults["finetune_config"],
        data_root=defaults["data_root"],
    )
