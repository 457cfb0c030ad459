"""The GPU check's steps, each run in its own process by the runner:

    python -m pretraining.gpu_check.steps STEP --mode gpu|cpu --work DIR --deadline-s SECONDS

A step writes <work>/steps/<STEP>.json (atomically) as it goes, so what it measured before a
timeout or a crash is kept; the runner fills the rest with the step's error (plan.complete_result).
Fields follow plan.py's schema: numbers, or {"error": "..."}.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from contracts.bounded import LARGE, SMALL, read_json_object, read_text
from contracts.layout import LOSS_LOG_FILE
from contracts.processes import dies_with_this_process
from contracts.provenance import atomic_write_json
from pretraining.gpu_check import plan

STEP_DIR = "steps"
LOG_DIR = "logs"


class StepContext:
    def __init__(self, step: str, mode: plan.Mode, work: Path, deadline_s: float):
        self.step, self.mode, self.work = step, mode, Path(work)
        self.deadline = time.monotonic() + deadline_s
        self.result: dict = {"status": "running"}

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def save(self) -> None:
        atomic_write_json(self.work / STEP_DIR / f"{self.step}.json", self.result)

    def log_path(self, name: str) -> Path:
        path = self.work / LOG_DIR / f"{self.step}-{name}.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        return path


def _is_cuda(mode: plan.Mode) -> bool:
    return mode.device == "cuda"


def _peak_gib(mode: plan.Mode):
    import torch

    if not _is_cuda(mode):
        return plan.error("no GPU (CPU mode)")
    return round(torch.cuda.max_memory_allocated() / 2**30, 2)


def _device_memory_gib(mode: plan.Mode) -> float | None:
    """The device's total memory (GiB), None in the CPU mode."""
    if not _is_cuda(mode):
        return None
    import torch

    return torch.cuda.get_device_properties(0).total_memory / 2**30


def _version(module: str):
    """A module's version, importing it (an import error is the answer)."""
    try:
        imported = __import__(module)
    except Exception as exc:  # noqa: BLE001 - any import failure is what we report
        return plan.error(f"not importable: {type(exc).__name__}: {exc}"[:300])
    return str(getattr(imported, "__version__", "unknown"))


# ----------------------------------------------------------------------------------------- (a)
def environment(ctx: StepContext) -> None:
    import platform

    import torch

    from pretraining.bench import spec_peak_bf16

    mode, cuda = ctx.mode, _is_cuda(ctx.mode)
    if cuda and not torch.cuda.is_available():
        raise RuntimeError("GPU mode but torch sees no CUDA device (use --cpu on a machine without one)")
    info = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda or plan.error("torch is a CPU build"),
        "transformers": _version("transformers"),
        "composer": _version("composer"),
        "streaming": _version("streaming"),
        "flash_attn": _version("flash_attn"),
        "liger_kernel": _liger_version(),
        "device_name": torch.cuda.get_device_name() if cuda else f"cpu ({platform.processor() or 'unknown'})",
        "driver": _driver() if cuda else plan.error("no GPU (CPU mode)"),
    }
    ctx.result = {"status": "running", "info": info, "metrics": {}}
    ctx.save()
    metrics = {"matmul_size": mode.matmul_size}
    dtype = getattr(torch, mode.matmul_dtype)
    metrics["matmul_tflops"] = round(matmul_tflops(mode.device, mode.matmul_size, dtype), 4)
    if cuda:
        name = info["device_name"]
        peak = spec_peak_bf16(name)
        metrics["spec_peak_tflops"] = peak / 1e12 if peak else plan.error(f"no spec bf16 peak known for {name}")
        metrics["device_memory_gib"] = round(_device_memory_gib(mode), 2)
    else:
        metrics["spec_peak_tflops"] = plan.error("no spec peak for a CPU (CPU mode)")
        metrics["device_memory_gib"] = plan.error("no GPU (CPU mode)")
    metrics["peak_gpu_memory_gib"] = _peak_gib(mode)
    ctx.result = {"status": "ok", "info": info, "metrics": metrics, "matmul_dtype": mode.matmul_dtype}


