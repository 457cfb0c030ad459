"""The study plan's builder: a ReproduceConfig -> StudyPlan, once. The one place in reproduce/ that
reads release-style names (contracts.model_names, through one NameBook per plan) and the pretraining
registry; every stage, the Slurm writer, status and resubmit take the plan it returns."""

from __future__ import annotations

import functools
from dataclasses import replace
from pathlib import Path

from contracts.layout import branch_state
from contracts.model_names import replicate_name, split_replicate
from contracts.paper import MASKING_RATIOS
from reproduce.plan.config import (
    TOY_DATA_EFFICIENCY_CHECKPOINTS,
    TOY_RESUME_EVERY,
    ReproduceConfig,
    ReproduceError,
    _toy_warmup,
    data_dir,
    finetune_dir,
    pretrain_length,
    pretraining_dir,
    study_sizes,
    task_data_root,
    tokenizer_path,
    write_if_changed,
)
from reproduce.plan.studies import STUDIES, NameBook, StudyError, checkpoints, runs_to_train, scale_steps, scaled_name
from reproduce.plan.study_plan import (
    PLAN_FILE,
    FinetuneJob,
    PretrainingRun,
    RandomInit,
    StudyPlan,
    job_model_and_dir,
    load_study_config,
    plan_changes,
    plan_to_json,
    read_plan,
    read_plan_or_stale,
)

RANDOM_INIT_SUFFIX = "-random-init"
REPLICATE_SEED_STEP = 1000  # run k's init and data-order seeds: the registry's + 1000 (k - 1)


@functools.lru_cache(maxsize=8)  # a config is frozen: the executors and the CLI ask for the same plan
def build_plan(cfg: ReproduceConfig) -> StudyPlan:
    """The plan of `cfg`; a ReproduceError (one line) when its options select nothing or something
    outside its study. Slow on a paper-scale study (it imports the registry, hence torch, and plans
    5,400 fine-tuning jobs): read OUT/plan.json where the study has been written."""
    book = NameBook()
    try:
        chosen = _study_checkpoints(cfg, book)
    except StudyError as exc:
        raise ReproduceError(str(exc)) from None
    if not chosen:
        raise ReproduceError("the options select no checkpoint of the study")
    runs = _pretraining_runs(cfg, chosen, book)
    random_init = _random_init(cfg, chosen, runs)
    draft = StudyPlan(cfg, chosen, runs, random_init, (), (), STUDIES[cfg.study].tables)
    figures = tuple(n for n in STUDIES[cfg.study].figures if n != 12 or draft.cpt_run_dirs)
    return replace(draft, jobs=_finetune_jobs(draft), figures=figures)


def _study_checkpoints(cfg: ReproduceConfig, book: NameBook) -> tuple:
    """The study's checkpoints (reproduce.plan.studies.Checkpoint) that this reproduction fine-tunes."""
    chosen = checkpoints(
        STUDIES[cfg.study], cfg.scale, pretrain_length(cfg), cfg.checkpoints, study_sizes(cfg), book=book
    )
    keep = list(chosen)
    if cfg.study == "data-efficiency" and cfg.scale == "toy" and cfg.checkpoints is None:
        keep = [c for c in chosen if c.paper_description.checkpoint_step in TOY_DATA_EFFICIENCY_CHECKPOINTS]
    if cfg.study == "masking":
        keep = []
        for ckpt in chosen:  # sizes are the scale's (toy_s or 210m), as the names are
            desc = ckpt.description
            wanted_ratio = cfg.clm if desc.objective == "clm" else desc.masking_ratio in (cfg.ratios or MASKING_RATIOS)
            if (cfg.sizes is None or desc.size in cfg.sizes) and wanted_ratio:
                keep.append(ckpt)
    return tuple(keep) + tuple(
        replace(
            c,
            name=replicate_name(c.name, k),
            paper_name=replicate_name(c.paper_name, k),
            run_name=replicate_name(c.run_name, k),
        )
        for k in range(2, cfg.pretrain_replicates + 1)
        for c in keep
    )


