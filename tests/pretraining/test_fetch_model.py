"""`python -m pretraining fetch-model` with huggingface_hub against a stand-in Hub on 127.0.0.1
(tests.hub_server) serving a tiny checkpoint that ships its own model code, like the paper's
released ones (tests.benchmarks.tiny.save_remote_code_model). The CLI runs in subprocesses with
HF_ENDPOINT pointing at the server; the offline loads run with HF_HUB_OFFLINE=1."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pretraining.__main__ import main as cli
from pretraining.fetch_model import MANIFEST_FILE, check_model
from tests.benchmarks.tiny import save_remote_code_model
from tests.benchmarks.toy_hub import model_repo
from tests.hub_server import HubServer

ROOT = Path(__file__).resolve().parents[2]
RELEASED = "MLMvsCLM/610m-mlm40-42k"


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    files = model_repo(save_remote_code_model(tmp_path_factory.mktemp("model") / "sl_model"))
    config = json.loads(files["config.json"])
    # the same checkpoint with its model code in another repo: auto_map "org/sl-code--module.Class"
    config["auto_map"] = {key: f"org/sl-code--{value}" for key, value in config["auto_map"].items()}
    with HubServer() as server:
        server.add("model", RELEASED, files)
        server.add(
            "model",
            "org/sl-split",
            {**{k: v for k, v in files.items() if not k.endswith(".py")}, "config.json": json.dumps(config)},
        )
        server.add(
            "model", "org/sl-code", {"README.md": "code\n", **{k: v for k, v in files.items() if k.endswith(".py")}}
        )
        yield server


def run(hub, home: Path, *argv, code: str | None = None, offline: bool = False, env: dict | None = None):
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1" if offline else "0",
        "TRANSFORMERS_OFFLINE": "1" if offline else "0",
        "HF_ENDPOINT": hub.url,
        "HF_HOME": str(home / "hf"),
        "OMP_NUM_THREADS": "1",
        **(env or {}),
    }
    command = ["-c", code, *map(str, argv)] if code else ["-m", "pretraining", "fetch-model", *map(str, argv)]
    return subprocess.run([sys.executable, *command], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)


def one_error(result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.startswith("fetch-model:")]
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_an_interrupted_fetch_of_a_released_name_resumes_and_verifies(hub, tmp_path):
    out = tmp_path / "610m-mlm40-42k"
    hub.fail_with(RELEASED, "model.safetensors", 403)
    first = run(hub, tmp_path, "610m-mlm40-42k", "--out", out, "--no-progress")
    assert first.returncode == 2
    assert one_error(first).startswith(f"fetch-model: model repo {RELEASED}: the Hub") and "HTTP 403" in first.stderr
    partial = out.with_name(out.name + ".partial")
    assert not out.exists() and (partial / "config.json").is_file()  # nothing looks complete; what came is kept

    before = len(hub.requests)
    second = run(hub, tmp_path, "610m-mlm40-42k", "--out", out, "--no-progress")
    assert second.returncode == 0, second.stderr
    assert f"fetch-model: {RELEASED}@" in second.stdout and "--trust-remote-code" in second.stdout
    assert hub.bytes_sent("/config.json", since=before) == 0  # the files fetched before are not fetched again
    assert not partial.exists()
    manifest = json.loads((out / MANIFEST_FILE).read_text())
    repo = hub.repos["model", RELEASED]
    assert (manifest["repo"], manifest["revision"], manifest["requested"]) == (RELEASED, repo.sha, "main")
    assert set(manifest["files"]) == set(repo.files)
    assert (
        manifest["files"]["model.safetensors"]["sha256"] == hashlib.sha256(repo.files["model.safetensors"]).hexdigest()
    )
    assert check_model(out) == [] and not (out / ".cache").exists()
    vocab = out / "vocab.txt"
    vocab.write_text(vocab.read_text() + "extra\n")
    recorded = manifest["files"]["vocab.txt"]["bytes"]
    assert check_model(out) == [f"{vocab}: {vocab.stat().st_size} bytes, the manifest says {recorded}"]
    assert cli(["fetch-model", "--check", str(out)]) == 1


_LOAD_OFFLINE = """
import sys
from transformers import AutoTokenizer
from benchmarks.kinds.common import load_backbone
backbone = load_backbone(sys.argv[1], trust_remote_code=True)
tokenizer = AutoTokenizer.from_pretrained(sys.argv[2])
print(type(backbone.model).__module__, type(tokenizer).__name__)
"""


@pytest.mark.e2e  # three fetch processes and a load, over 30 s
def test_code_from_another_repo_is_bundled_and_the_cache_mode_serves_hub_ids_offline(hub, tmp_path):
    out = tmp_path / "sl-split"
    fetched = run(hub, tmp_path, "org/sl-split", "--out", out, "--no-progress")
    assert fetched.returncode == 0, fetched.stderr
    config = json.loads((out / "config.json").read_text())
    assert config["auto_map"] == {
        "AutoConfig": "configuration_sl_model.SLModelConfig",
        "AutoModel": "modeling_sl_model.SLModel",
    }
    assert (out / "modeling_sl_model.py").read_bytes() == hub.repos["model", "org/sl-code"].files[
        "modeling_sl_model.py"
    ]
    manifest = json.loads((out / MANIFEST_FILE).read_text())
    assert manifest["code_from"] == {"org/sl-code": hub.repos["model", "org/sl-code"].sha}
    # a tokenizer the jobs load by hub id goes to the Hugging Face cache
    cached = run(hub, tmp_path, RELEASED, "--cache", "--include", "*.json", "--include", "vocab.txt", "--no-progress")
    assert cached.returncode == 0, cached.stderr
    loaded = run(hub, tmp_path, out, RELEASED, code=_LOAD_OFFLINE, offline=True)
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.split()[0].startswith("transformers_modules.") and "Tokenizer" in loaded.stdout


def test_bad_names_are_one_line(hub, tmp_path, capsys):
    assert cli(["fetch-model", "610m-mlm45-42k", "--out", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "fetch-model: '610m-mlm45-42k' is neither one of the paper's 50 checkpoints "
        "(`python -m pretraining configs --list`) nor a Hub repo id (org/name)"
    )
    missing = run(hub, tmp_path, "org/nothing-here", "--out", tmp_path / "m", "--no-progress")
    assert missing.returncode == 2
    assert one_error(missing).startswith("fetch-model: model repo org/nothing-here not found on http://127.0.0.1:")
    assert not (tmp_path / "m").exists() and not (tmp_path / "m.partial").exists()


def test_a_file_changed_in_place_is_fetched_again_not_up_to_date(hub, tmp_path):
    """Issue 35 item 11: a rerun compared sizes only, so a same-size corrupted file was "up to date"."""
    out = tmp_path / "610m-mlm40-42k"
    assert run(hub, tmp_path, "610m-mlm40-42k", "--out", out, "--no-progress").returncode == 0
    weights = out / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF  # same size, other content
    weights.write_bytes(bytes(data))
    before = len(hub.requests)
    again = run(hub, tmp_path, "610m-mlm40-42k", "--out", out, "--no-progress")
    assert again.returncode == 0, again.stderr
    assert "up to date" not in again.stdout and "1 file(s) differ from its manifest" in again.stdout
    weights_size = len(hub.repos["model", RELEASED].files["model.safetensors"])
    assert hub.bytes_sent("/model.safetensors", since=before) == weights_size  # fetched again, once
    assert check_model(out) == [] and not out.with_name(out.name + ".partial").exists()


@pytest.mark.parametrize("name", ["../victim_hub.txt", "VICTIM"])
def test_a_mirror_listing_a_name_outside_out_is_refused_and_nothing_beside_out_changes(hub, tmp_path, name):
    """Issue 78: a mirror (HF_ENDPOINT) whose repo lists `../victim_hub.txt` overwrote a file beside
    --out and the command said it succeeded; an absolute name got the user's file deleted by the size
    check. The real command against a stand-in Hub: one line, exit 2, the files beside --out as they were."""
    victim = tmp_path / "victim_hub.txt"
    victim.write_text("the user's own file\n")
    listed = str(victim) if name == "VICTIM" else name
    hub.add("model", "org/hostile", {"config.json": "{}", listed: "planted by the mirror\n"})
    result = run(hub, tmp_path, "org/hostile", "--out", tmp_path / "out", "--no-progress")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    line = one_error(result)
    assert "the file listing of model repo org/hostile" in line and "refused" in line
    assert victim.read_text() == "the user's own file\n"


def _tree(folder: Path) -> dict[str, bytes | str]:
    """Every file under `folder` (a link as its target's name), to compare before and after."""
    return {
        p.relative_to(folder).as_posix(): (f"-> {os.readlink(p)}" if p.is_symlink() else p.read_bytes())
        for p in sorted(folder.rglob("*"))
        if p.is_symlink() or p.is_file()
    }


def test_a_partial_folder_that_is_a_link_is_refused_and_what_it_points_to_is_untouched(hub, tmp_path):
    """Issue 88: `<out>.partial` is a name the package derives itself; planted as a link (a shared
    parent folder), the fetch wrote through it (the target's config.json overwritten) and --out
    became that link."""
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "config.json").write_text('{"the user": "own config"}\n')
    before = _tree(victim)
    out = tmp_path / "610m-mlm40-42k"
    partial = out.with_name(out.name + ".partial")
    partial.symlink_to(victim, target_is_directory=True)
    result = run(hub, tmp_path, "610m-mlm40-42k", "--out", out, "--no-progress")
    assert result.returncode == 2, result.stderr
    assert one_error(result) == (
        f"fetch-model: {partial} is a link (fetch-model keeps its partial download in a folder of its own, never "
        "through a link): remove the link, or give another --out; nothing was written"
    )
    assert _tree(victim) == before and partial.is_symlink() and not out.exists()


