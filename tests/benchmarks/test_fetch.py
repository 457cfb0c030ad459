"""`python -m benchmarks fetch-data` with the real clients (huggingface_hub, datasets) against a
stand-in Hub on 127.0.0.1 (tests.hub_server) serving the toy mirror as the Hub lays it out
(tests.benchmarks.toy_hub): parquet repos, and the script-based ones as their raw files. The CLI
runs in a subprocess with HF_ENDPOINT pointing at the server (huggingface_hub reads it at import)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.tasks import TASKS
from tests.benchmarks.tiny import save_remote_code_model
from tests.benchmarks.toy_hub import model_repo, serve, toy_hub
from tests.hub_server import HubServer

ROOT = Path(__file__).resolve().parents[2]
CHUNK = 10 * 1024 * 1024  # huggingface_hub writes a download to disk in chunks of this size
ONLINE = {"HF_HUB_OFFLINE": "0", "HF_DATASETS_OFFLINE": "0", "TRANSFORMERS_OFFLINE": "0"}
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    with HubServer() as server:
        # BeIR/nq's corpus is larger than one download chunk, so an interrupted download leaves
        # a partial file that the next run continues (with a Range request)
        serve(server, toy_hub(big_nq_corpus_bytes=CHUNK + 200_000))
        model = save_remote_code_model(tmp_path_factory.mktemp("model") / "sl_model")
        server.add("model", "org/sl-model", model_repo(model))
        yield server


def run(hub, home: Path, *argv, env=ONLINE, prelude: str = "", module: str = "benchmarks", timeout: int = 600):
    """`python -m <module> ARGV` against the stand-in Hub; `prelude` runs first in the same process
    (to simulate a full disk)."""
    code = f"{prelude}\nimport sys\nfrom {module}.__main__ import main\nsys.exit(main(sys.argv[1:]))"
    environ = {
        **os.environ,
        **env,
        "HF_ENDPOINT": hub.url,
        "HF_HOME": str(home / "hf"),
        "OMP_NUM_THREADS": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1",
    }
    return subprocess.run(
        [sys.executable, "-c", code, *map(str, argv)],
        env=environ,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def error_line(result) -> str:
    """The error a command printed, checked to be one line (progress bars aside)."""
    lines = [line for line in result.stderr.splitlines() if line.startswith(("error:", "fetch-model:", "fetch-data:"))]
    assert len(lines) == 1, result.stderr
    return lines[0]


_SAME_DATA = """
import sys
from benchmarks.datasets import TOY_DATA_ROOT, load_task_data
from benchmarks.tasks import TASKS

def rows(split):
    return split.to_list() if hasattr(split, "to_list") else (split.queries, split.corpus, split.qrels)

different = []
names = sys.argv[2].split(",") if len(sys.argv) > 2 else list(TASKS)
for name, spec in ((n, TASKS[n]) for n in names):
    fetched = load_task_data(spec, sys.argv[1], query_split_seed=0)
    toy = load_task_data(spec, TOY_DATA_ROOT, query_split_seed=0)
    for role in ("train", "validation", "test"):
        if rows(fetched.split(role)) != rows(toy.split(role)):
            different.append(f"{name}/{role}")
    if fetched.label_names != toy.label_names:
        different.append(f"{name} labels")