def _pretraining_runs(cfg: ReproduceConfig, chosen: tuple, book: NameBook) -> tuple[PretrainingRun, ...]:
    """Every pretraining run, CPT bases before their CPT runs; then the same runs again per
    replicate (`-rep<k>`)."""
    from pretraining import registry

    length = pretrain_length(cfg)
    ours = lambda paper: scaled_name(paper, cfg.scale, length, book)  # noqa: E731
    firsts = runs_to_train([c for c in chosen if split_replicate(c.name)[1] == 1], cfg.cpt_recipe, cfg.scale)
    names = {run: ours(run) for run in firsts}
    runs = []
    for k in range(1, cfg.pretrain_replicates + 1):
        for paper in firsts:
            run = registry.RUNS[paper]
            source = registry.cpt_branch_of(run, cfg.scale, cfg.cpt_recipe) or (
                registry.RUNS[run.cpt_base] if run.cpt_base is not None else None
            )
            name = replicate_name(names[paper], k)
            starts_from = None if source is None else replicate_name(names.get(source.name) or ours(source.name), k)
            body = _run_config(cfg, chosen, run, name, starts_from)
            branch = _is_cpt_branch(body)
            steps = body["train"]["max_steps"]
            trained = steps - registry.cpt_branch_step(run, cfg.scale, cfg.cpt_recipe) if branch else steps
            wave = 2 if branch else int(run.cpt_base is not None)
            runs.append(PretrainingRun(name, paper, body["model"]["preset"], wave, starts_from, trained, body))
    return tuple(runs)


def _is_cpt_branch(body: dict) -> bool:
    """A run config that continues another run's kept full state (a CPT decay branch): it trains
    after that run (reproduce.local's third wave; a Slurm dependency on that run's job)."""
    return body["init"].get("kind") == "full_state" and body["init"].get("path") is not None