def test_a_partial_folder_of_another_repo_is_refused_not_resumed(hub, tmp_path):
    """Issue 88: a stale `<out>.partial` of another repository was resumed, and its files went into
    the manifest, so `--check` certified them. The partial folder says what it holds; another
    repo's (or revision's) is refused in one line, untouched."""
    sha = hub.add("model", "org/other", {"config.json": "{}\n", "notes.md": "other\n", "model.safetensors": b"1" * 64})
    out = tmp_path / "610m-mlm40-42k"
    partial = out.with_name(out.name + ".partial")
    hub.fail_with("org/other", "model.safetensors", 403)
    first = run(hub, tmp_path, "org/other", "--out", out, "--no-progress")
    assert first.returncode == 2 and (partial / "config.json").is_file(), first.stderr
    before = _tree(partial)
    second = run(hub, tmp_path, "610m-mlm40-42k", "--out", out, "--no-progress")
    assert second.returncode == 2, second.stderr
    released = hub.repos["model", RELEASED].sha
    assert one_error(second) == (
        f"fetch-model: {partial} holds a partial download of org/other@{sha[:12]}, not of {RELEASED}@"
        f"{released[:12]}: remove it (or give another --out) and rerun; nothing was written"
    )
    assert _tree(partial) == before and not out.exists()


