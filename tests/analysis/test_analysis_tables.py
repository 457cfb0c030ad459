import pandas as pd

from analysis.aggregate import aggregate_runs
from analysis.published import load_published_cells, load_published_raw
from analysis.tables import MISSING, paper_layouts, render_table, write_tables
from tests.analysis.analysis_testlib import make_record


def test_layouts_come_from_the_published_csv():
    layouts = paper_layouts()
    raw = load_published_raw()
    assert [t.number for t in layouts] == list(range(2, 18))
    for layout in layouts:
        table = raw[raw.table == layout.number]
        assert [m for _, m in layout.rows] == list(dict.fromkeys(table.hf_model_id_inferred))
    rows = {t.number: len(t.rows) for t in layouts}
    assert (rows[2], rows[6], rows[10], rows[14]) == (15, 12, 15, 8)
    assert layouts[0].rows[7] == ("610M MLM-40", "610m-mlm40-42k")
    assert layouts[4].rows[0] == ("610M MLM-40 @ 1k steps", "610m-mlm40-42k-1000")
    assert [c for _, c in layouts[3].columns] == ["NQ", "MS MARCO", "MLDR", "Average"]


def test_published_tables_render_every_printed_value(tmp_path):
    cells = load_published_cells()
    shown = sum((render_table(t, cells).iloc[:, 2:] != MISSING).to_numpy().sum() for t in paper_layouts())
    assert shown == len(cells) == 800
    written = write_tables(cells, tmp_path, source="published")
    assert {p.name for p in written} >= {"tables.md", "tables.tex", "table_02.csv", "table_17.csv"}
    markdown = (tmp_path / "tables.md").read_text()
    md_table5 = markdown.split("## Table 5:")[1].split("## Table 6:")[0]
    assert "| 610M MLM-40 | 610m-mlm40-42k | 86.76 ± 0.63 | 91.65 ± 0.45 | 60.25 ± 0.76 | 79.55 ± 0.35 |" in md_table5
    assert "mislabelled" in markdown.split("## Table 10")[1].split("## Table 11")[0]
    assert r"$60.25 \pm 0.76$" in (tmp_path / "tables.tex").read_text()
    table5 = pd.read_csv(tmp_path / "table_05.csv").set_index("Checkpoint")
    assert table5.loc["610m-mlm40-42k", "MLDR"] == "60.25 ± 0.76"


def test_runs_fill_only_their_cells(tmp_path, mldr_records):
    extra = [make_record(model="toy-encoder", seed=s, lr=1e-5, test=50 + s) for s in range(3)]
    cells = aggregate_runs([*mldr_records, *extra], reps=200)
    write_tables(cells, tmp_path, formats=("md", "csv"), source="runs")
    table5 = pd.read_csv(tmp_path / "table_05.csv", keep_default_na=False).set_index("Checkpoint")
    assert table5.loc["610m-mlm40-42k", "MLDR"] == "60.25 ± 0.76"
    assert table5.loc["610m-mlm40-42k", "NQ"] == MISSING and table5.loc["610m-mlm40-42k", "Average"] == MISSING
    assert (table5.drop(index="610m-mlm40-42k").iloc[:, 1:] == MISSING).all().all()
    assert not (tmp_path / "tables.tex").exists()
    extra_table = pd.read_csv(tmp_path / "extra_SC.csv", keep_default_na=False)
    assert extra_table.loc[0, "Checkpoint"] == "toy-encoder" and extra_table.loc[0, "SST-2"] == "51.00 ± 1.13"
    assert "## Extra (SC)" in (tmp_path / "tables.md").read_text()


def test_each_interval_is_named_for_what_it_is(tmp_path, mldr_records):
    """Issue 81: the paper-layout tables name the paper's rule as the paper's (with its coverage),
    and cells regenerated from runs carry the calibrated 95% CI beside it: in the Markdown cell,
    and as a column after the dataset's in the CSV. The published tables carry the paper's rule only."""
    from analysis.intervals import SEEDS_CI_LABEL, paper_rule_label

    cells = aggregate_runs(mldr_records, reps=200)
    write_tables(cells, tmp_path / "runs", formats=("md", "csv"), source="runs")
    markdown = (tmp_path / "runs" / "tables.md").read_text()
    assert paper_rule_label() in markdown and SEEDS_CI_LABEL in markdown
    assert "95% half-width" not in markdown
    mldr = cells[(cells["dataset"] == "mldr_en")].iloc[0]
    interval = f"[{mldr.seed_boot_low:.2f}, {mldr.seed_boot_high:.2f}]"
    assert f"| 60.25 ± 0.76 {interval} |" in markdown
    table5 = pd.read_csv(tmp_path / "runs" / "table_05.csv", keep_default_na=False).set_index("Checkpoint")
    columns = list(table5.columns)
    assert columns[columns.index("MLDR") + 1] == f"MLDR: {SEEDS_CI_LABEL}"
    assert table5.loc["610m-mlm40-42k", f"MLDR: {SEEDS_CI_LABEL}"] == interval
    published = tmp_path / "published"
    write_tables(load_published_cells(), published, source="published")
    text = (published / "tables.md").read_text()
    assert paper_rule_label() in text and SEEDS_CI_LABEL not in text
    assert not any(": 95% CI" in c for c in pd.read_csv(published / "table_05.csv").columns)
    assert "not a 95% interval" in (published / "tables.tex").read_text()
