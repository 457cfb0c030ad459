"""The study plan (issue 79): every fact of a reproduction that its options decide (the checkpoints
with their parsed names, the pretraining runs with their configs, folders and sources, the untrained
references, the fine-tuning jobs, the figures and tables), built once by reproduce.plan.builder and
written as OUT/plan.json beside reproduce.yaml. The local executor and the Slurm writer take the plan
they build; `status` and `resubmit`, and a study moved or copied since, read plan.json instead of
planning again (seconds on a paper study, not 15, and no torch import).

plan.json is decoded only as the columns written here; folders under OUT are kept as `$OUT/...` so
a moved study reads its own folders; a plan whose reproduce.yaml changed since, or that names a
folder the study does not, is planned again from the typed config, with a line saying so."""

from __future__ import annotations

import copy
import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from contracts.bounded import LARGE, BoundedReadError, read_text, short_repr
from contracts.description import PretrainingDescription
from contracts.layout import RECORD_FILE, export_dir, finetune_run_dir
from reproduce.plan.config import (
    CONFIG_FILE,
    ReproduceConfig,
    ReproduceError,
    finetune_dir,
    out_dir,
    pretraining_dir,
    study_config_at,
    write_if_changed,
    write_reproduce_config,
)
from reproduce.plan.inventory import PLAN_FILE, check_no_links, inventory_json, record_planned_runs
from reproduce.plan.studies import Checkpoint

PLAN_VERSION = 2  # 2: the study's inventory and the plan's own digest (issue 88)
OUT_MARK = "$OUT"  # a folder under the study folder, in plan.json


@dataclass(frozen=True)
class PretrainingRun:
    """One pretraining run: its folder name at this scale, the registry run it is, its full config
    (`body()`: a copy to change), what it starts from (a run of this plan, or None: from scratch), its
    wave (0 from scratch, 1 from a base's export, 2 a CPT decay branch of a main CPT run's kept state)
    and the steps it trains itself (a decay branch: only those past the step it continues from)."""

    name: str
    registry_run: str
    size: str  # the model preset: toy_s .. toy_l, 210m, 610m, 1b
    wave: int
    starts_from: str | None
    trained_steps: int
    config: dict = field(hash=False, repr=False)

    @property
    def run_dir(self) -> Path:
        return Path(self.config["run_dir"])

    @property
    def max_steps(self) -> int:
        return int(self.config["train"]["max_steps"])

    @property
    def final_export(self) -> Path:
        """The Hugging Face export at its last step (what a CPT run from it starts from)."""
        return export_dir(self.run_dir, self.max_steps)

    def body(self) -> dict:
        return copy.deepcopy(self.config)


@dataclass(frozen=True)
class RandomInit:
    """An untrained model fine-tuned as the reference pretraining must beat: `<size>-random-init`,
    with the seed of the study's runs of that size (exactly the weights they start from)."""

    name: str
    size: str
    seed: int


@dataclass(frozen=True)
class FinetuneJob:
    """One fine-tuning run: the benchmarks.matrix job (`as_dict()`: a copy), its model's name and
    the run folder its record goes to."""

    id: str
    model: str
    run_dir: Path
    group: str | None
    index: int | None
    job: dict = field(hash=False, repr=False)

    def as_dict(self) -> dict:
        return copy.deepcopy(self.job)


