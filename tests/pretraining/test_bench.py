"""`python -m pretraining bench` runs both paths and reports throughput and the Composer ratio."""

import json

import pytest

from pretraining.__main__ import main as cli


def test_bench_reports_plain_and_composer_throughput(tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert (
        cli(
            [
                "bench",
                "--preset",
                "toy_s",
                "--seq-len",
                "32",
                "--batch-size",
                "2",
                "--steps",
                "2",
                "--warmup-steps",
                "1",
                "--vocab-size",
                "64",
                "--doc-len",
                "8",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    plain, composer = json.loads(out.read_text())
    assert plain["path"] == "plain" and composer["path"] == "composer"
    assert plain["tokens_per_s"] > 0 and composer["composer_overhead"] > 0
    assert plain["params_N"] > 0 and "mfu_6N" not in plain  # no known peak on CPU
    assert len(capsys.readouterr().out.strip().splitlines()) == 2


def test_attention_flops_count_the_pairs_inside_the_segments(tmp_path):
    """A block split into windows of a and b tokens attends a^2 + b^2 (query, key) pairs: the
    attention FLOPs count those, not the full seq_len^2 square (issue 37)."""
    import torch

    from pretraining.bench import attended_pairs, synthetic_batches
    from pretraining.data.windows import attention_segments
    from pretraining.objectives import WINDOW_IDS

    assert attended_pairs(torch.tensor([[0] * 6 + [1] * 4, [0] * 10])) == 36 + 16 + 100
    rows = {}
    for scope in ("window", "document"):
        out = tmp_path / f"{scope}.json"
        args = ["bench", "--plain", "--preset", "toy_s", "--seq-len", "32", "--batch-size", "2", "--steps", "2"]
        args += ["--warmup-steps", "1", "--vocab-size", "64", "--doc-len", "8", "--scope", scope, "--json", str(out)]
        assert cli(args) == 0
        (rows[scope],) = json.loads(out.read_text())
    timed = synthetic_batches(3, 2, 32, 64, 8)[1:]  # the bench's batches after its warmup step
    pairs = sum(attended_pairs(attention_segments(b[WINDOW_IDS], b["document_ids"], "window")) for b in timed)
    assert rows["window"]["attended_share"] == round(pairs / (2 * 2 * 32 * 32), 4) < 1
    assert rows["document"]["attended_share"] < rows["window"]["attended_share"]


def test_the_spec_peak_is_the_named_parts_not_the_first_partial_match():
    from pretraining.bench import spec_peak_bf16

    assert spec_peak_bf16("NVIDIA H100 80GB HBM3") == 989e12  # SXM
    assert spec_peak_bf16("NVIDIA H100 PCIe") == 756e12
    assert spec_peak_bf16("NVIDIA H100 NVL") == 835e12
    assert spec_peak_bf16("NVIDIA H200") == 989e12
    assert spec_peak_bf16("NVIDIA GeForce RTX 4090") is None


def test_mfu_is_reported_in_model_and_needed_flops(tmp_path):
    """Issue 82, item 1: the bench gives both counts. Under MLM-40 the LM head runs at the masked
    positions only, so needed FLOPs are below the model FLOPs (6N + attention) by the head's work at
    the unmasked ones; under CLM every position but each window's last is a target."""
    from pretraining.flops import counted_flops, flop_shape
    from pretraining.presets import config_from_preset

    rows = {}
    for objective in ("mlm", "clm"):
        out = tmp_path / f"{objective}.json"
        args = ["bench", "--plain", "--preset", "toy_s", "--seq-len", "32", "--batch-size", "2", "--steps", "2"]
        args += ["--warmup-steps", "1", "--vocab-size", "64", "--doc-len", "8", "--objective", objective]
        assert cli(args + ["--peak-tflops", "1", "--json", str(out)]) == 0
        (rows[objective],) = json.loads(out.read_text())
    mlm, clm = rows["mlm"], rows["clm"]
    for row in (mlm, clm):
        assert row["mfu_model"] == round(row["flops_model_per_s"] / 1e12, 4)
        assert row["mfu_needed"] == round(row["flops_needed_per_s"] / 1e12, 4)
        # model FLOPs are the 6N + attention of before
        assert row["flops_model_per_s"] == pytest.approx(row["flops_6N_per_s"] + row["flops_attention_per_s"])
    assert 0.25 < mlm["labelled_share"] < 0.55 and clm["labelled_share"] > 0.8
    assert mlm["needed_over_model"] < clm["needed_over_model"] <= 1.0
    # the needed count is the one formula of pretraining.flops at the labelled share
    shape = flop_shape(config_from_preset("toy_s", vocab_size=64))
    tokens = 2 * 2 * 32
    pairs = mlm["attended_share"] * tokens * 32
    expected = counted_flops(shape, tokens, round(mlm["labelled_share"] * tokens), pairs) / counted_flops(
        shape, tokens, tokens, pairs
    )
    assert abs(mlm["needed_over_model"] - expected) < 2e-3
