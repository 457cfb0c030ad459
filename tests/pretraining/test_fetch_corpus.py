"""`prepare-data --hf-dataset`: FineWeb-Edu-style parquet files streamed by `datasets` from a
stand-in Hub on 127.0.0.1 (tests.hub_server), interrupted by the server in the middle of the
stream (the second data file answers 403, as a signed download URL that expired; a lost connection
would be retried by the clients with sleeps first), then resumed by rerunning the same command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pretraining.assets import EMBEDDED_CORPUS
from pretraining.data.prepare import PrepareConfig, prepare_data
from tests.hub_server import HubServer

ROOT = Path(__file__).resolve().parents[2]
REPO = "HuggingFaceFW/fineweb-edu"


def fineweb_readme(config: str, folder: str) -> str:
    """A FineWeb-Edu-style dataset card: one config whose train split is the files of `folder`."""
    return (
        f"---\nconfigs:\n- config_name: {config}\n  data_files:\n  - split: train\n"
        f"    path: {folder}/*\n---\n# toy FineWeb-Edu\n"
    )


README = fineweb_readme("sample-10BT", "sample/10BT")


def _data_files(tmp_path: Path) -> list[Path]:
    """Three FineWeb-Edu-schema parquet files of 40 documents of the embedded corpus each."""
    table = pq.read_table(EMBEDDED_CORPUS)
    paths = []
    for i in range(3):
        path = tmp_path / "local" / f"00{i}_00000.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table.slice(40 * i, 40), path)
        paths.append(path)
    return paths


def _prepare(hub, tmp_path, out, *extra):
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "0",
        "HF_DATASETS_OFFLINE": "0",
        "HF_ENDPOINT": hub.url,
        "HF_HOME": str(tmp_path / "hf"),
        "OMP_NUM_THREADS": "1",
    }
    argv = [
        "--hf-dataset",
        REPO,
        "--hf-config",
        "sample-10BT",
        "--seq-len",
        "128",
        "--out",
        str(out),
        "--no-progress",
        *extra,
    ]
    return subprocess.run(
        [sys.executable, "-m", "pretraining", "prepare-data", *argv], env=env, cwd=ROOT, capture_output=True, text=True
    )


def _shards(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name not in ("manifest.json", "counts.json")
    }


@pytest.mark.e2e  # a killed Hub stream, over 30 s
def test_hub_stream_is_restartable_and_equals_the_local_files_packed_per_file(tmp_path):
    files = _data_files(tmp_path)
    out = tmp_path / "fineweb"
    with HubServer() as hub:
        sha = hub.add(
            "dataset", REPO, {"README.md": README, **{f"sample/10BT/{p.name}": p.read_bytes() for p in files}}
        )
        hub.fail_with(REPO, "sample/10BT/001_00000.parquet", 403)
        first = _prepare(hub, tmp_path, out)
        assert first.returncode == 2
        errors = [line for line in first.stderr.splitlines() if line.startswith("prepare-data:")]
        assert len(errors) == 1 and f"streaming {REPO}@{sha[:12]} failed in part 2 of 3" in errors[0], first.stderr
        assert "rerun the same command: the 1 finished parts" in errors[0]
        partial = out.with_name("fineweb.partial")
        assert not out.exists() and sorted(p.name for p in partial.iterdir()) == ["part-00000", "progress.json"]
        before = len(hub.requests)

        second = _prepare(hub, tmp_path, out, "--workers", "2")  # the other two parts side by side
        assert second.returncode == 0, second.stderr
        # the finished part is not streamed again (datasets reads its parquet footer for the schema)
        assert hub.bytes_sent("/000_00000.parquet", since=before) < files[0].stat().st_size
        assert hub.bytes_sent("/002_00000.parquet", since=before) >= files[2].stat().st_size
        assert "resuming" in second.stderr and "1 of 3 parts are finished" in second.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    counts = manifest["counts"]
    assert counts["documents"] + counts["empty_documents_skipped"] == 120 and len(counts["parts"]) == 3
    assert counts["tokens_in_samples"] == counts["samples"] * 128
    assert f"= {counts['tokens_in_samples']} tokens written" in second.stdout
    assert manifest["inputs"] == [
        {
            "hub": REPO,
            "config": "sample-10BT",
            "split": "train",
            "revision": None,
            "commit": sha,
            "streaming": True,
            "data_files": 3,
        }
    ]
    assert not partial.exists() and not (out / "progress.json").exists()
    # the same documents from local files, one part per file (workers = files): the same bytes
    local = prepare_data(
        PrepareConfig(out=str(tmp_path / "local-out"), inputs=tuple(map(str, files)), seq_len=128, workers=3),
        progress=False,
    )
    assert {k: v for k, v in local["counts"].items() if k != "parts"} == {
        k: v for k, v in counts.items() if k != "parts"
    }
    assert _shards(out) == _shards(tmp_path / "local-out")
    verify = subprocess.run(
        [sys.executable, "-m", "pretraining", "verify-data", str(out), "--samples", "2"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert verify.returncode == 0, verify.stderr
