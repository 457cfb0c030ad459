"""The DAG of a reproduction run here, stage after stage, each cached and resumable (toy scale).

`reproduce(cfg)` runs (or resumes) the stages: data, pretraining (one run after the other), fine-tuning
(a pool of `cfg.workers` processes) and analysis (records -> cells, tables, audit, figures).
"""

from __future__ import annotations

import functools
import shutil
import sys
import time
from collections import Counter
from pathlib import Path

from contracts.bounded import LARGE, read_json_object, read_yaml
from contracts.config import CONFIG_BYTES_LIMIT, config_from_dict, config_to_dict
from contracts.layout import ERROR_FILE, FINISHED_FILE, RECORD_FILE
from contracts.provenance import atomic_write_json, atomic_write_text, stable_hash, utc_now
from reproduce.figures import claims_report, draw_figures
from reproduce.housekeeping import finished_checkpoint_dirs, folder_size, output_lock
from reproduce.plan import (
    WORLD_VOCAB_SIZE,
    ReproduceConfig,
    ReproduceError,
    StudyPlan,
    build_plan,
    data_dir,
    finetune_dir,
    out_dir,
    pretraining_dir,
    shard_cache_dir,
    task_data_root,
    tokenizer_path,
    with_absolute_folders,
    world_dir,
    world_documents,
    write_if_changed,
    write_study_config,
)
from reproduce.workers import (
    _SHARED_POOL,
    CURRENT_STAGE,
    _finetune_chunk,
    _map,
    _pretrain_one,
    _start_shared_pool,
    _worker_pool,
    import_stage_modules,
)

STAGE_NAMES = ("data", "pretraining", "fine-tuning", "analysis")


# --- stages ----------------------------------------------------------------------------------------
def stage_data(plan: StudyPlan) -> str:
    """The toy world (corpus, tokenizer, tasks; reproduce.world), its corpus packed into shards, and
    the untrained reference models (they need the world's tokenizer). The Slurm data job runs this
    stage too (`--stage data`)."""
    from contracts.paper import TOY_SEQ_LEN
    from pretraining.data.context import describe, fineweb_edu_estimate
    from pretraining.data.prepare import MANIFEST, PrepareConfig, prepare_data
    from reproduce.world import CORPUS_FILE, build_world

    cfg = plan.config
    world = world_dir(cfg)
    build_world(world, world_documents(cfg), WORLD_VOCAB_SIZE)
    untrained = _export_random_init(plan)
    untrained_note = f"; untrained references {', '.join(untrained)}" if untrained else ""
    out = data_dir(cfg)
    if (out / MANIFEST).exists():
        return f"data: reusing {out} and the toy world {world}{untrained_note}"
    manifest = prepare_data(
        PrepareConfig(
            out=str(out), inputs=(str(world / CORPUS_FILE),), tokenizer=tokenizer_path(cfg), seq_len=TOY_SEQ_LEN
        )
    )
    counts = manifest["counts"]
    return (
        f"data: toy world {world} ({world_documents(cfg):,} documents of {counts['tokens'] / counts['documents']:.0f} "
        f"tokens on average, tokenizer, tasks); {counts['samples']:,} samples of {TOY_SEQ_LEN} tokens -> "
        f"{out}; {describe(manifest['context'])} (FineWeb-Edu at 2,048: about "
        f"{100 * fineweb_edu_estimate()['own_document_key_share']:.0f}%){untrained_note}"
    )


