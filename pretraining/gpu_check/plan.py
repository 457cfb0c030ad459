"""What the GPU check runs, at which sizes, within which budgets, and what its JSON must hold (pure).

Two modes of one plan: `gpu` (the paper's sizes at sequence 2,048, bf16) and `cpu` (tiny presets at
sequence 128, a few steps: what the test suite runs so that the check cannot rot). A result is
complete when every step has every field of its schema, each a number (or a boolean) or
{"error": "..."}; `complete_result` fills what a failed, skipped or timed-out step left out with
that step's error, so a reader never meets a missing key.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

STEPS = ("environment", "profile", "bench", "parity", "resume", "finetune")
SCHEMA_VERSION = 2  # 2: the profile step, kernel bundles in the bench, the fast parity and the resume floor
BENCH_PATHS = ("plain", "composer")
# Kernel bundles (pretraining.kernels; train.loss_kernel, model.block_kernels, optimizer.fused).
# `fast` keeps the reference block modules: compiled, Inductor fuses their elementwise work itself;
# `fast_blocks` adds Liger's RMSNorm/SwiGLU/RoPE (on a CPU: Liger's fallbacks, chunked and torch).
KERNEL_BUNDLES = {
    "reference": {"loss_kernel": "reference", "block_kernels": "reference", "fused_adamw": False},
    "fast": {"loss_kernel": "liger", "block_kernels": "reference", "fused_adamw": True},
    "fast_blocks": {"loss_kernel": "liger", "block_kernels": "liger", "fused_adamw": True},
}
# Where a step's time goes (the profile step): each GPU kernel (CPU mode: each op's own CPU time)
# is put in one region by its name and the operator that launched it (gpu_check.profiling)
PROFILE_REGIONS = (
    "embedding",
    "attention_kernel",
    "attention_matmuls",
    "mlp_matmuls",
    "norms_rope_swiglu_elementwise",
    "lm_head_and_loss",
    "optimizer_and_clipping",
    "other_kernels",
    "idle",  # the step's wall time minus its kernels' time: host work (data, masking, launches)
)
# One task per task type for the fine-tuning timings (the toy world has all 12, these are the
# paper's most-used of each type)
FINETUNE_TASKS = (("SC", "mnli"), ("TC", "conll2003"), ("QA", "squad"), ("IR", "msmarco"))
EXTRAPOLATED_STEPS = 1000  # the paper's fine-tuning budget per run (contracts.paper: 1,000 steps)

# field names per step: `info` are strings (names, versions), `metrics` numbers; either may be
# {"error": "..."} instead
ENVIRONMENT_INFO = (
    "python",
    "platform",
    "torch",
    "cuda",
    "transformers",
    "composer",
    "streaming",
    "flash_attn",
    "liger_kernel",
    "device_name",
    "driver",
)
ENVIRONMENT_METRICS = (
    "matmul_size",
    "matmul_tflops",
    "spec_peak_tflops",
    "device_memory_gib",
    "peak_gpu_memory_gib",
)
BENCH_ROW_INFO = ("case", "preset", "objective", "attn", "path", "precision")
BENCH_ROW_METRICS = (
    "seq_len",
    "batch_size",
    "steps",
    "seconds",
    "tokens_per_s",
    "params_N",
    "mfu_6n_spec",  # 6N FLOPs against the device's spec bf16 peak
    "mfu_spec",  # model FLOPs (6N + attention) against the spec peak
    "mfu_measured",  # model FLOPs against the matmul TFLOP/s measured in `environment`
    "mfu_needed_spec",  # needed FLOPs (the LM head at labelled positions only) against the spec peak
    "mfu_needed_measured",  # needed FLOPs against the measured matmul TFLOP/s
    "peak_gpu_memory_gib",
)
PARITY_METRICS = (
    "steps",
    "seq_len",
    "batch_size",
    "max_rel_diff",
    "mean_rel_diff",
    "step_of_max",
    "final_loss_bf16",
    "final_loss_fp32",
    # the fast kernel bundle (bf16) against the reference (bf16): within the bf16-vs-fp32 bound?
    "fast_max_rel_diff",
    "fast_mean_rel_diff",
    "fast_bound",  # = max_rel_diff: the reference path's own bf16 rounding effect
    "fast_within_bound",
    "final_loss_fast",
    "peak_gpu_memory_gib",
)
RESUME_METRICS = (
    "steps",
    "seq_len",
    "batch_size",
    "checkpoint_step",
    "killed_at_step",
    "resumed_from_step",
    "max_abs_diff_before_kill",  # killed vs reference, steps <= the checkpoint (both ran from step 0)
    "max_abs_diff_after_resume",  # killed-and-resumed vs reference, steps after the checkpoint
    "losses_equal",  # every step's loss bitwise equal to the uninterrupted run's
    # two uninterrupted runs of the same config (reference, repeat): the device's run-to-run floor
    "floor_max_abs_diff_before",
    "floor_max_abs_diff_after",
    "floor_losses_equal",
    "floor_factor",  # the verdict's margin (steps.FLOOR_FACTOR)
    "exact_up_to_floor",  # bitwise equal, or after-resume difference <= floor_factor x the floor
    "seconds_per_step",
    "peak_gpu_memory_gib",
    "runs_at_once",  # training runs sharing the device (resume_runs_at_once)
)
PROFILE_ROW_INFO = ("case", "kernels", "region")
PROFILE_ROW_METRICS = ("ms_per_step", "share_of_step", "step_ms", "steps", "batch_size")
FINETUNE_ROW_INFO = ("task_type", "task")
FINETUNE_ROW_METRICS = (
    "steps",
    "batch_size",
    "tokens_per_step",
    "fit_seconds",
    "seconds_per_step",
    "minutes_per_1000_steps",
    "wall_s",
    "peak_gpu_memory_gib",
)
STEP_METRICS = {"environment": ENVIRONMENT_METRICS, "parity": PARITY_METRICS, "resume": RESUME_METRICS}
ROW_STEPS = ("profile", "bench", "finetune")
STATUSES = ("ok", "failed", "timed_out", "skipped")


@dataclass(frozen=True)
class BenchCase:
    """One `pretraining bench` configuration: both paths (plain loop, Composer) are measured."""

    preset: str
    objective: str  # mlm | clm
    attn: str  # sdpa | flex_attention | flash_attention_2
    compiled: bool
    kernels: str = "reference"  # a KERNEL_BUNDLES key
    batch: int | None = None  # None: the mode's bench_batch
    peers: tuple[str, ...] = ()  # other trainers timed on the same step (pretraining.options.PEERS)

    @property
    def name(self) -> str:
        name = f"{self.preset}-{self.objective}-{self.attn}-{'compiled' if self.compiled else 'eager'}"
        name += "" if self.kernels == "reference" else f"-{self.kernels}"
        name += "" if self.batch is None else f"-b{self.batch}"
        return name + "".join(f"-vs-{p}" for p in self.peers)

    def path_label(self, path: str) -> str:
        return path + ("+compile" if self.compiled else "")

    @property
    def paths(self) -> tuple[str, ...]:
        """Its bench paths: ours (BENCH_PATHS), then each peer's (its row's path is its name)."""
        return (*BENCH_PATHS, *self.peers)


@dataclass(frozen=True)
class Mode:
    name: str
    device: str  # cuda | cpu
    matmul_size: int
    matmul_dtype: str
    bench_presets: tuple[str, ...]
    bench_seq_len: int
    bench_batch: int
    bench_steps: int
    bench_warmup: int
    bench_doc_len: int
    parity_preset: str
    parity_seq_len: int
    parity_batch: int
    parity_steps: int
    resume_preset: str
    resume_seq_len: int
    resume_batch: int
    resume_steps: int
    resume_checkpoint: int  # train.resume_interval: the checkpoint the killed run resumes from
    resume_kill_at: int  # the killed run is stopped at the end of this step, then SIGKILLed
    resume_max_documents: int  # embedded-corpus documents prepared (enough samples for one epoch)
    finetune_preset: str
    finetune_steps: int
    finetune_world: bool  # the toy world's tasks (generated); False: the toy mirror shipped in the repo
    finetune_parallel: int  # fine-tuning runs at a time (1: each timed alone)
    default_budget_s: float
    shares: tuple[tuple[str, float], ...]  # step -> its share of the budget (relative)
    toy_vocab: int = 512  # vocabulary of the toy presets' synthetic batches (bench, parity)
    bench_case_list: tuple[BenchCase, ...] = ()

    profile_cases: tuple[BenchCase, ...] = ()
    profile_steps: int = 3
    # resume runs trained at once: None = by the device's memory (resume_runs_at_once)
    resume_at_once: int | None = None

    def bench_cases(self, flash_attn: bool = False) -> list[BenchCase]:
        """In the order they run, most telling first, so a budget that runs out loses the least
        (GPU: the 610m reference and fast bundles at the bench batch, then larger microbatches,
        210m, eager); flash-attn's varlen kernel only where it imports."""
        cases = list(self.bench_case_list)
        if flash_attn and self.device == "cuda":
            cases += [BenchCase(self.bench_presets[0], o, "flash_attention_2", False, "fast") for o in ("mlm", "clm")]
        return cases


