"""The run store (contracts/run_store.py) and the analysis reading it (analysis/stored_runs.py)."""

import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analysis.aggregate import scan_runs
from analysis.bench import synthetic_records
from analysis.cli import main
from analysis.protocols import records_under
from analysis.stored_runs import scan_store
from contracts.run_record import RunRecordError, write_run_records
from contracts.run_store import (
    INSTANCES,
    is_run_store,
    iter_records_in,
    iter_store_records,
    records_table,
    store_parts,
    write_part,
    write_run_store,
)
from tests.analysis.analysis_testlib import make_record


def _two_protocol_records():
    """TC runs scored under both protocols (instance scores in each), and SC runs of one."""
    rng = np.random.default_rng(3)
    records = []
    for model in ("a", "b"):
        for lr in (1e-5, 2e-5):
            for seed in range(3):
                paper, standard = rng.uniform(0, 100, 40), rng.uniform(0, 100, 40)
                records.append(
                    make_record(
                        model=model,
                        task_type="TC",
                        dataset="conll2003",
                        lr=lr,
                        seed=seed,
                        val=float(rng.uniform(40, 60)),
                        test=float(paper.mean()),
                        instances=list(paper),
                        protocol="paper",
                        metric="word_macro_f1",
                        other_scores={
                            "standard": {
                                "metric": "seqeval_f1",
                                "validation_score": float(rng.uniform(40, 60)),
                                "test_score": float(standard.mean()),
                                "test_instance_scores": list(standard),
                            }
                        },
                    )
                )
                records.append(
                    make_record(
                        model=model,
                        task_type="SC",
                        dataset="sst2",
                        lr=lr,
                        seed=seed,
                        val=float(rng.uniform(40, 60)),
                        test=50.0,
                        protocol="standard",
                    )
                )
    return records


@pytest.fixture(scope="module")
def mixed_records(mldr_records):
    synthetic = synthetic_records(["210m-clm-42k"], instances=30, rng_seed=2)
    return [*mldr_records, *synthetic, *_two_protocol_records()]


@pytest.fixture(scope="module")
def both_forms(tmp_path_factory, mixed_records):
    folder = tmp_path_factory.mktemp("forms")
    jsonl = write_run_records(folder / "runs.jsonl", mixed_records)
    store = write_run_store(folder / "runs.parquet", mixed_records, rows_per_part=97)  # several parts
    return jsonl, store


def test_store_round_trip(tmp_path, mixed_records, both_forms):
    _, store = both_forms
    assert is_run_store(store) and len(store_parts(store)) > 1
    back = list(iter_store_records(store))
    assert len(back) == len(mixed_records)
    for original, read in zip(mixed_records, back):
        assert replace(read, test_instance_scores=None) == replace(original, test_instance_scores=None)
        if original.test_instance_scores is None:
            assert read.test_instance_scores is None
        else:  # float32 in the store
            assert read.test_instance_scores == tuple(
                np.asarray(original.test_instance_scores, dtype=np.float32).astype(float).tolist()
            )
    assert [r.key for r in iter_records_in([store])] == [r.key for r in mixed_records]
    without = next(iter_store_records(store, instance_scores=False))
    assert without.test_instance_scores is None and without.key == mixed_records[0].key


@pytest.mark.parametrize("protocol", ["paper", "standard"])
def test_store_frames_equal_the_record_scan(both_forms, mixed_records, protocol):
    _, store = both_forms
    selected, runs, note = scan_store([store], protocol)
    kept, expected_note = records_under(mixed_records, protocol)
    expected_selected, expected_runs = scan_runs(kept)
    assert note == expected_note
    pd.testing.assert_frame_equal(runs, expected_runs)
    pd.testing.assert_frame_equal(selected.drop(columns=INSTANCES), expected_selected.drop(columns=INSTANCES))
    for ours, theirs in zip(selected[INSTANCES], expected_selected[INSTANCES]):
        assert (ours is None and theirs is None) or (ours.dtype == np.float32 and np.array_equal(ours, theirs))