def stage_pretraining(plan: StudyPlan) -> str:
    import yaml

    from pretraining.config import PretrainConfig

    cfg = plan.config
    # runs from scratch; then CPT runs from their bases; then CPT decay branches from a main CPT run's kept state
    waves: tuple[list[dict], list[dict], list[dict]] = ([], [], [])
    bodies = {}
    for run in plan.runs:
        body = run.body()
        body["data"]["cache_dir"] = str(shard_cache_dir(cfg, run.name))  # the runs of a wave train side by side
        config_from_dict(PretrainConfig, body, f"pretraining config of {run.name}")  # validate before any work
        _check_finished_run(body)  # before anything is written
        bodies[run.name] = (run, body)
    for name, (run, body) in bodies.items():
        write_if_changed(
            out_dir(cfg) / "configs" / "pretraining" / f"{name}.yaml", yaml.safe_dump(body, sort_keys=False)
        )
        waves[run.wave].append(body)
    results = []
    for wave in waves:
        finished = [b for b in wave if (Path(b["run_dir"]) / FINISHED_FILE).exists()]
        results += [_pretrain_one(body) for body in finished]  # reused (their export redone if lost)
        todo = sorted((b for b in wave if b not in finished), key=_pretraining_cost, reverse=True)
        results += _map(_pretrain_one, todo, cfg, "pretraining", "run") if todo else []  # the longest first
    for name in plan.model_names:
        if not (plan.model_path(name) / "config.json").is_file():
            raise ReproduceError(
                f"{plan.model_path(name)} (the export of {name}) is missing although its run "
                "finished: delete that run's folder and rerun to train it again"
            )
    done = sum(state == "done" for _, state in results)
    freed = _drop_toy_resume_checkpoints(plan) if cfg.scale == "toy" else 0
    freed_note = f" (resume checkpoints and shard copies of finished toy runs removed: {freed / 1e6:.0f} MB)"
    return f"pretraining: {done} trained, {len(results) - done} reused -> {pretraining_dir(cfg)}" + (
        freed_note if freed else ""
    )


def _check_finished_run(body: dict) -> None:
    """A finished run is reused only for the config it was trained with: a setting that changes what
    it computes (pretraining.config.computing_differences) and differs, e.g. a default changed by a
    newer version of this package, is refused in one line rather than passing its models off as this
    config's."""
    import yaml

    from contracts.layout import RUN_CONFIG_FILE
    from pretraining.config import computing_differences, describe_differences

    run_dir = Path(body["run_dir"])
    if not (run_dir / FINISHED_FILE).exists():
        return
    fix = f"use a fresh --out (or delete {run_dir} to train it again)"
    try:
        saved = read_yaml(run_dir / RUN_CONFIG_FILE, CONFIG_BYTES_LIMIT)["config"]
        differences = computing_differences(saved, body)
    except (OSError, yaml.YAMLError, TypeError, KeyError, ValueError) as exc:
        raise ReproduceError(
            f"{run_dir / RUN_CONFIG_FILE}: the config of this finished pretraining run cannot be read "
            f"({type(exc).__name__}), so it cannot be checked against this reproduction's: {fix}"
        ) from None
    if differences:
        raise ReproduceError(
            f"{run_dir} is a finished pretraining run of another config: {describe_differences(differences)}; "
            f"its models are not this reproduction's: {fix}"
        )


def _check_reuse(plan: StudyPlan, stages) -> None:
    """Before anything is written: every finished pretraining run and every fine-tuning record the
    requested stages would reuse was made with this reproduction's settings (the stages check
    again as they go; an output folder made by an older version of this package is refused here)."""
    if "pretraining" in stages:
        for run in plan.runs:
            _check_finished_run(run.config)
    if "fine-tuning" in stages:
        for job in plan.jobs:
            _has_record(job.job)


def _pretraining_cost(body: dict) -> tuple:
    """Sort key for the expected length of a run: steps x model width (CLM's LM head runs everywhere)."""
    from pretraining.presets import PRESETS

    shape = PRESETS[body["model"]["preset"]]
    return (body["train"]["max_steps"] * shape.layers * shape.hidden, body["objective"]["kind"] != "mlm")


def _export_random_init(plan: StudyPlan) -> list[str]:
    """The untrained model of each size (the plan's `random_init`), with the seed of the runs of that
    size: exactly the weights they start from (pretraining.export.export_random_init)."""
    from pretraining.export import export_random_init

    names = []
    for ref in plan.random_init:
        path = plan.model_path(ref.name)
        if not (path / "config.json").is_file():
            shutil.rmtree(path, ignore_errors=True)  # a folder left by an interrupted export
            export_random_init(ref.size, path, tokenizer=tokenizer_path(plan.config), seed=ref.seed)
        names.append(ref.name)
    return names


def _drop_toy_resume_checkpoints(plan: StudyPlan) -> int:
    """A finished run is never resumed, and every later stage (CPT init, fine-tuning) reads its
    Hugging Face export: at toy scale its Composer resume checkpoints (weights + optimizer state,
    most of a toy study's disk) and its copy of the shards (`data.cache_dir`) are removed at once.
    At paper scale `make clean` removes the checkpoints (docs/reproduce.md, "Disk, locks and cleaning")."""
    freed = 0
    # the study's own finished runs that no other study plans (issue 88: a shared runs folder)
    for folder in finished_checkpoint_dirs(plan):
        cache = shard_cache_dir(plan.config, folder.parent.name)
        for path in (folder, cache) if cache.is_dir() else (folder,):
            freed += folder_size(path)
            shutil.rmtree(path)
    return freed