def _run_config(cfg: ReproduceConfig, chosen: tuple, run, name: str, source: str | None) -> dict:
    """The registry's config of `run` at this scale as the run `name` (e.g. `toy_m-mlm40-42`), renamed
    so that every run record carries its pretraining description (and shortened by --pretrain-steps)."""
    from pretraining import registry
    from pretraining.config import TrainConfig
    from pretraining.data.config import DataConfig

    body = registry.config_dict(
        run,
        cfg.scale,
        runs_root=str(pretraining_dir(cfg)),
        data_path=str(data_dir(cfg)),
        tokenizer=tokenizer_path(cfg),
        cpt_recipe=cfg.cpt_recipe,
        cpt_optimizer=cfg.cpt_optimizer,
    )
    body["name"] = name  # toy: `toy_s-mlm40-150` rather than the registry's `210m-mlm40-42k-toy`
    if cfg.loggers:
        body["loggers"] = dict(cfg.loggers)
    body["run_dir"] = str(pretraining_dir(cfg) / name)
    replicate = split_replicate(name)[1]
    if replicate > 1:  # another pretraining run of the configuration: other init and data order
        body["train"]["seed"] = body["train"].get("seed", TrainConfig.seed) + REPLICATE_SEED_STEP * (replicate - 1)
        body["data"]["shuffle_seed"] = body["data"].get(
            "shuffle_seed", DataConfig.shuffle_seed
        ) + REPLICATE_SEED_STEP * (replicate - 1)
    length = pretrain_length(cfg)
    if _is_cpt_branch(body):  # the main CPT run's kept state (`source`: of the same replicate, at this scale)
        body["init"]["path"] = str(
            branch_state(pretraining_dir(cfg) / source, registry.cpt_branch_step(run, cfg.scale, cfg.cpt_recipe))
        )
    elif source is not None:  # the decayed base's final export (or its last full state: continued optimizer)
        steps = scale_steps(registry.RUNS[run.cpt_base].max_steps, cfg.scale, length)
        body["init"] = registry.cpt_init(pretraining_dir(cfg) / source, steps, cfg.cpt_optimizer)
        body["data"]["start_sample"] = steps * body["train"]["global_batch_size"]  # after the base's data
    if length:  # the masking study's 42k runs, another length: the WSD phases keep their share
        body["train"]["max_steps"] = length
        body["train"]["checkpoint_steps"] = [s for s in body["train"]["checkpoint_steps"] if s < length]
        body["schedule"]["warmup"] = body["schedule"]["decay"] = _toy_warmup(length)
        if cfg.scale == "toy":  # each save writes weights and optimizer state (seconds over 15 runs)
            body["train"]["resume_interval"] = max(TOY_RESUME_EVERY, length // 10)
    exports = {c.step for c in chosen if c.run_name == name} - {body["train"]["max_steps"]}
    if cfg.scale == "toy":  # only the steps this study fine-tunes: each export is a full fp32 copy (disk)
        body["train"]["checkpoint_steps"] = sorted(exports)
        body["train"]["progress_bar"] = False  # one bar over the runs instead
    else:  # the registry's steps too: a paper run's exports are kept for every study that reads them
        body["train"]["checkpoint_steps"] = sorted(set(body["train"]["checkpoint_steps"]) | exports)
    return body


def _random_init(cfg: ReproduceConfig, chosen: tuple, runs: tuple) -> tuple[RandomInit, ...]:
    """`<size>-random-init` for every size of the study's models, when this reproduction fine-tunes
    untrained models too (`random_init`; names outside the release grammar: their records carry no
    pretraining description), with the seed of the study's runs of that size."""
    default = cfg.scale == "toy" and cfg.study in ("masking", "data-efficiency")  # the toy figures' reference
    if not (cfg.random_init if cfg.random_init is not None else default):
        return ()
    refs = []
    for size in dict.fromkeys(c.size for c in chosen):
        run = next((r for r in runs if r.size == size), None)
        if run is None:
            raise ReproduceError(
                f"no pretraining run of size {size} in this reproduction: {', '.join(r.name for r in runs)}"
            )
        refs.append(RandomInit(f"{size}{RANDOM_INIT_SUFFIX}", size, int(run.config["train"]["seed"])))
    return tuple(refs)


def _finetune_jobs(plan: StudyPlan) -> tuple[FinetuneJob, ...]:
    """benchmarks.matrix jobs for every model x task x LR x seed; the models need not exist yet
    (the stages check them before fine-tuning)."""
    from benchmarks import matrix
    from benchmarks.run import load_run_config

    cfg = plan.config
    values = {
        "model": "-",
        "task": "-",
        "lr": 1.0,
        "seed": 0,
        "out": str(finetune_dir(cfg)),
        "data_root": task_data_root(cfg),
        "max_steps": cfg.finetune_steps,
        **({"loggers": dict(cfg.loggers)} if cfg.loggers else {}),
    }
    base = load_run_config(values, cfg.finetune_config)
    jobs = []
    for model in plan.finetuned_models:
        for job in matrix.expand(
            replace(base, model_name=model),
            [str(plan.model_path(model))],
            list(cfg.tasks),
            list(cfg.lrs),
            list(cfg.seeds),
            check_models=False,
        ):
            name, run_dir = job_model_and_dir(job["config"])
            jobs.append(FinetuneJob(job["id"], name, Path(run_dir), job.get("group"), job.get("index"), job))
    return tuple(jobs)


def acting_plan(out: Path, notes: list[str] | None = None) -> StudyPlan:
    """The plan of the study in `out` for a command that changes it (resubmit, --force, --clean):
    always planned from OUT/reproduce.yaml, never taken from plan.json (issue 88: a forged plan.json with
    `runs: []` made resubmit queue arrays with no pretraining); `notes` gets a line when plan.json is
    not that plan (it is then not used by anything)."""
    plan = build_plan(load_study_config(out))
    written = read_plan(out, notes)
    if written is not None and plan_to_json(written, "") != plan_to_json(plan, ""):
        if notes is not None:
            notes.append(f"{out / PLAN_FILE} is not the plan of {out / 'reproduce.yaml'}: acting on the latter")
    return plan


def study_plan_at(out: Path, notes: list[str] | None = None) -> StudyPlan:
    """The plan of the study in `out`: plan.json, or, when that cannot be used, planned again from
    OUT/reproduce.yaml (slow on a paper-scale study: it imports the registry, hence torch). A plan.json
    that was absent or damaged is written again (issue 89), best effort (a teammate with read access
    only reads); one written for an earlier reproduce.yaml whose plan differs is kept, and `notes`
    says what changed (its Slurm scripts are that plan's until the study is written again)."""
    plan, stale = read_plan_or_stale(out, notes)
    if plan is not None:
        return plan
    plan = build_plan(load_study_config(out))
    changes = plan_changes(stale, plan) if stale is not None else None
    if changes:
        if notes is not None:
            notes.append(f"{out / 'reproduce.yaml'} changed since the study was written ({changes}): planned again")
        return plan
    try:
        write_if_changed(out / PLAN_FILE, plan_to_json(plan, (out / "reproduce.yaml").read_text()))
    except (OSError, ReproduceError):
        pass  # read-only here: the plan is used all the same
    return plan