@dataclass(frozen=True)
class StudyPlan:
    """What one ReproduceConfig selects, computed once (reproduce.plan.builder.build_plan)."""

    config: ReproduceConfig
    checkpoints: tuple[Checkpoint, ...]
    runs: tuple[PretrainingRun, ...]
    random_init: tuple[RandomInit, ...]
    jobs: tuple[FinetuneJob, ...]
    figures: tuple[int, ...]  # drawn by the analysis stage (Figure 12 only with CPT runs to draw)
    tables: tuple[int, ...]

    @property
    def study(self) -> str:
        return self.config.study

    @property
    def scale(self) -> str:
        return self.config.scale

    @property
    def model_names(self) -> list[str]:
        """The pretrained models: `toy_s-mlm20-250`, `toy_m-clm-42-5`, ..."""
        return [c.name for c in self.checkpoints]

    @property
    def random_init_models(self) -> dict[str, str]:
        """`toy_s-random-init` -> toy_s, for each untrained reference model."""
        return {r.name: r.size for r in self.random_init}

    @property
    def finetuned_models(self) -> list[str]:
        """Every model the fine-tuning stage runs: the pretrained ones, then the untrained references."""
        return self.model_names + [r.name for r in self.random_init]

    @property
    def sizes(self) -> dict[str, str]:
        """Model name -> size of every fine-tuned model."""
        return {**{c.name: c.size for c in self.checkpoints}, **self.random_init_models}

    @property
    def stand_ins(self) -> dict[str, str]:
        """Our model name -> the paper checkpoint it stands in for (toy scale; empty at paper scale)."""
        return {c.name: c.paper_name for c in self.checkpoints if c.name != c.paper_name}

    @property
    def made_by(self) -> dict[str, str]:
        """Pretrained model -> the pretraining run whose export it is."""
        return {c.name: c.run_name for c in self.checkpoints}

    @property
    def run_names(self) -> list[str]:
        return [r.name for r in self.runs]

    @property
    def registry_runs(self) -> dict[str, str]:
        """Run folder name -> the registry run it is (e.g. toy_m-mlm40-250 -> 610m-mlm40-42k)."""
        return {r.name: r.registry_run for r in self.runs}

    @property
    def cpt_run_dirs(self) -> list[Path]:
        """The CPT pretraining runs (their loss.jsonl is Figure 12)."""
        return [r.run_dir for r in self.runs if r.wave > 0]

    @property
    def record_files(self) -> list[Path]:
        """Where each planned fine-tuning run's record goes."""
        return [job.run_dir / RECORD_FILE for job in self.jobs]

    def run(self, name: str) -> PretrainingRun:
        for run in self.runs:
            if run.name == name:
                return run
        raise ReproduceError(f"{name} is not a pretraining run of this reproduction: {', '.join(self.run_names)}")

    def checkpoint(self, name: str) -> Checkpoint:
        for ckpt in self.checkpoints:
            if ckpt.name == name:
                return ckpt
        raise ReproduceError(f"{name} is not a model of this reproduction: {', '.join(self.finetuned_models)}")

    def model_path(self, name: str) -> Path:
        """The Hugging Face folder fine-tuned as `name`: a run's export, or an untrained model's."""
        if name in self.random_init_models:
            return pretraining_dir(self.config) / name
        ckpt = self.checkpoint(name)
        return export_dir(pretraining_dir(self.config) / ckpt.run_name, ckpt.step)

    def random_init_seed(self, size: str) -> int:
        for ref in self.random_init:
            if ref.size == size:
                return ref.seed
        raise ReproduceError(f"no untrained model of size {size} in this reproduction")

    def jobs_of(self, model: str | None = None) -> list[FinetuneJob]:
        return [j for j in self.jobs if model is None or j.model == model]

    def finetune_jobs(self, model: str | None = None) -> list[dict]:
        """benchmarks.matrix job dicts (copies) of every model, or of `model`."""
        return [j.as_dict() for j in self.jobs_of(model)]


def job_model_and_dir(config: dict) -> tuple[str, Path]:
    """The model name and run folder of a fine-tuning job's config, as benchmarks.run.RunConfig
    derives them, without building the typed config (5,400 of them on a paper-scale study)."""
    from benchmarks.run import run_model_name

    name = run_model_name(config["model"], config.get("model_name"))
    return name, finetune_run_dir(config["out"], name, config["task"], float(config["lr"]), int(config["seed"]))


# --- plan.json -------------------------------------------------------------------------------------
def _quoted(folder: str) -> str:
    """`folder` as it opens a JSON string: `"/path/to/out`."""
    return json.dumps(folder)[:-1]


def _marked(text: str, out: str) -> str:
    """JSON text with every string that is `out` or a folder under it written as `$OUT...` (a string
    that only begins like `out`, `/x/out2`, is left alone)."""
    opening = _quoted(out)
    return text.replace(opening + "/", '"' + OUT_MARK + "/").replace(opening + '"', '"' + OUT_MARK + '"')


def _unmarked(text: str, out: str) -> str:
    opening = _quoted(out)
    return text.replace('"' + OUT_MARK + "/", opening + "/").replace('"' + OUT_MARK + '"', opening + '"')