def stage_finetune(plan: StudyPlan) -> str:
    from benchmarks.matrix import check_local_models, job_list_text

    cfg = plan.config
    # the plan's jobs were expanded before the models existed: checked here, as matrix.expand does
    (trusted,) = {j.job["config"]["trust_remote_code"] for j in plan.jobs}  # one fine-tuning config for all
    check_local_models([str(plan.model_path(m)) for m in plan.finetuned_models], trusted)
    jobs = plan.finetune_jobs()
    # Chunks of one (model, lr, seed): the IR runs of a chunk share its MS MARCO model.
    chunks: dict[tuple, list[dict]] = {}
    for job in jobs:
        c = job["config"]
        chunks.setdefault((c["model_name"], c["lr"], c["seed"]), []).append(job)
    recorded = {job["id"]: _has_record(job) for job in jobs}  # every record checked before anything is written
    todo = [c for c in chunks.values() if not all(recorded[j["id"]] for j in c)]
    jobs_text = job_list_text(jobs)
    write_if_changed(finetune_dir(cfg) / "jobs.jsonl", jobs_text)  # the `benchmarks matrix` job list
    todo.sort(key=lambda chunk: _model_width(chunk[0]["config"]["model"]), reverse=True)  # the longest first
    skipped = len(jobs) - sum(len(c) for c in todo)
    outcomes = _map(_finetune_chunk, todo, cfg, "fine-tuning", "run", [len(c) for c in todo]) if todo else []
    failed = [f for o in outcomes for f in o["failed"]]
    for line in (w for o in outcomes for w in o.get("at_chance", ())):
        print(line, file=sys.stderr)  # each run at its chance level, one line (issue 67)
    done = sum(len(o["done"]) for o in outcomes)
    skipped += sum(len(o["skipped"]) for o in outcomes)
    if failed:
        raise ReproduceError(
            f"{len(failed)} fine-tuning run(s) failed, first: {failed[0]}; rerun to retry them (finished runs are kept)"
        )
    return f"fine-tuning: {done} runs done, {skipped} reused -> {finetune_dir(cfg)}"


def _model_width(model: str) -> int:
    """hidden_size x layers of a local Hugging Face folder (0 when unknown): the cost of fine-tuning it."""
    try:
        config = read_json_object(Path(model) / "config.json", LARGE)
        return int(config.get("hidden_size", 0)) * int(config.get("num_hidden_layers", 1))
    except (OSError, ValueError):
        return 0


def _has_record(job: dict) -> bool:
    """Whether the job's run has a complete record made with its settings; one made with other
    settings (benchmarks.run.reusable_record) is refused in one line, before anything is written."""
    from benchmarks.run import RunConfig, RunError, reusable_record

    try:
        return reusable_record(config_from_dict(RunConfig, job["config"], job["id"])) is not None
    except RunError as exc:
        raise ReproduceError(str(exc)) from None


def _planned_runs(plan: StudyPlan) -> list[tuple[dict, Path]]:
    """(job, its run folder) of every planned fine-tuning run, sorted by record path."""
    # the models need not exist: a pretraining run that left no export (cancelled, timed out, lost)
    # makes its runs missing, with that reason, not the whole analysis fail (issue 65)
    runs = [(j.job, j.run_dir) for j in plan.jobs]
    return sorted(runs, key=lambda run: str(run[1] / RECORD_FILE))


def _missing_row(job: dict, run_dir: Path, made_by: dict[str, str] | None = None) -> dict:
    """`made_by`: the pretraining run of each pretrained model (StudyPlan.made_by)."""
    from benchmarks.run import run_model_name
    from reproduce.status import error_first_line

    c = job["config"]
    error = run_dir / ERROR_FILE
    model = run_model_name(c["model"], c.get("model_name"))
    maker, exported = (made_by or {}).get(model), (Path(c["model"]) / "config.json").is_file()
    if error.is_file():
        why = f"failed: {error_first_line(error)}"
    elif maker and not exported:
        why = f"pretraining run {maker} has no export ({c['model']})"
    elif Path(c["model"]).is_absolute() and not exported:  # an untrained model of the study
        why = f"the model has no export ({c['model']}; the data stage writes the untrained ones)"
    else:
        why = "not run (no record, no error.txt)"
    return {"id": job["id"], "model": model, "task": c["task"], "lr": c["lr"], "seed": c["seed"], "why": why}


