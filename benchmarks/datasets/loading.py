"""Load a task's data from the Hub or a local mirror and apply the split protocol.

`load_task_data(spec, data_root)`:
- `data_root=None` reads the Hub: `datasets.load_dataset(hub_id, config, split=...)`.
- `data_root=<dir>` reads a local mirror laid out as
  `<data_root>/<hub_id>/<config or "default">/<split>.jsonl` (or `.parquet`), loaded with
  `datasets.load_dataset("json"|"parquet", data_files=..., features=<Hub features>)` so types and
  label names are the Hub's (benchmarks/datasets/schemas.py). The committed toy data
  (benchmarks/datasets/toy/) is such a mirror.
Both paths go through the same column checks and normalisation below.

Normalised output (what the fine-tuning code reads):
- SC: `text` (the task's input template applied), `label` (ClassLabel), `idx`.
- TC: `tokens` (list of words), `tags` (list of ClassLabel; names in `TaskData.label_names`).
- QA: `id`, `context`, `question`, `answers` = {text: [...], answer_start: [...]} (SQuAD shape;
  ReCoRD rows get `id` = "<hub split>-<row>" since the mirror has none).
- IR: `train` = the MS MARCO pairs (`query`, `positive`); `validation`/`test` are `IRSplit`s with
  raw query and document texts (no "Query: "/"Document: " prefix: that is the model input
  format, `TaskSpec.query_prefix`/`doc_prefix`), qrels with their raw grades, and the corpus
  restricted to the candidate pool.

Split protocol (deterministic): `train_carveout` = `train.train_test_split(train_size=0.95,
seed=42)`, its "test" part is the validation set (as the released harness); `official` = the
Hub splits; `query_halves` (NQ) = the sorted query ids of the one qrels split, round(n/2) of
them sampled with `random.Random(query_split_seed)` for validation, the rest for test (the
released `nq()` draws them with Python's `random.sample`; a run passes its fine-tuning seed,
docs/protocol.md, "Choices").
"""

from __future__ import annotations

import contextlib
import contextvars
import gzip
import hashlib
import json
import random
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import datasets
from datasets import Dataset, Features
from datasets.exceptions import DatasetGenerationError

from benchmarks.datasets.schemas import schema_of
from benchmarks.metrics import pooled_doc_ids, relevant_queries
from benchmarks.tasks import HubSource, TaskSpec

CandidatePool = Literal["qrels_pool", "qrels_pool_all_splits", "full_corpus"]
CANDIDATE_POOLS = ("qrels_pool", "qrels_pool_all_splits", "full_corpus")
ROLES = ("train", "validation", "test")


class DatasetError(ValueError):
    """Data that cannot serve a task; the message names dataset, split and what is wrong."""


# The local-mirror files a load reads, while `recording_mirror_reads` is active (benchmarks.reuse
# checks them before it reuses loaded data).
_MIRROR_READS: contextvars.ContextVar[list[Path] | None] = contextvars.ContextVar("mirror_reads", default=None)


@contextlib.contextmanager
def recording_mirror_reads():
    """Yields the list of mirror files that loads inside the block read (in order)."""
    reads: list[Path] = []
    token = _MIRROR_READS.set(reads)
    try:
        yield reads
    finally:
        _MIRROR_READS.reset(token)


@dataclass
class IRSplit:
    """One evaluated IR split: only queries with at least one relevant (grade >= 1) document."""

    queries: dict[str, str]  # query id -> text
    corpus: dict[str, str]  # doc id -> text (restricted to the candidate pool)
    qrels: dict[str, dict[str, int]]  # query id -> {doc id: grade}, grade-0 judgements kept


@dataclass
class TaskData:
    spec: TaskSpec
    train: Dataset | None
    validation: Dataset | IRSplit | None
    test: Dataset | IRSplit | None
    label_names: tuple[str, ...] = ()
    # How the splits were made (protocol, seed, sizes, hashes of the ids): saved with every run.
    split_record: dict = field(default_factory=dict)
    # Set by benchmarks.reuse on data it keeps: features built from it are kept under this name.
    reuse_token: int | None = field(default=None, compare=False, repr=False)

    def split(self, role: str):
        if role not in ROLES:
            raise KeyError(f"unknown split role {role!r}; use one of {ROLES}")
        return getattr(self, role)


