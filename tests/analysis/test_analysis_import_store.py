"""import-released into a run store: streaming, resuming, bad files; the fast results.json reader;
the release-scale benchmark on a tiny tree."""

import json
import os

import numpy as np
import pytest

import analysis.released as released
from analysis.cli import main
from analysis.release_bench import RELEASED_INSTANCES, benchmark_release, write_synthetic_release
from analysis.released import ReleasedImportError, import_released, import_released_to_store, parse_results_json
from contracts.paper import DATASETS
from contracts.run_record import RunRecordError, read_run_records
from contracts.run_store import PART_GLOB, iter_store_records, part_manifest, store_parts


@pytest.fixture(scope="module")
def tiny_release(tmp_path_factory):
    root = tmp_path_factory.mktemp("release")
    write_synthetic_release(root, ["210m-mlm40-42k"], rng_seed=1, max_instances=12)
    return root / "results"


@pytest.mark.parametrize("indent", [None, 4])
def test_fast_reader_equals_json(indent):
    data = {
        "test": {"scores_i": [1.0, 0.0, 0.6309297535714573, 5e-05, 1, 0.3333333333333335], "score": 0.5},
        "validation": {"score": 0.25, "scores_i": [0.5, 1.0]},
        "extra": [1, 2],
    }
    fast = parse_results_json(json.dumps(data, indent=indent).encode())
    assert fast["validation"] == {"score": 0.25, "scores_i": None}  # never parsed: not used
    assert fast["test"]["scores_i"].tolist() == data["test"]["scores_i"] and fast["extra"] == [1, 2]
    assert parse_results_json(b'{"test": {"score": 0.5, "scores_i": []}}')["test"]["scores_i"].size == 0


@pytest.mark.parametrize(
    "text",
    [
        b'{"test": {"score": 0.5, "scores_i": [0.1, true]}}',
        b'{"test": {"score": 0.5, "scores_i": [0.1, "x"]}}',
        b'{"test": {"score": 0.5, "scores_i": [0.1, null]}}',
        b'{"test": {"score": 0.5, "scores_i": [[0.1], [0.2]]}}',
        b'{"test": {"score": 0.5, "scores_i": null}}',
        b'{"test": {"score": 0.5, "scores_i": [0.1, 0.2}}',
    ],
)
def test_fast_reader_leaves_other_shapes_to_json(text):
    assert parse_results_json(text) is None


def test_synthetic_release_is_release_shaped(tiny_release):
    files = sorted(tiny_release.rglob("results.json"))
    assert len(files) == 12 * 30
    run = json.loads((tiny_release / "210m-mlm40-42k/IR/nq/msmarco_pairs_lr1e-04_sd3/results.json").read_text())
    assert run["test"]["score"] == pytest.approx(np.mean(run["test"]["scores_i"]))
    assert len(run["test"]["scores_i"]) == 12 and len(run["validation"]["scores_i"]) == 12
    records, unreported = import_released(tiny_release)
    assert len(records) == 360 and unreported == [] and all(len(r.test_instance_scores) == 12 for r in records)
    assert set(RELEASED_INSTANCES) == {d.id for d in DATASETS}
    assert RELEASED_INSTANCES["qqp"][1] == 40430 and RELEASED_INSTANCES["mldr_en"] == (200, 800)


def test_store_import_matches_the_jsonl_import(tmp_path, tiny_release, capsys):
    assert main(["import-released", str(tiny_release), "-o", str(tmp_path / "runs.jsonl")]) == 0
    assert main(["import-released", str(tiny_release), "-o", str(tmp_path / "runs.parquet")]) == 0
    assert "imported 360 runs of 1 models (360 with test instance scores)" in capsys.readouterr().out
    from_jsonl = read_run_records(tmp_path / "runs.jsonl")
    from_store = list(iter_store_records(tmp_path / "runs.parquet"))
    assert [r.key for r in from_store] == [r.key for r in from_jsonl]
    assert [r.test_score for r in from_store] == [r.test_score for r in from_jsonl]
    assert all(
        np.array_equal(np.float32(a.test_instance_scores), np.float32(b.test_instance_scores))
        for a, b in zip(from_store, from_jsonl)
    )


