"""prepare-data and verify-data on tiny jsonl input, a slice of the embedded corpus, and a mocked hub."""

import contextlib
import hashlib
import json
import os
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest

from contracts.config import ConfigError
from pretraining.assets import EMBEDDED_CORPUS
from pretraining.data.cli import main as data_cli
from pretraining.data.prepare import MDS_COLUMNS, PrepareConfig, PrepareError, prepare_data
from pretraining.data.verify import DataVerificationError, verify_prepared
from pretraining.tokenizer import load_tokenizer, special_token_ids

TEXTS = [
    "The cat sat on the mat.",
    "Encoders are pretrained with masked language modeling.",
    "",
    "Decoders predict the next token, one position at a time, from left to right.",
    "Short.",
    "A longer document that will certainly cross the boundary between two packed samples "
    "because it has many more tokens than a single sample of sixteen tokens can hold.",
]


@pytest.fixture
def jsonl(tmp_path):
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps({"text": t, "id": str(i)}) + "\n" for i, t in enumerate(TEXTS)))
    return path


@pytest.fixture(scope="module")
def embedded_slice(tmp_path_factory):
    """The first 12 documents of the shipped corpus, each cut to 3,000 characters (same schema)."""
    table = pq.read_table(EMBEDDED_CORPUS).slice(0, 12)
    texts = [t[:3000] for t in table.column("text").to_pylist()]
    table = table.set_column(0, "text", [texts])
    path = tmp_path_factory.mktemp("slice") / "slice.parquet"
    pq.write_table(table, path)
    return path


def stored_files(root):
    """sha256 of index.json and every shard: what must be identical across runs."""
    names = ["index.json"] + sorted(p.name for p in root.glob("shard.*"))
    return {name: hashlib.sha256((root / name).read_bytes()).hexdigest() for name in names}


def test_prepare_tiny_jsonl_counts_eos_and_manifest(jsonl, tmp_path):
    out = tmp_path / "out"
    manifest = prepare_data(PrepareConfig(out=str(out), inputs=(str(jsonl),), seq_len=16), progress=False)
    tokenizer = load_tokenizer("embedded")
    special = special_token_ids(tokenizer)
    kept = [t for t in TEXTS if t]
    expected_tokens = sum(len(tokenizer(t, add_special_tokens=False)["input_ids"]) + 1 for t in kept)
    counts = manifest["counts"]
    assert counts["documents"] == len(kept) and counts["empty_documents_skipped"] == 1
    assert counts["tokens"] == expected_tokens
    assert counts["samples"] == expected_tokens // 16 and counts["leftover_tokens"] == expected_tokens % 16
    assert manifest["inputs"][0]["sha256"] == hashlib.sha256(jsonl.read_bytes()).hexdigest()
    assert manifest["tokenizer"]["special_tokens"] == special.to_dict()
    assert set(manifest["tokenizer"]["files_sha256"]) >= {"tokenizer.json"}
    assert manifest["config"]["seq_len"] == 16 and manifest["columns"] == MDS_COLUMNS
    assert "git_sha" in manifest["code"]
    assert json.loads((out / "manifest.json").read_text()) == manifest
    shard = json.loads((out / "index.json").read_text())["shards"][0]
    assert shard["column_encodings"] == list(MDS_COLUMNS.values())

    report = verify_prepared(out, num_samples=100)  # every sample: seq_len, doc_lengths, eos at doc ends
    assert report.samples == counts["samples"] and len(report.checked_samples) == counts["samples"]
    first_doc = tokenizer(TEXTS[0], add_special_tokens=False)["input_ids"] + [special.eos]
    assert tokenizer.decode(first_doc) == TEXTS[0] + "<|end_of_text|>"
    assert report.previews[0].startswith(TEXTS[0] + "<|end_of_text|>")


