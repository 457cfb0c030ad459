"""The GPU check's orchestrator: each step in its own process, killed at its deadline; the report.

Output folder (`--out`, e.g. the device machine's $OUT): gpu_check.md, gpu_check.log (each step's
log, tail-capped) and gpu_check.json, written last: the check's completion marker. A folder that
already holds gpu_check.json is refused (a finished check is never overwritten). Working files
(prepared shards, checkpoints, a 610m export: gigabytes on a GPU) go to `--work`, by default a
temporary folder removed at the end.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from contracts.bounded import SMALL, read_json_object
from contracts.locks import folder_lock
from contracts.processes import dies_with_this_process
from contracts.provenance import atomic_write_json, atomic_write_text, git_sha, utc_now
from pretraining.gpu_check import plan, report
from pretraining.gpu_check.steps import LOG_DIR, STEP_DIR, _child_env

RESULT_FILE = "gpu_check.json"
REPORT_FILE = "gpu_check.md"
LOG_FILE = "gpu_check.log"
REPORT_RESERVE_S = 5.0  # kept out of the steps' budgets for the report and the clean-up
KILL_GRACE_S = 3.0  # a step is told its deadline this much before the runner kills it
LOG_TAIL_BYTES = 32 * 1024  # of each step's log in gpu_check.log


class GpuCheckError(ValueError):
    """Bad arguments or output folder, found before anything is written."""


def check_arguments(out: Path, budget_s: float, steps) -> None:
    if not budget_s > REPORT_RESERVE_S + 10:
        raise GpuCheckError(f"--budget-s {budget_s}: give at least {REPORT_RESERVE_S + 10:.0f} seconds")
    unknown = [s for s in steps if s not in plan.STEPS]
    if unknown or not steps:
        raise GpuCheckError(f"--steps {','.join(steps)}: choose from {','.join(plan.STEPS)}")
    if out.is_symlink():
        raise GpuCheckError(f"--out {out}: is a symbolic link; give the folder itself")
    if out.exists() and not out.is_dir():
        raise GpuCheckError(f"--out {out}: exists and is not a folder")
    if (out / RESULT_FILE).exists():
        raise GpuCheckError(f"--out {out}: holds a finished check ({RESULT_FILE}); choose another folder")


def step_command(step: str, mode: plan.Mode, work: Path, seconds: float) -> list[str]:
    argv = [sys.executable, "-m", "pretraining.gpu_check.steps", step, "--mode", mode.name, "--work", str(work)]
    return argv + ["--deadline-s", f"{max(seconds - KILL_GRACE_S, 1.0):.1f}"]


def run_step(step: str, mode: plan.Mode, work: Path, seconds: float) -> dict:
    """One step in its own process group, killed after `seconds`; its entry for the result."""
    started = time.monotonic()
    log = work / LOG_DIR / f"{step}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    argv = step_command(step, mode, work, seconds)
    timed_out = False
    env = _child_env()
    if mode.device == "cpu":  # the step and its training runs side by side: one thread each
        env.setdefault("OMP_NUM_THREADS", "1")
    with log.open("w") as handle:
        proc = subprocess.Popen(  # killed by the kernel when gpu-check dies, kill -9 included (issue 78)
            argv,
            stdout=handle,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            preexec_fn=dies_with_this_process(),
        )
        try:
            code = proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            code, timed_out = proc.wait(), True
        except BaseException:  # Ctrl-C: the step's process group goes too
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
    try:  # the step's own processes (a training run, a benchmarks run) may outlive it: not its group
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    path = work / STEP_DIR / f"{step}.json"
    try:
        entry = read_json_object(path, SMALL)
    except (OSError, ValueError):  # BoundedReadError is one: a link to /dev/zero, a FIFO, garbage
        entry = {}
    entry["seconds"] = round(time.monotonic() - started, 1)
    if timed_out:
        entry.update(status="timed_out", error=f"killed after {seconds:.0f} s, its budget (log: {log.name})")
    elif code != 0 or entry.get("status") != "ok":
        last = log.read_text(errors="replace").strip().splitlines()[-1:] or ["(no output)"]
        entry["error"] = entry.get("error") or f"exit {code}: {last[0][:500]}"
        entry["status"] = "failed"
    return entry


def run_check(
    out: Path,
    *,
    mode: plan.Mode,
    budget_s: float | None = None,
    steps=plan.STEPS,
    work: Path | None = None,
    command: str = "python -m pretraining gpu-check",
) -> dict:
    """Run the check; returns the result written to out/gpu_check.json."""
    out, budget_s = Path(out), budget_s or mode.default_budget_s
    steps = tuple(steps)
    check_arguments(out, budget_s, steps)
    with folder_lock(out, job="gpu-check", advice="wait for it to finish, or choose another --out"):
        scratch = Path(tempfile.mkdtemp(prefix="gpu-check-")) if work is None else Path(work)
        scratch.mkdir(parents=True, exist_ok=True)
        try:
            return _run_locked(out, mode, budget_s, steps, scratch, command)
        finally:
            if work is None:
                shutil.rmtree(scratch, ignore_errors=True)


def _run_locked(out: Path, mode: plan.Mode, budget_s: float, steps, work: Path, command: str) -> dict:
    start = time.monotonic()
    deadlines = plan.step_deadlines(mode, budget_s - REPORT_RESERVE_S, steps)
    entries = {}
    for step in plan.STEPS:
        if step not in steps:
            continue
        seconds = start + deadlines[step] - time.monotonic()
        if seconds < 2:
            entries[step] = {"status": "skipped", "error": "the budget was spent by the steps before"}
            continue
        print(f"gpu-check: {step} (up to {seconds:.0f} s) ...", file=sys.stderr, flush=True)
        entries[step] = run_step(step, mode, work, seconds)
        print(
            f"gpu-check: {step} {entries[step]['status']} in {entries[step]['seconds']:.0f} s"
            + (f": {entries[step]['error']}" if entries[step].get("error") else ""),
            file=sys.stderr,
            flush=True,
        )
    env_info = (entries.get("environment") or {}).get("info") or {}
    flash = isinstance(env_info.get("flash_attn"), str)
    result = {
        "schema": plan.SCHEMA_VERSION,
        "mode": mode.name,
        "command": command,
        "budget_s": budget_s,
        # a copied working tree may carry another commit's .git (the device tool's): the caller's word first
        "git_sha": os.environ.get("MLM_VS_CLM_GIT_SHA") or git_sha() or "unknown",
        "matmul_dtype": (entries.get("environment") or {}).get("matmul_dtype", mode.matmul_dtype),
        "steps": entries,
    }
    result = plan.complete_result(plan.add_measured_mfu(result), mode, flash)
    result.update(elapsed_s=round(time.monotonic() - start, 1), finished=utc_now())
    missing = plan.problems(result, mode, flash)
    if missing:  # complete_result fills every field: this is a bug of the check, not of the machine
        raise RuntimeError(f"gpu-check: incomplete result: {missing[:5]}")
    atomic_write_text(out / LOG_FILE, _combined_log(work))
    atomic_write_text(out / REPORT_FILE, report.render(result))
    atomic_write_json(out / RESULT_FILE, result)  # last: the completion marker
    return result


def _combined_log(work: Path) -> str:
    parts = []
    for log in sorted((work / LOG_DIR).glob("*.log")):
        data = log.read_bytes()
        cut = f"[... {len(data) - LOG_TAIL_BYTES} bytes cut ...]\n" if len(data) > LOG_TAIL_BYTES else ""
        parts.append(f"===== {log.name}\n{cut}{data[-LOG_TAIL_BYTES:].decode(errors='replace')}\n")
    return "".join(parts)


def register(sub) -> None:
    p = sub.add_parser(
        "gpu-check",
        help="measure the Composer path on a GPU (throughput and MFU, bf16 parity, kill/resume, fine-tuning)",
        description="One command for a GPU machine: writes gpu_check.json and gpu_check.md into --out "
        "(docs/timings.md, 'On a GPU'). --cpu: the same steps on tiny presets (minutes, any machine).",
    )
    p.add_argument(
        "--out", required=True, help="folder for gpu_check.json, .md and .log (not one holding a finished check)"
    )
    p.add_argument("--budget-s", type=float, help="whole-run budget in seconds (default: 480 on a GPU, 900 with --cpu)")
    p.add_argument("--cpu", action="store_true", help="tiny presets at sequence 128 on the CPU")
    p.add_argument("--steps", default=",".join(plan.STEPS), help=f"comma-separated subset of {','.join(plan.STEPS)}")
    p.add_argument("--work", help="folder for the working files (kept); default: a temporary folder, removed")
    p.set_defaults(func=main)


def main(args) -> int:
    mode = plan.CPU if args.cpu else plan.GPU
    steps = tuple(s.strip() for s in args.steps.split(",") if s.strip())
    command = (
        "python -m pretraining gpu-check " + " ".join(sys.argv[2:])
        if len(sys.argv) > 2
        else "python -m pretraining gpu-check"
    )
    try:
        result = run_check(
            Path(args.out), mode=mode, budget_s=args.budget_s, steps=steps, work=args.work, command=command
        )
    except GpuCheckError as exc:
        print(f"gpu-check: {exc}", file=sys.stderr)
        return 2
    print(report.render(result))
    failed = [s for s, e in result["steps"].items() if s in steps and e["status"] != "ok"]
    print(f"gpu-check: wrote {Path(args.out) / RESULT_FILE}" + (f"; not ok: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0