def plan_to_json(plan: StudyPlan, config_text: str) -> str:
    """plan.json: the plan of the study whose reproduce.yaml is `config_text` (its sha256 kept, so
    a changed reproduce.yaml is planned again rather than read from a stale plan), the study's
    inventory (reproduce.plan.inventory) and the sha256 of the rest of its own text (`plan_sha256`:
    an edited or truncated plan.json is planned again, never obeyed)."""
    body = {
        "version": PLAN_VERSION,
        "reproduce_yaml_sha256": hashlib.sha256(config_text.encode()).hexdigest(),
        "study": plan.study,
        "scale": plan.scale,
        "checkpoints": [
            {
                "name": c.name,
                "paper_name": c.paper_name,
                "run": c.run,
                "run_name": c.run_name,
                "step": c.step,
                "description": c.description.to_dict(),
                "paper_description": c.paper_description.to_dict(),
            }
            for c in plan.checkpoints
        ],
        "runs": [
            {
                "name": r.name,
                "registry_run": r.registry_run,
                "size": r.size,
                "wave": r.wave,
                "starts_from": r.starts_from,
                "trained_steps": r.trained_steps,
                "config": r.config,
            }
            for r in plan.runs
        ],
        "random_init": [{"name": r.name, "size": r.size, "seed": r.seed} for r in plan.random_init],
        "jobs": [j.job for j in plan.jobs],
        "figures": list(plan.figures),
        "tables": list(plan.tables),
        "inventory": inventory_json(plan),
    }
    return sign_plan_text(_marked(json.dumps(body, separators=(",", ":")), str(out_dir(plan.config))))


def sign_plan_text(text: str) -> str:
    """plan.json's text: `text` (a JSON object, its folders under OUT marked `$OUT`, so a moved study's
    plan keeps its digest) with `plan_sha256`, the sha256 of `text`, as its last key."""
    return text[:-1] + f',"plan_sha256":"{hashlib.sha256(text.encode()).hexdigest()}"}}\n'


def _digest_problem(text: str) -> str | None:
    """Why plan.json's text is not the one its `plan_sha256` was computed for (None: it is)."""
    body = json.loads(text)
    digest = body.pop("plan_sha256", None) if isinstance(body, dict) else None
    if not isinstance(digest, str):
        return "no digest of its own (written by an older version, or cut short)"
    if hashlib.sha256(json.dumps(body, separators=(",", ":")).encode()).hexdigest() != digest:
        return "its content does not match its digest (edited or damaged since it was written)"
    return None


def _description(data) -> PretrainingDescription:
    if not isinstance(data, dict):
        raise TypeError("a description is a mapping")
    return PretrainingDescription(
        size=_str(data["size"]),
        objective=_str(data["objective"]),
        masking_ratio=None if data["masking_ratio"] is None else float(data["masking_ratio"]),
        clm_steps=int(data["clm_steps"]),
        mlm_steps=int(data["mlm_steps"]),
        cpt_steps=int(data["cpt_steps"]),
        cpt_base_objective=_optional(data["cpt_base_objective"], _str),
        schedule_steps=int(data["schedule_steps"]),
        checkpoint_step=int(data["checkpoint_step"]),
        decayed=bool(data["decayed"]),
    )


def _mapping(value, what: str) -> dict:
    if not isinstance(value, dict):
        raise TypeError(f"{what} is not a mapping")
    return value


def _str(value) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{type(value).__name__} where plan.json has text")
    return value


def _int(value) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{type(value).__name__} where plan.json has a whole number")
    return value


def _finite(value) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        raise TypeError(f"{value!r} where plan.json has a finite number")
    return value


def _run_config(value) -> dict:
    """A pretraining run's config: a mapping with its folder and length (what status and the stages read)."""
    config = _mapping(value, "a run config")
    _str(config["run_dir"]), _int(_mapping(config["train"], "a run's train section")["max_steps"])
    return config


def _optional(value, kind):
    return None if value is None else kind(value)