def test_prepare_bos_policy(jsonl, tmp_path):
    common = dict(inputs=(str(jsonl),), seq_len=16)
    none = prepare_data(PrepareConfig(out=str(tmp_path / "a"), **common), progress=False)
    bos = prepare_data(PrepareConfig(out=str(tmp_path / "b"), bos="document", **common), progress=False)
    assert bos["counts"]["tokens"] == none["counts"]["tokens"] + none["counts"]["documents"]


def test_prepare_is_deterministic_and_refuses_to_overwrite(embedded_slice, tmp_path):
    cfg = dict(inputs=(str(embedded_slice),), seq_len=64, size_limit="16kb")
    first = prepare_data(PrepareConfig(out=str(tmp_path / "one"), **cfg), progress=False)
    prepare_data(PrepareConfig(out=str(tmp_path / "two"), **cfg), progress=False)
    files = stored_files(tmp_path / "one")
    assert len(files) > 2  # several shards
    assert files == stored_files(tmp_path / "two")
    assert first["counts"]["documents"] == 12 and first["counts"]["samples"] > 100
    with pytest.raises(PrepareError, match="refusing to overwrite"):
        prepare_data(PrepareConfig(out=str(tmp_path / "one"), **cfg), progress=False)
    assert stored_files(tmp_path / "one") == files
    assert not (tmp_path / "one.partial").exists()


def test_verify_detects_a_corrupted_shard(embedded_slice, tmp_path):
    out = tmp_path / "out"
    prepare_data(
        PrepareConfig(out=str(out), inputs=(str(embedded_slice),), seq_len=64, size_limit="16kb"), progress=False
    )
    verify_prepared(out)
    shard = sorted(out.glob("shard.*.mds.zstd"))[1]
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    with pytest.raises(DataVerificationError, match=f"shard {shard.name}: sha1"):
        verify_prepared(out)
    assert data_cli(["verify-data", str(out), "--no-decode"]) == 1
    shard.unlink()
    with pytest.raises(DataVerificationError, match=f"shard {shard.name} is missing"):
        verify_prepared(out)


