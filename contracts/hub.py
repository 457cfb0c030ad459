"""Fetching from the Hugging Face Hub once, for machines that later run offline (docs/cluster.md).

Shared by `python -m benchmarks fetch-data` (benchmarks.datasets.fetch) and `python -m pretraining
fetch-model` (pretraining.fetch_model). Everything goes through huggingface_hub: a revision is
resolved to its commit sha once (`resolve`) and every download pins that sha; `download` is
`hf_hub_download` of each file into a local folder (resumable: an interrupted file continues from
its `.incomplete` part on the next call; progress bars are huggingface_hub's), after which every file
is checked against the Hub's own hashes (sha256 of LFS files, the git blob sha1 of the others).
Failures become one-line `HubError`s naming the repo and the fix; a full disk is DiskFullError.
"""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from contracts.provenance import DiskFullError, disk_full_cause

# Where a local_dir download keeps its resume state (huggingface_hub's layout).
DOWNLOAD_STATE_DIR = ".cache"
# The record a fetched model folder carries (pretraining.fetch_model); checked before jobs run.
MODEL_MANIFEST = "fetch_manifest.json"


class HubError(RuntimeError):
    """The Hub could not give what was asked (unknown repo, revision or file, server or network
    error, offline mode); one line naming it and what to do."""


@dataclass(frozen=True)
class RemoteFile:
    path: str
    size: int | None
    sha256: str | None  # LFS files: the sha256 of the content
    git_sha1: str | None  # the git blob id (for LFS files, that of the pointer)


@dataclass(frozen=True)
class Snapshot:
    repo_id: str
    repo_type: str  # "model" | "dataset"
    requested: str  # the revision asked for (branch, tag or sha)
    sha: str  # the commit it resolved to: every download pins it
    files: dict[str, RemoteFile]


def endpoint() -> str:
    from huggingface_hub import constants

    return constants.ENDPOINT


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def git_blob_sha1_file(path: Path) -> str:
    digest = hashlib.sha1(b"blob %d\0" % Path(path).stat().st_size)
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def raise_hub_error(exc: Exception, repo_id: str, repo_type: str = "model", revision: str | None = None) -> NoReturn:
    """Raise the one-line error of `hub_error` from `exc`, or `exc` itself when it is none of the
    Hub's (never `exc` as its own cause: that loops whoever walks the chain)."""
    error = hub_error(exc, repo_id, repo_type, revision)
    if error is exc:
        raise exc
    raise error from exc


def hub_error(exc: BaseException, repo_id: str, repo_type: str = "model", revision: str | None = None) -> Exception:
    """The one-line error for an exception raised by huggingface_hub while fetching `repo_id`."""
    from huggingface_hub.errors import (
        EntryNotFoundError,
        GatedRepoError,
        HfHubHTTPError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )
    from requests import RequestException

    full = disk_full_cause(exc)
    if full is not None:
        return DiskFullError(
            full.errno, f"{full.filename or repo_id}: no space left on the device; free space and rerun (it resumes)"
        )
    kind = "dataset" if repo_type == "dataset" else "model"
    if isinstance(exc, GatedRepoError):
        return HubError(
            f"{kind} repo {repo_id} is gated: accept its terms on its Hub page and log in (`hf auth login`), then rerun"
        )
    if isinstance(exc, RepositoryNotFoundError):
        return HubError(
            f"{kind} repo {repo_id} not found on {endpoint()}: check the name (private repos need `hf auth login`)"
        )
    if isinstance(exc, RevisionNotFoundError):
        return HubError(f"{kind} repo {repo_id}: revision {revision!r} not found on {endpoint()}: check --revision")
    if isinstance(exc, EntryNotFoundError):
        return HubError(f"{kind} repo {repo_id}: a file is missing on the Hub ({_first_line(exc)})")
    if isinstance(exc, OfflineModeIsEnabled):
        return HubError(
            f"{kind} repo {repo_id}: HF_HUB_OFFLINE is set; fetch on a machine with network (the login node)"
        )
    if isinstance(exc, HfHubHTTPError):
        status = getattr(exc.response, "status_code", "?")
        return HubError(
            f"{kind} repo {repo_id}: the Hub ({endpoint()}) answered HTTP {status}; retry later: "
            "what was downloaded is kept and the next run resumes"
        )
    if isinstance(exc, (RequestException, ConnectionError, TimeoutError)):
        return HubError(
            f"{kind} repo {repo_id}: connection to {endpoint()} failed ({_first_line(exc)}); rerun the same "
            "command: finished files are kept and an interrupted one resumes"
        )
    return exc if isinstance(exc, Exception) else RuntimeError(str(exc))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def resolve(repo_id: str, repo_type: str = "model", revision: str | None = None) -> Snapshot:
    """The commit `revision` (default main) of a repo and its files with the Hub's hashes."""
    from huggingface_hub import HfApi

    try:
        info = HfApi().repo_info(repo_id, repo_type=repo_type, revision=revision, files_metadata=True)
    except Exception as exc:  # noqa: BLE001 - turned into one line naming the repo
        raise_hub_error(exc, repo_id, repo_type, revision)
    files = {
        s.rfilename: RemoteFile(s.rfilename, s.size, s.lfs.sha256 if s.lfs else None, s.blob_id)
        for s in info.siblings or ()
    }
    return Snapshot(repo_id, repo_type, revision or "main", info.sha, files)


