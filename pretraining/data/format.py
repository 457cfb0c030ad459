"""What prepare-data writes and every reader checks (docs/data.md): the MDS columns, the manifest's
name and the format tag. A module of its own so that readers (verify, loader) do not import the
writer."""

from pathlib import Path

MDS_COLUMNS = {"input_ids": "ndarray:uint32", "doc_lengths": "ndarray:uint32"}
MANIFEST = "manifest.json"
FORMAT = "mlm-vs-clm/packed-mds"
FORMAT_VERSION = 1


def present_shard_files(root: Path, shard: dict) -> tuple[list[dict], list[tuple[dict, Path, int]]]:
    """(the files an index.json shard entry names, [(its entry, path, size on disk) of those present
    in `root`]): the compressed file and the raw one streaming decompresses beside it."""
    files = [info for info in (shard.get("zip_data"), shard.get("raw_data")) if info]
    paths = [(info, root / info["basename"]) for info in files]
    return files, [(info, path, path.stat().st_size) for info, path in paths if path.is_file()]
