"""The paper's 50 evaluated checkpoints (paper Section 3) -> the training runs that produce them.

38 final models + 12 intermediate checkpoints. A *run* is one `python -m pretraining train`
config; intermediate checkpoints are exports of the 610m-clm-42k and 610m-mlm40-42k runs
(`train.checkpoint_steps`), and the 0%/100% CLM shares of the biphasic grid are the plain runs
(`610m-mlm40-12k`, `610m-clm-22k`, ...; at 42k they are the PFS runs).

Biphasic runs are one run with `objective.kind: clm_then_mlm` and one WSD schedule over the total:
the CLM phase sees the same data, schedule and seed as the first steps of the CLM run, so it is
the paper's "MLM resumed from a pre-decay CLM checkpoint" recomputed; to save compute, branch
instead with `init: {kind: full_state, path: <CLM run>/checkpoints/ba<N>-rank0.pt}`.
CPT runs start from the decayed 42k export (`<runs>/610m-<obj>-42k/hf/step-42000`, contracts.layout)
with a fresh optimizer and their own WSD schedule (the paper gives none): warmup = min(2000, 10% of the CPT
steps), decay = min(2000, half of the CPT steps), both exposed in the config. They read the data
stream after the base run's last sample (`data.start_sample` = base steps x global batch;
docs/data.md), so the prepared data must hold the base run's and the CPT samples.

Scales: `paper` (Table 1 shapes, 42k steps, 1,152 packed samples x 2,048 tokens = Table 1's
2,359,296 tokens per step; the paper's "12 sequences x 192 GPUs" with a 1,024 mean length is the
same count, `train.global_batch_size=2304 data.seq_len=1024` if you prefer it) and `toy` (toy_s/m/l
for 210m/610m/1b, every step count divided by 1,000, 16 x 128 tokens, the embedded corpus; `make
reproduce` trains them on its toy world instead, docs/reproduce.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from contracts.layout import branch_state, export_dir, resume_state
from contracts.model_names import (
    biphasic_name,
    cpt_name,
    objective_token,
    parse_model_name,
    single_objective_name,
    strip_hub_prefix,
)
from contracts.paper import (
    BIPHASIC_SPLITS,
    CLM_STEPS_BEFORE_MASKING,
    CPT_OPTIMIZERS,
    CPT_RECIPES,
    CPT_STEPS,
    DECAY_STEPS,
    DEFAULT_MASKING_RATIO,
    INTERMEDIATE_STEPS,
    MASKING_RATIOS,
    MAX_CONTEXT,
    PAPER_DATA_PATH,
    PAPER_GPUS,
    PAPER_SIZES,
    PRETRAIN_BATCH_SEQUENCES,
    PRETRAIN_STEPS,
    TOY_BATCH_SEQUENCES,
    TOY_PRETRAIN_LR,
    TOY_SEQ_LEN,
    TOY_SIZE,
    TOY_STEP_DIVISOR,
    WARMUP_STEPS,
)
from pretraining.data.windows import EARLY_END, MIN_WINDOW

DATA_SEED = TRAIN_SEED = 17  # the package's seeds (the paper gives none)


@dataclass(frozen=True)
class RunSetup:
    """One training run (paper scale, steps in optimizer steps)."""

    name: str  # the released name of the run's final checkpoint
    size: str
    objective: str  # clm | mlm | clm_then_mlm
    mlm_ratio: float
    max_steps: int
    switch_at: int | None = None
    checkpoint_steps: tuple[int, ...] = ()
    cpt_base: str | None = None  # run whose decayed final export CPT starts from
    warmup: int = WARMUP_STEPS
    decay: int = DECAY_STEPS


def _runs() -> list[RunSetup]:
    runs = []
    default = DEFAULT_MASKING_RATIO
    for size in PAPER_SIZES:
        for ratio in (None, *MASKING_RATIOS):
            obj = objective_token(ratio)
            keep = INTERMEDIATE_STEPS if size == "610m" and obj in ("clm", "mlm40") else ()
            runs.append(
                RunSetup(
                    single_objective_name(size, obj),
                    size,
                    "clm" if ratio is None else "mlm",
                    ratio or default,
                    PRETRAIN_STEPS,
                    checkpoint_steps=keep,
                )
            )
    for total, clm_steps in BIPHASIC_SPLITS.items():
        for clm in clm_steps:  # 0% and 100% CLM are plain runs (at 42k: the PFS runs above)
            if total == PRETRAIN_STEPS and clm in (0, total):
                continue
            objective = "mlm" if clm == 0 else "clm" if clm == total else "clm_then_mlm"
            runs.append(
                RunSetup(
                    biphasic_name("610m", clm, total),
                    "610m",
                    objective,
                    default,
                    total,
                    switch_at=clm if objective == "clm_then_mlm" else None,
                )
            )
    for ratio in MASKING_RATIOS:
        runs.append(
            RunSetup(
                biphasic_name("610m", CLM_STEPS_BEFORE_MASKING, PRETRAIN_STEPS, objective_token(ratio)),
                "610m",
                "clm_then_mlm",
                ratio,
                PRETRAIN_STEPS,
                switch_at=CLM_STEPS_BEFORE_MASKING,
            )
        )
    for base in ("clm", "mlm40"):
        for steps in CPT_STEPS:
            runs.append(
                RunSetup(
                    cpt_name(base, steps),
                    "610m",
                    "mlm",
                    default,
                    steps,
                    cpt_base=single_objective_name("610m", base),
                    warmup=min(WARMUP_STEPS, steps // 10),
                    decay=min(DECAY_STEPS, steps // 2),
                )
            )
    return runs


RUNS: dict[str, RunSetup] = {run.name: run for run in _runs()}


def released_checkpoints() -> dict[str, tuple[str, int]]:
    """Every released name -> (run that produces it, step of that run's export)."""
    out = {}
    for run in RUNS.values():
        for step in run.checkpoint_steps:
            out[f"{run.name}-{step}"] = (run.name, step)
        out[run.name] = (run.name, run.max_steps)
    return out


def run_for(name: str) -> tuple[RunSetup, int]:
    """(run, step) of a released checkpoint name; a clear error for any other name."""
    name = strip_hub_prefix(name)
    table = released_checkpoints()
    if name not in table:
        hint = (
            "it is not a release-style name"
            if parse_model_name(name) is None
            else "it parses but is not one of the paper's 50 checkpoints"
        )
        raise KeyError(f"{name!r}: {hint}; `python -m pretraining configs --list` lists them")
    run, step = table[name]
    return RUNS[run], step


def scale_steps(steps: int, scale: str) -> int:
    """A paper step count at `scale`: toy runs take it divided by 1,000, at least 1 step."""
    return steps if scale == "paper" else max(1, steps // TOY_STEP_DIVISOR)


CPT_SHARED_WARMUP = min(WARMUP_STEPS, min(CPT_STEPS) // 10)  # branches: one warmup for all three lengths


def cpt_schedule(run: RunSetup, cpt_recipe: str) -> tuple[int, int]:
    """(warmup, decay) of a CPT run at paper scale (docs/pretraining.md, "CPT readings"):
    `separate` min(2k, 10%) and min(2k, half); `branches` one 200-step warmup and min(2k, half);
    `literal` the paper's words taken as written, "decay only in the final 2,000 steps" and 26k
    steps per base: no warmup and a 2,000-step decay, the whole of the 2k model's run."""
    if cpt_recipe == "literal":
        return 0, min(DECAY_STEPS, run.max_steps)
    return (CPT_SHARED_WARMUP if cpt_recipe == "branches" else run.warmup), run.decay


def cpt_main_run(run: RunSetup) -> RunSetup:
    """The CPT run of `run`'s base that the `branches` recipe trains in full (the longest)."""
    return max((r for r in RUNS.values() if r.cpt_base == run.cpt_base), key=lambda r: r.max_steps)


def cpt_branch_step(run: RunSetup, scale: str, cpt_recipe: str) -> int:
    """`branches`, `literal`: the step of the main CPT run whose kept state a shorter CPT run
    continues from: the last step whose next LR is still the peak in both schedules (T - decay - 1);
    0 when the run starts at the base itself (toy `branches`: 2 steps; `literal`: the 2k model,
    all decay)."""
    decay = cpt_schedule(run, cpt_recipe)[1]
    return max(0, scale_steps(run.max_steps, scale) - scale_steps(decay, scale) - 1)


def cpt_init(base_run_dir: str | Path, base_steps: int, cpt_optimizer: str) -> dict:
    """The `init` block of a CPT run that starts where its base ended (`base_steps`): the base's
    final export (`fresh` AdamW), or its last resume checkpoint (`continued`: weights and AdamW state)."""
    if cpt_optimizer == "continued":
        return {"path": str(resume_state(base_run_dir, base_steps)), "kind": "weights_and_optimizer"}
    return {"path": str(export_dir(base_run_dir, base_steps)), "kind": "weights"}


def cpt_branch_of(run: RunSetup, scale: str, cpt_recipe: str) -> RunSetup | None:
    """The main CPT run whose kept state `run` continues as a decay branch (at cpt_branch_step),
    None when `run` starts from a base or from scratch."""
    if run.cpt_base is None or cpt_recipe == "separate":
        return None
    main = cpt_main_run(run)
    return main if main is not run and cpt_branch_step(run, scale, cpt_recipe) > 0 else None


def config_dict(
    run: RunSetup,
    scale: str = "paper",
    runs_root: str = "runs",
    data_path: str | None = None,
    tokenizer: str | None = None,
    cpt_recipe: str = "branches",
    cpt_optimizer: str = "fresh",
) -> dict:
    """The YAML body (a PretrainConfig) of `run` at `scale`, every setting written out: a changed
    default of the config classes never changes a written run (tests/pretraining/test_paper_configs.py
    pins the 50 paper configs). `cpt_recipe` (CPT runs only): `separate` trains each CPT length from
    the decayed base with its own schedule; `branches` trains the longest one per base and continues
    the shorter ones from its kept state, each decaying at its own end; `literal` branches the same
    way with no warmup and a 2,000-step decay (the 2k model: all decay, from the base).
    `cpt_optimizer`: `fresh` AdamW, or `continued` from the base's last resume checkpoint (its
    weights and AdamW state, then step 0). docs/pretraining.md, "CPT readings"."""
    if scale not in ("paper", "toy"):
        raise ValueError(f"scale {scale!r} is not paper or toy")
    if cpt_recipe not in CPT_RECIPES:
        raise ValueError(f"cpt_recipe {cpt_recipe!r} is not one of {', '.join(CPT_RECIPES)}")
    if cpt_optimizer not in CPT_OPTIMIZERS:
        raise ValueError(f"cpt_optimizer {cpt_optimizer!r} is not one of {', '.join(CPT_OPTIMIZERS)}")
    s = lambda steps: scale_steps(steps, scale)  # noqa: E731
    paper = scale == "paper"
    objective = {  # a CLM run never masks: its ratio is the unused default, written all the same
        "kind": run.objective,
        "mlm_ratio": run.mlm_ratio,
        "replace": [1.0, 0.0, 0.0],
        "switch_at": None if run.switch_at is None else s(run.switch_at),
    }
    run_name = lambda r: r.name if paper else f"{r.name}-toy"  # noqa: E731
    global_batch_size = PRETRAIN_BATCH_SEQUENCES if paper else TOY_BATCH_SEQUENCES
    data = {
        "path": data_path or (PAPER_DATA_PATH if paper else f"{runs_root}/data/embedded-{TOY_SEQ_LEN}"),
        "cache_dir": None,
        "seq_len": MAX_CONTEXT if paper else TOY_SEQ_LEN,
        "shuffle": True,
        "shuffle_seed": DATA_SEED,
        "shuffle_algo": "py1e",
        "shuffle_block_size": None,
        "num_canonical_nodes": 1,
        "predownload": None,
        "cache_limit": None,
        "download_retry": 2,
        "download_timeout": 60.0,
        "drop_last": True,
        "start_sample": 0,
        "allow_repeats": False,
        "windows": "random_split",  # the release's two windows per block (docs/choices.md)
        "min_window": MIN_WINDOW,
        "window_early_end": EARLY_END,  # the release's packer: a window ends at a document end near its split
    }
    init = {"path": None, "kind": "weights"}
    warmup, decay, branch_steps = s(run.warmup), s(run.decay), []
    if run.cpt_base is not None:
        base = RUNS[run.cpt_base]
        init = cpt_init(f"{runs_root}/{run_name(base)}", s(base.max_steps), cpt_optimizer)
        data["start_sample"] = s(base.max_steps) * global_batch_size  # after the base run's data
        warmup, decay = (s(steps) if steps else 0 for steps in cpt_schedule(run, cpt_recipe))
        if cpt_recipe != "separate":
            if run is cpt_main_run(run):  # keeps the states the shorter CPT runs of its base continue from
                shorter = [r for r in RUNS.values() if r.cpt_base == run.cpt_base and r is not run]
                branch_steps = sorted({cpt_branch_step(r, scale, cpt_recipe) for r in shorter} - {0})
            elif main := cpt_branch_of(run, scale, cpt_recipe):
                step = cpt_branch_step(run, scale, cpt_recipe)
                init = {"path": str(branch_state(f"{runs_root}/{run_name(main)}", step)), "kind": "full_state"}
    return {
        "name": run_name(run),
        "run_dir": f"{runs_root}/{run_name(run)}",
        "tokenizer": tokenizer or ("meta-llama/Meta-Llama-3-8B" if paper else "embedded"),
        "data": data,
        "model": {
            "preset": run.size if paper else TOY_SIZE[run.size],
            "attn_implementation": "sdpa",
            "attention_scope": "window",  # the release: attention and positions per window
            "block_kernels": "reference",  # Liger's RMSNorm/SwiGLU/RoPE: no faster on the H200 (docs/gpu_check.md)
        },
        "objective": objective,
        "optimizer": {
            "lr": 5e-4 if paper else TOY_PRETRAIN_LR,
            "betas": [0.9, 0.95],
            "eps": 1e-5,
            "weight_decay": 0.1,
            "no_decay": "none",  # the release decays every parameter
            "grad_clip_norm": 1.0,
            # paper scale (GPUs): torch's fused AdamW, 10 ms less per 610m step on the H200 and within
            # the bf16 parity bound (issue 68, docs/gpu_check.md); toy scale (CPU): foreach, as before
            "fused": paper,
        },
        "schedule": {"warmup": warmup, "decay": decay, "decay_shape": "linear", "alpha_f": 0.0},
        "train": {
            "max_steps": s(run.max_steps),
            "global_batch_size": global_batch_size,
            "device_microbatch_size": None,
            "seed": TRAIN_SEED,
            "checkpoint_steps": [s(c) for c in run.checkpoint_steps],
            "branch_steps": branch_steps,
            "resume_interval": 1000 if paper else 10,
            "keep_resume_checkpoints": 2,
            "precision": "auto",
            "device": "auto",
            "fsdp": paper,
            "compile": False,
            # Liger's fused loss: slower for MLM on the H200, no faster for CLM at the same batch (issue 68)
            "loss_kernel": "reference",
            "progress_bar": True,
            "dataloader_workers": 0,
            "callbacks": [],
            "loss_average": "rank",  # the release: each rank's mean loss, gradients averaged over ranks
            # its 192 GPUs: with device_microbatch_size 1152 / 192 = 6 each microbatch is one of them
            "release_ranks": PAPER_GPUS,
        },
        "init": init,
    }


def config_yaml(name: str, scale: str = "paper", **kwargs) -> str:
    name = strip_hub_prefix(name)
    run, step = run_for(name)
    body = yaml.safe_dump(config_dict(run, scale, **kwargs), sort_keys=False)
    where = export_dir("<run_dir>", scale_steps(step, scale))
    header = [
        f"# Run producing {name} (paper Section 3), scale {scale}: its weights are {where}.",
        "# Train: python -m pretraining train THIS.yaml [key=value ...]",
    ]
    if scale == "toy":
        header.append(
            "# Data first: python -m pretraining prepare-data --input embedded --seq-len 128 --out <data.path>"
        )
    return "\n".join(header) + "\n" + body


def write_config(name: str, out: str | Path, **kwargs) -> Path:
    from contracts.provenance import atomic_write_text

    return atomic_write_text(out, config_yaml(name, **kwargs))
