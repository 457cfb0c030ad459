"""Issue 82, item 2 (CPU mode): the Hugging Face Trainer peer runs the bench's step on the toy
presets, reports the bench's row (both MFU counts) and its ratio to ours, so the suite keeps it
working for the GPU check (pretraining/peers.py)."""

import json
import math

import pytest

from pretraining.__main__ import main as cli

TOY = ["--preset", "toy_s", "--seq-len", "32", "--batch-size", "2", "--steps", "2", "--warmup-steps", "1"]
TOY += ["--vocab-size", "64", "--doc-len", "8", "--peak-tflops", "1"]


@pytest.mark.parametrize("objective", ["mlm", "clm"])
def test_the_hf_trainer_peer_runs_the_same_step_and_is_compared_with_ours(tmp_path, capsys, objective):
    out = tmp_path / "bench.json"
    assert cli(["bench", *TOY, "--objective", objective, "--peers", "hf-trainer", "--json", str(out)]) == 0
    plain, composer, peer = json.loads(out.read_text())
    assert len(capsys.readouterr().out.strip().splitlines()) == 3  # the Trainer's own log lines are off
    assert peer["path"] == "hf-trainer" and peer["objective"] == objective and peer["tokens_per_s"] > 0
    assert math.isfinite(peer["final_loss"]) and peer["transformers"]
    assert peer["ours_path"] == "composer"
    assert peer["ours_over_peer"] == round(composer["tokens_per_s"] / peer["tokens_per_s"], 3)
    # the same work: tokens, model, sequence; the head's positions as the objective makes them
    for key in ("batch_size", "seq_len", "steps", "params_N", "precision"):
        assert peer[key] == composer[key], key
    if objective == "mlm":  # the collator's 40% of the non-special positions (BOS ids are never masked)
        assert 0.2 < peer["labelled_share"] < 0.55 and peer["mfu_needed"] <= peer["mfu_model"]
        assert peer["needed_over_model"] < 1
    else:  # every position but each window's last
        assert peer["labelled_share"] > 0.85 and peer["needed_over_model"] > 0.99


def test_an_unknown_peer_is_refused_before_anything_runs(capsys):
    assert cli(["bench", *TOY, "--peers", "hf-trainer,optimus"]) == 2
    err = capsys.readouterr().err
    assert "--peers optimus: not a peer; choose from hf-trainer" in err and err.count("\n") == 1


@pytest.mark.parametrize("peers", ["hf-trainer,hf-trainer", "hf-trainer, hf-trainer ,"])
def test_a_peer_named_twice_is_refused_before_anything_runs(capsys, monkeypatch, peers):
    """Issue 88: the peer was timed twice into one row, and the ratio went to the row before it, our
    own (`ours_over_peer: 1.0`). Refused in one line as --peers is parsed; nothing is timed."""
    import pretraining.bench

    def timed(args):
        raise AssertionError("a path was timed")

    monkeypatch.setattr(pretraining.bench, "run_plain", timed)
    assert cli(["bench", *TOY, "--peers", peers]) == 2
    err = capsys.readouterr().err
    assert err == "bench: error: --peers hf-trainer,hf-trainer: hf-trainer named more than once; name each peer once\n"


def test_a_library_caller_of_the_bench_gets_the_same_check():
    from argparse import Namespace

    from pretraining.bench import main
    from pretraining.options import PeersError

    with pytest.raises(PeersError, match="named more than once"):
        main(Namespace(steps=1, warmup_steps=0, repeats=1, batch_size=1, seq_len=2, peers=["hf-trainer"] * 2))


def test_the_collator_masks_the_ratio_and_never_a_special_id():
    import torch

    from pretraining.bench import BOS, EOS, MASK
    from pretraining.objectives import IGNORE_INDEX
    from pretraining.peers import CountingCollator

    collator = CountingCollator("mlm", 0.4, 64, seed=0)
    ids = torch.randint(3, 64, (8, 256))
    ids[:, ::17] = BOS
    samples = [{"input_ids": row, "segment_ids": torch.zeros(256, dtype=torch.long)} for row in ids]
    batch = collator(samples)
    labelled = batch["labels"] != IGNORE_INDEX
    assert not labelled[ids == BOS].any()
    assert (batch["input_ids"][labelled] == MASK).all()  # the paper's replacement: every one masked
    share = labelled.sum().item() / (ids != BOS).sum().item()
    assert abs(share - 0.4) < 0.03  # 1,920 positions: 3.5 binomial SEs
    assert collator.labelled == [labelled.sum().item()] and collator.pairs == [8 * 256 * 256]
    assert EOS not in batch["input_ids"][labelled]