def test_a_folder_swapped_for_a_link_during_the_download_receives_nothing_and_the_fetch_fails(hub, tmp_path):
    """Issue 88: a sub-folder of `<out>.partial` swapped for a link while a file of it downloaded sent
    the file through the link, outside, and the fetch said it succeeded. huggingface_hub now writes
    into the download state, and each file is moved into place under the containment rule."""
    hub.add("model", "org/nested", {"config.json": "{}\n", "sub/a.json": "{}\n", "sub/b.json": '{"b": 1}\n'})
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "b.json").write_text("the user's own b.json\n")
    before = _tree(victim)
    out = tmp_path / "nested"
    partial = out.with_name(out.name + ".partial")

    def swap():  # while sub/b.json downloads: sub/ (holding a.json) becomes a link to the victim folder
        (partial / "sub").rename(tmp_path / "moved-sub")
        (partial / "sub").symlink_to(victim, target_is_directory=True)

    hub.before_get("org/nested", "sub/b.json", swap)
    result = run(hub, tmp_path, "org/nested", "--out", out, "--no-progress")
    assert result.returncode == 2, result.stderr
    line = one_error(result)
    assert f"name 'sub/b.json' refused ({partial / 'sub'} is a link" in line and "nothing was kept" in line
    assert _tree(victim) == before and not out.exists()


def test_a_refetch_never_deletes_a_file_its_manifest_does_not_list(hub, tmp_path):
    """Issue 88: refetching a damaged model folder deleted every file the Hub listing does not name
    (the user's notes, an adapter). It now names them and stops; nothing is deleted."""
    out = tmp_path / "610m-mlm40-42k"
    assert run(hub, tmp_path, "610m-mlm40-42k", "--out", out, "--no-progress").returncode == 0
    (out / "notes.txt").write_text("my notes\n")
    (out / "adapter").mkdir()
    (out / "adapter" / "adapter_model.safetensors").write_bytes(b"lora")
    vocab = out / "vocab.txt"
    vocab.write_text(vocab.read_text() + "extra\n")  # damaged: a refetch is due
    before = _tree(out)
    result = run(hub, tmp_path, "610m-mlm40-42k", "--out", out, "--no-progress")
    assert result.returncode == 2, result.stderr
    assert one_error(result) == (
        f"fetch-model: {out} needs a refetch but holds files its {MANIFEST_FILE} does not list "
        "(adapter/adapter_model.safetensors, notes.txt), which a refetch would delete: move them out of the folder "
        "and rerun; nothing was deleted"
    )
    assert _tree(out) == before and not out.with_name(out.name + ".partial").exists()


def test_fetching_into_the_cache_from_a_trickling_hub_ends_at_the_minimum_rate(hub, tmp_path):
    """Issue 88: `--cache` fetched with snapshot_download, whose files download in worker threads:
    against a server that trickles a file the deadline fired in the main thread, which then waited
    for the worker for ever. Each file now downloads in the command's thread, under its deadline."""
    hub.add("model", "org/trickled", {"config.json": "{}\n", "model.safetensors": b"\0" * 100_000})
    hub.trickle("org/trickled", "model.safetensors")
    env = {"MLM_VS_CLM_HUB_TIMEOUT": "5", "MLM_VS_CLM_HUB_DEADLINE": "2"}
    result = run(hub, tmp_path, "org/trickled", "--cache", "--no-progress", env=env)
    assert result.returncode == 2, result.stderr
    assert "model repo org/trickled: the download of model.safetensors got" in one_error(result)