def check_free_space(folder: Path, need: int, what: str) -> None:
    """Refuse before writing when `folder`'s file system has less than `need` bytes free."""
    folder = Path(folder)
    probe = next((p for p in (folder, *folder.parents) if p.exists()), Path("/"))
    free = shutil.disk_usage(probe).free
    if free < need:
        raise DiskFullError(
            28,
            f"{folder}: {what} needs about {need / 1e9:.2f} GB, {free / 1e9:.2f} GB are free on that disk: "
            "free space or choose another --out (nothing was written)",
        )


def verify_file(path: Path, remote: RemoteFile) -> str | None:
    """None when `path` is the Hub's file, else what differs (size, sha256 or git sha1)."""
    if not path.is_file():
        return "missing"
    size = path.stat().st_size
    if remote.size is not None and size != remote.size:
        return f"{size} bytes, the Hub has {remote.size}"
    if remote.sha256:
        actual = sha256_file(path)
        return None if actual == remote.sha256 else f"sha256 {actual[:12]}..., the Hub has {remote.sha256[:12]}..."
    if remote.git_sha1:
        actual = git_blob_sha1_file(path)
        return (
            None if actual == remote.git_sha1 else f"git sha1 {actual[:12]}..., the Hub has {remote.git_sha1[:12]}..."
        )
    return None


def download(snapshot: Snapshot, paths: list[str], local_dir: Path) -> Path:
    """The files `paths` of the snapshot into `local_dir` (same relative paths), one
    `hf_hub_download` each at the pinned sha (resumable, with its progress bar; a file already
    there is not fetched again), then checked against the Hub's hashes: a file that does not match
    is deleted and named."""
    from huggingface_hub import hf_hub_download

    local_dir = Path(local_dir)
    for path in paths:
        try:
            hf_hub_download(
                snapshot.repo_id, path, repo_type=snapshot.repo_type, revision=snapshot.sha, local_dir=local_dir
            )
        except Exception as exc:  # noqa: BLE001 - one line naming the repo
            raise_hub_error(exc, snapshot.repo_id, snapshot.repo_type)
        problem = verify_file(local_dir / path, snapshot.files[path])
        if problem:
            (local_dir / path).unlink(missing_ok=True)
            raise HubError(
                f"{snapshot.repo_type} repo {snapshot.repo_id}@{snapshot.sha[:12]}: {path} downloaded but "
                f"{problem}; it was removed, rerun to fetch it again"
            )
    return local_dir


def check_files(root: Path, entries: dict[str, dict], hashes: bool = True) -> list[str]:
    """Problems of the files `entries` ({relative path: {"bytes", "sha256"}}) under `root` against
    those records, one line each; `hashes=False` checks presence and sizes only (fast)."""
    problems = []
    for rel, entry in sorted(entries.items()):
        path = Path(root) / rel
        if not path.is_file():
            problems.append(f"{path}: missing (the manifest lists it)")
        elif path.stat().st_size != entry["bytes"]:
            problems.append(f"{path}: {path.stat().st_size} bytes, the manifest says {entry['bytes']}")
        elif hashes and sha256_file(path) != entry["sha256"]:
            problems.append(f"{path}: sha256 differs from the manifest (corrupted or changed)")
    return problems


def check_fetched_model(folder: Path, hashes: bool = True) -> list[str]:
    """Problems of a `fetch-model` folder against its manifest (offline); [] when it verifies."""
    import json

    manifest = Path(folder) / MODEL_MANIFEST
    if not manifest.is_file():
        return [f"{folder}: no {MODEL_MANIFEST} (not a fetch-model folder)"]
    return check_files(Path(folder), json.loads(manifest.read_text())["files"], hashes)
