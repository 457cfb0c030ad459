"""Fetching from the Hugging Face Hub once, for machines that later run offline (docs/cluster.md).

Shared by `python -m benchmarks fetch-data` (benchmarks.datasets.fetch) and `python -m pretraining
fetch-model` (pretraining.fetch_model). Everything goes through huggingface_hub: a revision is
resolved to its commit sha once (`resolve`) and every download pins that sha; `download` is
`hf_hub_download` of each file into a local folder (resumable: an interrupted file continues from
its `.incomplete` part on the next call; progress bars are huggingface_hub's), after which every file
is checked against the Hub's own hashes (sha256 of LFS files, the git blob sha1 of the others)
and, given a staging folder, only then moved into place. Every call has a total deadline, in any
thread (`total_deadline`).
Failures become one-line `HubError`s naming the repo and the fix; a full disk is DiskFullError.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from contracts.paths import UnsafeNameError, check_name, contained, move_inside
from contracts.provenance import DiskFullError, disk_full_cause

# Where a local_dir download keeps its resume state (huggingface_hub's layout).
DOWNLOAD_STATE_DIR = ".cache"
# The record a fetched model folder carries (pretraining.fetch_model); checked before jobs run.
MODEL_MANIFEST = "fetch_manifest.json"
# Settings read from the environment when a Hub call is made, never at import (issue 78: a malformed
# value crashed every `python -m pretraining` command, `--help` included), each a positive finite
# number or a one-line HubError naming the variable:
# - MLM_VS_CLM_HUB_TIMEOUT (60 s): a Hub call's wait to connect and between bytes of the answer (issue
#   56: a server that accepts and never answers held `fetch-model` for ever);
# - MLM_VS_CLM_HUB_DEADLINE (600 s): the whole of a metadata call, connect to last byte, retries
#   included (issue 66: a server that trickled one byte every 5 s never tripped the per-read timeout);
# - MLM_VS_CLM_HUB_MIN_RATE (100 kB/s): a file download gets the deadline plus its size at this rate
#   (a 2.5 GB checkpoint may take 7 hours), but never more than
# - MLM_VS_CLM_HUB_MAX_DEADLINE (24 h) whatever size the server declares (issue 78: a Hub declaring a
#   50 GB file got a 5.8-day deadline).
HUB_SETTINGS = {
    "MLM_VS_CLM_HUB_TIMEOUT": 60.0,
    "MLM_VS_CLM_HUB_DEADLINE": 600.0,
    "MLM_VS_CLM_HUB_MIN_RATE": 100_000.0,
    "MLM_VS_CLM_HUB_MAX_DEADLINE": 86_400.0,
}


def hub_setting(variable: str) -> float:
    """The value of one of HUB_SETTINGS from the environment (its default when unset)."""
    import math

    raw = os.environ.get(variable)
    if raw is None or raw.strip() == "":
        return HUB_SETTINGS[variable]
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        shown = raw if len(raw) <= 40 else raw[:40] + "..."
        raise HubError(
            f"environment variable {variable}={shown!r}: not a positive finite number; unset it (default "
            f"{HUB_SETTINGS[variable]:g}) or set a number such as {HUB_SETTINGS[variable]:g}"
        )
    return value


def file_deadline(size: int | None) -> float:
    """The total deadline of downloading `size` bytes (the metadata deadline plus the size at the
    minimum rate), capped at MLM_VS_CLM_HUB_MAX_DEADLINE whatever size a server declares."""
    seconds = hub_setting("MLM_VS_CLM_HUB_DEADLINE") + max(0, size or 0) / hub_setting("MLM_VS_CLM_HUB_MIN_RATE")
    return min(seconds, hub_setting("MLM_VS_CLM_HUB_MAX_DEADLINE"))


class DeadlinePassed(BaseException):  # noqa: N818 - not an Exception: the libraries' `except Exception` let it pass
    """The total deadline of a Hub call passed: after `seconds`, with `received` bytes downloaded
    (None: not counted); `behind`: cut for falling behind the minimum rate, before the deadline."""

    def __init__(self, seconds: float = 0.0, received: int | None = None, behind: bool = False):
        super().__init__(seconds, received, behind)
        self.seconds, self.received, self.behind = seconds, received, behind


def _raise_in_thread(thread_id: int, exc_type: type[BaseException] | None) -> None:
    """Have `exc_type` raised in another thread at its next Python instruction (None: drop one set
    and not raised yet); CPython's own way to interrupt a thread."""
    import ctypes

    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), ctypes.py_object(exc_type) if exc_type else None
    )


