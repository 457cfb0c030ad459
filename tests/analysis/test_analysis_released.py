import json

import pytest

from analysis.cli import main
from analysis.released import ReleasedImportError, import_released
from contracts.paper import DATASETS, FINETUNE_LRS, FINETUNE_SEEDS, PAPER_PROTOCOL_METRICS
from contracts.run_record import read_run_records

# The dataset folders of the released tree (hgissbkh/EncodEval results/210m-mlm40-42k, listed with
# the search tool's find_files), written out here rather than taken from contracts.paper.
RELEASED_TREE = {
    "SC": ("sst2", "qqp", "mnli_m"),
    "TC": ("conll2003_en", "ontonotes", "uner_en"),
    "QA": ("squad", "squad_v2", "record", "qed"),
    "IR": ("msmarco", "nq", "mldr_en"),
}


def _write(root, rel, payload):
    path = root / "results" / rel / "results.json"
    path.parent.mkdir(parents=True)
    path.write_text(payload if isinstance(payload, str) else json.dumps(payload))
    return path


GOOD = {"validation": {"score": 0.5}, "test": {"score": 0.25}}


def test_imports_the_released_mldr_runs(released_root, mldr_records):
    assert len(mldr_records) == 30
    first = next(r for r in mldr_records if r.lr == 1e-4 and r.seed == 0)
    assert (first.model, first.task_type, first.dataset, first.train_set) == (
        "610m-mlm40-42k",
        "IR",
        "mldr_en",
        "msmarco_pairs",
    )
    assert first.test_score == pytest.approx(59.66, abs=0.005)
    assert first.pretraining.masking_ratio == 0.4 and first.pretraining.mlm_steps == 42000
    assert first.provenance["source"] == "released"
    assert first.provenance["path"] == "610m-mlm40-42k/IR/mldr_en/msmarco_pairs_lr1e-04_sd0/results.json"
    assert len(first.test_instance_scores) == 800
    assert sum(first.test_instance_scores) / 800 == pytest.approx(first.test_score)
    assert sum(r.test_instance_scores is not None for r in mldr_records) == 6
    # DIR may be the `results` folder itself as well as its parent.
    again, unreported = import_released(released_root / "results")
    assert [r.key for r in again] == [r.key for r in mldr_records] and unreported == []


def test_missing_scores_i_and_plain_run_folder(tmp_path):
    _write(tmp_path, "m/SC/sst2/lr2e-05_sd3", GOOD)
    (record,), _ = import_released(tmp_path)
    assert record.test_instance_scores is None and record.train_set is None
    assert (record.lr, record.seed, record.validation_score, record.test_score) == (2e-5, 3, 50.0, 25.0)
    assert record.pretraining is None  # "m" is not a release-style name


@pytest.mark.parametrize(
    "payload, message",
    [
        ("{not json", "not valid JSON"),
        ({"validation": {"score": 0.5}}, "missing object 'test'"),
        ({"validation": {"score": 0.5}, "test": {}}, "'test.score' is None"),
        ({"validation": {"score": 50.0}, "test": {"score": 0.5}}, "released scores are in \\[0, 1\\]"),
        ({"validation": {"score": 0.5}, "test": {"score": 0.5, "scores_i": [0.1, "x"]}}, "scores_i"),
    ],
)
def test_malformed_files_name_the_file(tmp_path, payload, message):
    path = _write(tmp_path, "m/SC/sst2/lr1e-05_sd0", payload)
    with pytest.raises(ReleasedImportError, match=message) as error:
        import_released(tmp_path)
    assert str(path) in str(error.value)


@pytest.mark.parametrize(
    "rel, message",
    [
        ("m/XX/sst2/lr1e-05_sd0", "task type folder 'XX'"),
        ("m/SC/sst2/run0", "is not \\[<train_set>_\\]lr<LR>_sd<SEED>"),
        ("m/TC/sst2/lr1e-05_sd0", "folder 'sst2' belongs under SC/, not TC/"),
        (
            "m/SC/mnli/lr1e-05_sd0",
            "unknown released dataset folder 'SC/mnli'; the known folders are "
            "SC/sst2, SC/qqp, SC/mnli_m, TC/ontonotes, TC/conll2003_en, TC/uner_en",
        ),
        ("m/SC/sst2/extra/lr1e-05_sd0", "expected <model>/<task type>"),
    ],
)
def test_bad_layout_names_the_file(tmp_path, rel, message):
    _write(tmp_path, rel, GOOD)
    with pytest.raises(ReleasedImportError, match=message):
        import_released(tmp_path)


def test_unreported_dataset_is_imported_and_flagged(tmp_path, capsys):
    _write(tmp_path, "m/QA/qed/lr1e-05_sd0", GOOD)
    _write(tmp_path, "m/QA/squad/lr1e-05_sd0", GOOD)
    records, unreported = import_released(tmp_path)
    assert unreported == ["qed"]
    flags = {r.dataset: r.provenance.get("reported_by_paper", True) for r in records}
    assert flags == {"qed": False, "squad": True}
    out = tmp_path / "runs.jsonl"
    assert main(["import-released", str(tmp_path), "-o", str(out)]) == 0
    assert len(read_run_records(out)) == 2
    captured = capsys.readouterr()
    assert "imported 2 runs" in captured.out and "'qed'" in captured.err and "not reported" in captured.err


def test_cli_errors_are_one_line(tmp_path, capsys):
    assert main(["import-released", str(tmp_path / "nowhere"), "-o", str(tmp_path / "x.jsonl")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nowhere" in err
    _write(tmp_path, "m/SC/sst2/lr1e-05_sd0", "[1, 2")
    assert main(["import-released", str(tmp_path), "-o", str(tmp_path / "x.jsonl")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "lr1e-05_sd0/results.json" in err and not (tmp_path / "x.jsonl").exists()


def test_a_whole_released_model_tree_maps_every_folder(tmp_path, capsys):
    """12 datasets x 30 runs and QED, with the release's real folder and run names."""
    for task_type, folders in RELEASED_TREE.items():
        for folder in folders:
            prefix = "msmarco_pairs_" if task_type == "IR" else ""
            for lr in FINETUNE_LRS:
                for seed in FINETUNE_SEEDS:
                    _write(tmp_path, f"210m-mlm40-42k/{task_type}/{folder}/{prefix}lr{lr:.0e}_sd{seed}", GOOD)
    records, unreported = import_released(tmp_path)
    assert unreported == ["qed"]
    per_dataset = {}
    for record in records:
        per_dataset[record.dataset] = per_dataset.get(record.dataset, 0) + 1
        assert (record.protocol, record.metric) == ("paper", PAPER_PROTOCOL_METRICS[record.task_type])
    assert per_dataset == {**{d.id: 30 for d in DATASETS}, "qed": 30}
    out = tmp_path / "runs.jsonl"
    assert main(["import-released", str(tmp_path), "-o", str(out)]) == 0
    captured = capsys.readouterr()
    assert "imported 390 runs of 1 models" in captured.out
    assert captured.err.count("\n") == 1 and "'qed' (30 runs, task type QA)" in captured.err
    metrics = {(r.task_type, r.metric) for r in read_run_records(out)}
    assert metrics == {
        ("SC", "accuracy"),
        ("TC", "sentence_macro_f1"),
        ("QA", "answer_token_f1"),
        ("IR", "retrieved_ndcg@10"),
    }