# ---------------------------------------------------------------------------------------------
# Raw hub splits


# File formats of a local mirror, in order of preference: JSON Lines (optionally gzipped, as the
# BeIR/MLDR raw files), parquet, and TSV with a header row (the BeIR qrels files).
MIRROR_SUFFIXES = (".jsonl", ".jsonl.gz", ".parquet", ".tsv")


def mirror_path(data_root: Path, source: HubSource, split: str) -> Path | None:
    base = Path(data_root) / source.hub_id / source.config_dir
    for suffix in MIRROR_SUFFIXES:
        path = base / f"{split}{suffix}"
        if path.exists():
            return path
    return None


def _first_row_columns(path: Path) -> list[str]:
    name = path.name
    if name.endswith(".parquet"):
        import pyarrow.parquet as pq

        return list(pq.read_schema(path).names)
    opener = gzip.open if name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as handle:
        if name.endswith(".tsv"):
            return handle.readline().rstrip("\n").split("\t")
        for line in handle:
            if line.strip():
                return list(json.loads(line))
    return []


def _check_columns(columns, required, source: HubSource, split: str, where: str) -> None:
    missing = [c for c in required if c not in columns]
    if missing:
        raise DatasetError(
            f"dataset {source.hub_id} (config {source.config_dir}), split {split!r}: "
            f"missing required column {missing[0]!r} (has {sorted(columns)}) [{where}]"
        )


def load_hub_split(source: HubSource, split: str, data_root: Path | None, required: tuple[str, ...] = ()) -> Dataset:
    """One split of a Hub dataset with the Hub's features, from the Hub or a local mirror."""
    if data_root is None:
        ds = datasets.load_dataset(source.hub_id, source.config, split=split)
        _check_columns(ds.column_names, required, source, split, "hub")
        return ds
    path = mirror_path(Path(data_root), source, split)
    if path is None:
        raise DatasetError(
            f"dataset {source.hub_id} (config {source.config_dir}), split {split!r}: no file "
            f"{Path(data_root) / source.hub_id / source.config_dir / split}.jsonl (or .parquet)"
        )
    reads = _MIRROR_READS.get()
    if reads is not None:
        reads.append(path)
    columns = _first_row_columns(path)
    _check_columns(columns, required, source, split, str(path))
    hub = schema_of(source.hub_id, source.config).features
    # A mirror may lack columns the task does not read; it keeps the Hub types of the others.
    features = Features({name: feat for name, feat in hub.items() if name in columns})
    kwargs = {}
    if path.name.endswith(".parquet"):
        builder = "parquet"
    elif path.name.endswith(".tsv"):
        builder, kwargs = "csv", {"sep": "\t"}
    else:
        builder = "json"
    bars_were_on = datasets.is_progress_bar_enabled()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        datasets.disable_progress_bars()
        try:
            return datasets.load_dataset(
                builder, data_files={split: str(path)}, features=features, split=split, **kwargs
            )
        except DatasetGenerationError as exc:  # a truncated row, a value of another type than the Hub's
            raise DatasetError(
                f"{path}: a row cannot be read with the dataset's columns and types ({_innermost(exc)}); "
                f"fix the file or fetch it again (`python -m benchmarks fetch-data --check {data_root}` names "
                "a damaged file)"
            ) from None
        finally:
            if bars_were_on:
                datasets.enable_progress_bars()


def _innermost(exc: BaseException) -> str:
    """The first line of the deepest cause of `exc` (datasets wraps the parser's error)."""
    seen = set()
    while (exc.__cause__ or exc.__context__) is not None and id(exc) not in seen:
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"


# ---------------------------------------------------------------------------------------------
# SC / TC / QA


def _label_names(ds: Dataset, column: str, spec: TaskSpec, split: str) -> tuple[str, ...]:
    feature = ds.features[column]
    feature = getattr(feature, "feature", feature)  # list of ClassLabel (TC)
    names = tuple(getattr(feature, "names", ()) or ())
    if len(names) != spec.num_labels:
        raise DatasetError(
            f"dataset {spec.hub_id}, split {split!r}: column {column!r} has {len(names)} label "
            f"names {list(names)}, task {spec.name} expects {spec.num_labels}"
        )
    if names != spec.label_names:
        warnings.warn(
            f"{spec.name}: label names of the data {list(names)} differ from the spec "
            f"{list(spec.label_names)}; using the data's",
            stacklevel=3,
        )
    return names