print("different:", different)
"""


@pytest.mark.e2e  # a killed fetch and an offline run, over 30 s
def test_interrupted_fetch_resumes_and_the_mirror_serves_an_offline_run(hub, tmp_path):
    mirror = tmp_path / "mirror"
    hub.fail_after("BeIR/nq", "corpus.jsonl.gz", CHUNK + 4096)
    first = run(hub, tmp_path, "fetch-data", "--out", mirror)
    assert first.returncode == 2
    line = error_line(first)
    assert line.startswith("error: dataset repo BeIR/nq: connection to") and "rerun the same command" in line
    manifest = json.loads((mirror / "manifest.json").read_text())
    # the repos before BeIR/nq are complete and recorded; nothing of nq looks complete
    assert list(manifest["tasks"]) == sorted(list(TASKS)[:9])  # sst2 ... record, in key order
    assert not (mirror / "BeIR" / "nq").exists() and "BeIR/nq" not in manifest["sources"]
    partial = list((mirror / ".downloads" / "BeIR" / "nq").rglob("*.incomplete"))
    assert len(partial) == 1 and partial[0].stat().st_size == CHUNK

    second = run(hub, tmp_path, "fetch-data", "--out", mirror)
    assert second.returncode == 0, second.stderr
    assert "fetch-data: nyu-mll/glue: up to date" in second.stdout
    corpus_gets = [
        r
        for r in hub.requests
        if r["method"] == "GET"
        and r["path"].endswith("BeIR/nq/resolve/" + manifest_sha(mirror, "BeIR/nq") + "/corpus.jsonl.gz")
    ]
    assert [r["range"] for r in corpus_gets] == [None, f"bytes={CHUNK}-"]  # resumed where it stopped
    assert hub.count("GET", "/sst2/train-00000-of-00001.parquet") == 1  # finished repos are not fetched again
    manifest = json.loads((mirror / "manifest.json").read_text())
    assert len(manifest["tasks"]) == 12 and not (mirror / ".downloads" / "BeIR").exists()
    sources = manifest["sources"]
    assert sources["hgissbkh/ontonotes5"]["method"] == "tner" and sources["BeIR/nq"]["method"] == "copy"
    assert sources["nyu-mll/glue"]["revision"] == hub.repos["dataset", "nyu-mll/glue"].sha
    entry = manifest["mirror"]["BeIR/msmarco-qrels/default/validation.tsv"]
    assert entry["from"] == ["dev.tsv"] and entry["rows"] == 64 and len(entry["sha256"]) == 64
    assert manifest["mirror"]["nyu-mll/glue/mnli/train.parquet"]["rows"] == 360

    check = run(hub, tmp_path, "fetch-data", "--check", mirror, env=OFFLINE)
    assert check.returncode == 0, check.stderr
    assert "OK: 32 files match the manifest" in check.stdout

    # offline, the loader reads exactly the toy data from the fetched mirror (script-based repos included)
    assert differences_from_the_toy_mirror(mirror, tmp_path) == "different: []"

    # a released-style checkpoint with its own model code, fetched, then a toy run offline on the
    # converted OntoNotes (a script-based repo)
    model = tmp_path / "models" / "sl-model"
    fetched = run(hub, tmp_path, "fetch-model", "org/sl-model", "--out", model, module="pretraining")
    assert fetched.returncode == 0, fetched.stderr
    toy_run = run(
        hub,
        tmp_path,
        *("run", "--model", model, "--task", "ontonotes5", "--lr", "1e-3", "--seed", "0", "--max-steps", "2"),
        *("--data-root", mirror, "--out", tmp_path / "runs", "--config", ROOT / "benchmarks" / "configs" / "toy.yaml"),
        "--trust-remote-code",
        env=OFFLINE,
    )
    assert toy_run.returncode == 0, toy_run.stderr
    record = json.loads((tmp_path / "runs" / "sl-model" / "ontonotes5" / "lr1e-03_sd0" / "record.json").read_text())
    assert record["dataset"] == "ontonotes5" and record["provenance"]["splits"]["sizes"]["train"] == 320

    # a corrupted file (same size, one byte changed) fails --check, named
    target = mirror / "nyu-mll" / "glue" / "sst2" / "train.parquet"
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0xFF
    target.write_bytes(bytes(data))
    check = run(hub, tmp_path, "fetch-data", "--check", mirror, env=OFFLINE)
    assert check.returncode == 1
    assert error_line(check) == f"fetch-data: FAILED: {target}: sha256 differs from the manifest (corrupted or changed)"


def differences_from_the_toy_mirror(mirror: Path, home: Path, tasks: str | None = None) -> str:
    """Offline, what the loader reads differently from `mirror` than from the committed toy mirror
    (all tasks, or the comma-separated `tasks`): "different: []" when nothing."""
    same = subprocess.run(
        [sys.executable, "-c", _SAME_DATA, str(mirror), *([tasks] if tasks else [])],
        env={**os.environ, **OFFLINE, "HF_HOME": str(home / "hf")},
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert same.returncode == 0, same.stderr
    return same.stdout.strip().splitlines()[-1]


def manifest_sha(mirror: Path, repo: str) -> str:
    return json.loads((mirror / "manifest.json").read_text())["sources"][repo]["revision"]


def test_unknown_task_is_one_line_and_writes_nothing(hub, tmp_path):
    result = run(hub, tmp_path, "fetch-data", "--out", tmp_path / "m", "--tasks", "sst2,sst3")
    assert result.returncode == 2
    assert error_line(result).startswith("error: unknown task 'sst3'; valid tasks: sst2, qqp")
    assert not (tmp_path / "m").exists()


def test_a_server_error_is_one_line_and_leaves_nothing_that_looks_complete(hub, tmp_path):
    hub.fail_api("rajpurkar/squad", 500, times=1)
    result = run(hub, tmp_path, "fetch-data", "--out", tmp_path / "m", "--tasks", "squad")
    assert result.returncode == 2
    assert "error: dataset repo rajpurkar/squad: the Hub" in error_line(result) and "HTTP 500" in error_line(result)
    assert not list((tmp_path / "m").rglob("*.parquet")) and not (tmp_path / "m" / "manifest.json").exists()


_NO_SPACE = """
import errno, datasets
def full(self, path, *args, **kwargs):
    with open(path, "wb") as handle:
        handle.write(b"PAR1 half a file")
    raise OSError(errno.ENOSPC, "No space left on device", str(path))
datasets.Dataset.to_parquet = full
"""
_LITTLE_SPACE = """
import shutil, collections
usage = collections.namedtuple("usage", "total used free")
shutil.disk_usage = lambda path: usage(10**9, 10**9 - 1000, 1000)
"""


def test_a_full_disk_is_one_line_and_the_rerun_completes(hub, tmp_path):
    mirror = tmp_path / "m"
    before = hub.count("GET", "plain_text/validation-00000-of-00001.parquet")
    short = run(hub, tmp_path, "fetch-data", "--out", mirror, "--tasks", "squad", prelude=_LITTLE_SPACE)
    assert short.returncode == 2
    assert "needs about" in error_line(short) and "1.00 kB are free" in error_line(short)
    assert hub.count("GET", "plain_text/validation-00000-of-00001.parquet") == before  # refused before downloading

    full = run(hub, tmp_path, "fetch-data", "--out", mirror, "--tasks", "squad", prelude=_NO_SPACE)
    assert full.returncode == 2
    line = error_line(full)
    assert line.startswith("error: ") and "no space left on the device while fetching rajpurkar/squad" in line
    leftovers = sorted(p.name for p in (mirror / "rajpurkar").rglob("*") if p.is_file())
    assert leftovers == []  # no half-written split, no temp file
    assert not (mirror / "manifest.json").exists()  # the first repo failed: no task is recorded

    again = run(hub, tmp_path, "fetch-data", "--out", mirror, "--tasks", "squad")
    assert again.returncode == 0, again.stderr
    assert sorted(p.name for p in (mirror / "rajpurkar" / "squad" / "plain_text").iterdir()) == [
        "train.parquet",
        "validation.parquet",
    ]
