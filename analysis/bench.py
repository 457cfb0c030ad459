"""Synthetic release-shaped run records, and the benchmark of the claims report and Tables 2-17.

`synthetic_records` makes every fine-tuning run of the release for the given checkpoints (12
datasets x 6 LRs x 5 seeds each): true cell means and seed sds from the published tables (sd =
half-width x sqrt(5) / 1.96), a penalty for LRs away from each cell's best LR, and per-instance
test scores on one fixed test set per dataset (run score = mean of its instance scores).
`benchmark` writes them as JSON Lines and times `python -m analysis claims` and
`python -m analysis tables` on them, each in a fresh process, with its peak memory
(resource.getrusage). docs/claims.md, "Scale", has the measured numbers.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from analysis.intervals import halfwidth_sd
from analysis.published import load_published_cells
from contracts.model_names import biphasic_name, objective_token, single_objective_name
from contracts.paper import (
    AVERAGE,
    CLM_STEPS_BEFORE_MASKING,
    DATASETS,
    FINETUNE_LRS,
    FINETUNE_SEEDS,
    MASKING_RATIOS,
    PRETRAIN_STEPS,
)
from contracts.provenance import atomic_write_json
from contracts.run_record import RunRecord, write_run_records

# Figure 7's 40k CLM + 2k MLM checkpoints (released, but in no table) -> the 610M MLM model of their ratio.
FIGURE7_MODELS = {
    biphasic_name("610m", CLM_STEPS_BEFORE_MASKING, PRETRAIN_STEPS, objective_token(ratio)): single_objective_name(
        "610m", objective_token(ratio)
    )
    for ratio in MASKING_RATIOS
}
IR_TRAIN_SET = "msmarco_pairs"  # the release's IR models are fine-tuned on MS MARCO pairs


def release_models() -> list[str]:
    """The 50 evaluated checkpoints: the 46 of Tables 2-17 (their order) and Figure 7's 4."""
    published = list(dict.fromkeys(load_published_cells()["model"]))
    return published + [m for m in FIGURE7_MODELS if m not in published]


def _truth() -> dict[tuple[str, str], tuple[float, float]]:
    """(model, dataset) -> (mean, seed sd) from the published cells; Figure 7's models borrow the
    610M MLM model of their masking ratio."""
    cells = load_published_cells()
    cells = cells[cells["dataset"] != AVERAGE].drop_duplicates(["model", "dataset"])
    truth = {
        (m, d): (mean, float(halfwidth_sd(hw, 5)))
        for m, d, mean, hw in zip(cells["model"], cells["dataset"], cells["mean"], cells["ci_halfwidth"])
    }
    for model, mlm_model in FIGURE7_MODELS.items():
        for dataset in DATASETS:
            truth[(model, dataset.id)] = truth[(mlm_model, dataset.id)]
    return truth


def synthetic_records(
    models: list[str] | None = None, instances: int = 300, rng_seed: int = 0, shift: dict[str, float] | None = None
) -> list[RunRecord]:
    """Every run (12 datasets x 6 LRs x 5 seeds) of `models` (default: release_models()).

    shift: model -> points added to its true means (a known effect). A model needs a published
    cell per dataset or to be one of FIGURE7_MODELS (KeyError otherwise).
    """
    models = release_models() if models is None else models
    truth = _truth()
    rng = np.random.default_rng(rng_seed)
    log_lrs = np.log10(FINETUNE_LRS)
    test_sets = {d.id: rng.normal(0.0, 15.0, size=instances) for d in DATASETS}  # instance difficulty
    records = []
    for model in models:
        for dataset in DATASETS:
            mean, sd = truth[(model, dataset.id)]
            mean += (shift or {}).get(model, 0.0)
            best = rng.choice(log_lrs[1:4])  # each cell's best LR in 2e-5..1e-4
            penalty = 1.5 * (log_lrs - best) ** 2  # points lost per LR, 1.5 per decade^2
            true = mean - penalty[:, None] + max(sd, 0.05) * rng.standard_normal((len(log_lrs), len(FINETUNE_SEEDS)))
            noise = rng.normal(0.0, 5.0, size=(*true.shape, instances))
            scores = np.clip(true[..., None] + test_sets[dataset.id] + noise, 0.0, 100.0)
            validation = np.clip(true + rng.normal(0.0, 0.3, size=true.shape), 0.0, 100.0)
            for i, lr in enumerate(FINETUNE_LRS):
                for j, seed in enumerate(FINETUNE_SEEDS):
                    records.append(
                        RunRecord.create(
                            model,
                            task_type=dataset.task_type,
                            dataset=dataset.id,
                            train_set=IR_TRAIN_SET if dataset.task_type == "IR" else None,
                            lr=lr,
                            seed=seed,
                            validation_score=float(validation[i, j]),
                            test_score=float(scores[i, j].mean()),
                            test_instance_scores=scores[i, j].round(4).tolist(),
                            provenance={"source": "synthetic", "rng_seed": rng_seed},
                            protocol="paper",
                        )
                    )
    return records


# Peak memory of the child's own process image: VmHWM (Linux) resets at exec, while ru_maxrss
# also counts the parent's resident pages at fork (this parent held every record). ru_maxrss
# where /proc is missing.
_CHILD = """import resource, sys
from analysis.cli import main
code = main(sys.argv[1:])
try:
    peak = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
except OSError:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print("peak_rss_kb", peak, file=sys.stderr)
sys.exit(code)
"""


def _timed(argv: list[str]) -> dict:
    """Run `python -m analysis <argv>` in a fresh process: wall seconds, CPU seconds, peak RSS (MB)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _CHILD, *argv], capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"analysis {argv[0]} failed: {done.stderr.strip().splitlines()[-1:]}")
    peak_kb = int(done.stderr.strip().splitlines()[-1].split()[-1])
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"seconds": round(wall, 2), "cpu_seconds": round(cpu, 2), "peak_mb": round(peak_kb / 1024, 1)}


def benchmark(
    out_dir: str | Path, n_models: int | None = None, instances: int = 300, reps: int = 10000, rng_seed: int = 0
) -> dict:
    """Write the synthetic runs of the first n_models release checkpoints (all 50 by default)
    into out_dir/runs.jsonl and time the claims report and Tables 2-17 from them."""
    out = Path(out_dir)
    models = release_models()[:n_models] if n_models else release_models()
    start = time.perf_counter()
    records = synthetic_records(models, instances, rng_seed)
    runs = write_run_records(out / "runs.jsonl", records)
    generated = time.perf_counter() - start
    result = {
        "models": len(models),
        "records": len(records),
        "instances_per_run": instances,
        "reps": reps,
        "runs_jsonl_mb": round(runs.stat().st_size / 2**20, 1),
        "generate_seconds": round(generated, 1),
        "cpu_count": os.cpu_count(),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS", "unset"),
    }
    del records
    result["claims"] = _timed(
        [
            "claims",
            str(runs),
            "--csv",
            str(out / "claims.csv"),
            "--md",
            str(out / "claims.md"),
            "--figure",
            str(out / "claims"),
            "--reps",
            str(reps),
        ]
    )
    result["tables"] = _timed(["tables", str(runs), "--out", str(out / "tables"), "--reps", str(reps)])
    result["total_seconds"] = round(result["claims"]["seconds"] + result["tables"]["seconds"], 2)
    result["peak_mb"] = max(result["claims"]["peak_mb"], result["tables"]["peak_mb"])
    atomic_write_json(out / "benchmark.json", result)
    return result
