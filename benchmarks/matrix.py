"""The fine-tuning matrix: models x tasks x LR grid x seeds as a JSONL job list, run locally or by Slurm.

Every job is one `benchmarks.run` run (idempotent: complete runs are skipped, interrupted ones
redone), so both runners can be killed and restarted at any time.

Jobs fall into three groups, each a Slurm job array indexed by `index`:
  finetune  SC/TC/QA runs, one per index
  ir_train  the MS MARCO run (trains the IR model) of each (model, lr, seed)
  ir_eval   the NQ and MLDR runs of the same (model, lr, seed) as `ir_train` task `index`; the
            array depends on `ir_train` with `aftercorr` (task i starts when training task i has
            succeeded)
Asking for NQ or MLDR without MS MARCO still schedules the MS MARCO runs they need.
"""

from __future__ import annotations

import json
import logging
import shlex
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from benchmarks.run import IR_TRAIN_TASK, RunConfig
from contracts.bounded import LARGE, BoundedReadError, read_text
from contracts.config import config_from_dict, config_to_dict
from contracts.layout import finetune_run_id
from contracts.paper import DATASETS, FINETUNE_LRS, FINETUNE_SEEDS
from contracts.provenance import atomic_write_text, utc_now

GROUPS = ("finetune", "ir_train", "ir_eval")
REPO_ROOT = Path(__file__).resolve().parent.parent
log = logging.getLogger("benchmarks.matrix")


class MatrixError(ValueError):
    """A matrix that cannot be built; one line saying why."""


def _group(task: str) -> str:
    from benchmarks.tasks import get_task

    if get_task(task).task_type != "IR":
        return "finetune"
    return "ir_train" if task == IR_TRAIN_TASK else "ir_eval"


def _check_distinct_names(base: RunConfig, models: Sequence[str]) -> None:
    """Two checkpoints recorded under one name would share run folders: the second's runs would be
    taken for finished ones (e.g. several runs' `hf/step-250` exports)."""
    seen: dict[str, str] = {}
    for model in models:
        name = replace(base, model=model).name
        if name in seen:
            raise MatrixError(
                f"models {seen[name]} and {model} would both be recorded as {name!r} (<out>/{name}/...): "
                "give each checkpoint a folder of its own name (e.g. a symlink runs/<run>-step250 -> <run>/hf/step-250)"
            )
        seen[name] = model


def check_local_models(
    models: Sequence[str], trust_remote_code: bool, allow_reinitialised_weights: bool | None = None
) -> None:
    """Each model is one a run can load (a Hugging Face folder with its config, weights and
    tokenizer, or a Hub id; remote code only when trusted). With `allow_reinitialised_weights`
    given, a local folder's backbone weights are checked too, as `run` checks them
    (benchmarks.kinds.loading): a checkpoint lacking some is refused unless it is true."""
    from benchmarks.kinds.checkpoint import check_model_path, check_remote_code, check_tokenizer_files

    for model in models:
        check_model_path(model)
        check_tokenizer_files(model)
        check_remote_code(model, trust_remote_code)
    if allow_reinitialised_weights is None:
        return
    from benchmarks.kinds.loading import check_checkpoint

    for model in models:
        if Path(model).is_dir():  # a Hub id: by its runs, or by the Slurm preflight's cache check
            check_checkpoint(model, trust_remote_code, allow_reinitialised_weights)


