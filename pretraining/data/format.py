"""What prepare-data writes and every reader checks (docs/data.md): the MDS columns, the manifest's
name and the format tag. A module of its own so that readers (verify, loader) do not import the
writer."""

MDS_COLUMNS = {"input_ids": "ndarray:uint32", "doc_lengths": "ndarray:uint32"}
MANIFEST = "manifest.json"
FORMAT = "mlm-vs-clm/packed-mds"
FORMAT_VERSION = 1
