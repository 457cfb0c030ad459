"""The Apptainer definition installs exactly the pinned lock (as CI does) and forwards to the CLIs."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from container import build
from container.definition import (
    DEFINITION,
    IMAGE_ROOT,
    LOCK,
    REPO_ROOT,
    STAGES,
    check_definition,
    parse_recipe,
    pip_installs,
    sections,
)
from container.image_check import GPU_ADDITIONS, canonical, package_problems, read_lock


@pytest.fixture(scope="module")
def recipe():
    return parse_recipe(DEFINITION)


@pytest.fixture(scope="module")
def lock():
    return read_lock(LOCK.read_text())


def test_definition_parses_with_spython(recipe):
    assert recipe.fromHeader and recipe.files and recipe.install and recipe.labels and recipe.environ
    assert recipe.test  # spython turns %test into a script


def test_definition_passes_its_own_check():
    assert check_definition() == []


def test_installs_exactly_the_lock_then_the_project_then_gpu_additions(recipe, lock):
    installs = [[w for w in args if not w.startswith("--no-cache")] for args in pip_installs(recipe.install)]
    assert installs[0] == [f"pip=={installs[0][0].split('==')[1]}"]  # the installer, pinned
    assert installs[1] == ["-r", f"{IMAGE_ROOT}/requirements.lock"]
    assert installs[2] == ["--no-deps", "--no-build-isolation", IMAGE_ROOT]  # as the Makefile's setup
    assert "--no-deps" in installs[3] and len(installs) == 4
    # The lock in the image is the repository's own: %files copies the exported tree to IMAGE_ROOT.
    assert recipe.files == [f"src {IMAGE_ROOT}"]
    assert LOCK.parent == REPO_ROOT
    # Nothing installed on top of the lock names a locked package (no pin can move).
    added = {canonical(re.split(r"==|-\d", Path(w).name)[0]) for w in installs[3] if not w.startswith("--")}
    assert added == {canonical(n) for n in GPU_ADDITIONS} and not added & set(lock)


def test_flash_attn_wheel_matches_torch_python_and_abi(recipe, lock):
    (url,) = [w for args in pip_installs(recipe.install) for w in args if w.startswith("https://")]
    wheel = url.split("#")[0].rsplit("/", 1)[1].replace("%2B", "+")
    torch_minor = ".".join(lock["torch"].split(".")[:2])
    # The PyPI torch 2.7 wheels use the C++11 ABI; an abiFALSE wheel fails with an undefined symbol.
    assert wheel == (
        f"flash_attn-{GPU_ADDITIONS['flash-attn']}+cu12torch{torch_minor}cxx11abiTRUE-cp311-cp311-linux_x86_64.whl"
    )
    assert re.search(r"#sha256=[0-9a-f]{64}$", url)


def test_base_image_is_pinned_by_digest(recipe):
    assert re.fullmatch(r"nvidia/cuda@sha256:[0-9a-f]{64}", recipe.fromHeader)
    assert "Bootstrap: docker" in DEFINITION.read_text().splitlines()


def test_labels_state_the_locked_versions(recipe, lock):
    labels = dict(line.split(None, 1) for line in recipe.labels)
    assert labels["mlm_vs_clm.torch"] == lock["torch"] == "2.7.0"
    assert labels["mlm_vs_clm.composer"] == lock["mosaicml"]
    assert labels["mlm_vs_clm.streaming"] == lock["mosaicml-streaming"]
    assert labels["mlm_vs_clm.transformers"] == lock["transformers"]
    assert labels["org.opencontainers.image.revision"] == "@GIT_SHA@"


def test_environment_is_offline(recipe):
    env = dict(e.split("=", 1) for e in recipe.environ)
    assert env["HF_HUB_OFFLINE"] == env["HF_DATASETS_OFFLINE"] == env["TRANSFORMERS_OFFLINE"] == "1"
    assert env["PATH"].startswith("/opt/venv/bin:")


def test_image_paths_exist_in_the_repository():
    text = DEFINITION.read_text()
    for path in set(re.findall(rf"{IMAGE_ROOT}/([\w./-]+)", text)) - {"GIT_SHA"}:
        assert (REPO_ROOT / path).exists(), path


def run_runscript(tmp_path, *args):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "python"
    fake.write_text('#!/bin/sh\nfor a in "$@"; do echo "$a"; done\n')
    fake.chmod(0o755)
    script = tmp_path / "runscript.sh"
    script.write_text("\n".join(sections(DEFINITION.read_text())["runscript"]) + "\n")
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return subprocess.run(["bash", str(script), *args], env=env, capture_output=True, text=True)


@pytest.mark.parametrize("stage", STAGES)
def test_runscript_forwards_to_the_stage_cli(tmp_path, stage):
    result = run_runscript(tmp_path, stage, "train", "--config", "a b.yaml")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["-m", stage, "train", "--config", "a b.yaml"]


def test_runscript_refuses_unknown_or_missing_stage(tmp_path):
    assert run_runscript(tmp_path).returncode == 64
    unknown = run_runscript(tmp_path, "rm", "-rf", "/")
    assert unknown.returncode == 64 and "unknown stage" in unknown.stderr and not unknown.stdout


def mutate(tmp_path, old, new):
    text = DEFINITION.read_text()
    assert old in text
    path = tmp_path / "mutant.def"
    path.write_text(text.replace(old, new))
    return check_definition(path)


@pytest.mark.parametrize(
    "old, new, complaint",
    [
        ("nvidia/cuda@sha256:", "nvidia/cuda:12.6.3-cudnn-devel-ubuntu22.04#", "not pinned by digest"),
        ("--no-deps einops==0.8.1", "--no-deps einops==0.8.1 numpy==2.2.0", "is in the lock"),
        ("--no-deps einops==0.8.1", "einops==0.8.1", "--no-deps"),
        ("einops==0.8.1", "einops", "unpinned"),
        ("-r /opt/mlm_vs_clm/requirements.lock", "-r /opt/mlm_vs_clm/requirements.lock --upgrade", "could move a pin"),
        ("--no-deps --no-build-isolation /opt/mlm_vs_clm", "/opt/mlm_vs_clm", "as CI does"),
        ("mlm_vs_clm.torch 2.7.0", "mlm_vs_clm.torch 2.6.0", "mlm_vs_clm.torch"),
        ("export HF_HUB_OFFLINE=1", "export HF_HUB_OFFLINE=0", "HF_HUB_OFFLINE"),
        ('exec python -m "$stage" "$@"', 'exec python "$@"', "%runscript"),
        ("/opt/venv/bin/python -m pip check", "true", "pip check"),
    ],
)
def test_check_catches_departures_from_the_lock(tmp_path, old, new, complaint):
    problems = mutate(tmp_path, old, new)
    assert any(complaint in p for p in problems), problems


def test_check_follows_a_changed_lock(tmp_path):
    lock = tmp_path / "requirements.lock"
    lock.write_text(LOCK.read_text().replace("transformers==4.57.6", "transformers==4.58.0"))
    assert any("mlm_vs_clm.transformers" in p for p in check_definition(DEFINITION, lock))


def test_check_cli_exit_codes(tmp_path):
    ok = subprocess.run(
        [sys.executable, "-m", "container.build", "--check"], cwd=REPO_ROOT, capture_output=True, text=True
    )
    assert ok.returncode == 0, ok.stderr
    bad = tmp_path / "bad.def"
    bad.write_text(DEFINITION.read_text().replace("einops==0.8.1", "einops"))
    result = subprocess.run(
        [sys.executable, "-m", "container.build", "--check", "--definition", str(bad)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1 and "unpinned" in result.stderr


def test_build_without_apptainer_exits_2(monkeypatch, capsys):
    monkeypatch.setattr(build, "find_builder", lambda: None)
    assert build.main(["--image", "never.sif"]) == 2
    assert "neither apptainer nor singularity" in capsys.readouterr().err


def committed_repo(tmp_path):
    """A git repository whose one commit holds the definition and the lock (and an untracked file)."""
    repo = tmp_path / "repo"
    (repo / "container").mkdir(parents=True)
    shutil.copy(DEFINITION, repo / "container" / DEFINITION.name)
    shutil.copy(LOCK, repo / LOCK.name)
    (repo / "untracked.txt").write_text("not committed")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "add", "container", LOCK.name], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    return repo


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_staging_exports_the_commit_and_fills_in_its_sha(tmp_path):
    repo = committed_repo(tmp_path)
    sha = build.git("rev-parse", "HEAD", repo=repo)
    staged = build.stage_commit(tmp_path / "stage", sha, repo=repo)
    text = staged.read_text()
    assert "@GIT_SHA@" not in text and f"org.opencontainers.image.revision {sha}" in text
    assert f"    {tmp_path / 'stage' / 'src'} /opt/mlm_vs_clm\n" in text  # %files from an absolute path
    assert (tmp_path / "stage" / "src" / LOCK.name).read_text() == LOCK.read_text()
    assert not (tmp_path / "stage" / "src" / "untracked.txt").exists()
    labels = check_definition(staged, tmp_path / "stage" / "src" / LOCK.name)
    assert labels == ["label org.opencontainers.image.revision must hold @GIT_SHA@ (filled at build)"]


def test_read_lock_rejects_unpinned_lines():
    assert read_lock("# c\nTorch==2.7.0\nPyYAML==6.0.3\n") == {"torch": "2.7.0", "pyyaml": "6.0.3"}
    with pytest.raises(ValueError, match="exact pin"):
        read_lock("torch>=2.7\n")


def test_package_problems_name_every_difference():
    lock = {"torch": "2.7.0", "numpy": "2.1.3"}
    installed = {
        "torch": "2.7.0",
        "numpy": "2.2.0",
        "pip": "25.1.1",
        "mlm-vs-clm": "0.1.0",
        "flash-attn": "2.8.0.post2+cu12torch2.7cxx11abiTRUE",
        "stray": "1.0",
    }
    problems = package_problems(lock, installed, {"flash-attn": "2.8.0.post2", "einops": "0.8.1"})
    assert problems == [
        "numpy: lock pins 2.1.3, installed 2.2.0",
        "einops: expected addition 0.8.1, installed nothing",
        "stray==1.0: installed but neither locked nor an addition",
    ]


def test_ci_environment_is_the_lock(lock):
    """The venv these tests run in holds every pin of the lock, as the image does."""
    from container.image_check import installed_versions

    assert package_problems(lock, installed_versions(), strict=False) == []


@pytest.mark.e2e
def test_image_runtime_check_passes_on_the_ci_stack(lock):
    """The image's %test, minus flash-attn (no GPU here): Python 3.11, the key imports at their pins."""
    from container.image_check import runtime_problems

    assert runtime_problems(lock) == []


