"""Hub schemas (features and split names) of every dataset the tasks read.

The same `Features` object is passed to `datasets.load_dataset("json", ..., features=...)` when a
local mirror is read, so a mirror loads with the Hub's types (ClassLabel names, int32, nested
shapes: SQuAD `answers` is a dict of lists, MLDR `positive_passages` a list of dicts), and the toy
generator writes rows of exactly these shapes. Sources: the datasets' Hub cards (docs/benchmarks.md)
and the released loader (hgissbkh/EncodEval `encodeval/datasets.py`); what is inferred rather
than read from a card is marked so.
"""

from __future__ import annotations

from dataclasses import dataclass

from datasets import ClassLabel, Features, List, Value

from benchmarks.tasks import CONLL2003_TAGS, ONTONOTES5_TAGS, UNER_TAGS


@dataclass(frozen=True)
class HubSchema:
    features: Features
    splits: tuple[str, ...]  # split names exactly as the Hub names them


_STR = Value("string")
_I32 = Value("int32")
_I64 = Value("int64")


def _glue(columns: tuple[str, ...], labels: tuple[str, ...], splits: tuple[str, ...]) -> HubSchema:
    feats = {c: _STR for c in columns}
    feats.update(label=ClassLabel(names=list(labels)), idx=_I32)
    return HubSchema(Features(feats), splits)


_SQUAD_FEATURES = Features(
    {
        "id": _STR,
        "title": _STR,
        "context": _STR,
        "question": _STR,
        "answers": {"text": List(_STR), "answer_start": List(_I32)},
    }
)
_BEIR_TEXT = Features({"_id": _STR, "title": _STR, "text": _STR})
_PASSAGES = List({"docid": _STR, "text": _STR})

# (hub_id, config or None) -> schema
HUB_SCHEMAS: dict[tuple[str, str | None], HubSchema] = {
    ("nyu-mll/glue", "sst2"): _glue(("sentence",), ("negative", "positive"), ("train", "validation", "test")),
    ("nyu-mll/glue", "qqp"): _glue(
        ("question1", "question2"), ("not_duplicate", "duplicate"), ("train", "validation", "test")
    ),
    ("nyu-mll/glue", "mnli"): _glue(
        ("premise", "hypothesis"),
        ("entailment", "neutral", "contradiction"),
        ("train", "validation_matched", "validation_mismatched", "test_matched", "test_mismatched"),
    ),
    # Only `words` and `ner` are confirmed (the released loader renames them); `id` [inferred].
    ("hgissbkh/conll2003-en", None): HubSchema(
        Features(
            {
                "id": _STR,
                "words": List(_STR),
                "ner": List(ClassLabel(names=list(CONLL2003_TAGS))),
            }
        ),
        ("train", "validation", "test"),
    ),
    # tner/ontonotes5 content; the released code reads `.feature.names` of `tags`, so ClassLabel.
    ("hgissbkh/ontonotes5", None): HubSchema(
        Features(
            {
                "tokens": List(_STR),
                "tags": List(ClassLabel(names=list(ONTONOTES5_TAGS))),
            }
        ),
        ("train", "validation", "test"),
    ),
    ("hgissbkh/uner_en", None): HubSchema(
        Features(
            {
                "idx": _STR,
                "text": _STR,
                "tokens": List(_STR),
                "ner_tags": List(ClassLabel(names=list(UNER_TAGS))),
                "annotator": List(_STR),
            }
        ),
        ("train", "validation", "test"),
    ),
    ("rajpurkar/squad", "plain_text"): HubSchema(_SQUAD_FEATURES, ("train", "validation")),
    ("rajpurkar/squad_v2", "squad_v2"): HubSchema(_SQUAD_FEATURES, ("train", "validation")),
    # ReCoRD cast to SQuAD-style extractive QA [inferred from the released loader, which feeds it
    # to the QA harness unchanged while it drops `id`/`title` from SQuAD].
    ("hgissbkh/record", None): HubSchema(
        Features(
            {
                "context": _STR,
                "question": _STR,
                "answers": {"text": List(_STR), "answer_start": List(_I32)},
            }
        ),
        ("train", "validation"),
    ),
    ("hgissbkh/msmarco-pairs", None): HubSchema(Features({"query": _STR, "positive": _STR}), ("train",)),
    ("BeIR/msmarco", "corpus"): HubSchema(_BEIR_TEXT, ("corpus",)),
    ("BeIR/msmarco", "queries"): HubSchema(_BEIR_TEXT, ("queries",)),
    # TSV on the Hub: numeric ids are read as int64 by the csv builder; the loader casts to str.
    ("BeIR/msmarco-qrels", None): HubSchema(
        Features(
            {
                "query-id": _I64,
                "corpus-id": _I64,
                "score": _I64,
            }
        ),
        ("train", "validation", "test"),
    ),
    ("BeIR/nq", "corpus"): HubSchema(_BEIR_TEXT, ("corpus",)),
    ("BeIR/nq", "queries"): HubSchema(_BEIR_TEXT, ("queries",)),
    ("BeIR/nq-qrels", None): HubSchema(
        Features(
            {
                "query-id": _STR,
                "corpus-id": _STR,
                "score": _I64,
            }
        ),
        ("test",),
    ),
    ("hgissbkh/mldr-en", "default"): HubSchema(
        Features(
            {
                "query_id": _STR,
                "query": _STR,
                "positive_passages": _PASSAGES,
                "negative_passages": _PASSAGES,
            }
        ),
        ("dev", "test"),
    ),
    ("hgissbkh/mldr-en", "corpus"): HubSchema(Features({"docid": _STR, "text": _STR}), ("corpus",)),
}


def schema_of(hub_id: str, config: str | None) -> HubSchema:
    try:
        return HUB_SCHEMAS[(hub_id, config)]
    except KeyError:
        raise KeyError(
            f"no schema declared for {hub_id} (config {config!r}); add it to benchmarks/datasets/schemas.py"
        ) from None
