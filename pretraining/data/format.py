"""What prepare-data writes and every reader checks (docs/data.md): the MDS columns, the manifest's
name and the format tag. A module of its own so that readers (verify, loader) do not import the
writer."""

import re
from pathlib import Path, PurePosixPath

from contracts.paths import UnsafeNameError, check_name, contained, show_name

MDS_COLUMNS = {"input_ids": "ndarray:uint32", "doc_lengths": "ndarray:uint32"}
MANIFEST = "manifest.json"
FORMAT = "mlm-vs-clm/packed-mds"
FORMAT_VERSION = 1


# The file names streaming's MDSWriter gives shards (`shard.00000.mds`, compressed `.mds.zstd`), in a
# part folder of prepare-data's (`part-00000/shard.00000.mds`): an index naming any other file is not
# prepared data (issue 78: a forged index named a user's thesis.tex as a shard, and a cache emptied it).
SHARD_FILE_NAME = re.compile(r"shard\.\d{5,}\.mds(\.[a-z0-9]{1,8})?")


class MdsIndexError(ValueError):
    """An index.json that is not one prepare-data writes (unsafe shard names, other columns); one line."""


def shard_file_name(info, source: str) -> PurePosixPath:
    """The relative name of a shard file an index entry names (`info["basename"]`), checked by the
    containment rule (contracts.paths) and against the MDS shard file names; MdsIndexError naming
    `source` otherwise."""
    name = info.get("basename") if isinstance(info, dict) else None
    try:
        relative = check_name(name, f"{source}: shard basename")
    except UnsafeNameError as exc:
        raise MdsIndexError(str(exc)) from None
    if not SHARD_FILE_NAME.fullmatch(relative.name):
        raise MdsIndexError(
            f"{source}: shard basename {show_name(name)} is not an MDS shard file (shard.NNNNN.mds[.zstd]): "
            "not prepare-data output; prepare the data again"
        )
    return relative


def check_index(index, source: str) -> None:
    """Refuse, before streaming or any reader touches a shard, an index.json whose shards are not
    what prepare-data writes: a shard entry that is not a mapping, a file name that fails the
    containment rule or is no MDS shard name, columns other than ours (MDS decodes a column as its
    declared encoding, and `pkl` would unpickle, so run, whatever the file holds)."""
    shards = index.get("shards") if isinstance(index, dict) else None
    if not isinstance(shards, list):
        raise MdsIndexError(f"{source}: no list of shards: not an MDS index; prepare the data again")
    for shard in shards:
        if not isinstance(shard, dict):
            raise MdsIndexError(f"{source}: a shard entry is not a mapping: not an MDS index; prepare the data again")
        files = [info for info in (shard.get("zip_data"), shard.get("raw_data")) if info]
        if not files:
            raise MdsIndexError(f"{source}: a shard names no file: not an MDS index; prepare the data again")
        for info in files:
            shard_file_name(info, source)
        check_columns(shard, source)


def check_columns(shard: dict, source: str = "index.json") -> None:
    """Refuse a shard whose index.json entry declares other columns than prepare-data writes: MDS
    decodes a column as its declared encoding, and `pkl` would unpickle (run) whatever the file holds."""
    columns, encodings = shard.get("column_names"), shard.get("column_encodings")
    declared = dict(zip(columns, encodings)) if isinstance(columns, list) and isinstance(encodings, list) else {}
    if declared != MDS_COLUMNS:
        info = shard.get("zip_data") or shard.get("raw_data")
        name = info.get("basename", "?") if isinstance(info, dict) else "?"
        found = ", ".join(f"{k}:{v}" for k, v in list(declared.items())[:6]) or "none"
        ours = ", ".join(f"{k}:{v}" for k, v in MDS_COLUMNS.items())
        raise MdsIndexError(
            f"{source}: shard {name!s:.80} declares columns {found:.200}; prepare-data writes only {ours}: "
            "refused without decoding (the folder is not prepare-data output; prepare it again)"
        )


def present_shard_files(
    root: Path, shard: dict, source: str = "index.json"
) -> tuple[list[dict], list[tuple[dict, Path, int]]]:
    """(the files an index.json shard entry names, [(its entry, path, size on disk) of those present
    in `root`]): the compressed file and the raw one streaming decompresses beside it. Each name
    passes `shard_file_name` and the containment rule under `root` (MdsIndexError otherwise)."""
    files = [info for info in (shard.get("zip_data"), shard.get("raw_data")) if info]
    paths = []
    for info in files:
        try:
            paths.append((info, contained(root, str(shard_file_name(info, source)), f"{source}: shard basename")))
        except UnsafeNameError as exc:
            raise MdsIndexError(str(exc)) from None
    return files, [(info, path, path.stat().st_size) for info, path in paths if path.is_file()]