def expand(
    base: RunConfig,
    models: Sequence[str],
    tasks: Sequence[str] | None = None,
    lrs: Sequence[float] | None = None,
    seeds: Sequence[int] | None = None,
    check_models: bool = True,
) -> list[dict]:
    """Job dicts {id, group, index, config}; `base` gives every RunConfig field but model/task/lr/seed.

    `check_models=False` accepts local model folders that do not exist yet (a job list written
    before the pretraining jobs that produce them, e.g. by `python -m reproduce --scale paper`).
    """
    from benchmarks.tasks import get_task, with_ir_training

    tasks = [d.id for d in DATASETS] if tasks is None else list(tasks)
    lrs = list(FINETUNE_LRS) if lrs is None else list(lrs)
    seeds = list(FINETUNE_SEEDS) if seeds is None else list(seeds)
    for name, values in (("models", models), ("tasks", tasks), ("LR grid", lrs), ("seeds", seeds)):
        if not values:
            raise MatrixError(f"empty {name}: give at least one value")
    # A repeated LR or seed listed the same run twice (issue 88): two array tasks on one run folder.
    # Models and tasks are made distinct below, as one may be named in two ways (a trailing slash).
    for name, values in (("LR grid", lrs), ("seeds", seeds)):
        repeated = [v for v in dict.fromkeys(values) if values.count(v) > 1]
        if repeated:
            raise MatrixError(
                f"{name} {','.join(map(str, values))}: {', '.join(map(str, repeated))} given more than once; "
                "give each once"
            )
    for task in tasks:
        get_task(task)
    for lr in lrs:
        if not lr > 0:
            raise MatrixError(f"learning rate {lr} in the LR grid is not > 0")
    if check_models:
        check_local_models(models, base.trust_remote_code, base.allow_reinitialised_weights)
    # Absolute local paths: Slurm tasks run from the repository, maybe on another node.
    models = list(dict.fromkeys(_absolute(m) if Path(m).exists() else m.rstrip("/") for m in models))
    _check_distinct_names(base, models)
    base = replace(base, out=_absolute(base.out), data_root=_absolute(base.data_root) if base.data_root else None)
    # MS MARCO first: the other IR runs evaluate its model; it is implied by them
    ordered = sorted(with_ir_training(tasks), key=lambda t: tasks.index(t) if t in tasks and t != IR_TRAIN_TASK else -1)
    jobs, counters, ir_index = [], {g: 0 for g in GROUPS}, {}
    for model in models:
        for task in ordered:
            for lr in lrs:
                for seed in seeds:
                    cfg = replace(base, model=model, task=task, lr=float(lr), seed=int(seed))
                    group = _group(task)
                    if group == "finetune":
                        index = counters["finetune"]
                        counters["finetune"] += 1
                    else:
                        key = (cfg.name, cfg.lr, cfg.seed)
                        if key not in ir_index:
                            ir_index[key] = len(ir_index)
                        index = ir_index[key]
                    jobs.append(
                        {
                            "id": finetune_run_id(cfg.name, task, cfg.lr, seed),
                            "group": group,
                            "index": index,
                            "config": config_to_dict(cfg),
                        }
                    )
    return jobs


def _absolute(path: str) -> str:
    return str(Path(path).expanduser().absolute())  # not resolve(): a symlinked model keeps its name


def job_list_text(jobs: Sequence[dict]) -> str:
    """A job list's text: one job per line, keys sorted (what the array scripts read by line)."""
    return "".join(json.dumps(j, sort_keys=True) + "\n" for j in jobs)


def write_jobs(jobs: Sequence[dict], path: Path) -> Path:
    return atomic_write_text(path, job_list_text(jobs))


def read_jobs(path: Path) -> list[dict]:
    path = Path(path)
    if not path.is_file():
        raise MatrixError(f"{path}: no such job list (write one with `python -m benchmarks matrix`)")
    try:
        text = read_text(path, LARGE)  # a paper study's job list: a few MB
    except BoundedReadError as exc:
        raise MatrixError(str(exc)) from None
    jobs = []  # (read_text decodes with replacement: a binary file fails as JSON, on its line)
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            jobs.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise MatrixError(
                f"{path}:{number}: not valid JSON ({exc.msg}); pass the job list `benchmarks matrix` wrote"
            ) from None
    return jobs


def job_config(job: dict) -> RunConfig:
    return config_from_dict(RunConfig, job["config"], f"job {job['id']}")


def array_sizes(jobs: Sequence[dict]) -> dict[str, int]:
    return {g: 1 + max((j["index"] for j in jobs if j["group"] == g), default=-1) for g in GROUPS}


