"""Every CLI entry point answers bad input in one line, never a traceback (issue 66 item 7).

The probes are the bad inputs a user passes by mistake (a missing path, a folder for a file, a
binary or truncated file, a YAML list for a mapping, a device); each runs the real `main` in this
process, so an exception that escapes is the traceback a user would see. The ones marked "was a
traceback" printed one before contracts.cli.run_command existed."""

from __future__ import annotations

import json

import pytest

from contracts.cli import TRACEBACK_VARIABLE, is_input_error, one_line, run_command


@pytest.fixture(scope="module")
def bad(tmp_path_factory):
    root = tmp_path_factory.mktemp("bad_inputs")
    (root / "folder").mkdir()
    (root / "binary").write_bytes(bytes(range(256)) * 8)
    (root / "list.yaml").write_text("- a\n- b\n")
    (root / "truncated.json").write_text('{"a": ')
    (root / "dangling").symlink_to(root / "nowhere")
    return {
        "missing": str(root / "missing"),
        "folder": str(root / "folder"),
        "binary": str(root / "binary"),
        "list": str(root / "list.yaml"),
        "truncated": str(root / "truncated.json"),
        "dangling": str(root / "dangling"),
        "out": str(root),
    }


def _mains():
    from analysis.cli import main as analysis_main
    from benchmarks.__main__ import main as benchmarks_main
    from container.build import main as build_main
    from container.device_wheels import main as wheels_main
    from container.image_check import main as image_check_main
    from paper_figures.cli import main as figures_main
    from pretraining.__main__ import main as pretraining_main
    from reproduce.cli import main as reproduce_main

    return {
        "pretraining": pretraining_main,
        "benchmarks": benchmarks_main,
        "analysis": analysis_main,
        "paper_figures": figures_main,
        "reproduce": reproduce_main,
        "image_check": image_check_main,
        "device_wheels": wheels_main,
        "build": build_main,
    }


# (entry point, argv with {kind} for the bad path, the kinds probed); "was a traceback" in the id
PROBES = [
    ("pretraining", ["random-init", "toy_s", "{out}/ri", "--tokenizer", "{bad}"], "was a traceback"),
    ("pretraining", ["train", "{bad}"], ""),
    ("pretraining", ["verify-data", "{bad}"], ""),
    ("pretraining", ["export", "{bad}", "{out}/export"], ""),
    ("pretraining", ["fetch-model", "--check", "{bad}"], ""),
    ("benchmarks", ["score", "mnli", "{bad}", "{bad}"], "was a traceback"),
    ("benchmarks", ["job", "--jobs", "{bad}", "--group", "finetune", "--index", "0"], "was a traceback"),
    ("benchmarks", ["export-st", "{bad}", "{out}/st"], ""),
    ("benchmarks", ["fetch-data", "--check", "{bad}"], ""),
    ("analysis", ["table", "{bad}"], ""),
    ("analysis", ["import-released", "{bad}", "-o", "{out}/store"], ""),
    ("paper_figures", ["figure3", "--source", "runs", "--runs", "{bad}", "--out", "{out}/fig"], "was a traceback"),
    ("paper_figures", ["figure12", "--logs", "{bad}", "--out", "{out}/fig12"], ""),
    ("reproduce", ["--config", "{bad}", "--dry-run"], ""),
    ("reproduce", ["status", "{bad}"], ""),
    ("reproduce", ["resubmit", "--dry-run", "{bad}"], ""),
    ("image_check", ["--lock", "{bad}", "--packages-only"], "was a traceback"),
    ("device_wheels", ["--list", "{bad}"], ""),
]
KINDS = ["missing", "folder", "binary", "list", "truncated", "dangling"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "entry, argv, note", PROBES, ids=[f"{e}-{a[0].lstrip('-')}{'-' + n if n else ''}" for e, a, n in PROBES]
)
def test_bad_input_is_one_line_at_every_entry_point(entry, argv, note, kind, bad, capsys, monkeypatch):
    monkeypatch.delenv(TRACEBACK_VARIABLE, raising=False)
    monkeypatch.chdir(bad["out"])
    args = [a.replace("{bad}", bad[kind]).replace("{out}", bad["out"]) for a in argv]
    try:
        rc = _mains()[entry](args)
    except SystemExit as stop:  # argparse's own usage errors are one line too
        rc = stop.code
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("usage:")]
    assert rc not in (0, None), (entry, args, err)
    assert "Traceback" not in err and 1 <= len(lines) <= 2, (entry, args, err)
    # the line names the file: the codec's "'utf-8' codec can't decode byte 0x80" of a binary run-record
    # file, job list or lock named none (analysis table, paper_figures --runs, benchmarks job, image_check)
    assert any(bad[kind] in line for line in lines), (entry, args, err)


def test_a_defect_keeps_its_traceback_and_the_variable_shows_ours(monkeypatch, capsys):
    def defect():
        raise ZeroDivisionError("a bug of ours")

    with pytest.raises(ZeroDivisionError):
        run_command("x", defect)
    from contracts.config import ConfigError

    def bad_config():
        raise ConfigError("run.yaml: optimizer.lr: must be > 0, got -1")

    assert run_command("train", bad_config) == 2
    assert capsys.readouterr().err == "train: error: run.yaml: optimizer.lr: must be > 0, got -1\n"
    monkeypatch.setenv(TRACEBACK_VARIABLE, "1")
    with pytest.raises(ConfigError):
        run_command("train", bad_config)


def test_what_counts_as_bad_input():
    import yaml

    assert is_input_error(FileNotFoundError(2, "No such file or directory", "x.yaml"))
    assert is_input_error(json.JSONDecodeError("Expecting value", '{"a": ', 6))
    assert is_input_error(yaml.YAMLError("bad"))
    assert is_input_error(UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"))
    assert not is_input_error(RuntimeError("CUDA error: device-side assert"))
    assert not is_input_error(TypeError("unsupported operand"))
    assert not is_input_error(KeyboardInterrupt())
    assert one_line(KeyError("unknown task 'sst3'")) == "unknown task 'sst3'"
    assert one_line(json.JSONDecodeError("Expecting value", '{"a": ', 6)).startswith("JSONDecodeError: ")
    assert "\n" not in one_line(ValueError("two\nlines"))
    assert len(one_line(ValueError("x" * 10_000))) == 2_000
