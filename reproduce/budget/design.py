"""The designs `reproduce budget` searches and their cost (issue 91; docs/reproduce.md, "Sizing a
reproduction to your allocation").

A design is which sizes, which of each size's five configurations (MODEL_SETS: the claims' groups),
pretraining runs per configuration, fine-tuning seeds per cell, and the paper's LR grid or one LR
for every cell; always the 12 datasets, whose fine-tuning is a small part of a design's cost at paper
scale (under 1% of the paper's study): leaving some out saves little and loses their claims. Each
is priced with the cost model the paper-scale dry run prints (reproduce.slurm.cost: the same per-run
FLOPs functions, summed over the runs the design's plan would hold; a test checks designs against
the dry run's printed total within 1%). Constants only at import: `--help` stays light.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path

from contracts.paper import FINETUNE_SEEDS, MASKING_RATIOS, PAPER_CENTRE_LR, PAPER_SIZES

SIZES = PAPER_SIZES
SEED_CHOICES = (2, 3, 5, 10)  # one seed has no seed SD: the report's t test needs 2
REPLICATE_CHOICES = (1, 2, 3)
DEFAULT_SINGLE_LR = PAPER_CENTRE_LR  # the middle of the paper's grid (1e-5 .. 5e-4)
PAPER_SEEDS = len(FINETUNE_SEEDS)
# Which of a size's five configurations a design pretrains: (MLM ratios, CLM). The claims fall in two
# groups: MLM-40 against CLM (Figure 2: the objective claims) and the MLM ratios against each other
# (Figure 3: the masking claims); Figure 3 with its CLM reference is the paper's study.
MODEL_SETS = {
    "all": (MASKING_RATIOS, True),
    "mlm40+clm": ((0.4,), True),
    "mlm-ratios": (MASKING_RATIOS, False),
}


@dataclass(frozen=True)
class Design:
    sizes: tuple[str, ...]
    seeds: int  # fine-tuning seeds per cell (0 .. seeds - 1)
    replicates: int  # pretraining runs per configuration
    lrs: tuple[float, ...]
    ratios: tuple[float, ...] = MASKING_RATIOS  # the MLM models of each size
    clm: bool = True  # and its CLM model

    @property
    def models_key(self) -> tuple:
        """What the claims a design can test depend on: its models."""
        return (self.sizes, self.ratios, self.clm)

    @property
    def models_per_size(self) -> int:
        return len(self.ratios) + int(self.clm)

    @property
    def model_set(self) -> str:
        return next((k for k, v in MODEL_SETS.items() if v == (self.ratios, self.clm)), "custom")

    @property
    def is_paper(self) -> bool:
        from contracts.paper import FINETUNE_LRS

        return (
            self.sizes == SIZES
            and self.model_set == "all"
            and self.seeds == PAPER_SEEDS
            and self.replicates == 1
            and self.lrs == FINETUNE_LRS
        )

    def describe(self) -> str:
        lrs = "the 6-LR grid" if len(self.lrs) > 1 else f"one LR ({self.lrs[0]:g})"
        runs = "1 run" if self.replicates == 1 else f"{self.replicates} runs"
        models = {"all": "", "mlm40+clm": " (MLM-40 and CLM)", "mlm-ratios": " (the 4 MLM ratios, no CLM)"}
        custom = f" (MLM {', '.join(f'{r:.0%}' for r in self.ratios)}{' and CLM' if self.clm else ''})"
        sizes = "+".join(self.sizes) + models.get(self.model_set, custom)
        return f"{sizes}, {runs} per configuration, {self.seeds} seeds per cell, {lrs}"

    def as_dict(self) -> dict:
        return {
            "study": "masking",
            "sizes": list(self.sizes),
            "ratios": list(self.ratios),
            "clm": self.clm,
            "model_set": self.model_set,
            "pretrain_replicates": self.replicates,
            "seeds": list(range(self.seeds)),
            "lrs": list(self.lrs),
            "models": len(self.sizes) * self.models_per_size * self.replicates,
            "paper": self.is_paper,
        }


def designs(sizes=SIZES, single_lr: float = DEFAULT_SINGLE_LR) -> list[Design]:
    from contracts.paper import FINETUNE_LRS

    subsets = [c for k in range(1, len(sizes) + 1) for c in itertools.combinations(sizes, k)]
    return [
        Design(tuple(s), seeds, runs, lrs, ratios, clm)
        for s in subsets
        for ratios, clm in MODEL_SETS.values()
        for seeds in SEED_CHOICES
        for runs in REPLICATE_CHOICES
        for lrs in (FINETUNE_LRS, (single_lr,))
    ]


# --- cost -----------------------------------------------------------------------------------------
def design_flops(design: Design) -> tuple[float, float, int]:
    """(pretraining FLOPs, fine-tuning FLOPs, fine-tuning runs) of the design's plan, by
    reproduce.slurm.cost's per-run functions: each size's configurations x runs, 42k steps of the
    Table 1 batch; each model x task (MS MARCO trains NQ's and MLDR's model) x LR x seed."""
    from benchmarks.tasks import with_ir_training
    from contracts.paper import PAPER_SHAPES, PRETRAIN_STEPS, TOKENS_PER_STEP_TABLE1
    from paper_figures.flops import count_parameters, training_flops
    from reproduce.plan.config import ALL_TASKS
    from reproduce.slurm.cost import finetune_flops

    tasks = with_ir_training(ALL_TASKS)
    grid = len(design.lrs) * design.seeds
    models = design.models_per_size * design.replicates
    pretraining = finetuning = 0.0
    for size in design.sizes:
        n = count_parameters(PAPER_SHAPES[size])["matmul"]
        pretraining += models * training_flops(PRETRAIN_STEPS, n, TOKENS_PER_STEP_TABLE1)
        finetuning += models * grid * sum(finetune_flops(size, task) for task in tasks)
    return pretraining, finetuning, len(design.sizes) * models * len(tasks) * grid


def design_hours(design: Design, mfu: float, gpu_tflops: float) -> dict:
    from reproduce.slurm.cost import gpu_hours, paper_utilisation

    pre, fine, runs = design_flops(design)
    at_paper = gpu_hours(pre, paper_utilisation("pretraining"), gpu_tflops) + gpu_hours(
        fine, paper_utilisation("evaluation"), gpu_tflops
    )
    return {
        "pretraining": gpu_hours(pre, mfu, gpu_tflops),
        "fine_tuning": gpu_hours(fine, mfu, gpu_tflops),
        "total": gpu_hours(pre, mfu, gpu_tflops) + gpu_hours(fine, mfu, gpu_tflops),
        "at_paper_utilisation": at_paper,
        "finetune_runs": runs,
    }


def reproduce_config(design: Design, out: Path):
    """The ReproduceConfig of the design at paper scale (written as DIR/reproduce.yaml)."""
    from reproduce.plan.config import SCALE_DEFAULTS, ReproduceConfig

    return ReproduceConfig(
        out=str(Path(out).absolute() / "study"),
        study="masking",
        scale="paper",
        sizes=design.sizes,
        ratios=None if design.ratios == MASKING_RATIOS else design.ratios,
        clm=design.clm,
        lrs=design.lrs,
        seeds=tuple(range(design.seeds)),
        pretrain_replicates=design.replicates,
        finetune_config=SCALE_DEFAULTS["paper"]["finetune_config"],
        data_root=None,
    )