def plan_from_json(text: str, cfg: ReproduceConfig) -> tuple[StudyPlan, str]:
    """(the plan, the sha256 of the reproduce.yaml it was written for) from plan.json's text, its
    folders under the study folder of `cfg` (where the study is now). Only the columns written by
    `plan_to_json`; a missing or mistyped one raises KeyError, TypeError or ValueError."""
    problem = _digest_problem(text)
    if problem:
        raise ValueError(problem)
    body = _mapping(json.loads(_unmarked(text, str(out_dir(cfg)))), "plan.json")
    if body["version"] != PLAN_VERSION:
        raise ValueError(f"plan version {body['version']!r}")
    if (body["study"], body["scale"]) != (cfg.study, cfg.scale):
        raise ValueError("another study's plan")
    checkpoints = tuple(
        Checkpoint(
            _str(c["name"]),
            _str(c["paper_name"]),
            _str(c["run"]),
            _str(c["run_name"]),
            _int(c["step"]),
            _description(c["description"]),
            _description(c["paper_description"]),
        )
        for c in map(lambda c: _mapping(c, "a checkpoint"), body["checkpoints"])
    )
    runs = tuple(
        PretrainingRun(
            _str(r["name"]),
            _str(r["registry_run"]),
            _str(r["size"]),
            _int(r["wave"]),
            _optional(r["starts_from"], _str),
            _int(r["trained_steps"]),
            _run_config(r["config"]),
        )
        for r in map(lambda r: _mapping(r, "a run"), body["runs"])
    )
    random_init = tuple(
        RandomInit(_str(r["name"]), _str(r["size"]), _int(r["seed"]))
        for r in map(lambda r: _mapping(r, "an untrained model"), body["random_init"])
    )
    jobs = []
    for job in body["jobs"]:
        config = _mapping(_mapping(job, "a job")["config"], "a job config")
        _int(config["seed"]), _finite(config["lr"])  # int() of Infinity is an OverflowError (issue 88)
        model, run_dir = job_model_and_dir(config)
        group, index = _optional(job["group"], _str), _optional(job["index"], _int)
        jobs.append(FinetuneJob(_str(job["id"]), model, Path(run_dir), group, index, job))
    plan = StudyPlan(
        cfg,
        checkpoints,
        runs,
        random_init,
        tuple(jobs),
        tuple(_int(n) for n in body["figures"]),
        tuple(_int(n) for n in body["tables"]),
    )
    if body["inventory"] != inventory_json(plan):
        raise ValueError("its inventory is not the one its own plan gives")
    return plan, _str(body["reproduce_yaml_sha256"])


def write_study_config(plan: StudyPlan) -> Path:
    """OUT/reproduce.yaml (reproduce.plan.config.write_reproduce_config) and OUT/plan.json beside it."""
    check_no_links(plan)  # before anything is written (issue 88)
    path = write_reproduce_config(plan.config)
    write_if_changed(out_dir(plan.config) / PLAN_FILE, plan_to_json(plan, path.read_text()))
    record_planned_runs(plan)
    return path


def _folders_problem(plan: StudyPlan) -> str | None:
    """The first folder of a read plan that is not where its study's reproduce.yaml puts it: a
    pretraining run's folder is <runs root>/<name>, a fine-tuning run's lies under OUT/finetune
    (issue 66: a plan naming another study's absolute folders showed their losses)."""
    from contracts.paths import name_problem, show_name

    runs, finetune = pretraining_dir(plan.config), finetune_dir(plan.config).absolute()
    named = [("model", m) for m in plan.finetuned_models] + [("checkpoint run", c.run_name) for c in plan.checkpoints]
    for kind, name in named:
        # a model names its job list (finetune/jobs/<name>.jsonl) and its folder: one part (issue 88)
        problem = name_problem(name) or ("a '/' in the name" if "/" in name else None)
        if problem:
            return f"{kind} name {show_name(name)} ({problem})"
    for run in plan.runs:
        # a run name is one part (issue 78: an absolute name made runs / name the name itself)
        problem = name_problem(run.name) or ("a '/' in a run name" if "/" in run.name else None)
        if problem:
            return f"pretraining run name {show_name(run.name)} ({problem})"
        if ".." in run.run_dir.parts or run.run_dir.absolute() != runs / run.name:
            return f"pretraining run {run.name} at {run.run_dir}, not {runs / run.name}"
    resolved: dict[Path, Path] = {}  # each task folder resolved once (5,400 runs on a paper study)
    try:
        root = finetune.resolve()
    except (OSError, RuntimeError):
        return f"fine-tuning folder {finetune} cannot be resolved"
    for job in plan.jobs:
        problem = name_problem(job.id)
        if problem:
            return f"fine-tuning run id {show_name(job.id)} ({problem})"
        try:
            if ".." in job.run_dir.parts:
                inside = False
            elif job.run_dir.is_symlink():
                inside = job.run_dir.resolve().is_relative_to(root)
            else:
                parent = job.run_dir.parent
                if parent not in resolved:
                    resolved[parent] = parent.resolve()
                inside = resolved[parent].is_relative_to(root)
        except (OSError, RuntimeError):
            inside = False
        if not inside:
            return f"fine-tuning run {job.id} at {job.run_dir}, outside {finetune}"
    return None