def _liger_version():
    """liger_kernel's version where its Triton kernels import (CPU: the import fails, no driver)."""
    from importlib.metadata import PackageNotFoundError, version

    from pretraining.kernels import liger_importable

    why = liger_importable()
    if why:
        return plan.error(f"not importable: {why}")
    try:
        return version("liger-kernel")
    except PackageNotFoundError:
        return "unknown"


def _driver():
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return plan.error(f"nvidia-smi: {exc}")
    return (
        out.stdout.strip().splitlines()[0]
        if out.returncode == 0 and out.stdout.strip()
        else plan.error(f"nvidia-smi exit {out.returncode}: {out.stderr.strip()[:200]}")
    )


def matmul_tflops(device: str, size: int, dtype, warmup: int = 3, repeats: int = 10) -> float:
    """TFLOP/s of `size`^3 matrix products on random data (2 size^3 FLOPs each), mean of `repeats`
    after `warmup`."""
    import torch

    g = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(size, size, device=device, dtype=dtype, generator=g)
    b = torch.randn(size, size, device=device, dtype=dtype, generator=g)
    for _ in range(warmup):
        a @ b
    _sync(device)
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    _sync(device)
    return 2 * size**3 * repeats / (time.perf_counter() - start) / 1e12


def _sync(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


# ------------------------------------------------------------------------------------ (profile)
def profile(ctx: StepContext) -> None:
    """Each profile case's plain-loop step (bench.train_step: the step both bench paths run) under
    torch.profiler after the bench's warm-up steps; its time per region (profiling.py)."""
    import torch
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    from pretraining import bench as bench_module
    from pretraining.gpu_check.profiling import ModelDims, region_microseconds, region_rows

    mode = ctx.mode
    cuda = _is_cuda(mode)
    rows: list[dict] = []
    ctx.result = {"status": "running", "rows": rows}
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    for case in mode.profile_cases:
        if ctx.left() < MIN_CASE_S[mode.device]:
            rows += _profile_errors(case, "skipped: the profile budget was spent")
            continue
        print(f"gpu-check profile: {case.name} ...", file=sys.stderr, flush=True)
        try:
            args = bench_args(case, mode)
            loop = bench_module.PlainLoop(args)
            for _ in range(args.warmup_steps):
                loop.step()
            loop.sync()
            with torch_profile(activities=activities, record_shapes=True) as prof:
                started = time.perf_counter()
                for _ in range(mode.profile_steps):
                    loop.step()
                loop.sync()
                wall = time.perf_counter() - started
            cfg = loop.cfg
            dims = ModelDims(cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size)
            totals = region_microseconds(prof.events(), dims, device=cuda)
            per_region = region_rows(totals, wall, mode.profile_steps, plan.PROFILE_REGIONS)
            for region, values in per_region.items():
                rows.append(
                    {
                        "case": case.name,
                        "kernels": case.kernels,
                        "region": region,
                        **values,
                        "step_ms": round(wall * 1000 / mode.profile_steps, 3),
                        "steps": mode.profile_steps,
                        "batch_size": args.batch_size,
                    }
                )
            del loop, prof
        except Exception as exc:  # noqa: BLE001 - recorded, the next case goes on
            rows += _profile_errors(case, f"{type(exc).__name__}: {exc}"[:500])
        bench_module._release_memory()
        if case.compiled:
            torch._dynamo.reset()
        ctx.save()
    ctx.result["status"] = "ok"


def _profile_errors(case: plan.BenchCase, message: str) -> list[dict]:
    return [{"case": case.name, "region": region, "case_error": message} for region in plan.PROFILE_REGIONS]


# ----------------------------------------------------------------------------------------- (b)
MIN_CASE_S = {"cuda": 15.0, "cpu": 2.0}  # a case is not started with less time left than this


def bench_args(case: plan.BenchCase, mode: plan.Mode) -> argparse.Namespace:
    from pretraining.options import add_bench_arguments

    parser = argparse.ArgumentParser()
    add_bench_arguments(parser)
    argv = ["--preset", case.preset, "--objective", case.objective, "--attn", case.attn]
    argv += ["--seq-len", str(mode.bench_seq_len), "--batch-size", str(case.batch or mode.bench_batch)]
    bundle = plan.KERNEL_BUNDLES[case.kernels]
    argv += ["--loss-kernel", bundle["loss_kernel"], "--block-kernels", bundle["block_kernels"]]
    argv += ["--fused-adamw"] if bundle["fused_adamw"] else []
    argv += ["--steps", str(mode.bench_steps), "--warmup-steps", str(mode.bench_warmup)]
    argv += ["--doc-len", str(mode.bench_doc_len), "--vocab-size", str(mode.toy_vocab), "--device", mode.device]
    return parser.parse_args(argv + (["--compile"] if case.compiled else []))


def bench_row(report: dict, case: plan.BenchCase) -> dict:
    """One of `pretraining bench`'s rows in the check's schema (mfu_measured is added by the runner)."""
    row = {
        "case": case.name,
        "preset": case.preset,
        "objective": case.objective,
        "kernels": case.kernels,
        "resolved_kernels": (
            f"loss {report['loss_kernel']}, blocks {report['block_kernels']}, fused AdamW {report['fused_adamw']}"
        ),
        "attn": report["attn"],
        "path": report["path"],
        "precision": report["precision"],
        "seq_len": report["seq_len"],
        "batch_size": report["batch_size"],
        "steps": report["steps"],
        "seconds": report["seconds"],
        "tokens_per_s": report["tokens_per_s"],
        "params_N": report["params_N"],
        "flops_per_s": report["flops_model_per_s"],  # model FLOPs: 6N + attention
        "needed_flops_per_s": report["flops_needed_per_s"],  # the LM head at labelled positions only
    }
    no_peak = plan.error(f"no spec bf16 peak known for {report['device_name']}")
    row["mfu_6n_spec"] = report.get("mfu_6N", no_peak)
    row["mfu_spec"] = report.get("mfu_model", no_peak)
    row["mfu_needed_spec"] = report.get("mfu_needed", no_peak)
    row["peak_gpu_memory_gib"] = report.get("peak_gpu_memory_gib", plan.error("no GPU (CPU mode)"))
    return row


def bench(ctx: StepContext) -> None:
    import torch

    from pretraining import bench as bench_module
    from pretraining.peers import run_peer

    for name in ("recompile_limit", "cache_size_limit"):  # one process compiles several cases
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, 64)
    flash = not plan.is_error(_version("flash_attn"))
    rows: list[dict] = []
    ctx.result = {"status": "running", "rows": rows}
    for case in ctx.mode.bench_cases(flash):
        args = bench_args(case, ctx.mode)
        runs = {"plain": bench_module.run_plain, "composer": bench_module.run_composer}
        runs.update({p: (lambda a, p=p: run_peer(p, a)) for p in case.peers})
        for path in case.paths:
            run, label = runs[path], case.path_label(path)
            if ctx.left() < MIN_CASE_S[ctx.mode.device]:
                rows.append({"case": case.name, "path": label, "case_error": "skipped: the bench budget was spent"})
                continue
            print(f"gpu-check bench: {case.name} {label} ...", file=sys.stderr, flush=True)
            try:
                rows.append(bench_row(run(args), case))
            except Exception as exc:  # noqa: BLE001 - recorded, the check goes on
                rows.append({"case": case.name, "path": label, "case_error": f"{type(exc).__name__}: {exc}"[:500]})
            bench_module._release_memory()
            ctx.save()
        if case.compiled:
            torch._dynamo.reset()  # the next case compiles its own graphs
    ctx.result["status"] = "ok"


