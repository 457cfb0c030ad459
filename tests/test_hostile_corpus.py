"""Every reader that turns an outside name into a path, fed the whole hostile corpus (issue 78;
tests/hostile.py; the list of readers is docs/reliability.md, "One containment rule").

Each case asserts: the reader's own error, in one line naming where the name came from; nothing
created, changed or removed outside the folder the reader was given (a snapshot of the sandbox
before and after, links not followed); no hang (an alarm per case fails it, it is not waited on).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from tests import hostile

CASE_BOUND_S = 120  # a reader that hangs fails here instead of holding the suite


@contextlib.contextmanager
def no_hang(seconds: float = CASE_BOUND_S):
    """Fail (not wait) when the block runs past `seconds`: the package's own SIGALRM deadline."""
    from contracts.hub import DeadlinePassed, total_deadline

    try:
        with total_deadline(seconds):
            yield
    except DeadlinePassed:
        raise AssertionError(f"the reader did not return within {seconds} s: it hangs") from None


# --- the prepared data the MDS readers are given -------------------------------------------------
@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """A real MDS folder in prepare-data's columns (streaming's MDSWriter), 2 shards."""
    from streaming import MDSWriter

    from pretraining.data.format import MANIFEST, MDS_COLUMNS

    root = tmp_path_factory.mktemp("prepared")
    with MDSWriter(out=str(root), columns=MDS_COLUMNS, compression="zstd", size_limit=1 << 10) as writer:
        for i in range(16):
            writer.write({"input_ids": np.arange(i, i + 16, dtype=np.uint32), "doc_lengths": np.array([16], np.uint32)})
    (root / MANIFEST).write_text(json.dumps({"seq_len": 16}))
    return root


def forge_index(folder: Path, name, field: str = "zip_data") -> None:
    """Replace the first shard's file name in folder/index.json with `name`."""
    index = json.loads((folder / "index.json").read_text())
    index["shards"][0][field]["basename"] = name
    (folder / "index.json").write_text(json.dumps(index))


# --- the readers: (sandbox, hostile name) -> (the folder given, a call that must refuse, source word)
def hub_listing(sandbox, name, monkeypatch):
    """contracts.hub.resolve (fetch-model, fetch-data): the server's file listing."""
    from huggingface_hub import HfApi

    from contracts import hub

    answer = SimpleNamespace(sha="a" * 40, siblings=[SimpleNamespace(rfilename=name, size=1, lfs=None, blob_id="0")])
    monkeypatch.setattr(HfApi, "repo_info", lambda self, *a, **k: answer)
    given = sandbox / "out"
    return given, lambda: hub.resolve("org/model"), hub.HubError, "file listing"


def hub_download(sandbox, name, monkeypatch):
    """contracts.hub.download: each listed name under --out, checked before the first byte."""
    from contracts import hub

    given = sandbox / "out"
    given.mkdir(exist_ok=True)
    remote = hub.RemoteFile(name, 1, None, "0")
    snapshot = hub.Snapshot("org/model", "model", "main", "a" * 40, {name: remote})
    return given, lambda: hub.download(snapshot, [name], given), hub.HubError, "file listing"


def fetched_model_manifest(sandbox, name, monkeypatch):
    """contracts.hub.check_fetched_model (fetch-model --check, the jobs' preflight): a manifest's names."""
    from contracts import hub

    given = sandbox / "model"
    given.mkdir(exist_ok=True)
    entry = {"bytes": 19, "sha256": hashlib.sha256(b"the user's own file\n").hexdigest()}
    (given / hub.MODEL_MANIFEST).write_text(json.dumps({"files": {str(name): entry}}))

    def call():
        problems = hub.check_fetched_model(given)
        if problems:
            raise hub.HubError(problems[0])

    return given, call, hub.HubError, "manifest"


