"""The data-efficiency arc report (reproduce.arc): arc.md / arc.csv with the toy tag on every line,
the curve with random init as step 0, and the figure's caption sentence."""

import numpy as np
import pandas as pd

from analysis.claims.arc import simulate_cells
from reproduce.arc import arc_sentence, curve_table, write_arc_report


def _cells():
    cells = simulate_cells(np.random.default_rng(0), 6.0, 0.5)
    untrained = cells[cells["model"] == "toy_s-clm-1k-1"].assign(model="toy_s-random-init", mean=40.0)
    return pd.concat([cells, untrained], ignore_index=True)


def test_the_report_tags_every_reading_and_keeps_the_curve(tmp_path):
    summary = write_arc_report(_cells(), tmp_path, True, "simulated", {"toy_s-random-init": "toy_s"})
    text = (tmp_path / "arc.md").read_text()
    readings = [line for line in text.splitlines() if line.startswith("- ")]
    assert len(readings) == 3 and all(line.startswith("- [toy] toy_s step ") for line in readings)
    assert "no evidence about the paper's claims" in text and text.startswith("# [toy] ")
    frame = pd.read_csv(tmp_path / "arc.csv")
    assert list(frame["reading"]) == ["clm_ahead_early", "mlm_ahead_late_tc", "mlm_ahead_late_qa"]
    assert frame["toy"].all() and summary.startswith("[toy] toy_s clm_ahead_early +")
    curve = curve_table(_cells(), {"toy_s-random-init": "toy_s"})
    start = curve[curve["objective"] == "random init"]
    assert start["step"].tolist() == [0] and start["12-task"].item() == 40.0
    assert curve[curve["objective"] == "clm"]["runs"].eq(2).all()


def test_a_paper_scale_report_has_no_toy_tag(tmp_path):
    write_arc_report(_cells(), tmp_path, False, "runs", {})
    assert "[toy]" not in (tmp_path / "arc.md").read_text()


def test_the_caption_sentence_states_each_reading_with_its_interval():
    sentence = arc_sentence(_cells())
    assert sentence.startswith("What the runs show")
    assert "CLM - MLM-40 at 1, 12-task: +" in sentence and "interval above 0" in sentence
    assert "MLM-40 - CLM at 5, TC: -" in sentence  # CLM is ahead everywhere in this simulation