GPU = Mode(
    name="gpu",
    device="cuda",
    matmul_size=8192,
    matmul_dtype="bfloat16",
    bench_presets=("610m", "210m"),
    bench_seq_len=2048,
    bench_batch=8,
    bench_steps=10,
    bench_warmup=3,
    bench_doc_len=512,
    parity_preset="210m",
    parity_seq_len=2048,
    parity_batch=4,
    parity_steps=200,
    resume_preset="210m",
    resume_seq_len=2048,
    resume_batch=8,
    resume_steps=100,
    resume_checkpoint=50,
    resume_kill_at=75,
    resume_max_documents=320,  # ~2.0M tokens: ~1,000 samples of 2,048 >= 100 x 8
    finetune_preset="610m",
    finetune_steps=100,
    finetune_world=True,
    finetune_parallel=1,
    default_budget_s=480.0,
    # environment 40: on a cold H100 (2026-11-28) imports, CUDA's start and the first matmul took
    # more than the 13 s that a share of 15 gave at --budget-s 470
    shares=(
        ("environment", 40),
        ("profile", 70),
        ("bench", 180),
        ("parity", 75),
        ("resume", 110),
        ("finetune", 100),
    ),
    bench_case_list=(
        BenchCase("610m", "mlm", "flex_attention", True),
        BenchCase("610m", "mlm", "flex_attention", True, "fast"),
        BenchCase("610m", "clm", "flex_attention", True),
        BenchCase("610m", "clm", "flex_attention", True, "fast"),
        BenchCase("610m", "mlm", "flex_attention", True, "fast", 16),
        BenchCase("610m", "clm", "flex_attention", True, "fast", 16),
        # issue 82: the Hugging Face Trainer on the same step (SDPA, compiled, bf16), ours beside it
        BenchCase("610m", "mlm", "sdpa", True, "reference", None, ("hf-trainer",)),
        BenchCase("610m", "clm", "sdpa", True, "reference", None, ("hf-trainer",)),
        BenchCase("210m", "mlm", "flex_attention", True, "fast", 16),
        BenchCase("210m", "clm", "flex_attention", True, "fast", 16),
        BenchCase("610m", "mlm", "sdpa", False),
        BenchCase("610m", "mlm", "sdpa", False, "fast_blocks"),
        BenchCase("610m", "mlm", "flex_attention", True, "fast_blocks", 16),
    ),
    profile_cases=(
        BenchCase("610m", "mlm", "flex_attention", True),
        BenchCase("610m", "mlm", "flex_attention", True, "fast"),
        BenchCase("610m", "clm", "flex_attention", True),
        BenchCase("610m", "clm", "flex_attention", True, "fast"),
    ),
)

