"""A small stand-in for the Hugging Face Hub on 127.0.0.1, for tests that run the real clients.

`huggingface_hub` (snapshot_download, hf_hub_download, HfApi, HfFileSystem) and `datasets` (streaming
through HfFileSystem) talk to it when `HF_ENDPOINT` is its URL. It serves the HTTP layout those
clients use (huggingface_hub 0.36, file_download.py / hf_api.py):

  GET  /api/{models|datasets}/{repo}[/revision/{rev}][?blobs=true]  repo info: sha, siblings (+ sizes,
                                                                     blob ids, LFS sha256 with blobs)
  GET  /api/{type}s/{repo}/tree/{rev}[/{path}]?recursive=..          the tree (HfFileSystem ls/glob)
  POST /api/{type}s/{repo}/paths-info/{rev}                          paths info (HfFileSystem info)
  HEAD / GET [/datasets]/{repo}/resolve/{rev}/{file}                 the file: X-Repo-Commit, ETag
                                                                     (sha256 for LFS files, the git
                                                                     blob sha1 otherwise), sizes,
                                                                     Range requests (206)

Errors come as the Hub sends them (status + `X-Error-Code`: RepoNotFound, RevisionNotFound,
EntryNotFound), so the clients raise their own exception types. Faults for tests, deterministic:
`fail_after(repo, file, n)` closes the connection after n bytes of the next GET of that file;
`fail_with(repo, file, status[, head=True])` answers the next GET (HEAD) of that file with an HTTP error;
`fail_api(repo, status)` answers the repo-info call with that status; `trickle(repo, file)` sends the
next GET of that file one byte at a time, slowly, for ever; `before_get(repo, file, action)` runs
`action()` before the next GET of that file is answered. Every request is logged in
`requests` (method, path, Range and Authorization headers, status), so a test can assert what the
client asked for.

    with HubServer() as hub:
        hub.add("dataset", "org/data", {"README.md": b"...", "train.jsonl": b"..."})
        env = {"HF_ENDPOINT": hub.url, "HF_HOME": str(tmp_path / "hf")}
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

# Files stored with git LFS on the Hub (what `.gitattributes` of a Hub repo tracks by default).
LFS_SUFFIXES = (".parquet", ".safetensors", ".bin", ".gz", ".arrow", ".zst", ".pt")


def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class Repo:
    repo_type: str  # "model" | "dataset"
    repo_id: str
    files: dict[str, bytes]
    sha: str = ""
    branches: dict[str, str] = field(default_factory=dict)  # name -> sha

    def __post_init__(self):
        digest = hashlib.sha1()
        for name in sorted(self.files):
            digest.update(name.encode() + b"\0" + self.files[name])
        self.sha = self.sha or digest.hexdigest()
        self.branches.setdefault("main", self.sha)

    def is_lfs(self, path: str) -> bool:
        return path.endswith(LFS_SUFFIXES)

    def entry(self, path: str, *, rfilename: bool) -> dict:
        data = self.files[path]
        item = {"rfilename": path} if rfilename else {"type": "file", "path": path, "oid": git_blob_sha1(data)}
        item["size"] = len(data)
        if rfilename:
            item["blobId"] = git_blob_sha1(data)
        if self.is_lfs(path):
            sha256 = hashlib.sha256(data).hexdigest()
            item["lfs"] = {"size": len(data), "pointerSize": 134, ("sha256" if rfilename else "oid"): sha256}
        return item

    def etag(self, path: str) -> str:
        data = self.files[path]
        return hashlib.sha256(data).hexdigest() if self.is_lfs(path) else git_blob_sha1(data)

    def folders(self) -> set[str]:
        out = set()
        for path in self.files:
            parts = path.split("/")[:-1]
            out.update("/".join(parts[: i + 1]) for i in range(len(parts)))
        return out


class HubServer:
    """The stand-in Hub; `url` is its endpoint (HF_ENDPOINT). A context manager (starts and stops)."""

    def __init__(self):
        self.repos: dict[tuple[str, str], Repo] = {}
        self.requests: list[dict] = []
        self._file_faults: dict[str, list[int]] = {}  # repo/file -> [bytes before closing, times left]
        self._api_faults: dict[str, list[int]] = {}  # repo id -> [status, times left]
        self._status_faults: dict[str, list[int]] = {}  # repo/file -> [status, times left]
        self._head_status_faults: dict[str, list[int]] = {}  # the same, for HEAD requests
        self._trickles: dict[str, list[float]] = {}  # repo/file -> [seconds between bytes, times left]
        self._actions: dict[str, list] = {}  # repo/file -> [callable, times left]
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    # -- content -------------------------------------------------------------------------------
    def add(self, repo_type: str, repo_id: str, files: dict[str, bytes | str]) -> str:
        """Add (or replace) a repo; returns its commit sha."""
        data = {k: v.encode() if isinstance(v, str) else v for k, v in files.items()}
        repo = Repo(repo_type, repo_id, data)
        self.repos[(repo_type, repo_id)] = repo
        return repo.sha

    def fail_after(self, repo_id: str, path: str, n_bytes: int, times: int = 1) -> None:
        """The next `times` GETs of the file `path` of `repo_id` stop after `n_bytes` bytes."""
        self._file_faults[f"{repo_id}/{path}"] = [n_bytes, times]

    def fail_with(self, repo_id: str, path: str, status: int, times: int = 1, head: bool = False) -> None:
        """The next `times` GETs of the file `path` of `repo_id` answer `status` (403: as a CDN
        answers a signed URL that expired mid-stream; huggingface_hub does not retry it);
        `head=True`: its HEAD requests instead (the metadata call before a download; a 5xx there
        is retried by huggingface_hub)."""
        faults = self._head_status_faults if head else self._status_faults
        faults[f"{repo_id}/{path}"] = [status, times]

    def fail_api(self, repo_id: str, status: int = 500, times: int = 1_000_000) -> None:
        """Repo-info calls for `repo_id` answer `status` (`times` times)."""
        self._api_faults[repo_id] = [status, times]

    def trickle(self, repo_id: str, path: str, every: float = 0.2, times: int = 1) -> None:
        """The next `times` GETs of the file send their headers (the whole size), then one byte every
        `every` seconds until the server stops or the client hangs up: every read gets a byte in
        time, so a per-read timeout never fires (issue 88)."""
        self._trickles[f"{repo_id}/{path}"] = [every, times]

    def before_get(self, repo_id: str, path: str, action, times: int = 1) -> None:
        """`action()` runs (in the server's thread) before the next `times` GETs of the file are
        answered: a test changes the disk while the client downloads."""
        self._actions[f"{repo_id}/{path}"] = [action, times]

    def count(self, method: str, suffix: str) -> int:
        return sum(1 for r in self.requests if r["method"] == method and r["path"].endswith(suffix))

    def bytes_sent(self, suffix: str, since: int = 0) -> int:
        """Bytes of files whose path ends with `suffix` sent in requests[since:]."""
        return sum(r["bytes"] for r in self.requests[since:] if r["method"] == "GET" and r["path"].endswith(suffix))

    # -- life cycle ----------------------------------------------------------------------------
    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> HubServer:
        hub = self

        class Handler(_Handler):
            server_hub = hub

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self._stopped.set()  # ends the trickles
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def __enter__(self) -> HubServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _take(self, faults: dict, key: str):
        with self._lock:
            fault = faults.get(key)
            if not fault or fault[1] <= 0:
                return None
            fault[1] -= 1
            return fault[0]


class _Handler(BaseHTTPRequestHandler):
    server_hub: HubServer
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # quiet
        pass

    # -- plumbing --------------------------------------------------------------------------------
    def _log(self, status: int, sent: int = 0) -> None:
        self.server_hub.requests.append(
            {
                "method": self.command,
                "path": urlsplit(self.path).path,
                "range": self.headers.get("Range"),
                "auth": self.headers.get("Authorization"),
                "status": status,
                "bytes": sent,
            }
        )

    def _send(self, status: int, body: bytes = b"", headers: dict | None = None, head: bool = False) -> None:
        self._log(status, 0 if head else len(body))
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        if "Content-Length" not in (headers or {}):
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head and body:
            self.wfile.write(body)

    def _json(self, obj, status: int = 200, headers: dict | None = None) -> None:
        self._send(status, json.dumps(obj).encode(), {"Content-Type": "application/json", **(headers or {})})

    def _error(self, status: int, code: str, message: str, head: bool = False) -> None:
        body = json.dumps({"error": message}).encode()
        self._send(status, body, {"Content-Type": "application/json", "X-Error-Code": code}, head=head)

    def _segments(self) -> list[str]:
        return [unquote(s) for s in urlsplit(self.path).path.split("/") if s]

    def _repo(self, repo_type: str, repo_id: str, head: bool = False) -> Repo | None:
        repo = self.server_hub.repos.get((repo_type, repo_id))
        if repo is None:
            self._error(404, "RepoNotFound", f"Repository {repo_id} not found", head)
        return repo

    def _revision(self, repo: Repo, rev: str, head: bool = False) -> str | None:
        sha = repo.branches.get(rev) or (rev if rev == repo.sha else None)
        if sha is None:
            self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}", head)
        return sha

    # -- verbs -----------------------------------------------------------------------------------
    def do_HEAD(self) -> None:
        self._resolve(head=True)

    def do_GET(self) -> None:
        parts = self._segments()
        if parts[:1] == ["api"]:
            return self._api_get(parts[1:])
        return self._resolve(head=False)

    def do_POST(self) -> None:
        parts = self._segments()
        length = int(self.headers.get("Content-Length") or 0)
        form = parse_qs(self.rfile.read(length).decode()) if length else {}
        # /api/{type}s/{org}/{name}/paths-info/{rev}
        if len(parts) >= 6 and parts[0] == "api" and parts[4] == "paths-info":
            repo = self._repo(parts[1][:-1], f"{parts[2]}/{parts[3]}")
            if repo is None or self._revision(repo, parts[5]) is None:
                return
            out = []
            for path in form.get("paths", []):
                path = path.strip("/")
                if path in repo.files:
                    out.append(repo.entry(path, rfilename=False))
                elif path in repo.folders():
                    out.append({"type": "directory", "path": path, "oid": git_blob_sha1(path.encode())})
            return self._json(out)
        self._error(404, "EntryNotFound", f"no route {self.path}")

    def _api_get(self, parts: list[str]) -> None:
        # {type}s/{org}/{name}[/revision/{rev}] | {type}s/{org}/{name}/tree/{rev}[/{path}]
        if len(parts) < 3 or parts[0] not in ("models", "datasets"):
            return self._error(404, "EntryNotFound", f"no route {self.path}")
        repo_type, repo_id, rest = parts[0][:-1], f"{parts[1]}/{parts[2]}", parts[3:]
        if not rest or rest[0] == "revision":
            status = self.server_hub._take(self.server_hub._api_faults, repo_id)
            if status is not None:
                return self._error(status, "ServerError", f"simulated error {status}")
        repo = self._repo(repo_type, repo_id)
        if repo is None:
            return
        rev = rest[1] if len(rest) >= 2 else "main"
        sha = self._revision(repo, rev)
        if sha is None:
            return
        if not rest or rest[0] == "revision":
            blobs = parse_qs(urlsplit(self.path).query).get("blobs", ["false"])[0].lower() == "true"
            siblings = [repo.entry(p, rfilename=True) if blobs else {"rfilename": p} for p in sorted(repo.files)]
            return self._json(
                {"id": repo_id, "sha": sha, "private": False, "gated": False, "disabled": False, "siblings": siblings}
            )
        if rest[0] == "tree":
            base = "/".join(rest[2:]).strip("/")
            recursive = parse_qs(urlsplit(self.path).query).get("recursive", ["false"])[0].lower() == "true"
            prefix = base + "/" if base else ""
            items = []
            for folder in sorted(repo.folders()):
                if folder.startswith(prefix) and (recursive or "/" not in folder[len(prefix) :]):
                    items.append({"type": "directory", "path": folder, "oid": git_blob_sha1(folder.encode())})
            for path in sorted(repo.files):
                if path.startswith(prefix) and (recursive or "/" not in path[len(prefix) :]):
                    items.append(repo.entry(path, rfilename=False))
            if base and base not in repo.folders():
                return self._error(404, "EntryNotFound", f"{base} does not exist")
            return self._json(items)
        self._error(404, "EntryNotFound", f"no route {self.path}")

    def _resolve(self, head: bool) -> None:
        parts = self._segments()
        repo_type = "model"
        if parts[:1] == ["datasets"]:
            repo_type, parts = "dataset", parts[1:]
        if len(parts) < 5 or parts[2] != "resolve":
            return self._error(404, "EntryNotFound", f"no route {self.path}", head)
        repo = self._repo(repo_type, f"{parts[0]}/{parts[1]}", head)
        if repo is None:
            return
        sha = self._revision(repo, parts[3], head)
        if sha is None:
            return
        path = "/".join(parts[4:])
        if path not in repo.files:
            return self._error(404, "EntryNotFound", f"{path} does not exist", head)
        faults = self.server_hub._head_status_faults if head else self.server_hub._status_faults
        status = self.server_hub._take(faults, f"{repo.repo_id}/{path}")
        if status is not None:
            return self._error(status, "Forbidden", f"simulated error {status} for {path}", head)
        action = None if head else self.server_hub._take(self.server_hub._actions, f"{repo.repo_id}/{path}")
        if action is not None:
            action()
        data = repo.files[path]
        headers = {"X-Repo-Commit": sha, "ETag": f'"{repo.etag(path)}"', "Accept-Ranges": "bytes"}
        if repo.is_lfs(path):
            headers.update({"X-Linked-Etag": f'"{repo.etag(path)}"', "X-Linked-Size": str(len(data))})
        start, end, status = 0, len(data) - 1, 200
        wanted = self.headers.get("Range")
        if wanted and wanted.startswith("bytes="):
            first, _, last = wanted[len("bytes=") :].partition("-")
            start = int(first) if first else max(0, len(data) - int(last))
            end = min(int(last), len(data) - 1) if (last and first) else len(data) - 1
            status = 206
            headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
        body = data[start : end + 1]
        headers["Content-Length"] = str(len(body))
        every = None if head else self.server_hub._take(self.server_hub._trickles, f"{repo.repo_id}/{path}")
        if every is not None:
            return self._trickle(status, headers, body, every)
        cut = None if head else self.server_hub._take(self.server_hub._file_faults, f"{repo.repo_id}/{path}")
        if cut is not None and cut < len(body):
            self._log(status, cut)
            self.send_response(status)  # headers announce the whole body ...
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(body[:cut])  # ... of which only `cut` bytes come
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)
            return
        self._send(status, body, headers, head=head)

    def _trickle(self, status: int, headers: dict, body: bytes, every: float) -> None:
        self._log(status)
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.close_connection = True
        for byte in body:
            if self.server_hub._stopped.wait(every):
                return
            try:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
            except OSError:  # the client hung up
                return
