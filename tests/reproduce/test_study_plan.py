"""The study plan (issue 79, reproduce/plan/): built once from a ReproduceConfig, the one input of the
executors, written as OUT/plan.json and read back by status, resubmit and a moved study."""

from __future__ import annotations

import ast
import collections
import contextlib
import io
import json
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from contracts.model_names import parse_model_name
from reproduce import cli
from reproduce.plan import PLAN_FILE, ReproduceConfig, build_plan, load_study_config, pretraining_dir, read_plan
from reproduce.plan.study_plan import plan_from_json, plan_to_json
from tests.reproduce.slurm_study import toy_cluster_body

ROOT = Path(__file__).resolve().parents[2]
# The plan's builder: the one place in reproduce/ that reads names and the registry.
BUILDER = {"reproduce/plan/builder.py", "reproduce/plan/studies.py"}
NAME_MODULES = ("contracts.model_names", "pretraining.registry")


def _imports_names_or_registry(source: str) -> list[str]:
    """The imports of contracts.model_names or pretraining.registry in `source`, at any depth (a
    lazy import in a function counts), in any form (`from pretraining import registry` too)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name in NAME_MODULES]
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module in NAME_MODULES:
                found.append(node.module)
            found += [f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in NAME_MODULES]
    return found


def test_only_the_builder_reads_names_and_the_registry_inside_reproduce():
    offenders = {}
    for path in sorted((ROOT / "reproduce").rglob("*.py")):
        where = str(path.relative_to(ROOT))
        if where not in BUILDER and (found := _imports_names_or_registry(path.read_text())):
            offenders[where] = found
    assert not offenders, offenders
    # the check sees each form of the import
    for source in (
        "from contracts.model_names import parse_model_name",
        "def f():\n    from pretraining import registry",
        "import pretraining.registry",
        "from pretraining.registry import RUNS",
    ):
        assert _imports_names_or_registry(source), source
    assert not _imports_names_or_registry("from contracts.description import PretrainingDescription")


def _count_parses():
    """A context counting the calls of contracts.model_names.parse_model_name however it was
    imported (its code object, through sys.setprofile), with the place each came from."""
    code = parse_model_name.__code__
    calls: collections.Counter = collections.Counter()

    def profile(frame, event, arg):
        if event == "call" and frame.f_code is code:
            calls[(Path(frame.f_back.f_code.co_filename).name, frame.f_back.f_code.co_name)] += 1

    @contextlib.contextmanager
    def counting():
        previous = sys.getprofile()
        sys.setprofile(profile)
        try:
            yield calls
        finally:
            sys.setprofile(previous)

    return counting()


def test_toy_figure_3_parses_each_checkpoint_name_once_planned_submitted_and_read(tmp_path):
    """The Done-when of issue 79: planned, submitted as a dry run, and read by status, the toy Figure 3
    (15 checkpoints) calls the name parser once per checkpoint (before: 2,340 calls)."""
    import pretraining.registry  # noqa: F401 - its own names, parsed at import, are not the study's

    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump(toy_cluster_body(tmp_path, "debug")))
    out = tmp_path / "study"
    argv = ["--figure", "3", "--out", str(out), "--dry-run", "--cluster", str(cluster), "--no-container"]
    build_plan.cache_clear()  # planned here, not remembered from another test
    with _count_parses() as calls, contextlib.redirect_stdout(io.StringIO()):
        assert cli.main(argv) == 0
        assert cli.main(["status", str(out)]) == 0
    checkpoints = build_plan(load_study_config(out)).checkpoints
    assert len(checkpoints) == 15
    assert sum(calls.values()) == len(checkpoints), dict(calls)


@pytest.mark.parametrize(
    "options",
    [
        {"study": "masking"},
        {"study": "masking", "scale": "paper", "data_root": None, "lrs": (1e-5, 3e-5), "seeds": (0, 1)},
        {"study": "data-efficiency", "pretrain_replicates": 2},
        {"study": "cpt"},
        {"study": "biphasic", "scale": "paper", "data_root": None},
    ],
    ids=["toy-masking", "paper-masking", "toy-data-efficiency-replicated", "toy-cpt", "paper-biphasic"],
)
def test_the_plan_reads_back_as_written_and_its_names_as_the_parser_reads_them(tmp_path, options):
    """plan.json decodes to the plan it was written from; each parsed description the builder kept
    (derived from the paper name, scaled without parsing again) is what the parser reads from the
    name; each run's size is its name's."""
    cfg = ReproduceConfig(out=str(tmp_path / "study"), **options)
    plan = build_plan(cfg)
    read, written_for = plan_from_json(plan_to_json(plan, "reproduce.yaml text"), cfg)
    assert read == plan and written_for
    for ckpt in plan.checkpoints:
        assert ckpt.description == parse_model_name(ckpt.name), ckpt.name
        assert ckpt.paper_description == parse_model_name(ckpt.paper_name), ckpt.paper_name
    exports = {run.final_export for run in plan.runs}
    for run in plan.runs:
        assert run.size == parse_model_name(run.name).size
        assert run.starts_from is None or run.starts_from in plan.run_names  # trained before it, in this plan
    # every checkpoint a run exports at its end is that run's final export
    assert all(plan.model_path(c.name) in exports for c in plan.checkpoints if c.step == plan.run(c.run_name).max_steps)
    assert {job.model for job in plan.jobs} == set(plan.finetuned_models)


def _written_study(tmp_path: Path) -> tuple[Path, Path]:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump(toy_cluster_body(tmp_path, "debug", array_throttle=2)))
    out = tmp_path / "out"
    argv = ["--figure", "3", "--slurm", "--no-container", "--cluster", str(cluster), "--dry-run", "--out", str(out)]
    argv += ["--sizes", "toy_s", "--ratios", "0.4", "--tasks", "sst2,qqp", "--pretrain-steps", "8"]
    with contextlib.redirect_stdout(io.StringIO()):
        assert cli.main(argv) == 0
    return out, cluster


def test_status_reads_plan_json_without_planning_and_resubmit_never_obeys_it(tmp_path, monkeypatch, capsys):
    """Status reads plan.json (no torch, no planning: issue 79); resubmit, which submits, plans from
    reproduce.yaml (issue 88: a forged plan.json with `runs: []`, its digest made again, made it queue
    fine-tuning arrays with no pretraining) and says that plan.json is not that plan."""
    from reproduce.plan import builder
    from reproduce.slurm import resubmit
    from reproduce.slurm.ledger import LedgerEntry, SlurmState, append_ledger
    from tests.hostile import forge_plan

    out, _ = _written_study(tmp_path)
    append_ledger(out, LedgerEntry("101", "data", "data", "data.sbatch"))
    monkeypatch.setattr(resubmit, "query_slurm", lambda jobs: ({"101": SlurmState("RUNNING")}, ["squeue"]))
    runs_gone = {"runs": [], "inventory": lambda items: [i for i in items if i["what"] != "pretraining run"]}
    forge_plan(out, lambda body: body.update(runs=[], inventory=runs_gone["inventory"](body["inventory"])))
    assert cli.main(["resubmit", str(out), "--dry-run"]) == 0, capsys.readouterr().err
    shown = capsys.readouterr().out
    assert "pretrain_toy_s-mlm40-8.sbatch" in shown and "afterok:101" in shown
    assert f"{out / PLAN_FILE} is not the plan of {out / 'reproduce.yaml'}: acting on the latter" in shown

    def refuse(cfg):
        raise AssertionError("planned again although plan.json matches reproduce.yaml")

    (tmp_path / "second").mkdir()
    out, _ = _written_study(tmp_path / "second")
    monkeypatch.setattr(builder, "build_plan", refuse)
    assert cli.main(["status", str(out)]) == 0
    assert "toy_s-mlm40-8" in capsys.readouterr().out


def test_a_moved_study_reads_its_plan_where_it_is_now(tmp_path, monkeypatch, capsys):
    """plan.json keeps the study's own folders as `$OUT/...`: a copy of the study, read elsewhere,
    names the copy's folders, as a plan built from the copy's reproduce.yaml does."""
    from reproduce.plan import builder

    out, _ = _written_study(tmp_path)
    written = json.loads((out / PLAN_FILE).read_text())
    assert str(out) not in json.dumps(written)  # every folder of the study relative to it
    moved = tmp_path / "elsewhere" / "copy"
    shutil.copytree(out, moved)
    shutil.rmtree(out)
    plan = read_plan(moved)
    assert plan is not None
    runs_root = pretraining_dir(load_study_config(moved))  # the cluster's runs_dir: outside the study
    assert all(run.run_dir.parent == runs_root for run in plan.runs)
    assert all(job.run_dir.is_relative_to(moved / "finetune") for job in plan.jobs)
    assert plan == builder.build_plan(load_study_config(moved))
    monkeypatch.setattr(builder, "build_plan", lambda cfg: pytest.fail("planned again"))
    assert cli.main(["status", str(moved)]) == 0
    assert f"in {moved}" in capsys.readouterr().out


def test_a_plan_json_of_another_shape_is_not_read(tmp_path):
    """plan.json decodes only as the columns written: text where a number is, a list where a
    mapping is, another study's plan or version: not read (status plans again), its digest made
    again for each (issue 88: the digest alone refuses an edit, the shape check a forger's)."""
    from reproduce.plan.study_plan import sign_plan_text

    out, _ = _written_study(tmp_path)
    body = json.loads((out / PLAN_FILE).read_text())
    del body["plan_sha256"]
    assert read_plan(out) is not None
    for path, value in (
        (("runs", 0, "wave"), "0"),
        (("runs", 0, "name"), 7),
        (("checkpoints", 0, "description"), []),
        (("jobs", 0, "config"), "x"),
        (("study",), "cpt"),
        (("version",), 1),
        (("version",), 3),
        (("runs", 0, "config", "train"), None),  # issue 88: a run config without `train` was a traceback
        (("jobs", 0, "config", "seed"), float("inf")),  # issue 88: a seed of Infinity, an OverflowError
    ):
        edited = json.loads(json.dumps(body))
        holder = edited
        for key in path[:-1]:
            holder = holder[key]
        holder[path[-1]] = value
        (out / PLAN_FILE).write_text(sign_plan_text(json.dumps(edited, separators=(",", ":"))))
        notes = []
        assert read_plan(out, notes) is None and "cannot be used" in notes[0], path
        assert cli.main(["status", str(out)]) == 0  # planned again, no traceback


def test_a_moved_local_study_reads_its_runs_under_its_new_folder(tmp_path):
    """A toy study run here keeps its pretraining runs inside it (OUT/pretraining): moved, its plan
    names the runs under the new folder."""
    from reproduce.plan import write_study_config

    out = tmp_path / "study"
    write_study_config(build_plan(ReproduceConfig(out=str(out), sizes=("toy_s",), ratios=(0.4,), tasks=("sst2",))))
    moved = tmp_path / "moved"
    out.rename(moved)
    plan = read_plan(moved)
    assert plan is not None and plan.runs
    assert all(run.run_dir.parent == moved / "pretraining" for run in plan.runs)
    assert all(job.job["config"]["model"].startswith(str(moved / "pretraining")) for job in plan.jobs)