CPU = Mode(
    name="cpu",
    device="cpu",
    matmul_size=256,
    matmul_dtype="float32",
    bench_presets=("toy_s", "toy_m"),
    bench_seq_len=128,
    bench_batch=2,
    bench_steps=2,
    bench_warmup=1,
    bench_doc_len=32,
    parity_preset="toy_s",
    parity_seq_len=128,
    parity_batch=2,
    parity_steps=10,
    resume_preset="toy_s",
    resume_seq_len=128,
    resume_batch=4,
    resume_steps=20,
    resume_checkpoint=10,
    resume_kill_at=15,
    resume_max_documents=12,
    finetune_preset="toy_s",
    finetune_steps=3,
    finetune_world=False,
    finetune_parallel=2,
    # a cap, not a target (the CPU mode takes about 2 minutes on 2 idle cores): generous, so a
    # loaded CI machine finishes every step
    default_budget_s=900.0,
    # environment 120: importing torch, Composer and transformers took over 60 s on a loaded CI box
    shares=(
        ("environment", 120),
        ("profile", 80),
        ("bench", 160),
        ("parity", 100),
        ("resume", 280),
        ("finetune", 240),
    ),
    bench_case_list=(
        BenchCase("toy_s", "mlm", "sdpa", False),
        BenchCase("toy_s", "mlm", "sdpa", False, "fast"),
        BenchCase("toy_s", "clm", "sdpa", False),
        BenchCase("toy_s", "clm", "sdpa", False, "fast_blocks", 4),
        BenchCase("toy_m", "mlm", "sdpa", False),
        BenchCase("toy_m", "clm", "sdpa", False),
    ),
    profile_cases=(
        BenchCase("toy_s", "mlm", "sdpa", False),
        BenchCase("toy_s", "clm", "sdpa", False, "fast_blocks"),
    ),
    profile_steps=2,
    resume_at_once=1,  # one at a time, as on an 80 GB H100 (the device tool's default)
)

