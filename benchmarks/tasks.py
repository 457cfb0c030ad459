"""The 12 fine-tuning tasks of the paper as one table of specs (docs/benchmarks.md).

One `TaskSpec` per paper dataset id (`contracts.paper.DATASETS`); everything task-specific that the
harness needs (where the data lives on the Hub, which split is trained / selected on / reported,
how an input is formatted, the labels, the metric, the step budget) is a field here, so the
training code has four task kinds and no per-dataset classes.

Sources of the facts: the paper, docs/protocol.md and the released harness (hgissbkh/EncodEval, branch
MLM_vs_CLM, `encodeval/datasets.py`): validation = 5% of train via
`train.train_test_split(train_size=0.95, seed=42)` (its "test" part) when the official validation
set is the reported test; TC uses the official splits; IR trains one model on
hgissbkh/msmarco-pairs and evaluates MS MARCO, NQ and MLDR zero-shot with it; NQ's single test
qrels split is divided 50/50 into validation/test queries at random (the loader's
`query_split_seed`; a run uses its fine-tuning seed, docs/protocol.md).

`TaskSpec.metric` is the task's `standard` metric; `metric_under(protocol)` gives the metric of
either evaluation protocol (docs/protocol.md): the `paper` protocol scores every task of a type
with the released harness's metric (`contracts.paper.PAPER_PROTOCOL_METRICS`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from contracts.paper import DATASET_BY_ID, DATASETS, PAPER_PROTOCOL_METRICS
from contracts.run_record import PROTOCOLS

TaskType = Literal["SC", "TC", "QA", "IR"]
IR_TRAIN_TASK = "msmarco"  # the IR run that trains the model the other IR runs evaluate
# How the model-selection split is obtained:
#   train_carveout: `validation_fraction` of the hub train split (datasets.train_test_split, seed
#                   `split_seed`), the official validation split is the reported test.
#   official:       the hub's own validation split.
#   query_halves:   (IR) the queries of one qrels split divided in two random halves.
ValidationProtocol = Literal["train_carveout", "official", "query_halves"]
# The evaluation protocols (contracts.run_record.PROTOCOLS): `paper` = the released harness's
# heads, inputs and metrics, `standard` = the community metrics (docs/protocol.md).
Protocol = Literal["paper", "standard"]

GLUE = "nyu-mll/glue"
MSMARCO_PAIRS = "msmarco_pairs"  # train_set id of the IR runs (folder prefix of the released runs)

CONLL2003_TAGS = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC")
# tner id order (tner/ontonotes5 label.json), which hgissbkh/ontonotes5 mirrors.
ONTONOTES5_TAGS = (
    "O",
    "B-CARDINAL",
    "B-DATE",
    "I-DATE",
    "B-PERSON",
    "I-PERSON",
    "B-NORP",
    "B-GPE",
    "I-GPE",
    "B-LAW",
    "I-LAW",
    "B-ORG",
    "I-ORG",
    "B-PERCENT",
    "I-PERCENT",
    "B-ORDINAL",
    "B-MONEY",
    "I-MONEY",
    "B-WORK_OF_ART",
    "I-WORK_OF_ART",
    "B-FAC",
    "B-TIME",
    "I-CARDINAL",
    "B-LOC",
    "B-QUANTITY",
    "I-QUANTITY",
    "I-NORP",
    "I-LOC",
    "B-PRODUCT",
    "I-TIME",
    "B-EVENT",
    "I-EVENT",
    "I-FAC",
    "B-LANGUAGE",
    "I-PRODUCT",
    "I-ORDINAL",
    "I-LANGUAGE",
)
UNER_TAGS = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC")


@dataclass(frozen=True)
class HubSource:
    """One Hub dataset (repo + config); `split` is set where one split of it is meant."""

    hub_id: str
    config: str | None = None
    split: str | None = None

    @property
    def config_dir(self) -> str:
        """Folder name of the config in a local mirror (`default` when the repo has none)."""
        return self.config or "default"


@dataclass(frozen=True)
class IRSources:
    """Where an IR task's evaluation data lives. Format `beir`: corpus/queries/qrels repos with
    `_id`/`query-id`/`corpus-id`/`score` columns; format `mldr`: query rows carrying their
    `positive_passages` (qrels) plus a corpus config with `docid`/`text`."""

    format: Literal["beir", "mldr"]
    corpus: HubSource
    qrels: HubSource  # split left None: the task's `splits` name the qrels splits
    queries: HubSource | None = None  # beir only
    # How a corpus row becomes the document text (before the "Document: " prefix).
    doc_template: str = "{text}"


@dataclass(frozen=True)
class TaskSpec:
    name: str  # contracts.paper dataset id
    task_type: TaskType
    hub_id: str  # SC/TC/QA: the dataset; IR: the qrels repo (see `ir`)
    hub_config: str | None
    # role -> hub split name; for IR the roles validation/test name qrels splits, train names the
    # split of `train_source`.
    splits: Mapping[str, str]
    validation_protocol: ValidationProtocol
    metric: str  # the `standard` protocol's metric, a name in benchmarks.metrics.METRICS
    # Columns the task reads from the hub rows (a missing one is a load error).
    input_columns: tuple[str, ...] = ()
    # SC: how the model input is built from a row (released harness templates).
    input_template: str | None = None
    label_column: str | None = None
    label_names: tuple[str, ...] = ()
    validation_fraction: float = 0.05
    split_seed: int = 42
    max_steps: int | None = 1000  # None: the budget is one epoch
    one_epoch: bool = False  # True: stop after one epoch (CoNLL, UNER) instead of max_steps
    eval_interval: int = 100
    # IR only
    train_set: str | None = None
    train_source: HubSource | None = None
    ir: IRSources | None = None
    query_prefix: str = "Query: "
    doc_prefix: str = "Document: "
    notes: str = ""

    def __hash__(self) -> int:  # `splits` is a dict; a spec is identified by its name
        return hash(self.name)

    @property
    def num_labels(self) -> int:
        return len(self.label_names)

    @property
    def display(self) -> str:
        return DATASET_BY_ID[self.name].display

    def metric_under(self, protocol: str) -> str:
        """The metric name (benchmarks.metrics.METRICS) of this task under an evaluation protocol."""
        if protocol == "paper":
            return PAPER_PROTOCOL_METRICS[self.task_type]
        if protocol == "standard":
            return self.metric
        raise ValueError(f"unknown protocol {protocol!r}; use one of {PROTOCOLS}")

    @property
    def source(self) -> HubSource:
        return HubSource(self.hub_id, self.hub_config)

    def format_input(self, row: Mapping) -> str:
        """SC model input of one hub row (SST-2: the raw sentence)."""
        if self.input_template is None:
            raise ValueError(f"task {self.name!r} ({self.task_type}) has no input template")
        return self.input_template.format(**row)


_MSMARCO_PAIRS_SOURCE = HubSource("hgissbkh/msmarco-pairs", None, "train")
_CARVEOUT = {"train": "train", "validation": "train", "test": "validation"}
_TC_SPLITS = {"train": "train", "validation": "validation", "test": "test"}


def _sc(name, config, test_split, columns, template, labels) -> TaskSpec:
    return TaskSpec(
        name=name,
        task_type="SC",
        hub_id=GLUE,
        hub_config=config,
        splits={"train": "train", "validation": "train", "test": test_split},
        validation_protocol="train_carveout",
        metric="accuracy",
        input_columns=columns,
        input_template=template,
        label_column="label",
        label_names=labels,
    )


def _tc(name, hub_id, tokens, tags, labels, one_epoch, notes="") -> TaskSpec:
    return TaskSpec(
        name=name,
        task_type="TC",
        hub_id=hub_id,
        hub_config=None,
        splits=_TC_SPLITS,
        validation_protocol="official",
        metric="seqeval_f1",
        input_columns=(tokens,),
        label_column=tags,
        label_names=labels,
        max_steps=None if one_epoch else 1000,
        one_epoch=one_epoch,
        eval_interval=20 if one_epoch else 100,
        notes=notes,
    )


def _qa(name, hub_id, config, metric, notes="") -> TaskSpec:
    return TaskSpec(
        name=name,
        task_type="QA",
        hub_id=hub_id,
        hub_config=config,
        splits=_CARVEOUT,
        validation_protocol="train_carveout",
        metric=metric,
        input_columns=("context", "question", "answers"),
        notes=notes,
    )


def _ir(name, splits, protocol, ir, notes="") -> TaskSpec:
    return TaskSpec(
        name=name,
        task_type="IR",
        hub_id=ir.qrels.hub_id,
        hub_config=ir.qrels.config,
        splits={"train": "train", **splits},
        validation_protocol=protocol,
        metric="ndcg@10",
        train_set=MSMARCO_PAIRS,
        train_source=_MSMARCO_PAIRS_SOURCE,
        ir=ir,
        notes=notes,
    )


_TASK_LIST = (
    _sc("sst2", "sst2", "validation", ("sentence",), "{sentence}", ("negative", "positive")),
    _sc(
        "qqp",
        "qqp",
        "validation",
        ("question1", "question2"),
        "Question 1: {question1}\nQuestion 2: {question2}",
        ("not_duplicate", "duplicate"),
    ),
    _sc(
        "mnli",
        "mnli",
        "validation_matched",
        ("premise", "hypothesis"),
        "Premise: {premise}\nHypothesis: {hypothesis}",
        ("entailment", "neutral", "contradiction"),
    ),
    _tc(
        "conll2003",
        "hgissbkh/conll2003-en",
        "words",
        "ner",
        CONLL2003_TAGS,
        one_epoch=True,
        notes="columns words/ner are those the released loader renames; the label order is the "
        "standard CoNLL-2003 (IOB2) order [inferred]; the loader reads the names from the data",
    ),
    _tc(
        "ontonotes5",
        "hgissbkh/ontonotes5",
        "tokens",
        "tags",
        ONTONOTES5_TAGS,
        one_epoch=False,
        notes="script-based on the Hub (the release passes trust_remote_code): use a local mirror "
        "with datasets>=4; tner label order",
    ),
    _tc("uner", "hgissbkh/uner_en", "tokens", "ner_tags", UNER_TAGS, one_epoch=True, notes="Universal NER v1 en_ewt"),
    _qa("squad", "rajpurkar/squad", "plain_text", "squad_f1"),
    _qa("squad_v2", "rajpurkar/squad_v2", "squad_v2", "squad_v2_f1"),
    _qa(
        "record",
        "hgissbkh/record",
        None,
        "record_f1",
        notes="hgissbkh/record is ReCoRD cast to SQuAD-style extractive QA (context, question, "
        "answers{text, answer_start}); the released loader uses it unchanged [inferred]",
    ),
    _ir(
        "msmarco",
        {"validation": "validation", "test": "test"},
        "official",
        IRSources(
            "beir",
            corpus=HubSource("BeIR/msmarco", "corpus", "corpus"),
            qrels=HubSource("BeIR/msmarco-qrels"),
            queries=HubSource("BeIR/msmarco", "queries", "queries"),
        ),
        notes="validation = dev qrels, test = the 'test' qrels split (TREC DL 2019, graded), as in the released loader",
    ),
    _ir(
        "nq",
        {"validation": "test", "test": "test"},
        "query_halves",
        IRSources(
            "beir",
            corpus=HubSource("BeIR/nq", "corpus", "corpus"),
            qrels=HubSource("BeIR/nq-qrels"),
            queries=HubSource("BeIR/nq", "queries", "queries"),
            doc_template="{title}. {text}",
        ),
        notes="only a test qrels split: its queries are split 50/50 (validation gets "
        "round(n/2) of the sorted query ids, random.Random(seed).sample with the run's "
        "fine-tuning seed unless ir_query_split_seed fixes it); the release's random.sample "
        "runs without a seed for NQ",
    ),
    _ir(
        "mldr_en",
        {"validation": "dev", "test": "test"},
        "official",
        IRSources(
            "mldr",
            corpus=HubSource("hgissbkh/mldr-en", "corpus", "corpus"),
            qrels=HubSource("hgissbkh/mldr-en", "default"),
        ),
    ),
)

assert {s.name for s in _TASK_LIST} == set(DATASET_BY_ID), "one spec per paper dataset"
# In the paper's table order (contracts.paper.DATASETS).
TASKS: dict[str, TaskSpec] = {d.id: next(s for s in _TASK_LIST if s.name == d.id) for d in DATASETS}


class UnknownTaskError(KeyError):
    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return self.args[0]


def get_task(name: str) -> TaskSpec:
    """The spec of a paper dataset id; an unknown name lists the valid ones."""
    try:
        return TASKS[name]
    except KeyError:
        raise UnknownTaskError(f"unknown task {name!r}; valid tasks: {', '.join(TASKS)}") from None


def with_ir_training(tasks: Sequence[str]) -> list[str]:
    """`tasks` and, when an IR task that evaluates another run's model is among them (NQ, MLDR),
    the MS MARCO task whose runs train that model (the released harness; docs/protocol.md)."""
    tasks = list(dict.fromkeys(tasks))
    if IR_TRAIN_TASK not in tasks and any(get_task(t).task_type == "IR" for t in tasks):
        tasks.append(IR_TRAIN_TASK)
    return tasks


def tasks_of(task_type: str) -> tuple[TaskSpec, ...]:
    return tuple(spec for spec in TASKS.values() if spec.task_type == task_type)