def test_interrupted_import_resumes_to_the_same_store(tmp_path, tiny_release, monkeypatch):
    clean = import_released_to_store(tiny_release, tmp_path / "clean", part_values=500)
    assert clean.parts_written > 3 and clean.runs == 360
    real, calls = released.parse_released_run, []

    def interrupted(path, root):
        calls.append(path)
        if len(calls) == 150:
            raise KeyboardInterrupt
        return real(path, root)

    monkeypatch.setattr(released, "parse_released_run", interrupted)
    with pytest.raises(KeyboardInterrupt):
        import_released_to_store(tiny_release, tmp_path / "resumed", part_values=500)
    kept = len(list((tmp_path / "resumed").glob(PART_GLOB)))
    assert 0 < kept < clean.parts_written
    (tmp_path / "resumed" / ".part-99999.parquet.x.tmp").write_bytes(b"half a part")  # a write cut short
    monkeypatch.setattr(released, "parse_released_run", real)
    resumed = import_released_to_store(tiny_release, tmp_path / "resumed", part_values=500)
    assert (resumed.parts_kept, resumed.parts_written) == (kept, clean.parts_written - kept)
    assert resumed.runs == 360 and resumed.with_instances == 360
    assert [p.read_bytes() for p in store_parts(tmp_path / "resumed")] == [
        p.read_bytes() for p in store_parts(tmp_path / "clean")
    ]
    assert not list((tmp_path / "resumed").glob(".*.tmp"))


