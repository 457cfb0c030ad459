"""The analysis at the release's scale: a release-shaped synthetic results/ tree, and the timing
of `import-released` (to a run store), `tables`, `audit` and `claims` on it.

`write_synthetic_release` writes every run (12 datasets x 6 LRs x 5 seeds) of the given release
checkpoints in the released layout and file format (analysis.released; indented JSON with
`scores_i` lists in both splits), at the real number of instances per split (RELEASED_INSTANCES),
with instance scores of the kind each task type's metric gives (0/1 accuracy; fractions for
word-level F1 and answer F1; NDCG@10 values of binary relevance) and run means from the
published cells (analysis.bench). `benchmark_release` times the four commands, each in a fresh
process (wall seconds, CPU seconds, peak RSS). docs/analysis.md, "Scale", has the numbers.
"""

from __future__ import annotations

import os
import shutil
import time
from fractions import Fraction
from pathlib import Path

import numpy as np

from analysis.bench import IR_TRAIN_SET, _timed, _truth, release_models
from contracts.bounded import SMALL, read_json_object
from contracts.paper import DATASETS, FINETUNE_LRS, FINETUNE_SEEDS, PAPER_TEST_INSTANCES
from contracts.provenance import atomic_write_json

# Instances per split of the released runs: (validation, test). docs/analysis.md, "Scale", gives
# the source of each: test = the reported split (GLUE/SQuAD/ReCoRD official validation, TC
# official test, IR qrels queries); validation = the 5% carve-out of train (train_test_split,
# ceil), the official TC validation, the IR dev/validation queries. MS MARCO's validation size is
# not known here: taken equal to its test.
_RELEASED_VALIDATION = {
    "sst2": 3368,
    "qqp": 18193,
    "mnli": 19636,
    "ontonotes5": 8528,
    "conll2003": 3250,
    "uner": 2001,
    "squad": 4380,
    "squad_v2": 6516,
    "record": 5037,
    "nq": 1726,
    "msmarco": 6980,
    "mldr_en": 200,
}
RELEASED_INSTANCES = {d: (n, PAPER_TEST_INSTANCES[d]) for d, n in _RELEASED_VALIDATION.items()}
_INDENT = "\n            "  # the released files' json.dump(indent=4) layout, inside a list


def _metric_values(task_type: str) -> np.ndarray:
    """The values one instance's metric takes: accuracy 0/1; F1 of word tags or answer tokens
    as fractions; NDCG@10 of one relevant document at rank r (1 / log2(r + 1)) or none."""
    if task_type == "SC":
        return np.array([0.0, 1.0])
    if task_type == "IR":
        return np.array([0.0, *(1 / np.log2(np.arange(2, 12)))])
    limit = 9 if task_type == "TC" else 30
    return np.array(sorted({float(Fraction(k, m)) for m in range(1, limit + 1) for k in range(m + 1)}))


def _instances_text(values: np.ndarray, strings: np.ndarray, codes: np.ndarray) -> tuple[str, str]:
    """(score, scores_i list) text of one split: the values' repr, joined as json.dump would."""
    listed = ("," + _INDENT).join(strings[codes].tolist())
    return repr(float(values[codes].mean())), "[" + _INDENT + listed + "\n        ]"