MODES = {"gpu": GPU, "cpu": CPU}


# Two paper-shaped 210m resume runs (8 x 2,048) trained side by side on a 141 GB H200
# (2026-11-27); on an 80 GB H100 one run's process held 74.6 GiB and the second ran out of memory
# (2026-11-28): side by side only on a device with at least this much memory.
RESUME_TWO_AT_ONCE_GIB = 120.0


def resume_runs_at_once(mode: Mode, device_memory_gib: float | None) -> int:
    """Training runs the resume step keeps on the device at once: the mode's own number, else 2 on
    a device with >= RESUME_TWO_AT_ONCE_GIB, else 1 (each run alone: slower, never out of memory)."""
    if mode.resume_at_once is not None:
        return mode.resume_at_once
    return 2 if device_memory_gib is not None and device_memory_gib >= RESUME_TWO_AT_ONCE_GIB else 1


def step_deadlines(mode: Mode, budget_s: float, steps=STEPS) -> dict[str, float]:
    """Seconds after the start by which each of `steps` must end: its share of the budget plus
    whatever the steps before it left unused (a step never takes time reserved for a later one)."""
    shares = dict(mode.shares)
    chosen = [s for s in STEPS if s in steps]
    total = sum(shares[s] for s in chosen)
    deadlines, cumulative = {}, 0.0
    for step in chosen:
        cumulative += shares[step]
        deadlines[step] = budget_s * cumulative / total
    return deadlines