def _with_bad_files(tmp_path, tiny_release):
    import shutil

    tree = tmp_path / "results"
    shutil.copytree(tiny_release, tree)
    bad = tree / "210m-mlm40-42k/SC/sst2/lr1e-05_sd0/results.json"
    bad.write_text(bad.read_text().replace('"score": ', '"score": 7', 1))  # validation score > 1
    cut = tree / "210m-mlm40-42k/QA/squad/lr2e-05_sd1/results.json"
    cut.write_text(cut.read_text()[:200])  # a truncated file
    return tree, bad, cut


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl"])
def test_bad_files_stop_the_import_or_are_skipped(tmp_path, tiny_release, capsys, suffix):
    tree, bad, cut = _with_bad_files(tmp_path, tiny_release)
    assert main(["import-released", str(tree), "-o", str(tmp_path / f"a{suffix}")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(cut) in err and "not valid JSON" in err  # the first bad file, sorted
    assert main(["import-released", str(tree), "-o", str(tmp_path / f"b{suffix}"), "--skip-bad"]) == 0
    captured = capsys.readouterr()
    assert "imported 358 runs" in captured.out
    assert f"warning: skipped {bad.relative_to(tree).as_posix()}: {bad}: 'validation.score' is 7" in captured.err
    assert "not valid JSON" in captured.err
    assert "warning: 2 bad file(s) or folder(s) skipped (--skip-bad)" in captured.err
    if suffix == ".parquet":  # the manifest remembers them: a rerun reads nothing again and lists them
        skipped = [s for p in store_parts(tmp_path / "b.parquet") for s in part_manifest(p)["skipped"]]
        assert len(skipped) == 2
        assert main(["import-released", str(tree), "-o", str(tmp_path / "b.parquet"), "--skip-bad"]) == 0
        captured = capsys.readouterr()
        assert "0 parts written" in captured.out and "2 bad file(s) or folder(s) skipped" in captured.err


def test_import_into_a_file_is_an_error(tmp_path, tiny_release):
    (tmp_path / "x.parquet").write_text("")
    with pytest.raises(ReleasedImportError, match="is a file"):
        import_released_to_store(tiny_release, tmp_path / "x.parquet")


@pytest.mark.e2e  # the whole bench, over 30 s
def test_bench_times_every_step(tmp_path, capsys):
    assert main(["bench", "--models", "1", "--out", str(tmp_path), "--max-instances", "8", "--reps", "20"]) == 0
    line = capsys.readouterr().out
    assert line.startswith("bench: 1 models, 360 runs") and "tables+audit" in line
    result = json.loads((tmp_path / "benchmark.json").read_text())
    for step in ("import", "tables", "audit", "claims"):
        assert result[step]["seconds"] > 0 and result[step]["peak_mb"] > 0
    assert result["store_mb"] > 0 and result["runs"] == 360 and result["max_instances"] == 8
    assert (tmp_path / "tables" / "tables.md").exists() and (tmp_path / "claims.csv").exists()
    again = benchmark_release(tmp_path, 1, reps=20, max_instances=8)  # the tree is reused
    assert again["generate_seconds"] == result["generate_seconds"]


def test_an_interrupted_import_is_not_read_as_the_whole_release(tmp_path, tiny_release, monkeypatch, capsys):
    """A store killed after its first parts was read by `table` as complete (docs/reliability.md)."""
    store = tmp_path / "runs.parquet"
    real = released.parse_released_run
    calls = []

    def interrupted(path, root):
        calls.append(path)
        if len(calls) == 150:
            raise KeyboardInterrupt  # as a kill: no cleanup code runs after it in the import
        return real(path, root)

    monkeypatch.setattr(released, "parse_released_run", interrupted)
    with pytest.raises(KeyboardInterrupt):
        import_released_to_store(tiny_release, store, part_values=500)
    assert list(store.glob(PART_GLOB))  # some parts were written
    assert main(["table", str(store)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "the import into it did not finish" in err[0] and "again: it resumes" in err[0], err
    with pytest.raises(RunRecordError, match="did not finish"):
        list(iter_store_records(store))
    monkeypatch.setattr(released, "parse_released_run", real)
    assert main(["import-released", str(tiny_release), "-o", str(store)]) == 0  # resumes and completes it
    assert len(list(iter_store_records(store, instance_scores=False))) == 360
    (store / "store.json").unlink()  # a store that does not say it is complete is not read
    with pytest.raises(RunRecordError, match="no store.json"):
        store_parts(store)


def test_another_tree_is_not_imported_into_a_store_of_the_first(tmp_path, tiny_release, capsys):
    import shutil

    store = tmp_path / "runs.parquet"
    assert main(["import-released", str(tiny_release), "-o", str(store)]) == 0
    other = tmp_path / "other" / "results"
    shutil.copytree(tiny_release / "210m-mlm40-42k", other / "610m-mlm40-42k")
    capsys.readouterr()
    assert main(["import-released", str(other), "-o", str(store)]) == 2
    err = capsys.readouterr().err
    assert f"{store}: holds the import of {tiny_release.resolve()}, not of {other.resolve()}" in err
    assert {r.model for r in iter_store_records(store, instance_scores=False)} == {"210m-mlm40-42k"}


SPECIAL_FILES = {
    "a link to /dev/zero": (lambda path, outside: path.symlink_to("/dev/zero"), "links to /dev/zero, outside the tree"),
    "a FIFO": (lambda path, outside: os.mkfifo(path), "a FIFO, not a regular file"),
    "a link out of the tree": (lambda path, outside: path.symlink_to(outside), "outside the tree"),
    # issue 56: skipped without a word by the tree walk, the import reported success with a run fewer
    "a looping link": (lambda path, outside: path.symlink_to(path), "a link that loops"),
    "a dangling link": (lambda path, outside: path.symlink_to(path.parent / "gone.json"), "cannot be read"),
}


def _limited():  # in the child: 4 GB of address space, so that old code reading /dev/zero fails, not the machine
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))


@pytest.mark.parametrize("case", sorted(SPECIAL_FILES))
def test_a_results_file_that_is_not_a_regular_file_of_the_tree_is_refused_unread(tmp_path, tiny_release, case):
    """Was: /dev/zero read until memory ran out, a FIFO waited for ever, a link out of the tree was
    imported silently (docs/reliability.md). Run in a child bounded in memory and time."""
    import shutil
    import subprocess
    import sys

    make, message = SPECIAL_FILES[case]
    tree = tmp_path / "results"
    shutil.copytree(tiny_release / "210m-mlm40-42k" / "SC" / "sst2", tree / "210m-mlm40-42k" / "SC" / "sst2")
    target = tree / "210m-mlm40-42k" / "SC" / "sst2" / "lr1e-05_sd0" / "results.json"
    outside = tmp_path / "outside.json"
    shutil.move(target, outside)
    make(target, outside)
    argv = [sys.executable, "-m", "analysis", "import-released", str(tree), "-o", str(tmp_path / "runs.parquet")]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=60, preexec_fn=_limited)
    assert result.returncode == 2, result.stderr[-2000:]
    err = result.stderr.strip().splitlines()
    assert len(err) == 1 and f"{target}: " in err[0] and message in err[0], err


def test_a_second_import_into_a_store_in_use_refuses_and_touches_nothing(tmp_path, tiny_release, capsys):
    from contracts.locks import folder_lock

    store = tmp_path / "runs.parquet"
    assert main(["import-released", str(tiny_release), "-o", str(store)]) == 0
    before = {p.name: p.read_bytes() for p in store.iterdir()}
    capsys.readouterr()
    with folder_lock(store, job="import-released"):  # as a live import holds it
        assert main(["import-released", str(tiny_release), "-o", str(store)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"{store} is in use by another import-released (pid {os.getpid()} on" in err[0], err
    assert {p.name: p.read_bytes() for p in store.iterdir()} == before


def test_a_3_gb_results_file_is_refused_unread(tmp_path, tiny_release, capsys):
    """Issue 66, item 5: a 3 GB results.json was read whole (sparse here: no disk behind it)."""
    import shutil

    from analysis.released import MAX_RESULTS_BYTES

    tree = tmp_path / "results"
    shutil.copytree(tiny_release / "210m-mlm40-42k" / "SC" / "sst2", tree / "210m-mlm40-42k" / "SC" / "sst2")
    target = tree / "210m-mlm40-42k" / "SC" / "sst2" / "lr1e-05_sd0" / "results.json"
    os.truncate(target, 3 << 30)
    assert main(["import-released", str(tree), "-o", str(tmp_path / "runs.parquet")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{target}: 3,221,225,472 bytes, more than the {MAX_RESULTS_BYTES:,}" in err[0], err


@pytest.mark.parametrize("case", ["out of the tree", "dangling", "inside the tree"])
def test_a_folder_link_is_followed_inside_the_tree_and_refused_out_of_it(tmp_path, tiny_release, capsys, case):
    """Issue 66, item 3: a released tree whose model folder was a link out of the tree lost those runs
    without a word ("imported 630 runs of 2 models", rc 0, for a 720-run tree). A link out of the
    tree (or dangling) is refused naming it, or listed as skipped with --skip-bad; a link to a folder
    inside the tree adds nothing: its target is read where it is, once."""
    import shutil

    tree = tmp_path / "results"
    model = tree / "210m-mlm40-42k"
    shutil.copytree(tiny_release / "210m-mlm40-42k", model)
    total = len(list(model.rglob("results.json")))
    moved = model / "SC"
    if case == "inside the tree":  # an alias of a folder the walk reads anyway: its runs once
        (tree / "alias").symlink_to(model)
    elif case == "dangling":
        shutil.rmtree(moved)
        moved.symlink_to(tmp_path / "gone")
    else:
        shutil.move(moved, tmp_path / "elsewhere")
        moved.symlink_to(tmp_path / "elsewhere")
    store = tmp_path / "runs.parquet"
    if case == "inside the tree":
        assert main(["import-released", str(tree), "-o", str(store)]) == 0, capsys.readouterr().err
        assert f"imported {total} runs" in capsys.readouterr().out
        return
    assert main(["import-released", str(tree), "-o", str(store)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{moved}: " in err[0] and "not followed" in err[0] and "--skip-bad" in err[0], err
    assert not store.exists()  # refused before anything was written
    assert main(["import-released", str(tree), "-o", str(store), "--skip-bad"]) == 0
    captured = capsys.readouterr()
    assert f"warning: skipped 210m-mlm40-42k/SC: {moved}" in captured.err
    assert "1 bad file(s) or folder(s) skipped (--skip-bad)" in captured.err