def stage_analysis(plan: StudyPlan) -> str:
    """Records -> runs.jsonl, cells.csv, tables/, audit/, figure/ (skipped when nothing changed)."""
    from analysis.aggregate import aggregate_runs
    from analysis.audit import audit_headline, run_audit
    from analysis.recipe import add_origin
    from analysis.tables import write_tables
    from benchmarks.run import run_model_name
    from contracts.run_record import RunRecord, write_run_records
    from reproduce.learning import learning_table, summary_line
    from reproduce.missing import (
        ANALYSIS_STAMP,
        MISSING_FILE,
        analysis_outputs,
        at_chance_section,
        missing_frame,
        missing_section,
        prepend,
    )

    cfg = plan.config
    out = out_dir(cfg)
    planned = _planned_runs(plan)
    files = [run_dir / RECORD_FILE for _, run_dir in planned]
    # a run that failed or never ran is listed on top of every report, not a reason to analyse nothing
    # (the Slurm analysis job runs afterany: issue 53)
    missing = missing_frame(
        [_missing_row(job, d, plan.made_by) for job, d in planned if not (d / RECORD_FILE).is_file()]
    )
    files = [f for f in files if f.is_file()]
    pretrained_files = [j.run_dir / RECORD_FILE for j in plan.jobs if j.model in plan.made_by]
    if not files or (pretrained_files and not any(f.is_file() for f in pretrained_files)):
        if planned:  # what is missing and why, for status and resubmit (issue 80: every pretraining job lost)
            atomic_write_text(out / MISSING_FILE, missing.to_csv(index=False))
        if files:  # issue 89: only the untrained references had runs: a one-line failure, not a traceback
            raise ReproduceError(
                f"none of the {len(plan.made_by)} pretrained models has a run record ({len(missing)} runs missing, "
                f"listed in {out / MISSING_FILE}): nothing to compare; finish their pretraining and fine-tuning first"
            )
        raise ReproduceError(
            f"none of the {len(planned)} planned run records exists yet (e.g. {planned[0][1] / RECORD_FILE}): "
            "finish the fine-tuning stage first"
            if planned
            else "the study plans no fine-tuning run"
        )
    planned_per_cell = Counter(
        (run_model_name(j["config"]["model"], j["config"].get("model_name")), j["config"]["task"]) for j, _ in planned
    )
    inputs = {
        "config": config_to_dict(cfg),
        "records": [[str(f), f.stat().st_mtime_ns, f.stat().st_size] for f in files],
    }
    stamp = out / ANALYSIS_STAMP
    expected = analysis_outputs(plan)
    if (
        stamp.exists()
        and read_json_object(stamp, LARGE).get("hash") == stable_hash(inputs)
        and all(p.exists() for p in expected)
    ):
        return f"analysis: unchanged records, reusing {out / 'cells.csv'}, tables, audit and figures"
    records = [RunRecord.from_dict(read_json_object(f, LARGE), str(f)) for f in files]
    # The chance levels (seconds of IR metric calls) in a worker of the reproduction's pool, idle by
    # now, while this process aggregates, tabulates, audits and draws every figure but Figure 3.
    chance_args = (plan, _protocols_by_task(cfg, records), recorded_chance(records))
    pool = _SHARED_POOL.get("pool")
    pending_chance = pool.apply_async(_chance_table, chance_args) if pool is not None else None
    write_run_records(out / "runs.jsonl", records)
    cells = aggregate_runs(records, reps=cfg.reps)
    atomic_write_text(out / "cells.csv", cells.to_csv(index=False))
    renamed = plan.stand_ins
    source = f"{cfg.scale}-scale reproduction run records {out / 'runs.jsonl'}"
    if renamed:
        source += " (toy runs in the rows of the paper checkpoints they stand in for: Checkpoint = our run)"
    write_tables(
        cells, out / "tables", source=source, only=plan.tables, rename={paper: ours for ours, paper in renamed.items()}
    )
    origins: dict[str, set[str]] = {}
    for r in records:  # this study pretrained its models: auto reads the recipe question from them
        add_origin(origins, r)
    summary = run_audit(cells, out / "audit", sources=[str(out / "runs.jsonl")], origins=origins)
    # waited for only when a figure or the learning table needs it
    chance_table = functools.cache(
        lambda: pending_chance.get() if pending_chance is not None else _chance_table(*chance_args)
    )

    figures = draw_figures(plan, cells, records, out / "figure", [str(out / "runs.jsonl")], chance_table)
    chance = chance_table()
    learned = ""
    if chance is not None:
        atomic_write_text(out / "chance.csv", chance.to_csv(index=False))
        pretrained = {c.name: c.size for c in plan.checkpoints}
        objectives = {c.name: c.description.objective for c in plan.checkpoints}
        table = learning_table(cells, chance, pretrained, plan.random_init_models, objectives)
        atomic_write_text(out / "learning.csv", table.to_csv(index=False))
        learned = f"; {summary_line(table)} ({out / 'learning.csv'})"
    if cfg.pretrain_replicates > 1:  # docs/reproduce.md, "Pretraining replicates"
        learned += f"; claims ({out / 'claims' / 'claims.md'}): {claims_report(plan, records, out / 'claims')}"
    if cfg.study == "data-efficiency":  # docs/reproduce.md, "Toy data efficiency"
        from reproduce.arc import write_arc_report

        arc = write_arc_report(cells, out / "claims", cfg.scale == "toy", source, plan.random_init_models)
        learned += f"; arc ({out / 'claims' / 'arc.md'}): {arc}"
    atomic_write_text(out / MISSING_FILE, missing.to_csv(index=False))
    section = missing_section(missing, planned_per_cell) + at_chance_section(cells)
    reports = ("tables/tables.md", "audit/audit.md", "claims/claims.md", "claims/arc.md")
    for report in (out / name for name in reports):
        prepend(report, section)
    atomic_write_json(stamp, {"hash": stable_hash(inputs), **inputs})
    partial = (
        f"PARTIAL: {len(missing)} of {len(planned)} planned runs missing ({out / MISSING_FILE}, listed on top of "
        "every report; python -m reproduce resubmit OUT reruns them on Slurm); "
        if len(missing)
        else ""
    )
    return (
        f"analysis: {partial}{len(records)} records -> {len(cells)} cells; {', '.join(figures)}; tables "
        f"{', '.join(map(str, plan.tables)) or '(none: extra tables only)'}; audit: {audit_headline(summary)} "
        f"-> {out}{learned}"
    )