def _ensure_class_labels(spec: TaskSpec, ds: Dataset, split: str) -> Dataset:
    """TC tags stored as plain ints (tner/ontonotes5 style) or strings become ClassLabel ids
    with the spec's names, so every source yields the same feature type."""
    from datasets import ClassLabel, List

    column = spec.label_column
    inner = getattr(ds.features[column], "feature", None)
    if isinstance(inner, ClassLabel) or inner is None:
        return ds
    names = list(spec.label_names)
    target = ds.features.copy()
    target[column] = List(ClassLabel(names=names))
    if inner.dtype == "string":
        index = {name: i for i, name in enumerate(names)}
        unknown = sorted({t for tags in ds[column] for t in tags} - set(index))
        if unknown:
            raise DatasetError(
                f"dataset {spec.hub_id}, split {split!r}: column {column!r} has "
                f"tags {unknown[:5]} outside the {len(names)} labels of {spec.name}"
            )
        ds = ds.map(lambda row: {column: [index[t] for t in row[column]]}, features=target)
        return ds
    top = max((max(tags) for tags in ds[column] if len(tags)), default=-1)
    if top >= len(names):
        raise DatasetError(
            f"dataset {spec.hub_id}, split {split!r}: column {column!r} has tag id "
            f"{top}, task {spec.name} has {len(names)} labels"
        )
    warnings.warn(
        f"{spec.name}: {column!r} has plain integer tags; reading them with the spec's label order", stacklevel=3
    )
    return ds.cast(target)


def _required(spec: TaskSpec) -> tuple[str, ...]:
    return spec.input_columns + ((spec.label_column,) if spec.label_column else ())


def _normalise(spec: TaskSpec, ds: Dataset, hub_split: str) -> Dataset:
    if spec.task_type == "SC":
        if len(ds) and min(ds[spec.label_column]) < 0:
            raise DatasetError(
                f"dataset {spec.hub_id} ({spec.hub_config}), split {hub_split!r}: "
                "hidden labels (-1); it cannot be trained or scored on"
            )
        keep = ["label"] + (["idx"] if "idx" in ds.column_names else [])
        text = [spec.format_input(row) for row in ds.select_columns(list(spec.input_columns))]
        return ds.select_columns(keep).add_column("text", text).select_columns(["text"] + keep)
    if spec.task_type == "TC":
        tokens, tags = spec.input_columns[0], spec.label_column
        ds = ds.select_columns([tokens, tags])
        if tokens != "tokens":
            ds = ds.rename_column(tokens, "tokens")
        if tags != "tags":
            ds = ds.rename_column(tags, "tags")
        return ds
    if spec.task_type == "QA":
        if "id" not in ds.column_names:
            ds = ds.add_column("id", [f"{hub_split}-{i}" for i in range(len(ds))])
        return ds.select_columns(["id", "context", "question", "answers"])
    raise AssertionError(spec.task_type)


def _ids_sha(ids) -> str:
    return hashlib.sha256("\n".join(map(str, ids)).encode()).hexdigest()[:16]


def _load_supervised(spec: TaskSpec, data_root: Path | None, roles) -> TaskData:
    source = spec.source
    required = _required(spec)
    raw = {}
    for role in roles:
        hub_split = spec.splits[role]
        if hub_split not in raw:
            raw[hub_split] = load_hub_split(source, hub_split, data_root, required)
    if spec.task_type == "TC":
        raw = {split: _ensure_class_labels(spec, ds, split) for split, ds in raw.items()}
    label_names = ()
    if spec.label_column and spec.task_type in ("SC", "TC"):
        first = spec.splits[roles[0]]
        label_names = _label_names(raw[first], spec.label_column, spec, first)
    out: dict[str, Dataset] = {}
    record = {"protocol": spec.validation_protocol, "hub_splits": {r: spec.splits[r] for r in roles}}
    if spec.validation_protocol == "train_carveout" and ("train" in roles or "validation" in roles):
        train = _normalise(spec, raw[spec.splits["train"]], spec.splits["train"])
        parts = train.train_test_split(train_size=round(1 - spec.validation_fraction, 10), seed=spec.split_seed)
        out["train"], out["validation"] = parts["train"], parts["test"]
        record.update(validation_fraction=spec.validation_fraction, seed=spec.split_seed)
        if "test" in roles:
            out["test"] = _normalise(spec, raw[spec.splits["test"]], spec.splits["test"])
    else:
        for role in roles:
            out[role] = _normalise(spec, raw[spec.splits[role]], spec.splits[role])
    id_column = {"SC": "idx", "QA": "id"}.get(spec.task_type)
    record["sizes"] = {role: len(out[role]) for role in roles}
    if id_column and all(id_column in out[role].column_names for role in roles):
        record["ids_sha"] = {role: _ids_sha(out[role][id_column]) for role in roles}
    return TaskData(
        spec,
        out.get("train") if "train" in roles else None,
        out.get("validation") if "validation" in roles else None,
        out.get("test") if "test" in roles else None,
        label_names,
        record,
    )