def run_local(jobs: Sequence[dict], progress: bool = True) -> dict[str, list[str]]:
    """Run every job in order (MS MARCO before the IR runs that need it); never stops on a failure."""
    from tqdm import tqdm

    from benchmarks.chance import chance_warning
    from benchmarks.run import run

    outcome = {"done": [], "skipped": [], "failed": [], "at_chance": []}
    bar = tqdm(jobs, desc="runs", unit="run", disable=not progress, file=sys.stderr)
    for job in bar:
        bar.set_postfix_str(job["id"], refresh=False)
        try:
            record, computed = run(job_config(job))
            outcome["done" if computed else "skipped"].append(job["id"])
            warning = chance_warning(record, job["id"])
            if warning:
                outcome["at_chance"].append(warning)
        except Exception as exc:  # one broken run must not stop the matrix
            log.error("run %s failed: %s", job["id"], exc)
            outcome["failed"].append(f"{job['id']}: {type(exc).__name__}: {exc}")
    return outcome


def report_outcome(outcome: dict[str, list[str]]) -> int:
    """Print what `run_local` did (counts on stdout; at-chance and failed runs on stderr); 1 if a run failed."""
    print(
        f"{len(outcome['done'])} runs done, {len(outcome['skipped'])} skipped (complete), "
        f"{len(outcome['failed'])} failed"
    )
    for line in outcome["at_chance"]:
        print(line, file=sys.stderr)
    for line in outcome["failed"]:
        print(f"  failed: {line}", file=sys.stderr)
    return 1 if outcome["failed"] else 0


def run_array_task(jobs: Sequence[dict], group: str, index: int) -> int:
    """What one Slurm array task does: the jobs of (group, index); exit status 1 if one failed."""
    from benchmarks.run import run

    selected = [j for j in jobs if j["group"] == group and j["index"] == index]
    if not selected:
        raise MatrixError(f"no job with group {group!r} and index {index} in the job list")
    status = 0
    for job in selected:
        try:
            run(job_config(job))
        except Exception as exc:
            log.error("run %s failed: %s", job["id"], exc)
            status = 1
    return status


def model_problems(model: str) -> list[str]:
    """What an offline job would miss to load `model`: a fetched folder that does not verify (sizes
    against its fetch manifest), or a hub id that is not in the Hugging Face cache."""
    from contracts.hub import MODEL_MANIFEST, check_fetched_model

    path = Path(model)
    if path.is_dir():
        return check_fetched_model(path, hashes=False) if (path / MODEL_MANIFEST).is_file() else []
    from huggingface_hub import constants, try_to_load_from_cache

    from benchmarks.kinds.checkpoint import _WEIGHT_FILES as WEIGHT_FILES
    from benchmarks.kinds.checkpoint import TOKENIZER_FILES

    cached = lambda name: isinstance(try_to_load_from_cache(model, name), str)  # noqa: E731
    weights = cached("config.json") and any(cached(name) for name in WEIGHT_FILES)
    if weights and any(cached(name) for name in TOKENIZER_FILES):
        return []
    name = model.split("/", 1)[1] if model.startswith("MLMvsCLM/") else model
    folder = f"models/{model.rsplit('/', 1)[-1]}"
    where = f"in the Hugging Face cache ({constants.HF_HUB_CACHE})"
    if weights:  # a tokenizer-less cache entry: every task would fail as it loads the tokenizer
        where += f" with its tokenizer (none of {', '.join(TOKENIZER_FILES)})"
    return [
        f"model {model} is neither a local folder nor {where}, and "
        f"the jobs run offline: `python -m pretraining fetch-model {name} --out {folder}`, then --models {folder}"
    ]


