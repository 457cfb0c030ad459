"""contracts.hub's errors without a Hub: which one line an exception of huggingface_hub becomes,
and that an error that is none of the Hub's is raised as it is (issue 35, items 6 and 11)."""

from __future__ import annotations

import errno
import re
import threading

import pytest

from contracts.hub import RemoteFile, Snapshot, download
from contracts.provenance import disk_full_cause


def _snapshot() -> Snapshot:
    return Snapshot("org/data", "dataset", "main", "a" * 40, {"x.json": RemoteFile("x.json", 3, None, None)})


def test_an_error_that_is_none_of_the_hubs_is_not_raised_as_its_own_cause(tmp_path, monkeypatch):
    import huggingface_hub

    def refuse(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", str(tmp_path / "x.json"))

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", refuse)
    with pytest.raises(PermissionError) as caught:
        download(_snapshot(), ["x.json"], tmp_path)
    assert caught.value.__cause__ is not caught.value  # `raise exc from exc` made the chain a loop
    assert disk_full_cause(caught.value) is None


def _in_thread(function, *args):
    """function(*args) in a daemon thread; (finished, result): a loop does not hang the test run."""
    result, done = [], threading.Event()

    def target():
        result.append(function(*args))
        done.set()

    threading.Thread(target=target, daemon=True).start()
    return done.wait(timeout=30), result


def test_the_disk_full_check_ends_on_a_looping_chain_and_finds_enospc_in_it():
    loop = RuntimeError("cleanup failed")
    loop.__cause__ = loop
    assert _in_thread(disk_full_cause, loop) == (True, [None])

    full = OSError(errno.ENOSPC, "No space left on device")
    outer, inner = RuntimeError("outer"), RuntimeError("inner")
    outer.__cause__, inner.__cause__, inner.__context__ = inner, outer, full
    assert _in_thread(disk_full_cause, outer) == (True, [full])


@pytest.mark.parametrize(
    "cause, says",
    [
        ("connection", "connection to "),
        ("http", "answered HTTP 503"),
    ],
)
def test_a_file_the_hub_could_not_be_asked_about_is_not_reported_missing(cause, says):
    """hf_hub_download raises LocalEntryNotFoundError (an EntryNotFoundError) from the real
    failure when the file's metadata call failed: the line names that failure."""
    import requests
    from huggingface_hub.errors import LocalEntryNotFoundError

    from contracts.hub import hub_error

    if cause == "connection":
        real = requests.ConnectionError("Connection refused")
    else:
        response = requests.Response()
        response.status_code = 503
        real = requests.HTTPError("503 Server Error", response=response)
    try:
        try:
            raise real
        except requests.RequestException as exc:
            raise LocalEntryNotFoundError("An error happened while trying to locate the file on the Hub") from exc
    except LocalEntryNotFoundError as exc:
        line = str(hub_error(exc, "org/data", "dataset"))
    assert says in line and "missing" not in line


class _RawServer:
    """A server on 127.0.0.1 answering each connection with `answer(conn)`, in a thread of its own;
    every connection is held open until close()."""

    def __init__(self):
        import socket

        self.server = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.server.getsockname()[1]}"
        self.stop, self.held = threading.Event(), []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        self.server.settimeout(0.1)
        while not self.stop.is_set():
            try:
                conn, _ = self.server.accept()
            except OSError:
                continue
            self.held.append(conn)
            threading.Thread(target=self.answer, args=(conn,), daemon=True).start()

    def answer(self, conn):
        raise NotImplementedError

    def close(self):
        self.stop.set()
        self.thread.join()
        for conn in self.held:
            conn.close()
        self.server.close()


