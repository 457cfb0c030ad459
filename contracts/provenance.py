"""Provenance and safe writes: git sha, package versions, config hashes, atomic files."""

from __future__ import annotations

import datetime as _dt
import errno
import functools
import hashlib
import json
import os
import subprocess
import tempfile
from importlib import metadata
from pathlib import Path

TRACKED_PACKAGES = (
    "torch",
    "mosaicml",
    "mosaicml-streaming",
    "transformers",
    "tokenizers",
    "datasets",
    "numpy",
    "scipy",
    "statsmodels",
    "pandas",
    "matplotlib",
    "seqeval",
    "pytrec-eval-terrier",
    "spython",
    "flash-attn",
)
_REPO_ROOT = Path(__file__).resolve().parent.parent


def git_sha(repo: Path = _REPO_ROOT) -> str | None:
    """Commit of the code that produced a result, '+dirty' when the tree had changes."""
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=repo,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        # Inside the Apptainer image there is no .git: the build records the commit here.
        return os.environ.get("MLM_VS_CLM_GIT_SHA") or None
    return sha + ("+dirty" if dirty else "")


def package_versions(names: tuple[str, ...] = TRACKED_PACKAGES) -> dict[str, str]:
    return dict(_installed_versions(names))


@functools.cache
def _installed_versions(names: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """Read once per process: about 0.25 s a call, twice per fine-tuning run otherwise, and the
    packages a process has imported do not change under it."""
    versions = []
    for name in names:
        try:
            versions.append((name, metadata.version(name)))
        except metadata.PackageNotFoundError:
            continue
    return tuple(versions)


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def stable_hash(obj) -> str:
    """Short sha256 of a JSON-serialisable object, independent of key order."""
    payload = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def _default_file_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def give_usual_modes(folder: str | os.PathLike) -> None:
    """Every regular file under `folder` (links not followed) gets the usual mode (0666 minus umask):
    libraries that write through a private temporary file leave 0600 (transformers' save_pretrained
    left model.safetensors unreadable by a teammate's jobs in a team's study, issue 89)."""
    mode = _default_file_mode()
    for top, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(top, name)
            if not os.path.islink(path) and os.path.isfile(path):
                os.chmod(path, mode)


class DiskFullError(OSError):
    """No space (or quota) left while writing a file: one line naming it."""


def disk_full_cause(exc: BaseException | None) -> OSError | None:
    """The "no space left" (or quota) OSError behind `exc`, if any: libraries may raise their own
    error while cleaning up after one (torch.save raises a RuntimeError from its zip writer).
    Both links are followed (`raise X from Y` sets the cause, raising while handling sets the
    context), each exception once: a chain may loop (`raise exc from exc`)."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        exc = todo.pop()
        if exc is None or id(exc) in seen:
            continue
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return exc
        todo += [exc.__context__, exc.__cause__]  # the cause first (popped last-in first-out)
    return None


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write via a temp file in the same folder + rename, so readers never see half a file.

    The file gets the usual mode (0666 minus umask), not mkstemp's 0600, so collaborators on a
    shared cluster folder can read results, manifests, tables and figures. A full disk raises
    DiskFullError naming the file; the file as it was before (if any) is left intact and the temp
    file removed.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, _default_file_mode())
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if disk_full_cause(exc):
            raise DiskFullError(
                exc.errno,
                f"{path}: not written, no space left on the device "
                f"({exc.strerror}); the earlier files are intact: free space and rerun",
            ) from exc
        raise
    return path


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """atomic_write_bytes of the UTF-8 text."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, obj) -> Path:
    return atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")
