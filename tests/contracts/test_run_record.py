import json

import pytest

from contracts.run_record import RunRecord, RunRecordError, read_run_records, write_run_records
from contracts.run_store import iter_records_in


def _record(**overrides):
    fields = dict(
        task_type="IR",
        dataset="mldr_en",
        train_set="msmarco_pairs",
        lr=1e-4,
        seed=0,
        validation_score=51.1,
        test_score=48.3,
        test_instance_scores=[100.0, 0.0, 45.0],
    )
    fields.update(overrides)
    return RunRecord.create("610m-mlm40-42k", **fields)


def test_round_trip_through_jsonl(tmp_path):
    records = [_record(), _record(seed=1, test_instance_scores=None)]
    path = write_run_records(tmp_path / "runs.jsonl", records)
    assert read_run_records(path) == records
    assert records[0].pretraining.masking_ratio == 0.4


@pytest.mark.parametrize(
    "mutate, field",
    [
        (lambda d: d.pop("seed"), "seed"),
        (lambda d: d.update(test_score=0.48), None),  # still valid: 0.48 is a percentage
        (lambda d: d.update(test_score=148.0), "test_score"),
        (lambda d: d.update(task_type="NER"), "task_type"),
        (lambda d: d.update(lr=0), "lr"),
        (lambda d: d.update(test_instance_scores=[1.0, float("nan")]), "test_instance_scores[1]"),
        (lambda d: d.update(extra=1), "extra"),
    ],
)
def test_validation_names_file_line_and_field(tmp_path, mutate, field):
    good = _record().to_dict()
    bad = dict(good)
    mutate(bad)
    path = tmp_path / "runs.jsonl"
    path.write_text(json.dumps(good) + "\n\n" + json.dumps(bad) + "\n")
    if field is None:
        assert len(read_run_records(path)) == 2
        return
    with pytest.raises(RunRecordError) as err:
        read_run_records(path)
    assert f"{path}:3" in str(err.value) and f"'{field}'" in str(err.value)


def test_malformed_json_and_missing_file(tmp_path):
    path = tmp_path / "runs.jsonl"
    path.write_text("{not json\n")
    with pytest.raises(RunRecordError, match=r"runs.jsonl:1: not valid JSON"):
        read_run_records(path)
    with pytest.raises(RunRecordError, match="no such run-record file"):
        read_run_records(tmp_path / "absent.jsonl")


def test_truncated_records_are_errors_naming_the_file(tmp_path):
    text = json.dumps(_record().to_dict())
    lines = tmp_path / "runs.jsonl"
    lines.write_text(text + "\n" + text[: len(text) // 2])  # the last line cut short
    with pytest.raises(RunRecordError, match=r"runs.jsonl:2: not valid JSON"):
        read_run_records(lines)
    folder = tmp_path / "runs" / "m" / "sst2" / "lr1e-04_sd0"
    folder.mkdir(parents=True)
    (folder / "record.json").write_text(text[:-10])
    with pytest.raises(RunRecordError, match=rf"{folder / 'record.json'}: not valid JSON .*truncated"):
        list(iter_records_in([tmp_path / "runs"]))


def test_new_records_are_validated():
    with pytest.raises(RunRecordError, match="validation_score.*expected a number"):
        _record(validation_score=float("nan"))
    with pytest.raises(RunRecordError, match=r"test_score.*outside \[0, 100\].*x100"):
        _record(test_score=-0.5)


def _two_protocol_record():
    return _record(
        task_type="TC",
        dataset="conll2003",
        train_set=None,
        protocol="paper",
        metric="sentence_macro_f1",
        other_scores={
            "standard": {
                "metric": "seqeval_f1",
                "validation_score": 80.0,
                "test_score": 70.0,
                "test_instance_scores": None,
            }
        },
    )


def test_protocol_fields_round_trip_and_select_scores(tmp_path):
    record = _two_protocol_record()
    path = write_run_records(tmp_path / "runs.jsonl", [record])
    assert read_run_records(path) == [record]
    assert record.scores_under("paper") is record
    standard = record.scores_under("standard")
    assert (standard.protocol, standard.metric, standard.test_score) == ("standard", "seqeval_f1", 70.0)
    assert standard.test_instance_scores is None
    assert standard.other_scores["paper"]["test_score"] == record.test_score
    assert _record(protocol="paper").scores_under("standard") is None  # no other scores
    assert _record().scores_under("standard").test_score == 48.3  # unknown protocol: as is
    with pytest.raises(ValueError, match="unknown protocol"):
        record.scores_under("seqeval")


def test_version_1_records_are_read_with_their_protocol(tmp_path):
    old = _record(provenance={"source": "released"}).to_dict()
    for key in ("protocol", "metric", "other_scores"):
        old.pop(key)
    old["schema_version"] = 1
    path = tmp_path / "v1.jsonl"
    path.write_text(json.dumps(old) + "\n" + json.dumps({**old, "provenance": {"source": "benchmarks"}}) + "\n")
    released, ours = read_run_records(path)
    assert (released.protocol, ours.protocol, released.schema_version) == ("paper", "standard", 2)
    path.write_text(json.dumps({**old, "protocol": "paper"}) + "\n")
    with pytest.raises(RunRecordError, match=r"v1.jsonl:1: field 'protocol' is not part of schema 1"):
        read_run_records(path)


@pytest.mark.parametrize(
    "change, field",
    [
        ({"protocol": "glue"}, "protocol"),
        ({"other_scores": {"paper": {"validation_score": 1.0, "test_score": 1.0}}}, "other_scores.paper"),
        ({"other_scores": {"standard": {"test_score": 1.0}}}, "other_scores.standard"),
        (
            {"other_scores": {"standard": {"validation_score": 1.0, "test_score": 101.0}}},
            "other_scores.standard.test_score",
        ),
    ],
)
def test_bad_protocol_fields_are_named(tmp_path, change, field):
    bad = {**_two_protocol_record().to_dict(), **change}
    path = tmp_path / "runs.jsonl"
    path.write_text(json.dumps(bad) + "\n")
    with pytest.raises(RunRecordError, match=rf"runs.jsonl:1: field '{field}'"):
        read_run_records(path)


def test_a_run_record_file_that_is_no_regular_file_is_refused_unread(tmp_path, monkeypatch):
    """Issue 66: `paper_figures --runs FIFO` waited for a writer, `/dev/zero` was read until memory
    ran out; a line longer than any record is refused without building it."""
    import os

    fifo = tmp_path / "runs.fifo"
    os.mkfifo(fifo)
    for path in (fifo, "/dev/zero", tmp_path):
        with pytest.raises(RunRecordError, match="not a regular file"):
            read_run_records(path)
    from contracts import run_record

    long = tmp_path / "long.jsonl"
    long.write_text("x" * 200 + "\n")
    monkeypatch.setattr(run_record, "MAX_RECORD_CHARS", 100)
    with pytest.raises(RunRecordError, match="long.jsonl:1: a line of more than 100 characters"):
        read_run_records(long)