# ----------------------------------------------------------------------------------------- (c)
PARITY_WARMUP = 10  # WSD warmup steps of the parity runs (then constant LR 5e-4)


# every fast option at once (Liger loss and blocks, fused AdamW), else without Liger's blocks
PARITY_FAST_BUNDLES = ("fast_blocks", "fast")


def parity(ctx: StepContext) -> None:
    """The same MLM steps from the same initial weights and batches, in bf16 autocast and in fp32
    (TF32 off), then in bf16 with the fast kernel bundle: the largest relative difference of the
    bf16 and fp32 loss curves (the reference path's own rounding effect) is the bound the fast
    bundle's difference from the bf16 reference must stay within."""
    import torch

    from pretraining.bench import apply_objective, bench_optimizer, synthetic_batches
    from pretraining.kernels import apply_block_kernels, lm_loss, resolve
    from pretraining.modeling import MlmClmForLM
    from pretraining.presets import config_from_preset
    from pretraining.schedule import wsd_multiplier

    mode = ctx.mode
    device = mode.device
    toy = mode.parity_preset.startswith("toy")
    cfg = config_from_preset(mode.parity_preset, vocab_size=mode.toy_vocab if toy else None, is_causal=False)
    torch.manual_seed(0)
    with torch.device(device):
        model = MlmClmForLM(cfg)
    initial = {k: v.detach().clone() for k, v in model.state_dict().items()}
    raw = synthetic_batches(
        mode.parity_steps, mode.parity_batch, mode.parity_seq_len, cfg.vocab_size, mode.bench_doc_len
    )
    batches = [apply_objective(b, "mlm", 0.4, cfg.vocab_size) for b in raw]
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    curves, peak, fast, notes = {}, 0.0, None, []

    def train_curve(run: str, kernels) -> list[float]:
        nonlocal peak
        if ctx.left() < 1:
            raise TimeoutError(f"the parity budget was spent before the {run} run")
        model.load_state_dict(initial)
        if kernels is not None:
            apply_block_kernels(model, kernels.blocks)
        optimizer = bench_optimizer(model, fused=kernels is not None)
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        losses = []
        for step, batch in enumerate(batches):
            batch = {k: v.to(device) for k, v in batch.items()}
            for group in optimizer.param_groups:
                group["lr"] = 5e-4 * wsd_multiplier(step + 1, PARITY_WARMUP, len(batches), len(batches))
            with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=run != "fp32"):
                loss = lm_loss(model, batch, False, kernels.loss if kernels else "reference")
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            losses.append(float(loss.detach()))
        if device == "cuda":
            peak = max(peak, torch.cuda.max_memory_allocated() / 2**30)
        return losses

    for run in ("bf16", "fp32"):
        curves[run] = train_curve(run, None)
        ctx.result = {"status": "running", "curves": curves}
        ctx.save()
    # every fast option at once; should that bundle fail to run here, the next one (recorded)
    for name in PARITY_FAST_BUNDLES:
        bundle = plan.KERNEL_BUNDLES[name]
        try:
            fast = resolve(bundle["loss_kernel"], bundle["block_kernels"], device)
            curves["fast"] = train_curve("fast", fast)
            fast_name = name
            break
        except Exception as exc:  # noqa: BLE001 - recorded; the smaller bundle is tried
            notes.append(f"{name}: {type(exc).__name__}: {exc}"[:300])
            apply_block_kernels(model, "reference")
    else:
        raise RuntimeError(f"no fast kernel bundle ran: {'; '.join(notes)}")
    metrics = parity_metrics(curves["bf16"], curves["fp32"])
    metrics.update(fast_parity_metrics(curves["fast"], curves["bf16"], metrics["max_rel_diff"]))
    ctx.result = {"status": "ok", "metrics": metrics, "curves": curves}
    ctx.result.update(fast_bundle=fast_name, fast_kernels=fast.as_dict(), fast_bundle_errors=notes)
    ctx.result["metrics"].update(
        steps=len(batches),
        seq_len=mode.parity_seq_len,
        batch_size=mode.parity_batch,
        peak_gpu_memory_gib=round(peak, 2) if device == "cuda" else plan.error("no GPU (CPU mode)"),
    )