def test_verify_detects_manifest_mismatch(jsonl, tmp_path):
    out = tmp_path / "out"
    prepare_data(PrepareConfig(out=str(out), inputs=(str(jsonl),), seq_len=16), progress=False)
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["counts"]["samples"] += 1
    (out / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(DataVerificationError, match="samples"):
        verify_prepared(out)
    with pytest.raises(DataVerificationError, match="not a folder"):
        verify_prepared(tmp_path / "missing")


def test_cli_prepare_and_verify(embedded_slice, tmp_path, capsys):
    out = tmp_path / "cli"
    code = data_cli(
        [
            "prepare-data",
            "--input",
            str(embedded_slice),
            "--seq-len",
            "128",
            "--out",
            str(out),
            "--no-progress",
            "max_documents=5",
        ]
    )
    assert code == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["counts"]["documents"] == 5 and manifest["config"]["max_documents"] == 5
    assert data_cli(["verify-data", str(out)]) == 0
    assert "verify-data: OK" in capsys.readouterr().out
    assert data_cli(["prepare-data", "--input", str(embedded_slice), "--out", str(out), "--no-progress"]) == 2
    assert "refusing to overwrite" in capsys.readouterr().err
    assert data_cli(["prepare-data", "--out", str(tmp_path / "x"), "--no-progress"]) == 2  # no source
    assert data_cli(["prepare-data", "--input", "nowhere.parquet", "--out", str(tmp_path / "y")]) == 2


def test_cli_reads_a_yaml_config_completed_by_flags(jsonl, tmp_path):
    config = tmp_path / "prep.yaml"
    config.write_text(f"inputs: [{jsonl}]\nseq_len: 32\nsize_limit: 1048576\n")
    out = tmp_path / "yaml-out"
    assert (
        data_cli(["prepare-data", "--config", str(config), "--out", str(out), "--seq-len", "16", "--no-progress"]) == 0
    )
    saved = json.loads((out / "manifest.json").read_text())["config"]
    assert (saved["seq_len"], saved["size_limit"], saved["inputs"]) == (16, 1048576, [str(jsonl)])
    config.write_text("inputs: [a]\nseq_lenn: 3\n")
    assert data_cli(["prepare-data", "--config", str(config), "--out", str(tmp_path / "z")]) == 2


def test_prepare_config_is_typed(tmp_path):
    from contracts.config import config_from_dict

    with pytest.raises(ConfigError, match="unknown key"):
        config_from_dict(PrepareConfig, {"out": "x", "inputs": ["a"], "seqlen": 5})
    with pytest.raises(ConfigError, match="bos"):
        config_from_dict(PrepareConfig, {"out": "x", "inputs": ["a"], "bos": "always"})
    with pytest.raises(ConfigError, match="exactly one source"):
        config_from_dict(PrepareConfig, {"out": "x", "inputs": ["a"], "hf_dataset": "HuggingFaceFW/fw"})


def test_samples_keep_uint32_ids(jsonl, tmp_path):
    from streaming.base.compression import decompress

    from pretraining.data.verify import read_sample

    out = tmp_path / "out"
    prepare_data(PrepareConfig(out=str(out), inputs=(str(jsonl),), seq_len=16), progress=False)
    shard = json.loads((out / "index.json").read_text())["shards"][0]
    raw = decompress("zstd", (out / shard["zip_data"]["basename"]).read_bytes())
    sample = read_sample(raw, shard, 0)
    assert sample["input_ids"].dtype == np.uint32 and sample["doc_lengths"].dtype == np.uint32


def test_parallel_workers_write_parts_under_one_index(embedded_slice, tmp_path):
    table = pq.read_table(embedded_slice)
    folder = tmp_path / "inputs"
    folder.mkdir()
    for i in range(3):  # three input files of 4 documents each
        pq.write_table(table.slice(4 * i, 4), folder / f"part-{i}.parquet")
    cfg = dict(inputs=(str(folder),), seq_len=64, workers=2)
    one = prepare_data(PrepareConfig(out=str(tmp_path / "one"), **cfg), progress=False)
    prepare_data(PrepareConfig(out=str(tmp_path / "two"), **cfg), progress=False)
    serial = prepare_data(
        PrepareConfig(out=str(tmp_path / "serial"), inputs=(str(folder),), seq_len=64), progress=False
    )
    parts = one["counts"]["parts"]
    assert [p["inputs"] for p in parts] == [2, 1]
    assert one["counts"]["documents"] == serial["counts"]["documents"] == 12
    assert one["counts"]["tokens"] == serial["counts"]["tokens"]
    assert one["counts"]["samples"] == sum(p["samples"] for p in parts)
    index = json.loads((tmp_path / "one" / "index.json").read_text())
    assert {s["raw_data"]["basename"].split("/")[0] for s in index["shards"]} == {"part-00000", "part-00001"}

    def part_files(root):
        return {
            str(p.relative_to(root)): p.read_bytes()
            for p in sorted(root.rglob("*"))
            if p.is_file() and p.name != "manifest.json"
        }

    assert part_files(tmp_path / "one") == part_files(tmp_path / "two")
    assert verify_prepared(tmp_path / "one").samples == one["counts"]["samples"]

    from pretraining.data import DataConfig, build_train_dataloader

    loader, _ = build_train_dataloader(DataConfig(path=str(tmp_path / "one"), seq_len=64, shuffle=False), 8)
    assert sum(len(b["input_ids"]) for b in loader) == one["counts"]["samples"] // 8 * 8


def test_cli_for_run_checks_that_the_data_holds_the_run(embedded_slice, tmp_path, capsys):
    """--for-run RUN.yaml: the samples a run reads must fit in one epoch (docs/data.md)."""
    import yaml

    from pretraining import registry

    body = registry.config_dict(registry.RUNS["610m-clm-dec42k-mlm40-44k"], "toy")  # CPT: 2 steps x the toy batch
    batch = body["train"]["global_batch_size"]
    assert body["data"]["start_sample"] == 42 * batch
    cpt = tmp_path / "cpt.yaml"
    cpt.write_text(yaml.safe_dump(body))
    fits = tmp_path / "fits.yaml"
    fits.write_text(yaml.safe_dump({**body, "data": {**body["data"], "start_sample": 16}}))

    out = tmp_path / "data"
    assert (
        data_cli(
            [
                "prepare-data",
                "--input",
                str(embedded_slice),
                "--seq-len",
                "128",
                "--out",
                str(out),
                "--no-progress",
                "--for-run",
                str(cpt),
            ]
        )
        == 2
    )
    samples = json.loads((out / "manifest.json").read_text())["counts"]["samples"]
    assert 2 * batch <= samples < 42 * batch
    err = capsys.readouterr().err
    reads = f"this run reads samples {42 * batch:,} to {44 * batch - 1:,}"
    assert f"{cpt}: data: {out} holds {samples} samples; {reads}" in err
    assert "start_sample lies beyond the data" in err and f"the prepared data stays in {out}" in err

    assert data_cli(["verify-data", str(out), "--no-decode", "--for-run", str(fits)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"verify-data: {fits}: data: {out} holds {samples} samples; this run reads samples 16 to {15 + 2 * batch} "
        f"(2 steps x {batch}) = {(16 + 2 * batch) / samples:.3g} epochs"
    )
    assert data_cli(["verify-data", str(out), "--no-decode", "--for-run", str(cpt)]) == 1
    assert "verify-data: FAILED: " in capsys.readouterr().err
    assert data_cli(["verify-data", str(out), "--for-run", str(tmp_path / "none.yaml")]) == 2


@pytest.mark.e2e  # a real SIGKILL of a command and its pool
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_kill_9_of_parallel_prepare_data_leaves_no_worker_tokenising(tmp_path):
    """`prepare-data --workers 2` killed with -9: its pool's workers die with it (they kept
    tokenising their whole part, orphans, before contracts.processes.die_with_parent). Each worker's
    part takes tens of seconds here, so on the old code they outlive the 10 s the test allows."""
    import random
    import signal
    import subprocess
    import time

    from tests.reproduce.interrupt_stress import proc_table

    words = ["energy", "school", "river", "history", "science", "learning", "student", "water", "field"]
    draw = random.Random(0)
    inputs = []
    for index in range(2):  # one file a worker, 34 MB of text each
        inputs.append(tmp_path / f"in{index}.jsonl")
        with inputs[-1].open("w") as handle:
            for _ in range(20_000):
                handle.write(json.dumps({"text": " ".join(draw.choice(words) for _ in range(250))}) + "\n")
    out = tmp_path / "out"
    command = [sys.executable, "-m", "pretraining", "prepare-data", "--input", *map(str, inputs)]
    proc = subprocess.Popen(
        [*command, "--out", str(out), "--workers", "2", "--no-progress"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    parts = [out.with_name("out.partial") / f"part-{i:05d}" for i in range(2)]
    workers: list[int] = []
    try:
        deadline = time.monotonic() + 600  # a failsafe only: the test waits for the parts to appear
        while not all(part.exists() for part in parts):  # written by the workers, after their initializer
            assert proc.poll() is None and time.monotonic() < deadline, "the workers never started their parts"
            time.sleep(0.05)
        workers = [pid for pid, fields in proc_table() if int(fields[1]) == proc.pid and fields[0] != "Z"]
        assert len(workers) >= 2, workers
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        alive = workers
        deadline = time.monotonic() + 10  # the kernel sends the SIGKILL as the parent exits
        while alive and time.monotonic() < deadline:
            alive = [pid for pid, fields in proc_table() if pid in workers and fields[0] != "Z"]
            time.sleep(0.05)
        assert not alive, "a prepare-data worker outlived its parent by 10 s"
    finally:
        for pid in [*workers, proc.pid]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
