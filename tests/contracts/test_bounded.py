"""contracts.bounded: a file read for a status or a marker is a regular file of bounded size, or an
error in one line naming it (issue 56), never a hang on a FIFO or a read of /dev/zero."""

import os

import pytest

from contracts.bounded import BoundedReadError, read_json_object, read_text


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