# ---------------------------------------------------------------------------------------------
# IR


def _qrels_from_beir(ds: Dataset) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    for qid, did, score in zip(ds["query-id"], ds["corpus-id"], ds["score"]):
        qrels.setdefault(str(qid), {})[str(did)] = int(score)
    return qrels


def _corpus_texts(cds: Dataset, id_column: str, columns, template: str, wanted: set[str] | None) -> dict[str, str]:
    """doc id -> document text for the documents in `wanted` (all when None); the id filter
    runs in Arrow, so a pool of a few thousand documents is cheap to take from millions."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    cds = cds.select_columns(list(columns))
    if wanted is not None:
        ids = cds.data.column(id_column).cast(pa.string())
        mask = pc.is_in(ids, value_set=pa.array(sorted(wanted), type=pa.string()))
        cds = cds.select(np.flatnonzero(mask.to_numpy(zero_copy_only=False)))
    return {str(row[id_column]): template.format(title=row.get("title", ""), text=row["text"]) for row in cds}


def _load_ir(spec: TaskSpec, data_root: Path | None, roles, pool: str, query_split_seed: int | None) -> TaskData:
    ir = spec.ir
    evaluated = [r for r in roles if r != "train"]
    record: dict = {
        "protocol": spec.validation_protocol,
        "candidate_pool": pool,
        "hub_splits": {r: spec.splits[r] for r in roles},
    }
    train = None
    if "train" in roles:
        src = spec.train_source
        train = load_hub_split(src, src.split, data_root, ("query", "positive"))
        train = train.select_columns(["query", "positive"])
        record["train_set"] = spec.train_set
    # qrels per role (all roles that define the pool, not only the requested ones)
    needed = list(dict.fromkeys(evaluated + (["validation", "test"] if pool == "qrels_pool_all_splits" else [])))
    queries_text: dict[str, str] = {}
    qrels_by_role: dict[str, dict[str, dict[str, int]]] = {}
    if ir.format == "beir":
        loaded = {}
        for role in needed:
            split = spec.splits[role]
            if split not in loaded:
                ds = load_hub_split(ir.qrels, split, data_root, ("query-id", "corpus-id", "score"))
                loaded[split] = _qrels_from_beir(ds)
            qrels_by_role[role] = loaded[split]
        if needed:
            qds = load_hub_split(ir.queries, ir.queries.split, data_root, ("_id", "text"))
            queries_text = {str(q): t for q, t in zip(qds["_id"], qds["text"])}
    else:  # mldr: query rows carry their positives
        for role in needed:
            split = spec.splits[role]
            ds = load_hub_split(ir.qrels, split, data_root, ("query_id", "query", "positive_passages"))
            qrels_by_role[role] = {}
            for qid, text, positives in zip(ds["query_id"], ds["query"], ds["positive_passages"]):
                queries_text[qid] = text
                qrels_by_role[role][qid] = {p["docid"]: 1 for p in positives}
    if spec.validation_protocol == "query_halves" and needed:
        if query_split_seed is None:
            raise ValueError(
                f"{spec.name}: its validation/test queries are drawn at random; give "
                "query_split_seed (a run uses its fine-tuning seed)"
            )
        shared = qrels_by_role[needed[0]]
        qids = sorted(shared)
        rng = random.Random(query_split_seed)
        val_ids = set(rng.sample(qids, round(0.5 * len(qids))))
        halves = {
            "validation": {q: shared[q] for q in qids if q in val_ids},
            "test": {q: shared[q] for q in qids if q not in val_ids},
        }
        qrels_by_role = {role: halves[role] for role in needed}
        record.update(query_split_seed=query_split_seed, query_split_fraction=0.5)
    # The released pool: every document named in the validation and test qrels, any grade, also
    # those judged only for queries without a relevant document (encodeval/datasets.py).
    all_splits_pool = set().union(*(pooled_doc_ids(q) for q in qrels_by_role.values()))
    # keep only evaluated queries (>= 1 relevant doc) and their judgements
    qrels_by_role = {role: {q: qrels[q] for q in relevant_queries(qrels)} for role, qrels in qrels_by_role.items()}
    for role, qrels in qrels_by_role.items():
        missing = [q for q in qrels if q not in queries_text]
        if missing:
            raise DatasetError(
                f"{spec.name}: query {missing[0]!r} of the {role} qrels has no text "
                f"in {ir.queries.hub_id if ir.queries else ir.qrels.hub_id}"
            )
    corpus: dict[str, str] = {}
    if evaluated:
        fields = ("docid", "text") if ir.format == "mldr" else ("_id", "text")
        needs_title = "{title}" in ir.doc_template
        required = fields + (("title",) if needs_title else ())
        cds = load_hub_split(ir.corpus, ir.corpus.split, data_root, required)
        if pool == "qrels_pool_all_splits":
            wanted = all_splits_pool
        elif pool == "qrels_pool":
            wanted = set().union(*(pooled_doc_ids(qrels_by_role[r]) for r in evaluated))
        else:
            wanted = None
        corpus = _corpus_texts(cds, fields[0], required, ir.doc_template, wanted)
    splits = {}
    for role in evaluated:
        qrels = qrels_by_role[role]
        if pool == "qrels_pool":
            ids = pooled_doc_ids(qrels)
        elif pool == "qrels_pool_all_splits":
            ids = all_splits_pool
        else:
            ids = set(corpus)
        absent = sorted(ids - set(corpus))
        if absent:
            raise DatasetError(
                f"{spec.name}: document {absent[0]!r} judged in the {role} qrels is "
                f"not in the corpus {ir.corpus.hub_id}"
            )
        splits[role] = IRSplit(
            queries={q: queries_text[q] for q in qrels}, corpus={d: corpus[d] for d in sorted(ids)}, qrels=qrels
        )
    record["sizes"] = {role: {"queries": len(s.queries), "corpus": len(s.corpus)} for role, s in splits.items()}
    if train is not None:
        record["sizes"]["train"] = len(train)
    record["query_ids_sha"] = {role: _ids_sha(s.queries) for role, s in splits.items()}
    return TaskData(spec, train, splits.get("validation"), splits.get("test"), (), record)


# ---------------------------------------------------------------------------------------------


def load_task_data(
    spec: TaskSpec,
    data_root: Path | None = None,
    *,
    roles: tuple[str, ...] = ROLES,
    pool: CandidatePool = "qrels_pool_all_splits",
    query_split_seed: int | None = None,
) -> TaskData:
    """The train/validation/test data of a task with the split protocol applied.

    `roles` limits what is loaded (e.g. ("validation", "test") for IR evaluation only);
    `pool` is the IR candidate pool: `qrels_pool_all_splits` (default, as the released loader: one
    pool per dataset, every document named in the validation and test qrels), `qrels_pool`
    (documents judged for the evaluated split's queries) or `full_corpus`.
    `query_split_seed` seeds the random validation/test query halves of NQ (required there).
    """
    roles = tuple(roles)
    unknown = [r for r in roles if r not in ROLES]
    if unknown or not roles:
        raise ValueError(f"roles must be a non-empty subset of {ROLES}, got {roles}")
    if pool not in CANDIDATE_POOLS:
        raise ValueError(f"unknown candidate pool {pool!r}; use one of {CANDIDATE_POOLS}")
    if spec.task_type == "IR":
        return _load_ir(spec, data_root, roles, pool, query_split_seed)
    return _load_supervised(spec, data_root, roles)