def mds_for_training(sandbox, name, monkeypatch, prepared):
    """pretraining.data.loader.check_shard_sizes: what `train` runs before streaming sees the folder."""
    from pretraining.data.config import PreparedDataError
    from pretraining.data.loader import check_shard_sizes

    given = sandbox / "data"
    shutil.copytree(prepared, given)
    forge_index(given, name)
    return given, lambda: check_shard_sizes(given), PreparedDataError, "index.json"


def mds_verify(sandbox, name, monkeypatch, prepared):
    """pretraining.data.verify.verify_prepared (`verify-data`)."""
    from pretraining.data.verify import DataVerificationError, verify_prepared

    given = sandbox / "data"
    shutil.copytree(prepared, given)
    forge_index(given, name, "raw_data")
    return given, lambda: verify_prepared(given, decode_text=False), DataVerificationError, "index.json"


def mds_cache_source(sandbox, name, monkeypatch, prepared):
    """pretraining.data.cache_binding.bind_cache: a source's index (local or downloaded from a remote
    data.path) before streaming joins its names to the cache."""
    from pretraining.data.cache_binding import bind_cache
    from pretraining.data.config import PreparedDataError

    given = sandbox / "cache"
    source = sandbox / "source"
    shutil.copytree(prepared, source)
    forge_index(source, name)
    before = hostile.snapshot(sandbox, skip=given)  # the source is read, not written: it stays

    def call():
        try:
            bind_cache(given, str(source), source / "index.json")
        finally:
            assert hostile.snapshot(sandbox, skip=given) == before

    return given, call, PreparedDataError, "index.json"


def status_plan(sandbox, name, monkeypatch):
    """reproduce.plan.read_plan (`reproduce status`, `resubmit`): a run name in plan.json."""
    from reproduce.plan import PLAN_FILE, read_plan

    given = hostile.study_with_plan(sandbox / "study", name, name if isinstance(name, str) else "x")

    class PlanRefused(Exception):
        pass

    def call():
        notes = []
        plan = read_plan(given, notes)
        assert plan is None, "a hostile run name was taken into the plan"
        raise PlanRefused(notes[0] if notes else f"{PLAN_FILE}: unreadable, planned again")

    return given, call, PlanRefused, PLAN_FILE


def ledger_script(sandbox, name, monkeypatch):
    """reproduce.slurm.resubmit.check_scripts (`reproduce resubmit`): a script name from the ledger."""
    from reproduce.plan import ReproduceError
    from reproduce.slurm.resubmit import Submission, check_scripts

    given = sandbox / "study"
    (given / "slurm").mkdir(parents=True, exist_ok=True)
    key = name if isinstance(name, str) else str(name)
    (given / "slurm" / "scripts.json").write_text(json.dumps({key: "0" * 64}))
    plan = [Submission("v1", "pretraining", "run", name)]
    return given, lambda: check_scripts(given, plan), ReproduceError, "ledger"


READERS = {
    "hub-listing": hub_listing,
    "hub-download": hub_download,
    "fetched-model-manifest": fetched_model_manifest,
    "mds-train": mds_for_training,
    "mds-verify": mds_verify,
    "mds-cache-source": mds_cache_source,
    "status-plan": status_plan,
    "ledger-script": ledger_script,
}
NEEDS_DATA = {"mds-train", "mds-verify", "mds-cache-source"}
# What a reader cannot be handed: JSON object keys are strings (a manifest's names), a listing's
# syntax is all resolve() sees (a link under --out is the download's to find).
NOT_APPLICABLE = {
    ("fetched-model-manifest", hostile.NOT_A_STRING),
    ("hub-listing", hostile.LINK_ON_THE_WAY),
}