def write_synthetic_release(
    root: str | Path, models: list[str], rng_seed: int = 0, max_instances: int | None = None
) -> dict:
    """Write <root>/results/<model>/<task type>/<folder>/<run>/results.json for every run of
    `models`; `max_instances` caps the instances per split (tests). Returns the tree's size."""
    rng = np.random.default_rng(rng_seed)
    truth, log_lrs = _truth(), np.log10(FINETUNE_LRS)
    files = size = values_written = 0
    for dataset in DATASETS:
        counts = [min(n, max_instances or n) for n in RELEASED_INSTANCES[dataset.id]]
        values = _metric_values(dataset.task_type)
        strings = np.array([repr(float(v)) for v in values])
        edges = (values[1:] + values[:-1]) / 2
        difficulty = [rng.normal(0.0, 0.25, size=n) for n in counts]  # one fixed set per split
        for model in models:
            mean, sd = truth[(model, dataset.id)]
            best = rng.choice(log_lrs[1:4])
            quality = (
                mean
                - 1.5 * (log_lrs - best)[:, None] ** 2
                + max(sd, 0.05) * rng.standard_normal((len(log_lrs), len(FINETUNE_SEEDS)))
            ) / 100
            for i, lr in enumerate(FINETUNE_LRS):
                for j, seed in enumerate(FINETUNE_SEEDS):
                    blocks = []
                    for split, hard in zip(("validation", "test"), difficulty):
                        latent = np.clip(quality[i, j] + hard + rng.normal(0.0, 0.1, size=hard.size), 0, 1)
                        codes = (
                            (rng.random(hard.size) < latent).astype(np.intp)
                            if dataset.task_type == "SC"
                            else np.searchsorted(edges, latent)
                        )
                        score, listed = _instances_text(values, strings, codes)
                        blocks.append(
                            f'    "{split}": {{\n        "score": {score},\n        "scores_i": {listed}\n    }}'
                        )
                        values_written += hard.size
                    prefix = f"{IR_TRAIN_SET}_" if dataset.task_type == "IR" else ""
                    path = (
                        Path(root)
                        / "results"
                        / model
                        / dataset.task_type
                        / dataset.released_folder
                        / f"{prefix}lr{lr:.0e}_sd{seed}"
                        / "results.json"
                    )
                    path.parent.mkdir(parents=True, exist_ok=True)
                    text = "{\n" + ",\n".join(blocks) + "\n}"
                    path.write_text(text)
                    files += 1
                    size += len(text)
    return {"files": files, "tree_mb": round(size / 2**20, 1), "instance_scores": values_written}


def _folder_mb(path: Path) -> float:
    return round(sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20, 1)


def benchmark_release(
    out_dir: str | Path, n_models: int, reps: int = 10000, rng_seed: int = 0, max_instances: int | None = None
) -> dict:
    """Write the synthetic release of the first n_models checkpoints into out_dir/results (kept
    when a previous call wrote the same one), then time import-released -> out_dir/store.parquet,
    tables, audit and claims on the store; writes out_dir/benchmark.json."""
    out = Path(out_dir)
    models = release_models()[:n_models]
    spec = {"models": models, "rng_seed": rng_seed, "max_instances": max_instances}
    marker = out / "results" / "synthetic.json"
    if not (marker.exists() and read_json_object(marker, SMALL).get("spec") == spec):
        shutil.rmtree(out / "results", ignore_errors=True)
        start = time.perf_counter()
        tree = write_synthetic_release(out, models, rng_seed, max_instances)
        tree["generate_seconds"] = round(time.perf_counter() - start, 1)
        atomic_write_json(marker, {"spec": spec, "tree": tree})
    tree = read_json_object(marker, SMALL)["tree"]
    store = out / "store.parquet"
    shutil.rmtree(store, ignore_errors=True)
    result = {
        "models": len(models),
        "runs": tree["files"],
        **tree,
        "reps": reps,
        "max_instances": max_instances,
        "cpu_count": os.cpu_count(),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS", "unset"),
        "load_average_before": [round(x, 2) for x in os.getloadavg()],
    }
    result["import"] = _timed(["import-released", str(out / "results"), "-o", str(store)])
    result["store_mb"] = _folder_mb(store)
    boot = ["--reps", str(reps), "--rng-seed", str(rng_seed)]
    result["tables"] = _timed(["tables", str(store), "--out", str(out / "tables"), *boot])
    result["audit"] = _timed(["audit", str(store), "--out", str(out / "audit"), *boot])
    result["claims"] = _timed(
        [
            "claims",
            str(store),
            "--csv",
            str(out / "claims.csv"),
            "--md",
            str(out / "claims.md"),
            "--figure",
            str(out / "claims"),
            *boot,
        ]
    )
    result["tables_audit_seconds"] = round(result["tables"]["seconds"] + result["audit"]["seconds"], 2)
    result["peak_mb"] = max(result[step]["peak_mb"] for step in ("import", "tables", "audit", "claims"))
    result["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    atomic_write_json(out / "benchmark.json", result)
    return result
