"""What a study plans, as `reproduce status` reads it (reproduce/status.py): OUT/status_index.json,
written beside reproduce.yaml when a study is planned (its pretraining runs and fine-tuning runs with
their folders, relative to OUT), or the same derived from reproduce.yaml when the index is absent,
stale or names folders the study does not; and the study's config read where the study is now."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from contracts.bounded import LARGE, read_text
from contracts.layout import finetune_run_dir
from reproduce.housekeeping import CONFIG_FILE, study_config_at
from reproduce.plan import ReproduceError

STATUS_INDEX = "status_index.json"


@dataclass(frozen=True)
class StudyPlan:
    """What `status` reads a study's folders for: the pretraining runs (name, folder, steps) and the
    fine-tuning runs (id, model, folder, array group and index). Folders under OUT are kept relative
    to it, so a moved or copied study is read where it is now."""

    study: str
    scale: str
    pretraining: tuple  # (name, run dir, max steps)
    finetune: tuple  # (id, model name, run dir, group, index)


def _relative(path: Path, out: Path) -> str:
    try:
        return str(Path(path).absolute().relative_to(out.absolute()))
    except ValueError:
        return str(Path(path).absolute())


def plan_of(cfg) -> StudyPlan:
    """The study's runs, from its typed config (slow on a paper-scale study: it imports the
    pretraining registry, hence torch and transformers, and plans 5,400 jobs)."""
    from reproduce.plan import finetune_jobs, pretraining_config, pretraining_dir, pretraining_runs

    pretraining = tuple(
        (name, pretraining_dir(cfg) / name, int(pretraining_config(cfg, name)["train"]["max_steps"]))
        for name in pretraining_runs(cfg)
    )
    finetune = []
    for job in finetune_jobs(cfg, check_models=False):
        view = _JobView(job["config"])
        finetune.append((job["id"], view.name, view.run_dir, job.get("group"), job.get("index")))
    return StudyPlan(cfg.study, cfg.scale, pretraining, tuple(finetune))


def write_status_index(cfg, config_text: str) -> Path:
    """OUT/status_index.json: the plan of the study whose reproduce.yaml is `config_text` (its sha256
    kept, so a changed reproduce.yaml makes status plan again instead of reading a stale index)."""
    from reproduce.plan import out_dir, write_if_changed

    out = out_dir(cfg)
    plan = plan_of(cfg)
    body = {
        "reproduce_yaml_sha256": hashlib.sha256(config_text.encode()).hexdigest(),
        "study": plan.study,
        "scale": plan.scale,
        "pretraining": [[n, _relative(d, out), steps] for n, d, steps in plan.pretraining],
        "finetune": [[i, m, _relative(d, out), g, x] for i, m, d, g, x in plan.finetune],
    }
    path = out / STATUS_INDEX
    write_if_changed(path, json.dumps(body, separators=(",", ":")) + "\n")
    return path


def write_study_config(cfg) -> Path:
    """`OUT/reproduce.yaml` (reproduce.plan.write_reproduce_config) and the status index beside it:
    what `reproduce status` reads instead of planning the study again (seconds, not 15)."""
    from reproduce.plan import write_reproduce_config

    path = write_reproduce_config(cfg)
    write_status_index(cfg, path.read_text())
    return path


def _index_folders_problem(out: Path, plan: StudyPlan) -> str | None:
    """The first folder of an index that is not where the study's reproduce.yaml puts it: a
    pretraining run's folder is <runs root>/<name>, a fine-tuning run's lies under OUT/finetune
    (issue 66: an index naming another study's absolute folders showed their losses)."""
    from contracts.paths import name_problem, show_name
    from reproduce.plan import finetune_dir, pretraining_dir

    cfg = load_study_config(out)
    runs, finetune = pretraining_dir(cfg), finetune_dir(cfg).absolute()
    for name, run_dir, _ in plan.pretraining:
        # a run name is one part (issue 78: an absolute name made runs / name the name itself)
        problem = name_problem(name) or ("a '/' in a run name" if "/" in name else None)
        if problem:
            return f"pretraining run name {show_name(name)} ({problem})"
        if Path(run_dir).absolute() != runs / name:
            return f"pretraining run {name} at {run_dir}, not {runs / name}"
    for run_id, _, run_dir, _, _ in plan.finetune:
        problem = name_problem(run_id)
        if problem:
            return f"fine-tuning run id {show_name(run_id)} ({problem})"
        try:
            inside = Path(run_dir).resolve().is_relative_to(finetune.resolve())
        except (OSError, RuntimeError):
            inside = False
        if not inside:
            return f"fine-tuning run {run_id} at {run_dir}, outside {finetune}"
    return None


def read_status_index(out: Path, notes: list[str] | None = None) -> StudyPlan | None:
    """The index of `out` when it matches its reproduce.yaml; None when absent, stale, unreadable or
    naming folders the study does not (status then plans from the typed config; `notes` gets a
    line saying so). Decoded only as the columns written above."""
    try:
        text = read_text(out / CONFIG_FILE, LARGE)
        body = json.loads(read_text(out / STATUS_INDEX, LARGE))
        if body["reproduce_yaml_sha256"] != hashlib.sha256(text.encode()).hexdigest():
            return None
        where = lambda d: out / d if not Path(d).is_absolute() else Path(d)  # noqa: E731
        pretraining = tuple((str(n), where(str(d)), int(steps)) for n, d, steps in body["pretraining"])
        finetune = tuple(
            (str(i), str(m), where(str(d)), None if g is None else str(g), None if x is None else int(x))
            for i, m, d, g, x in body["finetune"]
        )
        plan = StudyPlan(str(body["study"]), str(body["scale"]), pretraining, finetune)
        dotted = any(".." in Path(str(d)).parts for _, d, _ in body["pretraining"]) or any(
            ".." in Path(str(row[2])).parts for row in body["finetune"]
        )
        problem = "a folder with '..'" if dotted else _index_folders_problem(out, plan)
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return None
    if problem:
        if notes is not None:
            notes.append(f"status: {out / STATUS_INDEX} names a folder the study does not ({problem}): planned again")
        return None
    return plan


class _JobView:
    """The name and run folder of a planned fine-tuning job, as benchmarks.run.RunConfig derives
    them, without building 5,400 typed configs (most of `status`'s time on a paper-scale study)."""

    def __init__(self, config: dict):
        from benchmarks.run import run_model_name

        self.name = run_model_name(config["model"], config.get("model_name"))
        self.run_dir = finetune_run_dir(
            config["out"], self.name, config["task"], float(config["lr"]), int(config["seed"])
        )


def load_study_config(out: Path):
    """OUT/reproduce.yaml as a typed config whose `out` is OUT: everything is read relative to OUT,
    not to the `out` recorded there (relative to another folder, or the study moved or copied since)."""
    from contracts.config import ConfigError, load_config
    from reproduce.plan import ReproduceConfig

    config = out / CONFIG_FILE
    if not config.is_file():
        raise ReproduceError(
            f"{config}: no reproduce.yaml, so {out} is not a study folder (python -m reproduce writes "
            "it first); give the study's --out folder, e.g. outputs/masking"
        )
    try:
        cfg = load_config(ReproduceConfig, config)
    except ConfigError as exc:
        raise ReproduceError(str(exc)) from None
    return study_config_at(out, cfg)