def bench_row_names(mode: Mode, flash_attn: bool = False) -> list[tuple[BenchCase, str]]:
    return [(case, path) for case in mode.bench_cases(flash_attn) for path in case.paths]


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and (isinstance(value, bool) or math.isfinite(value))


def is_error(value) -> bool:
    return isinstance(value, dict) and set(value) == {"error"} and isinstance(value["error"], str) and value["error"]


def error(message: str) -> dict:
    return {"error": message}


def _fill(fields: dict, names, message: str, kind: str) -> dict:
    """`fields` with every name of `names` present: a value of the wrong kind or a missing one
    becomes {"error": message}."""
    out = dict(fields)
    for name in names:
        value = out.get(name)
        good = is_number(value) if kind == "metric" else isinstance(value, str)
        if not good and not is_error(value):
            out[name] = error(message if value is None else f"{message} (got {value!r})")
    return out


def complete_result(result: dict, mode: Mode, flash_attn: bool = False) -> dict:
    """Every step and field the schema names: those a step did not write carry its error."""
    steps = dict(result.get("steps") or {})
    for step in STEPS:
        entry = dict(steps.get(step) or {"status": "skipped", "error": "not run (--steps)"})
        reason = entry.get("error") or "not reported by the step"
        if entry.get("status") not in STATUSES:
            entry["status"], entry["error"] = "failed", f"unknown status {entry.get('status')!r}"
        if step == "environment":
            entry["info"] = _fill(entry.get("info") or {}, ENVIRONMENT_INFO, reason, "info")
        if step in STEP_METRICS:
            entry["metrics"] = _fill(entry.get("metrics") or {}, STEP_METRICS[step], reason, "metric")
        if step == "bench":
            entry["rows"] = _complete_bench_rows(entry.get("rows") or [], mode, flash_attn, reason)
        if step == "finetune":
            entry["rows"] = _complete_finetune_rows(entry.get("rows") or [], reason)
        if step == "profile":
            entry["rows"] = _complete_profile_rows(entry.get("rows") or [], mode, reason)
        steps[step] = entry
    return {**result, "steps": steps}


def _complete_bench_rows(rows: list[dict], mode: Mode, flash_attn: bool, reason: str) -> list[dict]:
    by_key = {(r.get("case"), r.get("path")): r for r in rows if isinstance(r, dict)}
    out = []
    for case, path in bench_row_names(mode, flash_attn):
        label = case.path_label(path)
        row = dict(by_key.get((case.name, label)) or {})
        why = row.pop("case_error", None) or (reason if not row else "not reported")
        info = {"case": case.name, "preset": case.preset, "objective": case.objective, "attn": case.attn, "path": label}
        row.setdefault("precision", "bf16" if mode.device == "cuda" else "fp32")
        out.append({**_fill(row, BENCH_ROW_METRICS, why, "metric"), **info})
    return out


def profile_row_names(mode: Mode) -> list[tuple[BenchCase, str]]:
    return [(case, region) for case in mode.profile_cases for region in PROFILE_REGIONS]


def _complete_profile_rows(rows: list[dict], mode: Mode, reason: str) -> list[dict]:
    by_key = {(r.get("case"), r.get("region")): r for r in rows if isinstance(r, dict)}
    out = []
    for case, region in profile_row_names(mode):
        row = dict(by_key.get((case.name, region)) or {})
        why = row.pop("case_error", None) or (reason if not row else "not reported")
        info = {"case": case.name, "kernels": case.kernels, "region": region}
        out.append({**_fill(row, PROFILE_ROW_METRICS, why, "metric"), **info})
    return out


def _complete_finetune_rows(rows: list[dict], reason: str) -> list[dict]:
    by_type = {r.get("task_type"): r for r in rows if isinstance(r, dict)}
    out = []
    for task_type, task in FINETUNE_TASKS:
        row = dict(by_type.get(task_type) or {})
        why = row.pop("run_error", None) or (reason if not row else "not reported")
        out.append({**_fill(row, FINETUNE_ROW_METRICS, why, "metric"), "task_type": task_type, "task": task})
    return out