def chance_levels(plan: StudyPlan, records):
    """Per task of the runs: the chance level under their protocol, tokenizer and length
    (benchmarks.chance); None when the data come from the Hub (paper scale: not downloaded here)."""
    return _chance_table(plan, _protocols_by_task(plan.config, records), recorded_chance(records))


def recorded_chance(records) -> dict[tuple[str, str], dict]:
    """{(dataset, protocol): {"levels": [test chance level of each record], "max_length": [...]}}
    from the records that carry their level (benchmarks.run, issue 67: computed with the run's own
    tokenizer, effective length and split); a record from before that counts as lacking one (None)."""
    found: dict[tuple[str, str], dict] = {}
    for r in records:
        provenance = r.provenance or {}
        levels = (provenance.get("chance") or {}).get("levels") or {}
        for protocol in (r.protocol, *sorted(r.other_scores or {})):
            level = (levels.get(protocol) or {}).get("test")
            entry = found.setdefault((r.dataset, protocol), {"levels": [], "max_length": set()})
            entry["levels"].append(level)
            if provenance.get("max_length") is not None:
                entry["max_length"].add(int(provenance["max_length"]))
    return found


def _protocols_by_task(cfg: ReproduceConfig, records) -> dict[str, list[str]]:
    return {task: sorted({r.protocol for r in records if r.dataset == task}) for task in cfg.tasks}