def preflight(jobs: Sequence[dict]) -> list[str]:
    """What the offline Slurm jobs of `jobs` (HF_HUB_OFFLINE=1) would miss, one line each: every
    task's data in its mirror (benchmarks.datasets.fetch.mirror_problems) and every model."""
    from benchmarks.datasets.fetch import mirror_problems

    problems, tasks_of_root = [], {}
    for job in jobs:
        tasks_of_root.setdefault(job["config"]["data_root"], []).append(job["config"]["task"])
    for root, tasks in tasks_of_root.items():
        problems += mirror_problems(root, tasks)
    for model in dict.fromkeys(job["config"]["model"] for job in jobs):
        problems += model_problems(model)
    return problems


def not_ready(problems: Sequence[str], limit: int = 3) -> str:
    """The problems of a preflight as one line (the first few, then how many more)."""
    more = f" (and {len(problems) - limit} more)" if len(problems) > limit else ""
    return "not ready for the offline Slurm jobs: " + "; ".join(problems[:limit]) + more


def check_sbatch_options(options: Sequence[str], where: str = "--sbatch-option") -> None:
    """MatrixError naming the option when one holds a control character: each becomes a `#SBATCH`
    line, a comment to bash, and a newline in it would start a shell command of its own in the
    script (docs/reliability.md)."""
    for option in options:
        if any(ord(c) < 32 or ord(c) == 127 for c in option):
            raise MatrixError(
                f"{where} {option!r}: holds a newline or another control character, which would put a "
                "command of its own into the Slurm script; give each option on one line"
            )


def slurm_script(
    jobs_path: Path,
    jobs: Sequence[dict],
    throttle: int | None,
    out_dir: Path,
    sbatch_options: Sequence[str] = (),
    python: str | None = None,
) -> str:
    """A bash script that submits the job arrays when run with bash, and is the array task body."""
    check_sbatch_options(sbatch_options)
    sizes = array_sizes(jobs)
    python = python or sys.executable
    throttle_suffix = f"%{throttle}" if throttle else ""
    logs = Path(out_dir).resolve() / "slurm_logs"
    lines = [
        "#!/bin/bash",
        f"# Generated by `python -m benchmarks matrix` on {utc_now()}: {len(jobs)} runs in {jobs_path}.",
        "# Submit with `bash THIS_FILE`: it calls sbatch once per job array (finetune, ir_train, ir_eval);",
        "# each array task runs `python -m benchmarks job` on the same job list. Runs are idempotent:",
        "# re-submitting after a failure or a kill redoes only the runs without a record.",
        f"#SBATCH --output={logs}/%x_%A_%a.out",
        *[f"#SBATCH {opt}" for opt in sbatch_options],
        "set -euo pipefail",
        f"JOBS={shlex.quote(str(Path(jobs_path).resolve()))}",
        f"REPO={shlex.quote(str(REPO_ROOT))}",
        f"PYTHON=${{PYTHON:-{shlex.quote(python)}}}",
        "",
        'if [[ -n "${SLURM_ARRAY_TASK_ID:-}" ]]; then  # inside an array task: run its jobs',
        '    cd "$REPO"',
        "    export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1",
        '    exec "$PYTHON" -m benchmarks job --jobs "$JOBS" --group "$1" --index "$SLURM_ARRAY_TASK_ID"',
        "fi",
        "",
        'SELF=$(readlink -f "${BASH_SOURCE[0]}")',
        f"mkdir -p {shlex.quote(str(logs))}",
    ]
    for group, dependency in (("finetune", None), ("ir_train", None), ("ir_eval", "ir_train")):
        if sizes[group] == 0:
            continue
        dep = ""
        if dependency and sizes[dependency]:
            dep = f' --dependency=aftercorr:"${{{dependency}_id}}" --kill-on-invalid-dep=yes'
        lines += [
            f"{group}_id=$(sbatch --parsable --job-name=mlmclm-{group} "
            f'--array=0-{sizes[group] - 1}{throttle_suffix}{dep} "$SELF" {group})',
            f"{group}_id=${{{group}_id%%;*}}",
            f'echo "submitted {group}: job array ${{{group}_id}} ({sizes[group]} tasks)"',
        ]
    return "\n".join(lines) + "\n"