def fast_parity_metrics(fast: list[float], reference_bf16: list[float], bound: float) -> dict:
    """The fast bundle's loss curve against the bf16 reference's: within `bound` (the reference's
    bf16-vs-fp32 largest relative difference) at every step?"""
    diffs = parity_metrics(fast, reference_bf16)
    return {
        "fast_max_rel_diff": diffs["max_rel_diff"],
        "fast_mean_rel_diff": diffs["mean_rel_diff"],
        "fast_bound": bound,
        "fast_within_bound": diffs["max_rel_diff"] <= bound,
        "final_loss_fast": diffs["final_loss_bf16"],
    }


def parity_metrics(bf16: list[float], fp32: list[float]) -> dict:
    """Relative differences |bf16 - fp32| / |fp32| of two loss curves, step by step."""
    if len(bf16) != len(fp32) or not bf16:
        raise ValueError(f"loss curves of {len(bf16)} and {len(fp32)} steps")
    rel = [abs(b - f) / abs(f) for b, f in zip(bf16, fp32)]
    worst = max(range(len(rel)), key=rel.__getitem__)
    return {
        "max_rel_diff": round(rel[worst], 6),
        "mean_rel_diff": round(sum(rel) / len(rel), 6),
        "step_of_max": worst + 1,
        "final_loss_bf16": round(bf16[-1], 6),
        "final_loss_fp32": round(fp32[-1], 6),
    }