def read_plan(out: Path, notes: list[str] | None = None) -> StudyPlan | None:
    """OUT/plan.json when it was written for OUT/reproduce.yaml as it is; None when absent, stale
    (reproduce.yaml changed since), or not to be obeyed: unreadable, edited since it was written (its
    digest), its inventory not its plan's, or naming folders the study does not (`notes` gets a line
    for each of those: the plan is made again from reproduce.yaml)."""
    return read_plan_or_stale(out, notes)[0]


def read_plan_or_stale(out: Path, notes: list[str] | None = None) -> tuple[StudyPlan | None, StudyPlan | None]:
    """(read_plan's answer, the plan.json written for an earlier reproduce.yaml when that is why it is
    None: what the study was when its files were written)."""
    problem = None
    try:
        text = read_text(out / CONFIG_FILE, LARGE)
        plan, written_for = plan_from_json(read_text(out / PLAN_FILE, LARGE), load_study_config(out))
        if written_for != hashlib.sha256(text.encode()).hexdigest():
            return None, plan
        problem = _folders_problem(plan)
        if problem:
            problem = f"names a folder the study does not ({problem})"
    except FileNotFoundError:
        return None, None
    except ReproduceError:
        return None, None  # no reproduce.yaml: the caller's own one-line error says so
    except (OSError, ValueError, KeyError, TypeError, RecursionError, OverflowError, BoundedReadError) as exc:
        problem = f"cannot be used ({type(exc).__name__}: {short_repr(str(exc), 120)})"
    if problem:
        if notes is not None:
            notes.append(f"{out / PLAN_FILE} {problem}: planned again from {CONFIG_FILE}")
        return None, None
    return plan, None


def plan_changes(old: StudyPlan, new: StudyPlan) -> str | None:
    """What changed between the plan a study's files were written for and its plan now ("2 pretraining
    runs added, 6 fine-tuning runs added, 1 removed"), None when nothing did (an edited comment)."""
    parts = []
    for what, before, after in (
        ("pretraining runs", {r.name for r in old.runs}, {r.name for r in new.runs}),
        ("fine-tuning runs", {str(j.run_dir) for j in old.jobs}, {str(j.run_dir) for j in new.jobs}),
    ):
        added, removed = len(after - before), len(before - after)
        if added or removed:
            parts.append(f"{what}: {added} added, {removed} removed")
    return "; ".join(parts) or None


def study_folder(given: str | Path) -> Path:
    """The folder of the study at `given` under the name it was written with: the `out` its
    reproduce.yaml records when that is the same folder reached another way (a link, `..`), so that its
    plan names the folders its scripts and job lists do (issue 89: a symlinked path read as a moved
    study); `given`, made absolute, otherwise (a moved study, one that records no absolute `out`)."""
    import os

    from contracts.config import ConfigError, load_config

    given = Path(os.path.abspath(given))
    try:
        recorded = load_config(ReproduceConfig, given / CONFIG_FILE).out
    except (ConfigError, OSError):
        return given  # the caller's own one-line error names an unreadable config
    same = Path(recorded).is_absolute() and os.path.realpath(recorded) == os.path.realpath(given)
    return Path(recorded) if same else given


def load_study_config(out: Path) -> ReproduceConfig:
    """OUT/reproduce.yaml as a typed config whose `out` is OUT: everything is read relative to OUT,
    not to the `out` recorded there (relative to another folder, or the study moved or copied since)."""
    from contracts.config import ConfigError, load_config

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