@pytest.mark.parametrize("protocol", ["paper", "standard"])
def test_jsonl_and_store_give_identical_tables(tmp_path, both_forms, protocol):
    jsonl, store = both_forms
    outputs = []
    for source in (jsonl, store):
        out = tmp_path / source.suffix.strip(".")
        boot = ["--reps", "300", "--rng-seed", "4", "--protocol", protocol]
        assert main(["table", str(source), "--csv", str(out / "cells.csv"), *boot]) == 0
        assert main(["tables", str(source), "--out", str(out / "tables"), "--format", "csv,md", *boot]) == 0
        assert main(["audit", str(source), "--out", str(out / "audit"), *boot]) == 0
        outputs.append(out)
    cells = pd.read_csv(outputs[0] / "cells.csv")
    assert (cells["bootstrap"] == "seeds+instances").any()  # the instance bootstrap was exercised
    written = [sorted(p.name for p in (o / "tables").glob("*.csv")) for o in outputs]
    assert written[0] == written[1] and written[0]  # the same tables (those with a cell of these runs)
    for name in ("cells.csv", "tables/tables.md", *(f"tables/{n}" for n in written[0]), "audit/audit.json"):
        # The outputs name their source: the same placeholder for both.
        first, second = (
            (o / name).read_text().replace(str(source), "SOURCE") for o, source in zip(outputs, both_forms)
        )
        if name.endswith(".json"):  # and the time it was written
            first, second = ({**json.loads(t), "written": None} for t in (first, second))
        assert first == second, name


def test_claims_read_a_store(tmp_path, both_forms, capsys):
    jsonl, store = both_forms
    for source, name in ((jsonl, "a.csv"), (store, "b.csv")):
        assert main(["claims", str(source), "--csv", str(tmp_path / name), "--reps", "100"]) == 0
    ours, theirs = (pd.read_csv(tmp_path / n).drop(columns="source") for n in ("a.csv", "b.csv"))
    pd.testing.assert_frame_equal(ours, theirs)


def test_store_errors_name_the_file_and_field(tmp_path, mldr_records, capsys):
    table = records_table(mldr_records[:3])
    broken = table.set_column(table.schema.get_field_index("lr"), "lr", pa.array([1e-5, -1.0, 1e-5]))
    write_part(tmp_path / "bad.parquet", broken)
    with pytest.raises(RunRecordError, match=r"bad.parquet: row 1: field 'lr' must be > 0"):
        list(iter_store_records(tmp_path / "bad.parquet"))
    pq.write_table(table.drop_columns(["seed"]), tmp_path / "foreign.parquet")
    assert main(["table", str(tmp_path / "foreign.parquet")]) == 2
    assert "foreign.parquet: column 'seed' is missing" in capsys.readouterr().err
    with pytest.raises(RunRecordError, match="no run store here"):
        store_parts(tmp_path / "empty.parquet")
    with pytest.raises(RunRecordError, match="already exists"):
        write_run_store(tmp_path / "bad.parquet", mldr_records)


def test_a_run_flagged_at_chance_is_counted_in_its_cell_from_records_and_from_the_store(tmp_path, capsys):
    """Issue 67: a cell whose selected runs include one at its chance level says so
    (`at_chance_runs`), read from record files and from a run store alike; a flagged run that is not
    selected (a better LR of its seed) is not counted."""
    from analysis.aggregate import aggregate_selected

    records = synthetic_records(["210m-clm-42k"], instances=10, rng_seed=5)
    best = {}
    for r in records:
        if r.dataset == "sst2":
            key = r.seed
            if key not in best or r.validation_score > best[key].validation_score:
                best[key] = r
    flag = {"chance": {"at_chance": ["test"], "why": "test 50.00 vs chance 50.00"}}
    chosen = best[min(best)]
    beaten = next(r for r in records if r.dataset == "sst2" and r.seed == chosen.seed and r is not chosen)
    flagged = [
        replace(r, provenance={**(r.provenance or {}), **flag}) if r is chosen or r is beaten else r for r in records
    ]
    store = write_run_store(tmp_path / "runs.parquet", flagged)
    from_records, _ = scan_runs(flagged)
    from_store, _, _ = scan_store([store], "paper")
    for selected in (from_records, from_store):
        assert int(selected["at_chance"].sum()) == 1
        cells = aggregate_selected(selected, reps=50)
        for row in cells.itertuples():  # sst2's cell and the SC average it is part of
            counted = row.dataset == "sst2" or (row.dataset == "average" and row.task_type == "SC")
            assert row.at_chance_runs == int(counted), (row.dataset, row.at_chance_runs)
    from analysis.aggregate import at_chance_note

    note = at_chance_note(cells)
    assert (
        note.startswith("note: 1 cells include selected runs at their chance level") and "210m-clm-42k/sst2 (1)" in note
    )
    from reproduce.missing import at_chance_section

    section = at_chance_section(cells)  # the reports' section names the same cell, not the average
    assert "1 selected runs in 1 cells" in section and "| 210m-clm-42k | sst2 | 1 |" in section
    assert at_chance_section(cells.drop(columns="at_chance_runs")) == "" and at_chance_note(cells.iloc[0:0]) is None
    jsonl = write_run_records(tmp_path / "runs.jsonl", flagged)
    assert main(["table", str(jsonl), "--reps", "50"]) == 0
    assert note in capsys.readouterr().err  # the table, tables and audit commands print it