@pytest.mark.parametrize("case", hostile.CASES)
@pytest.mark.parametrize("reader", list(READERS))
def test_every_reader_refuses_every_hostile_name_in_one_line_and_changes_nothing_outside(
    reader, case, tmp_path, monkeypatch, request
):
    if (reader, case) in NOT_APPLICABLE:
        pytest.skip("not a name this reader can be given")
    sandbox = tmp_path / "sandbox"
    sandbox.mkdir()
    hostile.plant_victims(sandbox)
    extra = [request.getfixturevalue("prepared")] if reader in NEEDS_DATA else []
    # the given folder may hold the link of the link case: made before the snapshot
    root = {
        "hub-download": "out",
        "fetched-model-manifest": "model",
        "mds-train": "data",
        "ledger-script": "study/slurm",
    }.get(reader)
    name = hostile.name_case(case, sandbox, sandbox / (root or "unused"))
    if root is None and case == hostile.LINK_ON_THE_WAY:
        shutil.rmtree(sandbox / "unused")
    if root == "data" and (sandbox / "data").exists():  # copytree needs it absent: the link comes after the copy
        shutil.rmtree(sandbox / "data")
    given, call, error, source = READERS[reader](sandbox, name, monkeypatch, *extra)
    if root == "data" and case == hostile.LINK_ON_THE_WAY:
        (given / "escape").symlink_to(sandbox, target_is_directory=True)
    before = hostile.snapshot(sandbox, skip=given)
    with no_hang(), pytest.raises(error) as caught:
        call()
    message = str(caught.value)
    assert "\n" not in message.strip(), message
    assert source in message, message
    assert hostile.snapshot(sandbox, skip=given) == before


def test_a_forged_index_cannot_name_a_users_file_in_a_forged_cache(prepared, tmp_path):
    """Issue 78: a forged .source.json plus a forged index.json naming thesis.tex and figure.png as
    shards got both deleted by the cache binding. Only MDS shard names are a cache's own files."""
    from pretraining.data.cache_binding import CACHE_SOURCE, bind_cache
    from pretraining.data.config import PreparedDataError

    cache = tmp_path / "thesis"
    cache.mkdir()
    (cache / CACHE_SOURCE).write_text(json.dumps({"source": "/elsewhere", "index_sha256": "0" * 64}))
    forged = json.loads((prepared / "index.json").read_text())
    forged["shards"][0]["zip_data"]["basename"] = "thesis.tex"
    forged["shards"][1]["zip_data"]["basename"] = "figure.png"
    (cache / "index.json").write_text(json.dumps(forged))
    (cache / "thesis.tex").write_text("\\documentclass{article}\n")
    (cache / "figure.png").write_bytes(b"\x89PNG")
    with pytest.raises(PreparedDataError, match="holds files a streaming cache does not") as caught:
        bind_cache(cache, str(prepared), prepared / "index.json")
    assert "\n" not in str(caught.value)
    assert (cache / "thesis.tex").is_file() and (cache / "figure.png").is_file()


def test_a_cleared_cache_is_said(prepared, tmp_path, caplog):
    """Issue 78: a bound cache of another index was emptied without a word."""
    from pretraining.data.cache_binding import bind_cache

    cache = tmp_path / "cache"
    other = tmp_path / "other"
    shutil.copytree(prepared, other)
    bind_cache(cache, str(other), other / "index.json")
    shutil.copy(other / "index.json", cache / "index.json")
    index = json.loads((other / "index.json").read_text())
    index["shards"] = index["shards"][:1]
    (other / "index.json").write_text(json.dumps(index))
    with caplog.at_level("WARNING"):
        assert bind_cache(cache, str(other), other / "index.json") == "cleared"
    assert any("emptied and bound" in r.getMessage() for r in caplog.records)


def test_pickle_columns_are_refused_before_streaming_reads_them(prepared, tmp_path):
    """Issue 78: an MDS index declaring a `pkl` column reached streaming (a 45-line traceback)."""
    from pretraining.data.config import PreparedDataError
    from pretraining.data.loader import check_shard_sizes

    data = tmp_path / "data"
    shutil.copytree(prepared, data)
    index = json.loads((data / "index.json").read_text())
    index["shards"][0]["column_encodings"] = ["pkl", "pkl"]
    (data / "index.json").write_text(json.dumps(index))
    with pytest.raises(PreparedDataError, match="declares columns") as caught:
        check_shard_sizes(data)
    assert "\n" not in str(caught.value)
