"""The one containment rule (issue 78): a name that comes from outside (a Hub listing, an MDS
index.json, a study's status index, a release tree, a recorded path) becomes a path under a root only
through `contained`, never by `root / name`.

A name is refused, in one line naming where it came from and the fix, when it is not a string, is
empty, absolute, holds a `..` or `.` part or an empty part (`a//b`), a backslash, a NUL or another
control character, a part longer than the file system allows (255 bytes) or a whole name longer than
PATH_MAX (4,096 bytes), or when a link lies on its way under the root (or is the name itself), or when
it resolves outside the root for any other reason. The root itself may be a link: the user gave it.
"""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path, PurePosixPath

NAME_MAX = 255  # bytes of one part (ext4, xfs, Lustre, GPFS)
PATH_MAX = 4096  # bytes of a whole name


class UnsafeNameError(ValueError):
    """A name from outside that would leave its root or cannot be a file name there."""


def show_name(name) -> str:
    """A name as error messages show it: its repr, cut in the middle when long."""
    text = repr(name)
    return text if len(text) <= 80 else f"{text[:60]}...{text[-12:]} ({len(text)} characters)"


def name_problem(name) -> str | None:
    """Why `name` cannot be a relative file name under a root (syntax only; no file system access),
    or None when it can."""
    if not isinstance(name, str):
        return f"a {type(name).__name__}, not a name"
    if not name:
        return "an empty name"
    if any(unicodedata.category(ch) == "Cc" for ch in name):
        return "a control character (NUL, newline, ...) in the name"
    if "\\" in name:
        return "a backslash in the name"
    if name.startswith("/"):
        return "an absolute name"
    try:
        encoded = name.encode("utf-8")
    except UnicodeEncodeError:
        return "not valid Unicode (a lone surrogate)"
    if len(encoded) > PATH_MAX:
        return f"{len(encoded):,} bytes, more than the {PATH_MAX:,} a path may have"
    for part in name.split("/"):
        if part in ("", ".", ".."):
            return f"a {part or 'empty'!r} part" if part else "an empty part ('//' or a trailing '/')"
        if len(part.encode("utf-8")) > NAME_MAX:
            return f"a part of {len(part.encode('utf-8'))} bytes, more than the {NAME_MAX} a file name may have"
    return None


def check_name(name, source: str) -> PurePosixPath:
    """`name` as a relative POSIX path when `name_problem` finds nothing; UnsafeNameError naming
    `source` (the file, server or field it came from) otherwise."""
    problem = name_problem(name)
    if problem:
        raise UnsafeNameError(f"{source}: name {show_name(name)} refused ({problem}); nothing was written")
    return PurePosixPath(name)


def contained(root: str | os.PathLike, name, source: str) -> Path:
    """`root / name` when the name passes `check_name`, no existing part below `root` is a link and
    the result resolves inside `root`; UnsafeNameError in one line naming `source` otherwise."""
    root = Path(root)
    relative = check_name(name, source)
    path = root
    for part in relative.parts:
        path = path / part
        if path.is_symlink():
            raise UnsafeNameError(
                f"{source}: name {show_name(name)} refused ({path} is a link: links are not followed into reads "
                "or writes); remove the link"
            )
    try:
        inside = path.resolve().is_relative_to(root.resolve())
    except (OSError, RuntimeError):
        inside = False
    if not inside:
        raise UnsafeNameError(f"{source}: name {show_name(name)} refused (it resolves outside {root})")
    return path


def move_inside(file: str | os.PathLike, root: str | os.PathLike, name, source: str) -> Path:
    """Move `file` to `root / name` (creating its folders) under the same rule, a link swapped in
    after the check included: `contained` first, then each folder below `root` is opened without
    following a link and the file renamed into the last one by its descriptor, so that it lands
    under `root` or nowhere (issue 88: a folder of fetch-model's partial folder swapped for a link
    during the download sent the file outside). A file already at the name is replaced."""
    target = contained(root, name, source)
    parts = PurePosixPath(name).parts
    folder = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for depth, part in enumerate(parts[:-1], 1):
            try:
                os.mkdir(part, dir_fd=folder)
            except FileExistsError:
                pass
            try:
                inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=folder)
            except OSError as exc:  # ELOOP: a link; ENOTDIR: a file
                where = Path(root, *parts[:depth])
                what = "is a link: links are not followed into writes" if os.path.islink(where) else exc.strerror
                raise UnsafeNameError(
                    f"{source}: name {show_name(name)} refused ({where} {what}): remove it and rerun; nothing was "
                    "written through it"
                ) from None
            os.close(folder)
            folder = inner
        os.replace(file, parts[-1], dst_dir_fd=folder)
    finally:
        os.close(folder)
    return target


def resolve_recorded(folder: str | os.PathLike, recorded: str | os.PathLike) -> Path:
    """A path recorded in a study's files: an absolute one as it is, a relative one against the
    study's own `folder`, never against the current folder (issue 78: `--clean` from the checkout
    cleaned another study)."""
    recorded = Path(recorded)
    return recorded if recorded.is_absolute() else Path(folder).absolute() / recorded
