"""contracts.bounded: a file read for a status or a marker is a regular file of bounded size, or an
error in one line naming it (issue 56), never a hang on a FIFO or a read of /dev/zero."""

import contextlib
import os
import threading
import time

import pytest
import yaml

from contracts.bounded import SMALL, BoundedReadError, read_json_object, read_text, read_yaml


def test_regular_small_files_read_and_everything_else_is_one_error(tmp_path):
    good = tmp_path / "good.json"
    good.write_text('{"a": 1}')
    assert read_json_object(good) == {"a": 1}
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # opening it for reading would block forever
    zero = tmp_path / "zero.json"
    zero.symlink_to("/dev/zero")
    big = tmp_path / "big.json"
    big.write_bytes(b" " * 2048)
    for path, message in (
        (fifo, "not a regular file"),
        (zero, "not a regular file"),
        (tmp_path, "not a regular file"),
        (big, "2,048 bytes, more than the 1,024"),
    ):
        with pytest.raises(BoundedReadError, match=message) as caught:
            read_text(path, limit=1024)
        assert str(path) in str(caught.value) and "\n" not in str(caught.value)
    for text, message in (("[1, 2]", "a JSON list, not an object"), ("{", "not valid JSON"), ("[" * 100000, "JSON")):
        path = tmp_path / "x.json"
        path.write_text(text)
        with pytest.raises(BoundedReadError, match=message):
            read_json_object(path, limit=1 << 20)


@contextlib.contextmanager
def fifo_unblocked(fifo, after_s: float = 2.0):
    """A FIFO that a read of the old code (open, blocking until a writer comes) would hang on: a
    writer opens and closes it once a reader waits, after `after_s`, so such a read ends (empty, then
    a wrong result) instead of hanging the test; a refusal before opening leaves it unopened."""
    done = threading.Event()

    def unblock():
        deadline = time.monotonic() + after_s
        while not done.wait(0.05):
            if time.monotonic() < deadline:
                continue
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # ENXIO while no reader waits
            except OSError:
                continue

    thread = threading.Thread(target=unblock, daemon=True)
    thread.start()
    try:
        yield fifo
    finally:
        done.set()
        thread.join()


def over_cap(path, limit: int):
    """A sparse file one byte over `limit` (no disk used): read whole, it is `limit` + 1 NULs."""
    with open(path, "wb") as handle:
        handle.truncate(limit + 1)
    return path


def test_read_yaml_reads_what_safe_load_reads_and_refuses_the_rest_in_one_line(tmp_path):
    """contracts.bounded.read_yaml: the bounded YAML read of the stages (issue 56, item 5)."""
    from contracts.config import CONFIG_BYTES_LIMIT

    good = tmp_path / "config.yaml"
    good.write_text("config:\n  lr: 5e-4\n  tasks: [sst2, mnli]\nconfig_hash: abc\n")
    assert read_yaml(good, CONFIG_BYTES_LIMIT) == yaml.safe_load(good.read_text())
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert read_yaml(empty) is None  # as yaml.safe_load("")
    big = tmp_path / "big.yaml"
    big.write_text("a: 1\n" + "#" * CONFIG_BYTES_LIMIT)
    deep = tmp_path / "deep.yaml"
    deep.write_text("a: " + "[" * 100_000 + "]" * 100_000)
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1,\n  b: {")
    zero = tmp_path / "zero.yaml"
    zero.symlink_to("/dev/zero")
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    for path, message in (
        (big, "bytes, more than the 8,388,608 this file may hold"),
        (deep, "nested too deeply"),
        (bad, r"not valid YAML: .* at line \d+, column \d+"),
        (zero, "not a regular file"),
        (fifo, "not a regular file"),
    ):
        started = time.monotonic()
        with fifo_unblocked(fifo), pytest.raises(BoundedReadError, match=message) as caught:
            read_yaml(path, CONFIG_BYTES_LIMIT)
        assert str(path) in str(caught.value) and "\n" not in str(caught.value)
        assert time.monotonic() - started < 60


def test_saved_config_that_is_a_fifo_is_refused_unopened(tmp_path):
    """contracts.config.saved_config read `config.yaml` with no check: a FIFO there blocked the read
    for ever (in this test the old code gets an empty read after 2 s, then a TypeError)."""
    from contracts.config import saved_config

    os.mkfifo(tmp_path / "config.yaml")
    with fifo_unblocked(tmp_path / "config.yaml"), pytest.raises(BoundedReadError, match="not a regular file"):
        saved_config(tmp_path)


def test_an_over_cap_index_json_is_refused_by_verify_data_before_it_is_read(tmp_path):
    """pretraining.data.verify read index.json whole: 256 MiB of NULs and more were read, then a JSON
    error (a link to /dev/zero: until memory ran out). Now the size cap, before reading."""
    from contracts.bounded import LARGE
    from pretraining.data.verify import DataVerificationError, verify_prepared

    index = over_cap(tmp_path / "index.json", LARGE)
    with pytest.raises(DataVerificationError, match=r"268,435,457 bytes, more than the 268,435,456") as caught:
        verify_prepared(tmp_path)
    assert str(index) in str(caught.value) and "\n" not in str(caught.value)


def test_an_over_cap_store_manifest_is_refused_before_it_is_read(tmp_path):
    """contracts.run_store.read_store_manifest: store.json is at most 1 MiB (SMALL)."""
    from contracts.run_record import RunRecordError
    from contracts.run_store import STORE_MANIFEST, read_store_manifest

    manifest = over_cap(tmp_path / STORE_MANIFEST, SMALL)
    with pytest.raises(RunRecordError, match=r"more than the 1,048,576 this file may hold") as caught:
        read_store_manifest(tmp_path)
    assert str(manifest) in str(caught.value) and "\n" not in str(caught.value)


def test_an_over_cap_task_mirror_manifest_is_refused_before_it_is_read(tmp_path):
    """benchmarks.datasets.fetch.read_manifest: a mirror's manifest.json lists every file, at most 256 MiB."""
    from benchmarks.datasets.fetch import MANIFEST_FILE, FetchError, read_manifest
    from contracts.bounded import LARGE

    manifest = over_cap(tmp_path / MANIFEST_FILE, LARGE)
    with pytest.raises(FetchError, match=r"more than the 268,435,456 this file may hold; remove it") as caught:
        read_manifest(tmp_path)
    assert str(manifest) in str(caught.value) and "\n" not in str(caught.value)


def test_preflight_says_an_over_cap_data_manifest_in_one_line(tmp_path):
    """reproduce.slurm.preflight: an over-cap (or garbage) manifest.json of the prepared data is one of the
    problem lines, not a JSONDecodeError traceback after reading it whole."""
    from contracts.bounded import LARGE
    from reproduce.slurm.preflight import _data_problems

    over_cap(tmp_path / "manifest.json", LARGE)
    (tmp_path / "index.json").write_text('{"shards": []}')
    (problem,) = _data_problems(tmp_path, 512, "python -m pretraining prepare-data ...")
    assert "is unreadable" in problem and "more than the 268,435,456 this file may hold" in problem
    assert "prepare-data" in problem and "\n" not in problem
    (tmp_path / "manifest.json").write_text("{not json")
    (problem,) = _data_problems(tmp_path, 512, "python -m pretraining prepare-data ...")
    assert "not valid JSON" in problem
    (tmp_path / "manifest.json").write_text('{"seq_len": 512}')
    assert _data_problems(tmp_path, 512, "python -m pretraining prepare-data ...") == []