def _chance_table(plan: StudyPlan, protocols: dict[str, list[str]], recorded: dict | None = None):
    import pandas as pd

    from benchmarks.chance import chance_score
    from benchmarks.kinds.common import load_tokenizer, protocol_max_length
    from benchmarks.run import RunConfig
    from benchmarks.tasks import get_task

    cfg = plan.config
    data_root = task_data_root(cfg)
    if data_root is None or not any(protocols.values()):
        return None
    # every model shares the tokenizer and length: the first that has an export (one whose pretraining
    # run left none is a missing model, not a failed analysis: issue 65)
    exported = [m for m in plan.finetuned_models if (plan.model_path(m) / "config.json").is_file()]
    if not exported:
        return None
    first_job = plan.finetune_jobs(exported[0])[0]
    run_config = config_from_dict(RunConfig, first_job["config"], "fine-tuning job")
    tokenizer = load_tokenizer(run_config.model)
    rows = []
    for task in cfg.tasks:
        spec = get_task(task)
        for protocol in protocols[task]:
            entry = (recorded or {}).get((task, protocol), {"levels": [None], "max_length": set()})
            if entry["levels"] and None not in entry["levels"]:  # each run's own level: their mean
                level = sum(entry["levels"]) / len(entry["levels"])  # (differs only by NQ's query split)
            else:  # records from before the levels were recorded: at the runs' effective length
                lengths = entry["max_length"] or {protocol_max_length(run_config.max_length, protocol)}
                level = chance_score(task, data_root, protocol, tokenizer, min(lengths))
            rows.append(
                {
                    "task_type": spec.task_type,
                    "dataset": task,
                    "protocol": protocol,
                    "metric": spec.metric_under(protocol),
                    "chance": level,
                }
            )
    return pd.DataFrame(rows)


STAGES = (
    ("data", stage_data),
    ("pretraining", stage_pretraining),
    ("fine-tuning", stage_finetune),
    ("analysis", stage_analysis),
)


def _resources(out: Path) -> dict:
    """Peak resident memory of this process and of its largest finished worker (getrusage), and the
    size of the output folder: the numbers docs/timings.md quotes."""
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
    workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    size = folder_size(out)
    return {"peak_rss_mb": round(own, 1), "peak_worker_rss_mb": round(workers, 1), "output_mb": round(size / 1e6, 1)}


def reproduce(cfg: ReproduceConfig, log=print, stages=STAGE_NAMES) -> dict:
    """Run (or resume) the stages here; returns {stage: seconds}. Writes `<out>/reproduce.yaml` and
    the study plan beside it (`<out>/plan.json`), the one input of every stage."""
    if cfg.scale != "toy" and set(stages) != {"analysis"}:
        raise ReproduceError(
            f"scale {cfg.scale} pretrains on a cluster: use --slurm (or --dry-run) with "
            "--cluster FILE; only --stage analysis runs here"
        )
    cfg = with_absolute_folders(cfg)  # recorded absolute, as on Slurm (issue 88: a relative --runs-dir)
    plan = build_plan(cfg)  # a selection outside the study fails here, before anything is written
    out = out_dir(cfg)
    timings = {}
    with output_lock(out), _worker_pool(cfg):  # a second reproduce on this folder refuses before writing
        CURRENT_STAGE["stage"] = next(name for name, _ in STAGES if name in stages)  # its imports come first
        import_stage_modules(stages)
        _check_reuse(plan, stages)
        write_study_config(plan)
        if "data" in stages and "pretraining" in stages:
            from pretraining.data.format import MANIFEST

            if not (data_dir(cfg) / MANIFEST).exists():  # a new folder: workers import while the data stage runs
                CURRENT_STAGE["stage"] = "data"  # the pool starts as part of it (an interrupt here names it)
                _start_shared_pool(cfg)
        for name, stage in STAGES:
            if name not in stages:
                continue
            t0 = time.perf_counter()
            CURRENT_STAGE["stage"] = name
            log(stage(plan))
            timings[name] = round(time.perf_counter() - t0, 2)
        resources = _resources(out)
        log(
            f"reproduce: done in {sum(timings.values()):.1f} s "
            f"({', '.join(f'{k} {v:.1f} s' for k, v in timings.items())}); "
            f"peak memory {resources['peak_rss_mb']:.0f} MB "
            f"(largest worker {resources['peak_worker_rss_mb']:.0f} MB); {resources['output_mb']:.0f} MB in {out}; "
            f"figures and tables: {out / 'figure'}, {out / 'tables'}"
        )
        if set(stages) == set(STAGE_NAMES):
            atomic_write_json(out / "timings.json", {"finished": utc_now(), "seconds": timings, **resources})
    return timings