# ----------------------------------------------------------------------------------------- (d)
RESUME_SOURCE_RUN = "210m-mlm40-42k"  # the registry's paper config the resume test is shaped on
RESUME_ROLES = ("reference", "repeat", "killed")


def _child_env() -> dict:
    """Children run offline (no Hub lookups that would wait on a closed network) and see this checkout."""
    root = str(Path(__file__).resolve().parents[2])
    path = os.environ.get("PYTHONPATH", "")
    return {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "PYTHONPATH": path + os.pathsep + root if path else root,
    }


def run_child(
    ctx: StepContext, name: str, argv: list[str], timeout: float | None = None
) -> subprocess.CompletedProcess:
    """`python -m ...`, its output in the step's log; killed at `timeout` (default: what is left of
    the step's budget). It stays in the step's process group, which the runner kills when the
    step ends, so nothing it started outlives the check."""
    limit = ctx.left() if timeout is None else min(timeout, ctx.left())
    if limit <= 0:
        raise TimeoutError(f"{name}: the {ctx.step} budget was spent before it started")
    log = ctx.log_path(name)
    with log.open("w") as handle:
        proc = subprocess.Popen(
            [sys.executable, *argv],
            stdout=handle,
            stderr=subprocess.STDOUT,
            env=_child_env(),
            preexec_fn=dies_with_this_process(),
        )
        try:
            code = proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise TimeoutError(f"{name}: killed after {limit:.0f} s (the {ctx.step} budget); log {log}") from None
    if code != 0:
        raise RuntimeError(f"{name} exited {code}: {tail(log)}")
    return subprocess.CompletedProcess(argv, code)


def tail(path: Path, lines: int = 3) -> str:
    try:
        text = Path(path).read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    return " | ".join(text[-lines:])[-600:]


