"""The task table: one spec per paper dataset, the released protocol's facts, clear errors."""

import pytest

from benchmarks.datasets.schemas import HUB_SCHEMAS
from benchmarks.metrics import METRICS
from benchmarks.tasks import MSMARCO_PAIRS, TASKS, UnknownTaskError, get_task, tasks_of
from contracts.paper import DATASETS


def test_one_spec_per_paper_dataset_in_table_order():
    assert list(TASKS) == [d.id for d in DATASETS]
    assert len(TASKS) == 12
    for d in DATASETS:
        assert TASKS[d.id].task_type == d.task_type
        assert TASKS[d.id].display == d.display


def test_hub_ids_are_those_of_the_released_configs():
    expected = {
        "sst2": ("nyu-mll/glue", "sst2"),
        "qqp": ("nyu-mll/glue", "qqp"),
        "mnli": ("nyu-mll/glue", "mnli"),
        "conll2003": ("hgissbkh/conll2003-en", None),
        "ontonotes5": ("hgissbkh/ontonotes5", None),
        "uner": ("hgissbkh/uner_en", None),
        "squad": ("rajpurkar/squad", "plain_text"),
        "squad_v2": ("rajpurkar/squad_v2", "squad_v2"),
        "record": ("hgissbkh/record", None),
        "msmarco": ("BeIR/msmarco-qrels", None),
        "nq": ("BeIR/nq-qrels", None),
        "mldr_en": ("hgissbkh/mldr-en", "default"),
    }
    assert {n: (s.hub_id, s.hub_config) for n, s in TASKS.items()} == expected
    assert TASKS["msmarco"].ir.corpus.hub_id == "BeIR/msmarco"
    assert TASKS["nq"].ir.queries.hub_id == "BeIR/nq"


def test_labels_metrics_and_budgets():
    counts = {"sst2": 2, "qqp": 2, "mnli": 3, "conll2003": 9, "ontonotes5": 37, "uner": 7}
    assert {n: TASKS[n].num_labels for n in counts} == counts
    assert TASKS["mnli"].label_names == ("entailment", "neutral", "contradiction")
    assert TASKS["conll2003"].label_names[:3] == ("O", "B-PER", "I-PER")
    for spec in TASKS.values():
        assert spec.metric in METRICS
        if spec.name in ("conll2003", "uner"):
            assert spec.one_epoch and spec.max_steps is None and spec.eval_interval == 20
        else:
            assert not spec.one_epoch and spec.max_steps == 1000 and spec.eval_interval == 100


def test_split_protocols():
    for spec in tasks_of("SC") + tasks_of("QA"):
        assert spec.validation_protocol == "train_carveout"
        assert (spec.validation_fraction, spec.split_seed) == (0.05, 42)
        assert spec.splits["validation"] == "train"
    assert TASKS["mnli"].splits["test"] == "validation_matched"
    assert TASKS["sst2"].splits["test"] == "validation"
    for spec in tasks_of("TC"):
        assert spec.validation_protocol == "official"
        assert dict(spec.splits) == {"train": "train", "validation": "validation", "test": "test"}
    nq = TASKS["nq"]
    assert nq.validation_protocol == "query_halves"
    assert nq.splits["validation"] == nq.splits["test"] == "test"
    assert TASKS["mldr_en"].splits["validation"] == "dev"


def test_ir_tasks_share_the_msmarco_pairs_training_set():
    for spec in tasks_of("IR"):
        assert spec.train_set == MSMARCO_PAIRS
        assert spec.train_source.hub_id == "hgissbkh/msmarco-pairs"
        assert (spec.query_prefix, spec.doc_prefix) == ("Query: ", "Document: ")
    assert TASKS["nq"].ir.doc_template == "{title}. {text}"


def test_input_templates():
    assert TASKS["sst2"].format_input({"sentence": "a fine film . "}) == "a fine film . "
    assert TASKS["mnli"].format_input({"premise": "P", "hypothesis": "H"}) == "Premise: P\nHypothesis: H"
    assert TASKS["qqp"].format_input({"question1": "A?", "question2": "B?"}) == "Question 1: A?\nQuestion 2: B?"
    with pytest.raises(ValueError, match="no input template"):
        TASKS["squad"].format_input({})


def test_every_source_has_a_declared_schema():
    for spec in TASKS.values():
        sources = (
            [spec.source]
            if spec.task_type != "IR"
            else [spec.train_source, spec.ir.corpus, spec.ir.qrels] + ([spec.ir.queries] if spec.ir.queries else [])
        )
        for src in sources:
            assert (src.hub_id, src.config) in HUB_SCHEMAS, src
            schema = HUB_SCHEMAS[(src.hub_id, src.config)]
            if src.split:
                assert src.split in schema.splits
        if spec.task_type != "IR":
            assert set(spec.splits.values()) <= set(HUB_SCHEMAS[(spec.hub_id, spec.hub_config)].splits)


def test_unknown_task_lists_the_valid_names():
    assert get_task("squad_v2").name == "squad_v2"
    with pytest.raises(UnknownTaskError) as info:
        get_task("glue")
    message = str(info.value)
    assert "unknown task 'glue'" in message
    for name in TASKS:
        assert name in message
    assert isinstance(info.value, KeyError)


def test_specs_are_hashable_and_frozen():
    import dataclasses

    spec = TASKS["sst2"]
    assert {spec: 1}[dataclasses.replace(spec)] == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.name = "x"