def problems(result: dict, mode: Mode, flash_attn: bool = False) -> list[str]:
    """What keeps `result` from being complete (empty: every field present, numeric or an error)."""
    found = []
    steps = result.get("steps")
    if not isinstance(steps, dict):
        return ["steps: missing"]

    def check(where: str, fields: dict, names, kind: str) -> None:
        for name in names:
            value = fields.get(name) if isinstance(fields, dict) else None
            good = is_number(value) if kind == "metric" else isinstance(value, str)
            if not (good or is_error(value)):
                found.append(
                    f"{where}.{name}: {value!r} is neither a {'number' if kind == 'metric' else 'string'} nor an error"
                )

    for step in STEPS:
        entry = steps.get(step)
        if not isinstance(entry, dict):
            found.append(f"steps.{step}: missing")
            continue
        if entry.get("status") not in STATUSES:
            found.append(f"steps.{step}.status: {entry.get('status')!r}")
        if entry.get("status") != "ok" and not (isinstance(entry.get("error"), str) and entry["error"]):
            found.append(f"steps.{step}.error: a step that is not ok must say why")
        if step == "environment":
            check(f"steps.{step}.info", entry.get("info"), ENVIRONMENT_INFO, "info")
        if step in STEP_METRICS:
            check(f"steps.{step}.metrics", entry.get("metrics"), STEP_METRICS[step], "metric")
        if step == "bench":
            rows = entry.get("rows") or []
            if len(rows) != len(bench_row_names(mode, flash_attn)):
                found.append(
                    f"steps.bench.rows: {len(rows)} rows, the plan has {len(bench_row_names(mode, flash_attn))}"
                )
            for i, row in enumerate(rows):
                check(f"steps.bench.rows[{i}]", row, BENCH_ROW_INFO, "info")
                check(f"steps.bench.rows[{i}]", row, BENCH_ROW_METRICS, "metric")
        if step == "profile":
            rows = entry.get("rows") or []
            if len(rows) != len(profile_row_names(mode)):
                found.append(f"steps.profile.rows: {len(rows)} rows, the plan has {len(profile_row_names(mode))}")
            for i, row in enumerate(rows):
                check(f"steps.profile.rows[{i}]", row, PROFILE_ROW_INFO, "info")
                check(f"steps.profile.rows[{i}]", row, PROFILE_ROW_METRICS, "metric")
        if step == "finetune":
            rows = entry.get("rows") or []
            if len(rows) != len(FINETUNE_TASKS):
                found.append(f"steps.finetune.rows: {len(rows)} rows, the plan has {len(FINETUNE_TASKS)}")
            for i, row in enumerate(rows):
                check(f"steps.finetune.rows[{i}]", row, FINETUNE_ROW_INFO, "info")
                check(f"steps.finetune.rows[{i}]", row, FINETUNE_ROW_METRICS, "metric")
    return found


def add_measured_mfu(result: dict) -> dict:
    """Each bench row's MFU against the bf16 (CPU: fp32) matmul TFLOP/s the environment step
    measured on this device, beside the spec-peak one the bench reported."""
    env = (result.get("steps") or {}).get("environment") or {}
    measured = (env.get("metrics") or {}).get("matmul_tflops")
    bench = (result.get("steps") or {}).get("bench") or {}
    for row in bench.get("rows") or []:
        for flops_key, mfu_key in (("flops_per_s", "mfu_measured"), ("needed_flops_per_s", "mfu_needed_measured")):
            flops = row.get(flops_key)
            if not is_number(flops):
                continue
            if is_number(measured) and measured > 0:
                row[mfu_key] = round(flops / (measured * 1e12), 4)
            else:
                row[mfu_key] = error("no matmul TFLOP/s measured (environment step)")
    return result
