"""Reads bounded in size and type (issue 56): a status or marker file that is a link to /dev/zero, a
FIFO or a folder, or that grew to gigabytes, is an error in one line naming it, not a read until
memory runs out or a hang."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

SMALL = 1 << 20  # markers, records, timings: a few kB each
LARGE = 256 << 20  # logs and indexes of a paper-scale study (loss.jsonl of 42k steps: about 5 MB)


class BoundedReadError(ValueError):
    """A file that is not a regular file, or is larger than its reader allows."""


def read_text(path: str | Path, limit: int = SMALL, *, errors: str = "replace") -> str:
    """The text of a regular file of at most `limit` bytes (a link is followed to check its target:
    a link to a device, a FIFO or a folder is refused before it is opened). `errors="strict"`: a
    UnicodeDecodeError for bytes that are not UTF-8, for a reader that writes the text back."""
    path = Path(path)
    info = os.stat(path)
    if not stat.S_ISREG(info.st_mode):
        raise BoundedReadError(f"{path}: not a regular file; remove it (or the link) and rerun")
    if info.st_size > limit:
        raise BoundedReadError(f"{path}: {info.st_size:,} bytes, more than the {limit:,} this file may hold")
    with open(path, "rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:  # grew while read
        raise BoundedReadError(f"{path}: more than the {limit:,} bytes this file may hold")
    return data.decode("utf-8", errors=errors)


def read_tail(path: str | Path, size: int = 4096) -> str:
    """The last `size` bytes of a regular file as text (a log read from its end); a link is followed
    to check its target: a device, a FIFO or a folder is refused before it is opened."""
    path = Path(path)
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise BoundedReadError(f"{path}: not a regular file; remove it (or the link) and rerun")
    with open(path, "rb") as handle:
        handle.seek(0, os.SEEK_END)
        handle.seek(max(0, handle.tell() - size))
        return handle.read(size).decode("utf-8", errors="replace")


def read_json_object(path: str | Path, limit: int = SMALL) -> dict:
    """A JSON object from a bounded regular file; BoundedReadError when it is not one."""
    try:
        value = json.loads(read_text(path, limit))
    except (json.JSONDecodeError, RecursionError) as exc:
        raise BoundedReadError(f"{path}: not valid JSON ({str(exc)[:80]})") from None
    if not isinstance(value, dict):
        raise BoundedReadError(f"{path}: a JSON {type(value).__name__}, not an object")
    return value


def read_yaml(path: str | Path, limit: int = SMALL):
    """What a bounded regular YAML file holds (PyYAML's safe loader; any type); BoundedReadError in
    one line naming the file when it is not a regular file, is over `limit`, is not YAML or is nested
    too deeply to parse (a RecursionError, as contracts.config.read_yaml_mapping says it)."""
    import yaml

    text = read_text(path, limit)
    try:
        return load_yaml(text)
    except yaml.YAMLError as exc:
        raise BoundedReadError(f"{path}: not valid YAML: {yaml_problem(exc)}") from None
    except YamlTooLarge as exc:
        raise BoundedReadError(f"{path}: {exc}") from None
    except RecursionError:
        raise BoundedReadError(f"{path}: nested too deeply to be read") from None


# Nodes a YAML document may stand for once its aliases are expanded (issue 78: a 400-byte alias
# bomb, 9 levels of 9 aliases, is 387 million nodes once printed or walked: memory ran out in a
# `{value!r}` of an error message, and the `loggers:` secret scan ran for hours). The largest file we
# read as YAML, a paper study's reproduce.yaml, is a few hundred nodes.
MAX_YAML_NODES = 100_000


class YamlTooLarge(ValueError):
    """A YAML document that stands for more than MAX_YAML_NODES nodes, or refers to itself."""


def _expanded_size(root, limit: int) -> int:
    """Nodes of the document `root` with every alias expanded (a node reached twice counts twice),
    without expanding anything: sizes are memoised per node, iteratively (no recursion limit)."""
    import yaml

    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            if isinstance(node, yaml.SequenceNode):
                children = node.value
            elif isinstance(node, yaml.MappingNode):
                children = [item for pair in node.value for item in pair]
            else:
                children = []
            sizes[key] = 1 + sum(sizes[id(child)] for child in children)
            if sizes[key] > limit:
                raise YamlTooLarge(f"stands for more than {limit:,} values once its aliases are expanded")
            continue
        if key in sizes:
            continue
        if key in on_path:
            raise YamlTooLarge("an alias refers to a node that contains it (a recursive structure)")
        on_path.add(key)
        stack.append((node, True))
        if isinstance(node, yaml.SequenceNode):
            stack.extend((child, False) for child in node.value if id(child) not in sizes)
        elif isinstance(node, yaml.MappingNode):
            stack.extend((item, False) for pair in node.value for item in pair if id(item) not in sizes)
    return sizes[id(root)]


def load_yaml(text: str, limit: int = MAX_YAML_NODES):
    """PyYAML's safe loader (no tag builds a Python object), refusing a document that stands for
    more than `limit` nodes with its aliases expanded, or a recursive one (YamlTooLarge), before
    anything is built from it."""
    import yaml

    class Loader(yaml.SafeLoader):
        def get_single_node(self):
            node = super().get_single_node()
            if node is not None:
                _expanded_size(node, limit)
            return node

    return yaml.load(text, Loader=Loader)  # noqa: S506 - a SafeLoader subclass


def short_repr(value, width: int = 120) -> str:
    """`repr(value)` bounded in time and length (reprlib: a few items per level, a few levels),
    for error messages that show a value read from a file."""
    import reprlib

    shown = reprlib.Repr()  # attributes, not keywords: Python 3.11's Repr takes none
    shown.maxlevel, shown.maxstring, shown.maxother = 3, width, 60
    shown.maxdict = shown.maxlist = shown.maxtuple = shown.maxset = shown.maxfrozenset = 6
    text = shown.repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def read_json_object_or(path: str | Path, error: type[Exception], limit: int = SMALL) -> dict:
    """`read_json_object`, its one-line message raised as the caller's `error` class (e.g. a model
    folder's config.json -> ModelLoadError / CheckpointError)."""
    try:
        return read_json_object(path, limit)
    except BoundedReadError as exc:
        raise error(str(exc)) from None


def yaml_problem(exc) -> str:
    """A YAML error in one line: what and where (PyYAML's message spans several lines)."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"{problem}{where}"