@contextlib.contextmanager
def total_deadline(seconds: float, received: Callable[[], int] | None = None):
    """DeadlinePassed in the block once `seconds` have passed, wherever it is (a socket read too), in
    whichever thread runs it. With `received` (the bytes the block has downloaded so far) the block
    must also keep pace: past MLM_VS_CLM_HUB_DEADLINE seconds it ends as soon as it has received less
    than MLM_VS_CLM_HUB_MIN_RATE bytes a second beyond them, so that a server that trickles a large
    file is cut off after minutes, not at the deadline its declared size gives (issue 88: 24 hours).

    A watchdog thread keeps the time. The main thread gets SIGALRM, which interrupts a blocked read
    at once; another thread gets the exception set asynchronously (issue 88: a worker thread's call
    had no total deadline), raised at its next Python instruction, so at the latest when the
    per-read timeout ends a read that gets no byte."""
    import signal
    import threading
    import time

    if seconds <= 0:
        yield
        return
    caller = threading.current_thread()
    in_main = caller is threading.main_thread()
    grace = rate = base = 0.0
    if received is not None:
        grace, rate, base = hub_setting("MLM_VS_CLM_HUB_DEADLINE"), hub_setting("MLM_VS_CLM_HUB_MIN_RATE"), received()
    start, stop, lock = time.monotonic(), threading.Event(), threading.Lock()
    fired: list[DeadlinePassed] = []

    def limit() -> tuple[float, int | None]:
        if received is None:
            return seconds, None
        got = max(0, int(received() - base))
        return min(seconds, grace + got / rate), got

    def watch():
        while True:
            allowed, got = limit()
            left = start + allowed - time.monotonic()
            if left <= 0:
                break
            if stop.wait(left):
                return
        with lock:
            if stop.is_set():
                return
            fired.append(DeadlinePassed(allowed, got, allowed < seconds))
            if in_main:
                signal.pthread_kill(caller.ident, signal.SIGALRM)
            else:
                _raise_in_thread(caller.ident, DeadlinePassed)

    def expire(signum, frame):
        raise DeadlinePassed()

    previous = signal.signal(signal.SIGALRM, expire) if in_main else None
    threading.Thread(target=watch, name="hub-deadline", daemon=True).start()
    expired = False
    try:
        yield
    except DeadlinePassed:
        expired = True
    finally:
        while True:  # a DeadlinePassed on its way may still arrive here: the watchdog is stopped whatever
            try:
                with lock:
                    stop.set()
                    if fired and not in_main:
                        _raise_in_thread(caller.ident, None)  # the block finished first: drop it
                break
            except DeadlinePassed:
                expired = True
        if in_main:
            signal.signal(signal.SIGALRM, previous)
    if expired:
        raise fired[0] if fired else DeadlinePassed(seconds)


def bytes_under(folder: Path) -> Callable[[], int]:
    """What `total_deadline` counts for a download into `folder`: the bytes of its files now (links
    not followed), which huggingface_hub's `.incomplete` parts grow as they arrive (10 MB at a time)."""

    def count() -> int:
        total = 0
        for top, _, names in os.walk(folder):
            for name in names:
                with contextlib.suppress(OSError):
                    total += os.lstat(os.path.join(top, name)).st_size
        return total

    return count


def deadline_error(passed: DeadlinePassed, repo_id: str, repo_type: str, what: str) -> HubError:
    if passed.behind:
        rate = hub_setting("MLM_VS_CLM_HUB_MIN_RATE")
        return HubError(
            f"{repo_type} repo {repo_id}: {what} got {human_bytes(passed.received or 0)} in {passed.seconds:,.0f} s, "
            f"less than {human_bytes(rate)}/s after the first {hub_setting('MLM_VS_CLM_HUB_DEADLINE'):,.0f} s (the Hub "
            f"at {endpoint()} answers too slowly; MLM_VS_CLM_HUB_DEADLINE and MLM_VS_CLM_HUB_MIN_RATE set the limit): "
            "retry later: what was downloaded is kept and the next run resumes"
        )
    return HubError(
        f"{repo_type} repo {repo_id}: {what} did not finish within {passed.seconds:,.0f} s (the Hub at "
        f"{endpoint()} answers too slowly or not at all; MLM_VS_CLM_HUB_DEADLINE and MLM_VS_CLM_HUB_MIN_RATE set "
        "the limit): retry later"
    )


