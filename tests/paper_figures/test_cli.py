"""`python -m paper_figures`: files written, sources, clear errors."""

import json
from pathlib import Path

import pandas as pd
import pytest

from contracts.run_record import write_run_records
from paper_figures.cli import main
from tests.paper_figures.test_from_runs import lr_records, masking_records

ROOT = Path(__file__).resolve().parents[2]


def _outputs(out: Path, name: str):
    png, pdf, csv = out / f"{name}.png", out / f"{name}.pdf", out / f"{name}_points.csv"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert pdf.read_bytes()[:5] == b"%PDF-"
    assert (out / f"{name}_meta.json").is_file()
    assert not list(out.glob(".*.tmp"))
    return pd.read_csv(csv)


def test_reproduce_figure3_command_writes_png_pdf_csv(tmp_path, cli):
    """The command behind `make reproduce-figure3 SOURCE=published`."""
    out = tmp_path / "figure3"
    result = cli("paper_figures", "figure3", "--source", "published", "--out", out, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    points = _outputs(out, "figure3")
    assert len(points) == 60 and points["mean"].notna().all()


def test_figure10_cli_records_the_tokens_per_step(tmp_path):
    assert main(["figure10", "--out", str(tmp_path), "--tokens-per-step", "2373120"]) == 0
    points = _outputs(tmp_path, "figure10")
    assert (points["tokens_per_step"] == 2_373_120).all()
    assert '"tokens_per_step": 2373120' in (tmp_path / "figure10_meta.json").read_text()


def test_published_source_refuses_figure5_with_a_clear_error(tmp_path, capsys):
    assert main(["figure5", "--source", "published", "--out", str(tmp_path)]) == 2
    assert "needs raw run records" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_figure12_needs_training_logs(tmp_path, capsys):
    assert main(["figure12", "--out", str(tmp_path)]) == 2
    assert "needs training logs: --logs" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def _loss_log(run_dir, losses, repeat_from=None):
    run_dir.mkdir(parents=True)
    lines = [
        {"step": i + 1, "loss": loss, "lr": 1e-3, "objective": "mlm", "tokens": 1024 * (i + 1)}
        for i, loss in enumerate(losses)
    ]
    if repeat_from is not None:  # a resumed run logs the steps after its checkpoint again
        lines = lines[: repeat_from + 2] + [dict(line, loss=line["loss"] + 1) for line in lines[repeat_from:]]
    (run_dir / "loss.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return run_dir


def test_figure12_from_cpt_loss_logs(tmp_path, capsys):
    from paper_figures.from_logs import read_loss_log

    clm = _loss_log(tmp_path / "runs" / "610m-clm-dec42k-mlm40-44k", [5.0, 4.0, 3.0, 2.0], repeat_from=2)
    mlm = _loss_log(tmp_path / "runs" / "610m-mlm40-dec42k-mlm40-44k", [2.0, 2.0, 2.0, 2.0])
    log = read_loss_log(clm)
    assert list(log["step"]) == [1, 2, 3, 4] and list(log["loss"]) == [5.0, 4.0, 4.0, 3.0]  # last line wins
    assert main(["figure12", "--logs", str(clm), str(mlm), "--ema", "0.5", "--out", str(tmp_path / "f")]) == 0
    points = pd.read_csv(tmp_path / "f" / "figure12_points.csv")
    mine = points[points["model"] == "610m-clm-dec42k-mlm40-44k"]
    assert list(mine["raw_loss"]) == [5.0, 4.0, 4.0, 3.0]
    assert list(mine["mean"]) == [5.0, 4.5, 4.25, 3.625]  # EMA with alpha 0.5
    assert set(points["series"]) == {"CPT from CLM, 2,000 steps", "CPT from MLM, 2,000 steps"}
    assert (tmp_path / "f" / "figure12.png").stat().st_size > 0
    meta = json.loads((tmp_path / "f" / "figure12_meta.json").read_text())
    assert meta["ema_alpha"] == 0.5 and len(meta["logs"]) == 2


def test_figure12_refuses_a_run_that_is_not_cpt(tmp_path, capsys):
    run = _loss_log(tmp_path / "610m-mlm40-42k", [3.0, 2.0])
    assert main(["figure12", "--logs", str(run), "--out", str(tmp_path / "f")]) == 2
    err = capsys.readouterr().err
    assert "is not a CPT run name" in err and "610m-mlm40-42k" in err
    assert main(["figure12", "--logs", str(tmp_path / "absent"), "--out", str(tmp_path / "f")]) == 2


def test_figure12_refuses_a_run_given_twice(tmp_path, capsys):
    """Issue 88: the run's points were drawn and written twice (as its folder and its loss.jsonl too)."""
    run = _loss_log(tmp_path / "610m-clm-dec42k-mlm40-44k", [3.0, 2.0])
    for again in (run, run / "loss.jsonl"):
        assert main(["figure12", "--logs", str(run), str(again), "--out", str(tmp_path / "f")]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1, err
        assert f"{again}: the same loss log as {run}, given before it; give each CPT run once" in err
        assert not (tmp_path / "f").exists()


def test_runs_source_needs_runs(capsys):
    with pytest.raises(SystemExit):
        main(["figure2", "--source", "runs"])
    assert "--runs" in capsys.readouterr().err


def test_figure5_and_7_from_run_records(tmp_path):
    # Two files: both fixtures hold a 610m-mlm40-42k/sst2 run, and a run may appear only once.
    lr_runs = write_run_records(tmp_path / "lr_runs.jsonl", lr_records())
    runs = write_run_records(tmp_path / "masking_runs.jsonl", masking_records())
    out = tmp_path / "out"
    assert main(["figure5", "--source", "runs", "--runs", str(lr_runs), "--out", str(out)]) == 0
    points = _outputs(out, "figure5")
    assert points.loc[(points["dataset"] == "sst2") & (points["objective"] == "clm"), "std"].iloc[0] == 0
    assert main(["figure7", "--source", "runs", "--runs", str(runs), "--out", str(out)]) == 0
    points = _outputs(out, "figure7")
    assert set(points["series"]) == {"MLM", "CLM+MLM"}


def test_cell_figures_from_run_records(tmp_path):
    aggregate = pytest.importorskip("analysis.aggregate")
    records = masking_records()
    runs = write_run_records(tmp_path / "runs.jsonl", records)
    assert main(["figure3", "--source", "runs", "--runs", str(runs), "--out", str(tmp_path)]) == 0
    points = _outputs(tmp_path, "figure3")
    cells = aggregate.aggregate_runs(records, reps=200)
    expected = cells[(cells["dataset"] == "average") & (cells["model"] == "610m-mlm30-42k")]["mean"].iloc[0]
    row = points[(points["model"] == "610m-mlm30-42k") & (points["task_type"] == "SC")]
    assert row["mean"].iloc[0] == pytest.approx(expected)
    # everything the records lack is missing, with a note
    absent = points[points["model"].str.startswith("1b")]
    assert absent["mean"].isna().all() and absent["note"].str.contains("missing").all()


def test_all_from_published_skips_the_run_figures(tmp_path, capsys, monkeypatch):
    saved = []  # rendering is tested above; here only which figures `all` makes
    monkeypatch.setattr(
        "paper_figures.cli.save_figure", lambda fig, points, out, name, provenance, dpi: saved.append(name) or []
    )
    assert main(["all", "--out", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert "skipped figure5" in err and "skipped figure7" in err
    assert saved == [f"figure{n}" for n in (2, 3, 4, 6, 8, 9, 10, 11)]


@pytest.mark.parametrize(
    "option, value", [("--dpi", "0"), ("--ema", "0"), ("--ema", "1.5"), ("--tokens-per-step", "0"), ("--n-params", "0")]
)
def test_an_out_of_range_option_is_one_line_before_anything_is_drawn(tmp_path, capsys, option, value):
    """Issue 35 item 14: --dpi 0 was a traceback after the figure was drawn; --tokens-per-step 0 and
    --n-params 0 drew Figure 10 against zero FLOPs."""
    with pytest.raises(SystemExit) as caught:
        main(["figure10", "--source", "published", option, value, "--out", str(tmp_path / "f")])
    err = capsys.readouterr().err
    assert caught.value.code == 2 and f"error: {option} {value}: must be" in err
    assert not (tmp_path / "f").exists()