FAKE_APPTAINER = """#!/bin/sh
if [ "$1" = "--version" ]; then echo "apptainer version 1.3.4"; exit 0; fi
echo "$@" > "$FAKE_LOG"
for last in "$@"; do :; done
cp "$last" "$FAKE_LOG.def"
for a in "$@"; do case "$a" in *.partial) echo image > "$a";; esac; done
"""


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_build_goes_through_spython_with_the_staged_definition(tmp_path, monkeypatch):
    repo = committed_repo(tmp_path)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "apptainer").write_text(FAKE_APPTAINER)
    (bin_dir / "apptainer").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_LOG", str(tmp_path / "log"))
    monkeypatch.setattr(build, "find_builder", lambda: str(bin_dir / "apptainer"))
    image = tmp_path / "out" / "x.sif"
    image.parent.mkdir()
    assert build.build(image, sudo=False, fakeroot=True, extra=["--notest"], repo=repo) == 0
    assert image.read_text() == "image\n" and not image.with_name("x.sif.partial").exists()
    args = (tmp_path / "log").read_text().split()
    assert args[:4] == ["build", "--force", "--fakeroot", "--notest"] and args[4] == f"{image}.partial"
    staged = (tmp_path / "log.def").read_text()
    sha = build.git("rev-parse", "HEAD", repo=repo)
    assert f"org.opencontainers.image.revision {sha}" in staged
    # the build record beside the image: what the preflight of a submission checks (issue 53)
    import hashlib
    import json

    from contracts import image_record

    assert build.build_record_path(image) == image_record.build_record_path(image)  # the reader's name
    record = json.loads(build.build_record_path(image).read_text())
    assert tuple(record) == image_record.RECORD_KEYS
    assert record["commit"] == sha and record["image_bytes"] == len("image\n")
    lock = subprocess.run(["git", "show", f"{sha}:requirements.lock"], cwd=repo, capture_output=True, check=True).stdout
    assert record["requirements_lock_sha256"] == hashlib.sha256(lock).hexdigest()