class _SilentOrMalformedHub(_RawServer):
    """A server on 127.0.0.1 that accepts and never answers (`silent`), or answers every request with
    HTTP 200 and a body that is no repo description."""

    def __init__(self, body: bytes | None):
        self.body = body
        super().__init__()

    def answer(self, conn):
        if self.body is not None:  # a silent server neither answers nor closes
            conn.recv(65536)
            head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(self.body)}\r\n\r\n"
            conn.sendall(head.encode() + self.body)


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (None, "connection to"),  # accepts, never answers: ends at the read timeout
        (b'{"id": "x", "sha": 5, "siblings": 7}', "answered something that is not a repo description"),
        (b"[1, 2", "answered something that is not a repo description"),
    ],
)
def test_a_hub_that_never_answers_or_answers_nonsense_is_one_line(tmp_path, body, says):
    """Issue 56: `fetch-model` against a server that accepts and never answers waited for ever (no
    timeout passed to huggingface_hub); a malformed JSON answer printed a 40-line TypeError. The
    command runs as a user runs it, against the server, with a 1 s timeout."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    server = _SilentOrMalformedHub(body)
    env = {**os.environ, "HF_HUB_OFFLINE": "0", "HF_ENDPOINT": server.url, "MLM_VS_CLM_HUB_TIMEOUT": "1"}
    env["HF_HOME"] = str(tmp_path / "hf")
    argv = [sys.executable, "-m", "pretraining", "fetch-model", "610m-clm-42k", "--out", str(tmp_path / "model")]
    root = Path(__file__).resolve().parents[2]
    try:
        result = subprocess.run(argv, env=env, cwd=root, capture_output=True, text=True, timeout=300)
    finally:
        server.close()
    err = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(err) == 1, result.stderr[-3000:]
    assert says in err[0] and "MLMvsCLM/610m-clm-42k" in err[0]


@pytest.mark.e2e  # huggingface_hub retries the metadata call 5 times with backoff (~30 s)
def test_a_file_download_from_a_hub_that_never_answers_ends_at_our_timeout(tmp_path):
    """The file downloads pass MLM_VS_CLM_HUB_TIMEOUT as hf_hub_download's metadata timeout (it
    waited huggingface_hub's own 10 s before): against a server that accepts and never answers the
    download ends in one line that names the read timeout we set (1 s here)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from contracts.hub import HubError, RemoteFile, Snapshot, download\n"
        "files = {'config.json': RemoteFile('config.json', 2, None, None)}\n"
        "snap = Snapshot('org/model', 'model', 'main', 'a' * 40, files)\n"
        "try:\n"
        "    download(snap, ['config.json'], Path(sys.argv[1]))\n"
        "except HubError as exc:\n"
        "    print(exc)\n"
    )
    server = _SilentOrMalformedHub(None)
    env = {**os.environ, "HF_HUB_OFFLINE": "0", "HF_ENDPOINT": server.url, "MLM_VS_CLM_HUB_TIMEOUT": "1"}
    env["HF_HOME"] = str(tmp_path / "hf")
    env.pop("HF_HUB_ETAG_TIMEOUT", None)
    root = Path(__file__).resolve().parents[2]
    try:
        argv = [sys.executable, "-c", code, str(tmp_path / "model")]
        result = subprocess.run(argv, env=env, cwd=root, capture_output=True, text=True)
    finally:
        server.close()
    out = result.stdout.strip().splitlines()
    assert result.returncode == 0 and len(out) == 1, result.stdout[-2000:] + result.stderr[-3000:]
    assert "connection to" in out[0] and "org/model" in out[0]
    assert re.search(r"read timeout=1(\.0)?\)", out[0]), out[0]  # ours, not huggingface_hub's 10 s


class _TricklingHub(_RawServer):
    """A server that answers 200 with a Content-Length and then one byte every `every` seconds, for
    ever: each read gets a byte in time, so a per-read timeout never fires."""

    def __init__(self, every: float = 0.3):
        self.every = every
        super().__init__()

    def answer(self, conn):
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n")
        while not self.stop.wait(self.every):
            try:
                conn.sendall(b" ")
            except OSError:
                return


