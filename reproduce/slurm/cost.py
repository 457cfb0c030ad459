"""What a paper-scale reproduction costs, printed with its Slurm DAG (`make reproduce SCALE=paper DRY_RUN=1`).

GPU-hours per stage from the model FLOPs and an assumed model FLOPs utilisation (MFU, a flag):

- pretraining: C = 6 x N x tokens per run (paper_figures.flops, the count Figure 10 uses: N = the
  matmul parameters of the Table 1 shape, LM head included; attention scores not counted), tokens =
  the run's steps x global batch x sequence length (2,359,296 a step, Table 1); a CPT run counts its
  own steps (a decay branch only those past the main CPT run's step it continues from: 25,002 steps
  a base under the default `branches` recipe, for the paper's "26k steps"), a biphasic run its whole budget;
- fine-tuning: 6 x N x training tokens + 2 x N x evaluation tokens per run, N = the non-embedding
  parameters; the tokens per run come from `FINETUNE_TOKENS` (dataset sizes from the cards, mean
  lengths ASSUMED, not measured). It is a floor: start-up, padding and the low utilisation of
  32-sequence batches are not counted;
- data (prepare-data) and analysis run on CPUs.

The paper reports 110k AMD MI250X GPU-hours (Section 2: 81k base pretraining, 16k biphasic, 4k
CPT, about 9k evaluation; `contracts.paper.PAPER_COMPUTE`). The report prints them beside the
estimate with the utilisation they imply: the same FLOP count of the paper's whole set of runs over
those hours at the MI250X's peak (`paper_utilisation`), about 11% for pretraining against the 40%
the estimate assumes; and this DAG's GPU-hours at that utilisation.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmarks.tasks import with_ir_training
from contracts.paper import (
    FINETUNE_LRS,
    FINETUNE_SEEDS,
    PAPER_COMPUTE,
    PAPER_COMPUTE_TOTAL_GPU_HOURS,
    PAPER_GPU,
    PAPER_GPU_BF16_TFLOPS,
    PAPER_GPUS,
    PAPER_SHAPES,
    PAPER_SIZES,
    PRETRAIN_STEPS,
    TOKENS_PER_STEP_TABLE1,
)
from paper_figures.flops import count_parameters, training_flops
from reproduce.plan import ReproduceError, StudyPlan

H100_BF16_TFLOPS = 989.0  # NVIDIA H100 SXM, dense bf16 (the 1,979 of the data sheet assume sparsity)
DEFAULT_MFU = 0.4
FINETUNE_BATCH = 32


@dataclass(frozen=True)
class TaskTokens:
    """One fine-tuning run of a task: steps, mean tokens of a training example (IR: query and
    document), and the tokens its evaluation encodes (validation + test, IR: queries + pool)."""

    steps: int  # 1,000, or one epoch (CoNLL 14,041 / 32, UNER 12,543 / 32)
    train_tokens: int
    eval_tokens: int


# Sizes: the datasets' cards (docs/benchmarks.md; validation = 5% of train where it is carved out);
# mean lengths in Llama-3 tokens with the input template and EOS: assumed, not measured.
FINETUNE_TOKENS: dict[str, TaskTokens] = {
    "sst2": TaskTokens(1000, 25, (3_367 + 872) * 25),
    "qqp": TaskTokens(1000, 40, (18_192 + 40_430) * 40),
    "mnli": TaskTokens(1000, 55, (19_635 + 9_815) * 55),
    "ontonotes5": TaskTokens(1000, 35, (8_528 + 8_262) * 35),
    "conll2003": TaskTokens(439, 30, (3_250 + 3_453) * 30),
    "uner": TaskTokens(392, 30, (2_001 + 2_077) * 30),
    "squad": TaskTokens(1000, 180, (4_380 + 10_570) * 180),
    "squad_v2": TaskTokens(1000, 180, (6_516 + 11_873) * 180),
    "record": TaskTokens(1000, 300, (5_037 + 10_000) * 300),
    # MS MARCO trains the IR model (query ~12 + passage ~88 tokens) and evaluates the dev + TREC DL
    # pool (~16,700 judged passages) and ~7,000 queries; NQ and MLDR evaluate it only.
    "msmarco": TaskTokens(1000, 100, 16_700 * 88 + 7_000 * 12),
    "nq": TaskTokens(0, 0, 4_201 * 130 + 3_452 * 12),
    "mldr_en": TaskTokens(0, 0, 1_000 * 2_028 + 1_000 * 15),
}


def gpu_hours(flops: float, mfu: float, gpu_tflops: float) -> float:
    return flops / (mfu * gpu_tflops * 1e12) / 3600


def pretraining_costs(plan: StudyPlan) -> list[dict]:
    """Per pretraining run of the reproduction: size, steps, tokens, FLOPs."""
    out = []
    for run in plan.runs:
        name, body, size = run.name, run.config, run.size
        steps = run.trained_steps  # a decay branch trains only past the main run's step it continues from
        per_step = body["train"]["global_batch_size"] * body["data"]["seq_len"]
        n = count_parameters(PAPER_SHAPES[size])["matmul"]
        out.append(
            {
                "run": name,
                "size": size,
                "steps": steps,
                "tokens": steps * per_step,
                "flops": training_flops(steps, n, per_step),
            }
        )
    return out


def finetune_flops(size: str, task: str, max_steps: int | None = None) -> float:
    """FLOPs of one fine-tuning run of a `size` model on `task` (module docstring)."""
    n = count_parameters(PAPER_SHAPES[size])["non_embedding"]
    cost = FINETUNE_TOKENS[task]
    steps = min(cost.steps, max_steps) if max_steps else cost.steps
    return 6 * n * steps * FINETUNE_BATCH * cost.train_tokens + 2 * n * cost.eval_tokens


def finetune_costs(plan: StudyPlan) -> dict:
    """Runs and FLOPs of the fine-tuning stage (every model x task x LR x seed)."""
    cfg = plan.config
    tasks = with_ir_training(cfg.tasks)  # NQ and MLDR evaluate the model the MS MARCO runs train
    grid = len(cfg.lrs) * len(cfg.seeds)
    runs, flops = 0, 0.0
    for size in plan.sizes.values():
        for task in tasks:
            runs += grid
            flops += grid * finetune_flops(size, task, cfg.finetune_steps)
    return {"runs": runs, "models": len(plan.finetuned_models), "flops": flops}


def paper_stage_flops(stage: str) -> float:
    """FLOPs of a stage of `PAPER_COMPUTE` as this module counts them: pretraining 5 objectives at
    each size for 42k steps; biphasic and CPT their steps at 610M; evaluation every task x LR x
    seed of its 42 models, the 15 base models at their sizes and the others (all 610M) at 610M."""
    entry = next(c for c in PAPER_COMPUTE if c.stage == stage)
    matmul = {size: count_parameters(PAPER_SHAPES[size])["matmul"] for size in PAPER_SIZES}
    if stage == "pretraining":
        return sum(training_flops(PRETRAIN_STEPS, matmul[size]) * 5 for size in PAPER_SIZES)
    if entry.steps is not None:
        return training_flops(entry.steps, matmul[entry.size])
    sizes = [size for size in PAPER_SIZES for _ in range(5)]
    sizes += ["610m"] * (entry.models - len(sizes))
    grid = len(FINETUNE_LRS) * len(FINETUNE_SEEDS)
    return grid * sum(finetune_flops(size, task) for size in sizes for task in FINETUNE_TOKENS)


def paper_utilisation(stage: str) -> float:
    """The model FLOPs utilisation the paper's GPU-hours of `stage` imply: its FLOPs over those hours
    at the peak of one MI250X GPU (`contracts.paper.PAPER_GPU_BF16_TFLOPS`)."""
    entry = next(c for c in PAPER_COMPUTE if c.stage == stage)
    return paper_stage_flops(stage) / (entry.gpu_hours * 3600 * PAPER_GPU_BF16_TFLOPS * 1e12)


def paper_compute_lines(mfu: float, gpu_tflops: float, pretraining_flops: float, finetune_flops: float) -> list[str]:
    """The paper's GPU-hours, the utilisation they imply, and this DAG's hours at that utilisation."""
    stages = ", ".join(
        f"{c.stage} {c.gpu_hours:,} ({c.models} models, "
        + (f"{c.runs:,} runs)" if c.runs else f"{c.steps:,} steps{' at ' + c.size if c.size else ''})")
        for c in PAPER_COMPUTE
    )
    used = {c.stage: paper_utilisation(c.stage) for c in PAPER_COMPUTE}
    implied = ", ".join(f"{stage} {u:.1%}" for stage, u in used.items())
    pre, fine = used["pretraining"], used["evaluation"]
    at_paper = lambda flops, u: gpu_hours(flops, u, gpu_tflops)  # noqa: E731
    return [
        f"cost: the paper (Section 2) reports {PAPER_COMPUTE_TOTAL_GPU_HOURS:,} {PAPER_GPU} GPU-hours on "
        f"{PAPER_GPUS} GPUs: {stages}",
        f"cost: utilisation those hours imply (the paper's runs counted as above, over the hours at "
        f"{PAPER_GPU_BF16_TFLOPS} bf16 TFLOP/s a GPU): {implied}; this estimate assumes {mfu:.0%}, "
        f"{mfu / pre:.1f}x the paper's pretraining "
        f"and {mfu / fine:.0f}x its evaluation",
        f"cost: at the paper's utilisation this DAG takes pretraining {at_paper(pretraining_flops, pre):,.0f} GPU-h, "
        f"fine-tuning {at_paper(finetune_flops, fine):,.0f} GPU-h ({gpu_tflops:,.0f} TFLOP/s GPUs)",
    ]


def cost_report(plan: StudyPlan, mfu: float = DEFAULT_MFU, gpu_tflops: float = H100_BF16_TFLOPS) -> list[str]:
    """The lines a paper-scale dry run prints (module docstring)."""
    if not 0 < mfu <= 1 or gpu_tflops <= 0:
        raise ReproduceError(f"--mfu {mfu} must be in (0, 1] and --gpu-tflops {gpu_tflops} > 0")
    hours = lambda flops: gpu_hours(flops, mfu, gpu_tflops)  # noqa: E731
    runs = pretraining_costs(plan)
    sizes: dict[str, list[dict]] = {}
    for run in runs:
        sizes.setdefault(run["size"], []).append(run)
    pretraining = sum(r["flops"] for r in runs)
    per_size = ", ".join(
        f"{size} {len(rs)} x {hours(sum(r['flops'] for r in rs)) / len(rs):,.0f}" for size, rs in sizes.items()
    )
    finetune = finetune_costs(plan)
    total = hours(pretraining) + hours(finetune["flops"])
    pre_u, fine_u = paper_utilisation("pretraining"), paper_utilisation("evaluation")
    at_paper = gpu_hours(pretraining, pre_u, gpu_tflops), gpu_hours(finetune["flops"], fine_u, gpu_tflops)
    return [
        # The headline, first (issue 53): the hours at the utilisation the paper's own GPU-hours
        # imply beside the hours at the assumed MFU, each summed over the stages.
        f"cost: this DAG takes {sum(at_paper):,.0f} GPU-h at the paper's utilisation (pretraining "
        f"{at_paper[0]:,.0f} at {pre_u:.1%} + fine-tuning {at_paper[1]:,.0f} at {fine_u:.1%}) and "
        f"{total:,.0f} GPU-h at the assumed MFU {mfu:.0%} (pretraining {hours(pretraining):,.0f} + fine-tuning "
        f"{hours(finetune['flops']):,.0f}), on {gpu_tflops:,.0f} TFLOP/s GPUs",
        f"cost: GPU-hours = FLOPs / (MFU {mfu:.2f} x {gpu_tflops:,.0f} TFLOP/s per GPU; --mfu, --gpu-tflops); FLOPs = "
        "6 x N x tokens to train (paper_figures.flops; attention not counted), 2 x N x tokens to evaluate",
        "cost:   data         1 CPU job (prepare-data), no GPU",
        f"cost:   pretraining  {len(runs)} runs ({per_size} GPU-h each), {pretraining:.2e} FLOPs = "
        f"{hours(pretraining):,.0f} GPU-h = {hours(pretraining) / PAPER_GPUS:,.1f} h of the paper's {PAPER_GPUS} GPUs",
        f"cost:   fine-tuning  {finetune['runs']:,} runs of {finetune['models']} models, "
        f"{finetune['flops']:.2e} FLOPs = {hours(finetune['flops']):,.0f} GPU-h (a floor: start-up, padding, "
        "small batches not counted)",
        "cost:   analysis     1 CPU job, no GPU",
        f"cost:   total        {total:,.0f} GPU-h",
        f"cost: the paper's setup: {PAPER_GPUS} GPUs x 12 sequences, {TOKENS_PER_STEP_TABLE1:,} tokens a step "
        f"(Table 1), {PRETRAIN_STEPS * TOKENS_PER_STEP_TABLE1 / 1e9:.1f}B tokens in a 42k-step run",
        *paper_compute_lines(mfu, gpu_tflops, pretraining, finetune["flops"]),
    ]
