"""A checkpoint checked before it trains, and what the loader did recorded (issue 90, item 2): a
folder without a tokenizer, one whose backbone lacks a layer's weights and a Hub id that cannot be
resolved are each refused in one line with nothing written, by `run`, `matrix` and the Slurm
preflight; `--allow-reinitialised-weights` runs the incomplete one, and its record names the weights
transformers re-initialised, as does its at-chance warning."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchmarks.datasets import TOY_DATA_ROOT
from benchmarks.kinds.loading import check_checkpoint, describe_reinitialised, report_from_info
from benchmarks.run import CONFIG_DIR
from tests.benchmarks.tiny import minilm_dir, one_torch_thread, save_tiny_model  # noqa: F401 (autouse fixture)

TOKENIZER_SAVED = ("tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json")


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """A tiny BERT as saved, the same without its tokenizer, and the same without layer 1's weights."""
    from safetensors.torch import load_file, save_file

    root = tmp_path_factory.mktemp("checkpoints")
    whole = save_tiny_model(root / "whole")
    no_tokenizer = root / "no-tokenizer"
    shutil.copytree(whole, no_tokenizer)
    for name in TOKENIZER_SAVED:
        (no_tokenizer / name).unlink(missing_ok=True)
    no_layer = root / "no-layer"
    shutil.copytree(whole, no_layer)
    weights = load_file(no_layer / "model.safetensors")
    kept = {name: tensor for name, tensor in weights.items() if not name.startswith("encoder.layer.1.")}
    assert len(kept) < len(weights)
    save_file(kept, no_layer / "model.safetensors", metadata={"format": "pt"})
    return {"whole": whole, "no_tokenizer": no_tokenizer, "no_layer": no_layer}


def _run(model, out, lr="1e-4", *more):
    return [
        "run", "--model", str(model), "--task", "sst2", "--lr", lr, "--seed", "0",
        "--data-root", str(TOY_DATA_ROOT), "--out", str(out), "--config", str(CONFIG_DIR / "toy.yaml"), *more,
    ]  # fmt: skip


def _one_error_line(result) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def test_a_folder_without_a_tokenizer_is_refused_in_one_line_with_nothing_written(checkpoints, tmp_path, cli):
    out = tmp_path / "runs"
    line = _one_error_line(cli("benchmarks", *_run(checkpoints["no_tokenizer"], out)))
    assert f"model path {checkpoints['no_tokenizer']} has no tokenizer" in line and "save_pretrained" in line
    assert not out.exists()


def test_a_checkpoint_without_a_layer_is_refused_in_one_line_with_nothing_written(checkpoints, tmp_path):
    """A process of its own: transformers' own warning (its logger writes to the stderr it found at
    import, which the in-process runner does not capture) must not add lines to the one."""
    import subprocess
    import sys

    out = tmp_path / "runs"
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks", *_run(checkpoints["no_layer"], out)],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
        check=False,
    )
    line = _one_error_line(result)
    assert f"model {checkpoints['no_layer']}: the checkpoint lacks backbone weights" in line
    assert "encoder.layer.1 (16 tensors)" in line and "--allow-reinitialised-weights" in line
    assert not out.exists()


def test_a_hub_id_that_cannot_be_resolved_leaves_no_run_folder(tmp_path, cli):
    out = tmp_path / "runs"  # the tests run offline: an id not in the cache is one that cannot load
    line = _one_error_line(cli("benchmarks", *_run("no-such-org/no-such-model", out)))
    assert "cannot load model no-such-org/no-such-model" in line
    assert not out.exists()


def test_the_flag_runs_it_and_the_record_and_the_at_chance_warning_name_the_layer(checkpoints, tmp_path, cli):
    """LR 3.0 drives the head to one class (test_own_checkpoint.py): the warning names the layer the
    checkpoint lacked before it speaks of the LR."""
    out = tmp_path / "runs"
    result = cli("benchmarks", *_run(checkpoints["no_layer"], out, "3.0", "--allow-reinitialised-weights"))
    assert result.returncode == 0, result.stderr
    record = json.loads(next(out.rglob("record.json")).read_text())
    report = record["provenance"]["loading_report"]
    assert len(report["reinitialised_backbone"]) == 16
    assert all(name.startswith("encoder.layer.1.") for name in report["reinitialised_backbone"])
    assert report["head_initialised"] and not any(n.startswith("backbone.") for n in report["head_initialised"])
    assert report["unexpected"] == []
    said = [line for line in result.stderr.splitlines() if line.startswith(("weights:", "warning:"))]
    assert len(said) == 2, result.stderr
    assert said[0].startswith(f"weights: {checkpoints['no_layer']}: re-initialised at random")
    assert "encoder.layer.1 (16 tensors)" in said[0]
    warning = said[1]
    assert "at its chance level" in warning
    assert warning.index("encoder.layer.1") < warning.index("its LR")