def test_a_hub_that_trickles_its_answer_ends_at_the_total_deadline(tmp_path):
    """Issue 66, item 6: against a server that trickles its answer, `fetch-model` printed nothing for
    240 s (the per-read timeout bounds each read, not the call). The whole call now has a deadline
    (MLM_VS_CLM_HUB_DEADLINE, 3 s here): one line, exit 2."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    server = _TricklingHub()
    env = {**os.environ, "HF_HUB_OFFLINE": "0", "HF_ENDPOINT": server.url, "HF_HOME": str(tmp_path / "hf")}
    env.update(MLM_VS_CLM_HUB_TIMEOUT="2", MLM_VS_CLM_HUB_DEADLINE="3")
    argv = [sys.executable, "-m", "pretraining", "fetch-model", "610m-clm-42k", "--out", str(tmp_path / "model")]
    try:
        result = subprocess.run(
            argv, env=env, cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, timeout=300
        )
    finally:
        server.close()
    err = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(err) == 1, result.stderr[-3000:]
    assert "model repo MLMvsCLM/610m-clm-42k: the repo description did not finish within 3 s" in err[0], err


def _call_code(call: str, thread: str) -> str:
    """Code that runs `call` in the main thread or in a worker thread and prints its HubError."""
    return (
        "import sys, threading\n"
        "from contracts.hub import HubError\n"
        "def call():\n"
        "    try:\n"
        f"        {call}\n"
        "    except HubError as exc:\n"
        "        print(exc)\n"
        + (
            "call()\n"
            if thread == "main"
            else "worker = threading.Thread(target=call)\nworker.start()\nworker.join()\n"
        )
    )


def _run_code(code: str, url: str, tmp_path, **settings) -> list[str]:
    """`python -c code OUT` against the Hub at `url`; its stdout lines (a guard ends a hang: the test fails)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {**os.environ, "HF_HUB_OFFLINE": "0", "HF_ENDPOINT": url, "HF_HOME": str(tmp_path / "hf"), **settings}
    root = Path(__file__).resolve().parents[2]
    argv = [sys.executable, "-c", code, str(tmp_path / "out")]
    result = subprocess.run(argv, env=env, cwd=root, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.strip().splitlines()


def test_a_hub_call_from_a_worker_thread_ends_at_its_total_deadline(tmp_path):
    """Issue 88: the total deadline was SIGALRM's, which only the main thread gets: a library caller's
    worker thread asking a trickling server for a repo description waited for ever. Now it ends at
    MLM_VS_CLM_HUB_DEADLINE (2 s here) in one line."""
    server = _TricklingHub()
    try:
        code = _call_code("__import__('contracts.hub').hub.resolve('org/model')", "worker")
        out = _run_code(code, server.url, tmp_path, MLM_VS_CLM_HUB_TIMEOUT="5", MLM_VS_CLM_HUB_DEADLINE="2")
    finally:
        server.close()
    assert len(out) == 1 and "model repo org/model: the repo description did not finish within 2 s" in out[0], out


@pytest.mark.parametrize("thread", ["main", "worker"])
def test_a_file_the_hub_trickles_is_cut_off_once_it_falls_behind_the_minimum_rate(tmp_path, thread):
    """Issue 88: a server that trickles a file declared large held the download for the 24-hour cap
    (`MLM_VS_CLM_HUB_MAX_DEADLINE`), in a worker thread for ever. A download now keeps pace: past
    MLM_VS_CLM_HUB_DEADLINE seconds (2 here) it must have received MLM_VS_CLM_HUB_MIN_RATE bytes a
    second since, or it ends in one line, in the main thread and in a worker thread alike."""
    from tests.hub_server import HubServer

    with HubServer() as hub:
        sha = hub.add("model", "org/model", {"model.safetensors": b"\0" * 100_000})
        hub.trickle("org/model", "model.safetensors")
        # the listing declares 10 GB: the deadline its size gives is the 24-hour cap
        call = (
            "from contracts.hub import RemoteFile, Snapshot, download; from pathlib import Path; "
            "files = {'model.safetensors': RemoteFile('model.safetensors', 10**10, None, None)}; "
            f"download(Snapshot('org/model', 'model', 'main', {sha!r}, files), list(files), Path(sys.argv[1]))"
        )
        code = _call_code(call, thread)
        out = _run_code(code, hub.url, tmp_path, MLM_VS_CLM_HUB_TIMEOUT="5", MLM_VS_CLM_HUB_DEADLINE="2")
    assert len(out) == 1, out
    assert re.search(
        r"model repo org/model: the download of model\.safetensors got \d+ bytes in 2 s, less than", out[0]
    )
