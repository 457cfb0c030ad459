"""`python -m pretraining bench` runs both paths and reports throughput and the Composer ratio."""

import json

from pretraining.__main__ import main as cli


def test_bench_reports_plain_and_composer_throughput(tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert (
        cli(
            [
                "bench",
                "--preset",
                "toy_s",
                "--seq-len",
                "32",
                "--batch-size",
                "2",
                "--steps",
                "2",
                "--warmup-steps",
                "1",
                "--vocab-size",
                "64",
                "--doc-len",
                "8",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    plain, composer = json.loads(out.read_text())
    assert plain["path"] == "plain" and composer["path"] == "composer"
    assert plain["tokens_per_s"] > 0 and composer["composer_overhead"] > 0
    assert plain["params_N"] > 0 and "mfu_6N" not in plain  # no known peak on CPU
    assert len(capsys.readouterr().out.strip().splitlines()) == 2