def test_a_whole_checkpoint_records_an_empty_report_and_says_nothing(checkpoints, tmp_path, cli):
    out = tmp_path / "runs"
    result = cli("benchmarks", *_run(checkpoints["whole"], out))
    assert result.returncode == 0, result.stderr
    report = json.loads(next(out.rglob("record.json")).read_text())["provenance"]["loading_report"]
    assert report["reinitialised_backbone"] == [] and report["unused_initialised"] == []
    assert not [line for line in result.stderr.splitlines() if line.startswith("weights:")]
    head = [line for line in result.stdout.splitlines() if line.startswith("head:")]
    assert head == [
        f"head: {checkpoints['whole']}: uses this package's head (the checkpoint ships no "
        "AutoModelForSequenceClassification class of its own)"
    ]


@pytest.mark.parametrize("mode", ["--local", "--slurm-script"])
def test_matrix_refuses_both_before_writing_a_job_list(checkpoints, tmp_path, cli, mode):
    for broken, says in (("no_tokenizer", "has no tokenizer"), ("no_layer", "lacks backbone weights")):
        out = tmp_path / broken
        where = [mode] if mode == "--local" else [mode, str(tmp_path / f"{broken}.sh")]
        result = cli(
            "benchmarks", "matrix", "--models", f"{checkpoints['whole']},{checkpoints[broken]}", "--tasks", "sst2",
            "--lrs", "1e-4", "--seeds", "0", "--data-root", str(TOY_DATA_ROOT), "--out", str(out), *where,
        )  # fmt: skip
        assert says in _one_error_line(result) and str(checkpoints[broken]) in result.stderr
        assert not out.exists() and not (tmp_path / f"{broken}.sh").exists()


def test_matrix_passes_the_flag_to_its_jobs(checkpoints, tmp_path, cli):
    """The Slurm tasks run `benchmarks job` on the job list: the flag travels in each job's config."""
    script, jobs = tmp_path / "submit.sh", tmp_path / "runs" / "jobs.jsonl"
    result = cli(
        "benchmarks", "matrix", "--models", str(checkpoints["no_layer"]), "--tasks", "sst2", "--lrs", "1e-4",
        "--seeds", "0", "--data-root", str(TOY_DATA_ROOT), "--out", str(tmp_path / "runs"),
        "--slurm-script", str(script), "--allow-reinitialised-weights",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    (job,) = [json.loads(line) for line in jobs.read_text().splitlines()]
    assert job["config"]["allow_reinitialised_weights"] is True


def test_the_report_separates_backbone_head_and_pooler():
    own_head = {
        "missing_keys": ["bert.encoder.layer.1.output.dense.weight", "classifier.weight", "classifier.bias"],
        "unexpected_keys": ["cls.predictions.bias"],
        "mismatched_keys": [],
    }
    report = report_from_info(own_head, "bert")
    assert report.reinitialised_backbone == ("encoder.layer.1.output.dense.weight",)
    assert report.head_initialised == ("classifier.bias", "classifier.weight")
    assert report.unexpected == ("cls.predictions.bias",)
    base = {"missing_keys": ["pooler.dense.weight", "pooler.dense.bias"], "unexpected_keys": []}
    report = report_from_info(base, None, ["classifier.weight"])  # the package's heads never read the pooler
    assert report.reinitialised_backbone == () and report.unused_initialised == (
        "pooler.dense.bias",
        "pooler.dense.weight",
    )
    assert report.head_initialised == ("classifier.weight",)
    names = ["embeddings.word_embeddings.weight", *[f"encoder.layer.{i}.x.weight" for i in range(5)]]
    assert describe_reinitialised(names) == (
        "embeddings.word_embeddings, encoder.layer.0, encoder.layer.1 and 3 more (6 tensors)"
    )


def test_a_real_checkpoint_loads_whole():
    """all-MiniLM-L6-v2 (a sentence-transformers BERT): nothing re-initialised, nothing refused."""
    report = check_checkpoint(str(minilm_dir()), trust_remote_code=False, allow_reinitialised=False)
    assert report.reinitialised_backbone == ()


def test_the_slurm_preflight_wants_a_hub_models_tokenizer_in_the_cache(tmp_path, monkeypatch):
    """A cache entry with config and weights but no tokenizer file: every offline task would fail as
    it loads the tokenizer; the preflight says so, with the fetch command."""
    from huggingface_hub import constants

    from benchmarks.matrix import model_problems

    commit = "0" * 40
    entry = tmp_path / "hub" / "models--some-org--encoder"
    (entry / "refs").mkdir(parents=True)
    (entry / "refs" / "main").write_text(commit)
    snapshot = entry / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for name in ("config.json", "model.safetensors"):
        (snapshot / name).write_text("{}")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    (problem,) = model_problems("some-org/encoder")
    assert "nor in the Hugging Face cache" in problem and "with its tokenizer (none of tokenizer.json" in problem
    assert "fetch-model some-org/encoder --out models/encoder" in problem
    (snapshot / "tokenizer.json").write_text("{}")
    assert model_problems("some-org/encoder") == []


def test_the_tokenizer_loader_itself_says_what_is_missing(checkpoints):
    """What `run` refuses before: transformers' own TypeError (`stat: path should be string ... not
    NoneType`) becomes one line wherever a tokenizer is loaded."""
    from benchmarks.kinds.checkpoint import ModelLoadError
    from benchmarks.kinds.common import load_tokenizer

    with pytest.raises(ModelLoadError, match="cannot load the tokenizer of model .*: it has none of tokenizer.json"):
        load_tokenizer(str(checkpoints["no_tokenizer"]))
