"""A streaming cache bound to the data it copies (issue 56, item 3; docs/reliability.md).

mosaicml-streaming downloads a source's `index.json` into `data.cache_dir` only when the cache has
none, and a shard only when its file is missing (streaming 0.13 `Stream.get_shards`): a cache filled
from another `data.path`, or from the same path before the data were prepared again, is read as if
it were the new data, while the run's config records the new path. So before the dataset is built,
the node's local leader compares the cache with its source:

- an empty or absent cache: bound to the source (`.source.json`: the source and its index's sha256);
- the same index (sha256 of the bytes) and every shard file already there of the size the index
  records: used as it is (a cache of this source from before this check is bound now);
- another index, in a cache bound by us (`.source.json`): emptied, then bound to the new source,
  when it holds only what a cache holds (the marker, index.json, the shards it names); a file or
  folder of anyone else's is refused in one line, nothing removed (issue 66);
- another index in a folder we did not bind: refused in one line (it may be someone's data).

One process per node decides and clears (the local leader); the others wait for it at a barrier of
the job's process group, so no rank reads a cache while it is emptied. Links inside the cache are
removed, never followed.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from pathlib import Path

from contracts.bounded import SMALL, BoundedReadError, read_json_object
from contracts.hub import sha256_file
from contracts.provenance import atomic_write_json
from pretraining.data.config import PreparedDataError
from pretraining.data.format import MdsIndexError, check_index, present_shard_files

log = logging.getLogger(__name__)

CACHE_SOURCE = ".source.json"
INDEX = "index.json"
INDEX_BYTES_LIMIT = 256 * 1024 * 1024  # an MDS index of a few hundred thousand shards


def source_index(source: str, is_remote: bool, download_timeout: float) -> Path:
    """A local copy of the source's index.json (for a remote source: downloaded, bounded in time)."""
    if not is_remote:
        return Path(source) / INDEX
    from streaming.base.storage import download_file

    target = Path(tempfile.mkdtemp(prefix="mlm-vs-clm-index-")) / INDEX
    try:
        download_file(f"{source.rstrip('/')}/{INDEX}", str(target), download_timeout)
    except Exception as exc:  # noqa: BLE001 - any download failure is one line naming the source
        raise PreparedDataError(
            f"{source}/{INDEX}: could not be read to check data.cache_dir against it ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''}); check data.path and the connection"
        ) from None
    return target


def _shards_match(cache: Path, index: dict) -> bool:
    """Every shard file of `index` present in the cache has the size the index records."""
    return all(
        size == info["bytes"]
        for shard in index.get("shards", [])
        for info, _, size in present_shard_files(cache, shard, str(cache / INDEX))[1]
    )


def _not_ours(cache: Path) -> list[str]:
    """The entries of a bound cache that neither we nor streaming wrote there: anything but the
    marker, the cached index.json and the shard files it names (with a `.tmp` left by a copy cut
    short); a folder counts as not ours (issue 66: a thesis.tex beside a forged marker was emptied)."""
    ours = {CACHE_SOURCE, INDEX}
    try:
        index = read_json_object(cache / INDEX, INDEX_BYTES_LIMIT) if (cache / INDEX).is_file() else {}
        check_index(index, str(cache / INDEX))  # a forged index names no file of anyone's (issue 78)
        for shard in index.get("shards", []):
            ours.update(info["basename"] for info in present_shard_files(cache, shard, str(cache / INDEX))[0])
    except (BoundedReadError, MdsIndexError, AttributeError, KeyError, TypeError):
        pass  # an index we cannot read names no shard: only the marker and itself are ours
    found = []
    for entry in cache.iterdir():
        name = entry.name
        temporary = name.endswith(".tmp") and (name[:-4] in ours or name.startswith(f".{CACHE_SOURCE}."))
        if entry.is_symlink() or not entry.is_file() or not (name in ours or temporary):
            found.append(name)
    return sorted(found)


def _empty(cache: Path) -> None:
    """Remove everything inside `cache` (links removed, not followed)."""
    for entry in cache.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def bind_cache(cache: Path, source: str, index_path: Path) -> str:
    """Make `cache` hold the data of `source` (its index at `index_path`); returns what was done:
    'bound' (empty cache), 'same' or 'cleared'; PreparedDataError (one line) for a folder not ours."""
    if cache.is_symlink() or (cache.exists() and not cache.is_dir()):
        raise PreparedDataError(f"data.cache_dir {cache} is a link or a file: give a folder of its own")
    try:  # the source's shard names and columns, before streaming joins a name to the cache (issue 78)
        index = read_json_object(index_path, INDEX_BYTES_LIMIT)
        check_index(index, f"{source}/{INDEX}")
    except (BoundedReadError, MdsIndexError) as exc:
        raise PreparedDataError(f"{exc}" if isinstance(exc, MdsIndexError) else f"{exc}: not an MDS index") from None
    want = {"source": source, "index_sha256": sha256_file(index_path)}
    marker = cache / CACHE_SOURCE
    if not cache.exists() or not any(cache.iterdir()):
        cache.mkdir(parents=True, exist_ok=True)
        atomic_write_json(marker, want)
        return "bound"
    cached = cache / INDEX
    try:
        bound = read_json_object(marker, SMALL) if marker.is_file() else None
    except BoundedReadError:
        bound = None
    if cached.is_file() and not cached.is_symlink() and sha256_file(cached) == want["index_sha256"]:
        if _shards_match(cache, index):
            if bound != want:
                atomic_write_json(marker, want)
            return "same"
    if not (isinstance(bound, dict) and "source" in bound and "index_sha256" in bound):
        raise PreparedDataError(
            f"data.cache_dir {cache} holds files that are not a cache of data.path {source} (another index, "
            "and no .source.json of ours): empty that folder or set data.cache_dir to a folder of its own"
        )
    strangers = _not_ours(cache)
    if strangers:
        shown = ", ".join(strangers[:3]) + (f" and {len(strangers) - 3} more" if len(strangers) > 3 else "")
        raise PreparedDataError(
            f"data.cache_dir {cache} holds files a streaming cache does not ({shown}), nothing removed: move them "
            "out, or set data.cache_dir to a folder of its own"
        )
    removed = sum(1 for _ in cache.iterdir())
    _empty(cache)
    atomic_write_json(marker, want)
    log.warning(  # said, not silent (issue 78: a cleared folder went unmentioned)
        "data.cache_dir %s held a cache of another index (%d entries): emptied and bound to %s", cache, removed, source
    )
    return "cleared"


def bind_cache_on_leader(cache: str, source: str, is_remote: bool, download_timeout: float) -> str | None:
    """`bind_cache` on the node's local leader, the other ranks waiting for it at a barrier; returns
    what the leader did (None on the other ranks)."""
    from streaming.base.world import World
    from torch import distributed as dist

    done = None
    if World.detect().is_local_leader:
        index = source_index(source, is_remote, download_timeout)
        try:
            done = bind_cache(Path(cache), str(Path(source).resolve()) if not is_remote else source, index)
        finally:
            if is_remote:
                shutil.rmtree(index.parent, ignore_errors=True)
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        dist.barrier()
    return done