class HubError(RuntimeError):
    """The Hub could not give what was asked (unknown repo, revision or file, server or network
    error, offline mode), or the folder to fetch into cannot be written; one line naming it and
    what to do."""


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
        LocalEntryNotFoundError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )
    from requests import HTTPError, RequestException

    if isinstance(exc, LocalEntryNotFoundError) and exc.__cause__ is not None:
        # hf_hub_download's "cannot locate the file" (an EntryNotFoundError too) when the call for
        # the file's metadata failed: a server error or a lost connection, not a missing file
        return hub_error(exc.__cause__, repo_id, repo_type, revision)
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
    # requests' HTTPError too: http_backoff raises it once its retries of a 5xx answer are spent
    if isinstance(exc, (HfHubHTTPError, HTTPError)) and getattr(exc, "response", None) is not None:
        status = getattr(exc.response, "status_code", "?")
        return HubError(
            f"{kind} repo {repo_id}: the Hub ({endpoint()}) answered HTTP {status}{_retried()}; retry later: "
            "what was downloaded is kept and the next run resumes"
        )
    if isinstance(exc, (RequestException, ConnectionError, TimeoutError)):
        return HubError(
            f"{kind} repo {repo_id}: connection to {endpoint()} failed ({_first_line(exc)}){_retried()}; rerun "
            "the same command: finished files are kept and an interrupted one resumes"
        )
    return exc if isinstance(exc, Exception) else RuntimeError(str(exc))


class _Retries(logging.Filter):
    """Keeps huggingface_hub's retry warnings (two lines per retry of a 5xx answer or a lost
    connection, `huggingface_hub.utils._http.http_backoff`) off the terminal and counts them: the
    retries still happen, and the one-line error says how many there were."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if message.startswith("Retrying in "):
            self.count += 1
            return False
        return " thrown while requesting " not in message


_RETRY_LOGGER = "huggingface_hub.utils._http"
_retries = _Retries()


@contextlib.contextmanager
def quiet_retries():
    """Inside: huggingface_hub's retry warnings are counted, not printed (see `_Retries`)."""
    logger = logging.getLogger(_RETRY_LOGGER)
    _retries.count = 0
    logger.addFilter(_retries)
    try:
        yield
    finally:
        logger.removeFilter(_retries)


def _retried() -> str:
    return f" (after {_retries.count} retries)" if _retries.count else ""


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def resolve(repo_id: str, repo_type: str = "model", revision: str | None = None) -> Snapshot:
    """The commit `revision` (default main) of a repo and its files with the Hub's hashes."""
    from huggingface_hub import HfApi
    from requests.exceptions import JSONDecodeError

    deadline, timeout = hub_setting("MLM_VS_CLM_HUB_DEADLINE"), hub_setting("MLM_VS_CLM_HUB_TIMEOUT")
    try:
        with quiet_retries(), total_deadline(deadline):
            info = HfApi().repo_info(
                repo_id, repo_type=repo_type, revision=revision, files_metadata=True, timeout=timeout
            )
    except DeadlinePassed as passed:
        raise deadline_error(passed, repo_id, repo_type, "the repo description") from None
    except (TypeError, KeyError, AttributeError, JSONDecodeError) as exc:  # parsing a malformed answer
        raise HubError(
            f"{repo_type} repo {repo_id}: the Hub ({endpoint()}) answered something that is not a repo "
            f"description ({type(exc).__name__}); check HF_ENDPOINT, retry later"
        ) from None
    except Exception as exc:  # noqa: BLE001 - turned into one line naming the repo
        raise_hub_error(exc, repo_id, repo_type, revision)
    try:
        files = {
            s.rfilename: RemoteFile(s.rfilename, s.size, s.lfs.sha256 if s.lfs else None, s.blob_id)
            for s in info.siblings or ()
        }
        if not isinstance(info.sha, str):
            raise TypeError(info.sha)
    except (TypeError, AttributeError) as exc:
        raise HubError(
            f"{repo_type} repo {repo_id}: the Hub ({endpoint()}) answered something that is not a repo "
            f"description ({type(exc).__name__}); check HF_ENDPOINT, retry later"
        ) from None
    listing = f"the file listing of {repo_type} repo {repo_id} on {endpoint()}"
    for name in files:  # issue 78: a listed `../x` or `/x` reached the disk through hf_hub_download
        try:
            check_name(name, listing)
        except UnsafeNameError as exc:
            raise HubError(f"{exc}: check HF_ENDPOINT (a mirror that lists such names is not to be trusted)") from None
    return Snapshot(repo_id, repo_type, revision or "main", info.sha, files)