def resume_configs(base: dict, mode: plan.Mode, work: Path) -> dict[str, dict]:
    """The paper config of RESUME_SOURCE_RUN cut to the check's size: `reference` and `repeat`
    run through (their differences are the device's run-to-run floor: a GPU's kernels need not be
    bitwise reproducible), `killed` is held at mode.resume_kill_at (then killed) and run again."""
    configs = {}
    for role in RESUME_ROLES:
        cfg = json.loads(json.dumps(base))  # a deep copy of plain YAML data
        cfg["name"] = f"gpu-check-{role}"
        cfg["run_dir"] = str(work / "runs" / role)
        cfg["data"].update(path=str(work / "data"), seq_len=mode.resume_seq_len, allow_repeats=True)
        cfg["model"]["preset"] = mode.resume_preset
        cfg["schedule"].update(warmup=mode.resume_steps // 10, decay=mode.resume_steps // 5)
        cfg["train"].update(
            max_steps=mode.resume_steps,
            global_batch_size=mode.resume_batch,
            resume_interval=mode.resume_checkpoint,
            keep_resume_checkpoints=1,
            progress_bar=False,
            callbacks=[
                {
                    "factory": "pretraining.gpu_check.hold:HoldAt",
                    "kwargs": {
                        "marker": str(work / f"{role}.held"),
                        "report": str(work / f"{role}.report.json"),
                        "hold_at": mode.resume_kill_at if role == "killed" else None,
                    },
                }
            ],
        )
        configs[role] = cfg
    return configs


# A resume is "exact up to the device's floor" when, after the checkpoint, it differs from the
# reference by at most FLOOR_FACTOR x what a second uninterrupted run differs by over the same
# steps. Both are maxima of run-to-run noise that grows as training diverges, one sample each, so
# their ratio is heavy-tailed: an exact resume exceeds 3x the floor in 3-19% of simulated pairs
# and 10x in 0-6% (tests/pretraining/test_gpu_check_floor.py, docs/timings.md), while a resume
# that lost state (data position, optimizer moments, schedule) is caught once it moves each step's
# loss by about 15x the floor (0.0032 on the H200, 2026-11-27).
FLOOR_FACTOR = 10.0


def exact_up_to_floor(resumed: dict, floor: dict) -> bool:
    """`resumed` and `floor` from compare_losses (killed-and-resumed vs reference; repeat vs reference)."""
    if resumed["losses_equal"]:
        return True
    after, floor_after = resumed["max_abs_diff_after_resume"], floor["max_abs_diff_after_resume"]
    if not (plan.is_number(after) and plan.is_number(floor_after)) or floor_after == 0:
        return False  # a bitwise-reproducible device: only a bitwise resume is exact
    return after <= FLOOR_FACTOR * floor_after


def compare_losses(reference: list[dict], resumed: list[dict], checkpoint: int) -> dict:
    """Step-by-step loss differences of two loss.jsonl files: up to the checkpoint (both runs
    computed them alike from the start) and after it (the resumed run's steps)."""
    ref = {r["step"]: r["loss"] for r in reference}
    new = {r["step"]: r["loss"] for r in resumed}
    if sorted(ref) != sorted(new):
        raise ValueError(f"the runs logged different steps: {sorted(set(ref) ^ set(new))[:10]}")
    before = [abs(ref[s] - new[s]) for s in ref if s <= checkpoint]
    after = [abs(ref[s] - new[s]) for s in ref if s > checkpoint]
    return {
        "max_abs_diff_before_kill": max(before) if before else plan.error("no step before the checkpoint"),
        "max_abs_diff_after_resume": max(after) if after else plan.error("no step after the checkpoint"),
        "losses_equal": all(ref[s] == new[s] for s in ref),
    }


def _loss_rows(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in read_text(run_dir / LOSS_LOG_FILE, LARGE).splitlines() if line.strip()]


def _median_step_seconds(rows: list[dict]) -> float:
    gaps = sorted(b["seconds"] - a["seconds"] for a, b in zip(rows, rows[1:]))
    return round(gaps[len(gaps) // 2], 4) if gaps else float("nan")


def resume(ctx: StepContext) -> None:
    """A real `python -m pretraining train` of a paper-shaped config on MDS shards prepared here:
    one run straight through, one held at a step past its checkpoint, SIGKILLed, and run again."""
    import yaml

    mode, work = ctx.mode, ctx.work / "resume"
    work.mkdir(parents=True, exist_ok=True)
    from pretraining.data.cli import main as data_cli

    prepare = ["prepare-data", "--input", "embedded", "--seq-len", str(mode.resume_seq_len), "--no-progress"]
    prepare += ["--max-documents", str(mode.resume_max_documents), "--out", str(work / "data")]
    if data_cli(prepare) != 0:  # `python -m pretraining prepare-data ...`, in this process (no second start-up)
        raise RuntimeError(f"prepare-data {' '.join(prepare)} failed (its message is in the step's log)")
    from pretraining import registry

    paper = yaml.safe_load(registry.config_yaml(RESUME_SOURCE_RUN, scale="paper", tokenizer="embedded"))
    configs = resume_configs(paper, mode, work)
    paths = {}
    for role, cfg in configs.items():
        paths[role] = work / f"{role}.yaml"
        paths[role].write_text(yaml.safe_dump(cfg, sort_keys=False))
    # Two runs at a time where the device holds two (three 210m runs at 8 x 2,048 ran out of memory
    # on a 141 GB H200, two on an 80 GB H100): the reference beside the run to kill, then the
    # repeat beside the resumed run; else one at a time. The kill lands at the end of step
    # resume_kill_at, which the HoldAt callback holds.
    at_once = plan.resume_runs_at_once(mode, _device_memory_gib(mode))
    logs = {role: ctx.log_path(f"train-{role}") for role in configs}
    logs["resumed"] = ctx.log_path("train-resumed")
    procs: dict[str, subprocess.Popen] = {}

    def start(role: str, config: str) -> None:
        with logs[role].open("w") as handle:
            procs[role] = subprocess.Popen(
                [sys.executable, "-m", "pretraining", "train", str(paths[config])],
                stdout=handle,
                stderr=subprocess.STDOUT,
                env=_child_env(),
                preexec_fn=dies_with_this_process(),
            )

    def finish(role: str) -> None:  # a run already finished: its status again, at once
        code = procs[role].wait(timeout=max(ctx.left(), 0.1))
        if code != 0:
            raise RuntimeError(f"the {role} run exited {code}: {tail(logs[role])}")

    def alone(role: str) -> None:  # one at a time: this run ends before the next starts
        if at_once == 1:
            finish(role)

    try:
        start("reference", "reference")
        alone("reference")
        start("killed", "killed")
        held = work / "killed.held"
        while not held.exists():  # the event: the run wrote its marker and now waits to be killed
            if procs["killed"].poll() is not None:
                code = procs["killed"].returncode
                raise RuntimeError(
                    f"the run to kill exited {code} before step {mode.resume_kill_at}: {tail(logs['killed'])}"
                )
            if ctx.left() <= 0:
                raise TimeoutError(f"the run to kill did not reach step {mode.resume_kill_at} within the resume budget")
            time.sleep(0.05)
        procs["killed"].kill()  # SIGKILL: no clean-up, as a node failure or `kill -9`
        procs["killed"].wait()
        killed_at = read_json_object(held, SMALL)["step"]
        finish("reference")
        start("resumed", "killed")  # the same config again: it resumes from the checkpoint
        alone("resumed")
        start("repeat", "repeat")
        finish("resumed")
        finish("repeat")
    except BaseException:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        raise
    resumed_from = read_json_object(work / "killed.report.json", SMALL)["started_at"]
    reference = _loss_rows(Path(configs["reference"]["run_dir"]))
    resumed = _loss_rows(Path(configs["killed"]["run_dir"]))
    metrics = compare_losses(reference, resumed, mode.resume_checkpoint)
    floor = compare_losses(reference, _loss_rows(Path(configs["repeat"]["run_dir"])), mode.resume_checkpoint)
    metrics.update(
        floor_max_abs_diff_before=floor["max_abs_diff_before_kill"],
        floor_max_abs_diff_after=floor["max_abs_diff_after_resume"],
        floor_losses_equal=floor["losses_equal"],
        floor_factor=FLOOR_FACTOR,
        exact_up_to_floor=exact_up_to_floor(metrics, floor),
    )
    report = read_json_object(work / "reference.report.json", SMALL)
    metrics.update(
        steps=mode.resume_steps,
        seq_len=mode.resume_seq_len,
        batch_size=mode.resume_batch,
        checkpoint_step=mode.resume_checkpoint,
        killed_at_step=killed_at,
        resumed_from_step=resumed_from,
        seconds_per_step=_median_step_seconds(reference),
        runs_at_once=at_once,
        peak_gpu_memory_gib=(
            round(report["peak_gpu_memory_gib"], 2)
            if report.get("peak_gpu_memory_gib") is not None
            else plan.error("no GPU (CPU mode)")
        ),
    )
    ctx.result = {"status": "ok", "metrics": metrics}


# ----------------------------------------------------------------------------------------- (e)
FINETUNE_LR = 5e-5  # any of the paper's LRs: the check times steps, it does not select


def finetune(ctx: StepContext) -> None:
    """One `python -m benchmarks run` per task type: random weights of the mode's preset, the
    toy world's data (CPU mode: the shipped toy mirror), the paper's protocol
    (benchmarks/configs/paper.yaml: batch 32, the model's maximum length), `finetune_steps` steps."""
    mode, work = ctx.mode, ctx.work / "finetune"
    work.mkdir(parents=True, exist_ok=True)
    from pretraining.export import export_random_init

    model = export_random_init(mode.finetune_preset, work / f"{mode.finetune_preset}-random-init", tokenizer="embedded")
    if mode.finetune_world:
        tasks = work / "tasks"
        run_child(ctx, "toy-world", ["-m", "benchmarks.datasets.make_toy", str(tasks), "--world"])
    else:  # the small mirror shipped in the repository (CPU mode: evaluation in seconds)
        tasks = Path(__file__).resolve().parents[2] / "benchmarks" / "datasets" / "toy"
    done: dict[str, dict] = {}
    lock = threading.Lock()

    def run_one(task_type: str, task: str) -> None:
        argv = ["-m", "benchmarks", "run", "--model", str(model), "--task", task, "--lr", str(FINETUNE_LR)]
        argv += [
            "--seed",
            "0",
            "--data-root",
            str(tasks),
            "--max-steps",
            str(mode.finetune_steps),
            "--out",
            str(work / "runs"),
        ]
        started = time.monotonic()
        try:
            run_child(ctx, f"run-{task}", argv)
            (record,) = (work / "runs").glob(f"*/{task}/*/record.json")
            row = {**finetune_row(read_json_object(record, SMALL)), "wall_s": round(time.monotonic() - started, 2)}
        except Exception as exc:  # noqa: BLE001 - recorded, the other task types go on
            row = {"run_error": f"{type(exc).__name__}: {exc}"[:500]}
        with lock:
            done[task_type] = {**row, "task_type": task_type, "task": task}
            ctx.result = {"status": "running", "rows": [done[t] for t, _ in plan.FINETUNE_TASKS if t in done]}
            ctx.save()

    # GPU: one run at a time, so each is timed alone; CPU mode: side by side, one thread each
    with ThreadPoolExecutor(max_workers=mode.finetune_parallel) as pool:
        for future in [pool.submit(run_one, *pair) for pair in plan.FINETUNE_TASKS]:
            future.result()
    ctx.result["status"] = "ok"


def finetune_row(record: dict) -> dict:
    """Timings of a run record's training (benchmarks.finetune writes them into provenance.train)."""
    train = record["provenance"]["train"]
    steps = train["steps"]
    per_step = train["fit_seconds"] / steps
    return {
        "steps": steps,
        "batch_size": train["batch_size"],
        # IR batches hold queries and documents under other keys: Composer's clock counts none
        "tokens_per_step": round(train["tokens"] / steps, 1) if train["tokens"] else plan.error("not counted (IR)"),
        "fit_seconds": train["fit_seconds"],
        "seconds_per_step": round(per_step, 4),
        "minutes_per_1000_steps": round(per_step * plan.EXTRAPOLATED_STEPS / 60, 2),
        "peak_gpu_memory_gib": (
            train["peak_gpu_memory_gib"]
            if train.get("peak_gpu_memory_gib") is not None
            else plan.error("no GPU (CPU mode)")
        ),
    }


STEP_FUNCTIONS = {
    "environment": environment,
    "profile": profile,
    "bench": bench,
    "parity": parity,
    "resume": resume,
    "finetune": finetune,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pretraining.gpu_check.steps")
    parser.add_argument("step", choices=plan.STEPS)
    parser.add_argument("--mode", choices=sorted(plan.MODES), required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--deadline-s", type=float, required=True, help="seconds this step may take")
    args = parser.parse_args(argv)
    ctx = StepContext(args.step, plan.MODES[args.mode], Path(args.work), args.deadline_s)
    try:
        STEP_FUNCTIONS[args.step](ctx)
    except Exception as exc:  # noqa: BLE001 - the step's error is its result
        ctx.result = {**ctx.result, "status": "failed", "error": f"{type(exc).__name__}: {exc}"[:1000]}
        ctx.save()
        raise
    ctx.save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