def check_writable(folder: Path, option: str = "--out") -> None:
    """Refuse before fetching when `folder` cannot be created or written (a read-only disk, a
    folder of another user): one line, nothing downloaded."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".write-check.", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise HubError(
            f"{option} {folder}: cannot write there ({exc.strerror or exc}); choose a writable {option} "
            "(nothing was downloaded)"
        ) from None


def human_bytes(n: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{int(n)} bytes"


def bytes_to_download(
    snapshot: Snapshot, paths: list[str], local_dir: Path, staging: Path | None = None
) -> tuple[int, int]:
    """(bytes still to download, bytes already downloaded) of `paths` into `local_dir` (through
    `staging`, see `download`): a finished file counts whole, an interrupted one by its `.incomplete`
    part, which the next `hf_hub_download` continues (huggingface_hub's local-folder layout; the part
    is named by the file's ETag, which the Hub sets to the sha256 of an LFS file and the git blob id
    of others)."""
    from huggingface_hub._local_folder import get_local_download_paths

    local_dir = Path(local_dir)
    writer = Path(staging) if staging is not None else local_dir
    remaining = have = 0
    for path in paths:
        remote = snapshot.files[path]
        size = remote.size or 0
        if (local_dir / path).is_file() or (writer / path).is_file():
            have += size
            continue
        part = 0
        etag = remote.sha256 or remote.git_sha1
        if etag and writer.is_dir():
            incomplete = get_local_download_paths(writer, path).incomplete_path(etag)
            part = min(incomplete.stat().st_size, size) if incomplete.is_file() else 0
        have += part
        remaining += size - part
    return remaining, have


def check_free_space(folder: Path, need: int, what: str, have: int = 0) -> None:
    """Refuse before writing when `folder`'s file system has less than `need` bytes free (`have`:
    what is already downloaded and not counted in `need`, for the message)."""
    folder = Path(folder)
    probe = next((p for p in (folder, *folder.parents) if p.exists()), Path("/"))
    free = shutil.disk_usage(probe).free
    if free < need:
        already = f" more ({human_bytes(have)} already downloaded)" if have else ""
        raise DiskFullError(
            28,
            f"{folder}: {what} needs about {human_bytes(need)}{already}, {human_bytes(free)} are free on that disk: "
            "free space or choose another --out (nothing more was written)",
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


def download(snapshot: Snapshot, paths: list[str], local_dir: Path, staging: Path | None = None) -> Path:
    """The files `paths` of the snapshot into `local_dir` (same relative paths), one
    `hf_hub_download` each at the pinned sha (resumable, with its progress bar; a file already
    there is not fetched again), then checked against the Hub's hashes: a file that does not match
    is deleted and named.

    With `staging` (a folder of the package's own), huggingface_hub writes there and each file is
    moved into `local_dir` only once it matches, through `contracts.paths.move_inside`: a folder of
    `local_dir` swapped for a link during the download is refused, and no file goes through it
    (issue 88); a file already in `local_dir` that matches the Hub's is kept as it is."""
    from huggingface_hub import hf_hub_download

    local_dir = Path(local_dir)
    writer = Path(staging) if staging is not None else local_dir
    source = f"the file listing of {snapshot.repo_type} repo {snapshot.repo_id} on {endpoint()}"
    targets = {}
    for path in paths:  # every name checked before the first byte is written
        try:
            targets[path] = (contained(local_dir, path, source), contained(writer, path, source))
        except UnsafeNameError as exc:
            raise HubError(str(exc)) from None
    timeout = hub_setting("MLM_VS_CLM_HUB_TIMEOUT")
    for path in paths:
        target, written = targets[path]
        remote = snapshot.files[path]
        if staging is not None and verify_file(target, remote) is None:
            continue
        seconds = file_deadline(remote.size)
        try:
            with quiet_retries(), total_deadline(seconds, bytes_under(writer / DOWNLOAD_STATE_DIR)):
                hf_hub_download(
                    snapshot.repo_id,
                    path,
                    repo_type=snapshot.repo_type,
                    revision=snapshot.sha,
                    local_dir=writer,
                    etag_timeout=timeout,  # the metadata call; the body's read: HF_HUB_DOWNLOAD_TIMEOUT
                )
        except DeadlinePassed as passed:
            raise deadline_error(passed, snapshot.repo_id, snapshot.repo_type, f"the download of {path}") from None
        except Exception as exc:  # noqa: BLE001 - one line naming the repo
            raise_hub_error(exc, snapshot.repo_id, snapshot.repo_type)
        try:  # where huggingface_hub wrote it, a link on the way swapped in meanwhile included
            contained(writer, path, source)
        except UnsafeNameError as exc:
            raise HubError(f"{exc} (during the download: nothing was kept)") from None
        problem = verify_file(written, remote)
        if problem:
            written.unlink(missing_ok=True)
            raise HubError(
                f"{snapshot.repo_type} repo {snapshot.repo_id}@{snapshot.sha[:12]}: {path} downloaded but "
                f"{problem}; it was removed, rerun to fetch it again"
            )
        if staging is not None:
            try:
                move_inside(written, local_dir, path, source)
            except UnsafeNameError as exc:
                raise HubError(f"{exc} (during the download: nothing was kept)") from None
    return local_dir


def download_to_cache(snapshot: Snapshot, paths: list[str]) -> Path:
    """The files `paths` into the Hugging Face cache ($HF_HOME/hub), one `hf_hub_download` each in
    this thread (each under its deadline: snapshot_download's worker threads had none, issue 88), at
    the revision asked for, which huggingface_hub records (refs/main -> the commit) so that
    `from_pretrained(repo_id)` finds it offline; then checked against the Hub's hashes. Returns the
    snapshot folder; a revision that moved on the Hub meanwhile is a HubError."""
    from huggingface_hub import constants, hf_hub_download
    from huggingface_hub.file_download import repo_folder_name

    cached = Path(constants.HF_HUB_CACHE) / repo_folder_name(repo_id=snapshot.repo_id, repo_type=snapshot.repo_type)
    folder = cached / "snapshots" / snapshot.sha
    timeout = hub_setting("MLM_VS_CLM_HUB_TIMEOUT")
    for path in paths:
        seconds = file_deadline(snapshot.files[path].size)
        try:
            with quiet_retries(), total_deadline(seconds, bytes_under(cached / "blobs")):
                local = hf_hub_download(
                    snapshot.repo_id,
                    path,
                    repo_type=snapshot.repo_type,
                    revision=snapshot.requested,
                    etag_timeout=timeout,
                )
        except DeadlinePassed as passed:
            raise deadline_error(passed, snapshot.repo_id, snapshot.repo_type, f"the download of {path}") from None
        except Exception as exc:  # noqa: BLE001 - one line naming the repo
            raise_hub_error(exc, snapshot.repo_id, snapshot.repo_type)
        if Path(local) != folder / path:
            raise HubError(
                f"{snapshot.repo_id}: {snapshot.requested} moved from {snapshot.sha[:12]} to another commit during "
                "the fetch; rerun"
            )
        problem = verify_file(folder / path, snapshot.files[path])
        if problem:
            raise HubError(f"{snapshot.repo_id}: {path} in the cache is {problem}; delete it and rerun")
    return folder


def check_files(root: Path, entries: dict[str, dict], hashes: bool = True) -> list[str]:
    """Problems of the files `entries` ({relative path: {"bytes", "sha256"}}) under `root` against
    those records, one line each; `hashes=False` checks presence and sizes only (fast)."""
    return [problem for _, problem in differing_files(root, entries, hashes)]


def differing_files(root: Path, entries: dict[str, dict], hashes: bool = True) -> list[tuple[str, str]]:
    """(relative path, what differs) of each file of `entries` that is not as recorded."""
    out = []
    for rel, entry in sorted(entries.items()):
        try:  # a manifest is read from disk: its names pass the containment rule (issue 78)
            path = contained(root, rel, f"the manifest of {root}")
        except UnsafeNameError as exc:
            out.append((str(rel), str(exc)))
            continue
        if not path.is_file():
            out.append((rel, f"{path}: missing (the manifest lists it)"))
        elif path.stat().st_size != entry["bytes"]:
            out.append((rel, f"{path}: {path.stat().st_size} bytes, the manifest says {entry['bytes']}"))
        elif hashes and sha256_file(path) != entry["sha256"]:
            out.append((rel, f"{path}: sha256 differs from the manifest (corrupted or changed)"))
    return out


def check_fetched_model(folder: Path, hashes: bool = True) -> list[str]:
    """Problems of a `fetch-model` folder against its manifest (offline); [] when it verifies."""
    from contracts.bounded import SMALL, BoundedReadError, read_json_object

    manifest = Path(folder) / MODEL_MANIFEST
    if not manifest.is_file():
        return [f"{folder}: no {MODEL_MANIFEST} (not a fetch-model folder)"]
    try:
        files = read_json_object(manifest, SMALL)["files"]
    except BoundedReadError as exc:
        return [f"{exc} (the fetch-model manifest): fetch the model again"]
    return check_files(Path(folder), files, hashes)
