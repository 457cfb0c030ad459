"""Your models beside the paper's published rows (issue 90): one table per paper table, one CSV.

The paper's rows are its published cells (mean ± the paper's rule over 5 seeds, on the full test
splits). Your rows are your cells, aggregated by the same rule (analysis.aggregate), each labelled
with its interval rule and with the data it was tested on (analysis.setups.data_label). A row whose
data or fine-tuning differ from the paper's (toy data, other steps, batch, LR grid, fewer seeds) is
marked `not comparable` and its differences are listed under the table: it shows where a model
sits among the paper's, not whether it is better. `paper_figures beside` draws the figure.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from analysis.intervals import PASSES_MARK, paper_rule_label
from analysis.published import load_published_cells
from analysis.setups import Setups, against_paper, data_label, is_paper_data
from analysis.tables import MISSING, TableLayout, paper_layouts, paper_rule_cell
from contracts.paper import AVERAGE, PAPER_CITATION, PAPER_TEST_INSTANCES
from contracts.provenance import atomic_write_json, atomic_write_text, git_sha, package_versions, utc_now

PAPER_RULE_SHORT = "± 1.96 SD/sqrt(n) over seeds (the paper's rule)"
COLUMNS = [
    "table",
    "task_type",
    "source",
    "row",
    "model",
    "dataset",
    "mean",
    "halfwidth",
    "n_seeds",
    "interval_rule",
    "data",
    "test_size",
    "paper_test_size",
    "comparable",
    "selected_lrs",
]


@dataclass
class Comparison:
    """The long table of every compared cell, and per user model what differs from the paper."""

    cells: pd.DataFrame  # COLUMNS
    layouts: list[TableLayout]
    models: list[str]  # yours, in order
    differences: dict[str, list[str]] = field(default_factory=dict)  # model -> what differs from the paper
    outside: list[str] = field(default_factory=list)  # your models with no cell of the compared task types

    def summary_line(self) -> str:
        marked = sorted(m for m, d in self.differences.items() if d)
        tables = ", ".join(str(layout.number) for layout in self.layouts)
        line = f"compare: {len(self.models)} model(s) of yours beside the published rows of Tables {tables}"
        if marked:
            line += f"; not comparable as they stand (data or fine-tuning differ from the paper's): {', '.join(marked)}"
        return line


def _interval_rule(n_seeds: int) -> str:
    if n_seeds < 2:
        return "1 seed: no interval"
    return f"{PAPER_RULE_SHORT}, {n_seeds} seeds"


def compare_with_published(cells: pd.DataFrame, setups: Setups, tables: tuple[int, ...]) -> Comparison:
    """The comparison of `cells` (analysis.aggregate output, your runs) with the published rows of
    `tables`; `setups` holds what your runs were fine-tuned and tested with."""
    published = load_published_cells()
    layouts = [layout for layout in paper_layouts() if layout.number in tables]
    types = {layout.task_type for layout in layouts}
    models = list(dict.fromkeys(cells["model"]))
    rows, differences = [], {}
    by_cell = {(r.model, r.task_type, r.dataset): r for r in cells.itertuples()}
    for layout in layouts:
        table = published[published["table"] == layout.number]
        pub = {(r.model, r.dataset): r for r in table.itertuples()}
        for label, model in layout.rows:
            for dataset, _ in layout.columns:
                cell = pub.get((model, dataset))
                rows.append(
                    {
                        "table": layout.number,
                        "task_type": layout.task_type,
                        "source": "published",
                        "row": label,
                        "model": model,
                        "dataset": dataset,
                        "mean": cell.mean if cell is not None else math.nan,
                        "halfwidth": cell.ci_halfwidth if cell is not None else math.nan,
                        "n_seeds": int(cell.n_seeds) if cell is not None else 0,
                        "interval_rule": _interval_rule(int(cell.n_seeds)) if cell is not None else "",
                        "data": "paper test set",
                        "test_size": PAPER_TEST_INSTANCES.get(dataset),
                        "paper_test_size": PAPER_TEST_INSTANCES.get(dataset),
                        "comparable": True,
                        "selected_lrs": "",
                    }
                )
        for model in models:
            if not any((model, layout.task_type, d) in by_cell for d, _ in layout.columns):
                continue
            notes = []
            for dataset, _ in layout.columns:
                cell = by_cell.get((model, layout.task_type, dataset))
                if dataset == AVERAGE:
                    datasets = [d for d, _ in layout.columns if d != AVERAGE]
                    data = (
                        "paper test sets"
                        if all(is_paper_data(d, setups.of(model, d)) for d in datasets)
                        else "toy or partial data (see its datasets)"
                    )
                    comparable = data == "paper test sets" and not notes
                    size = None
                else:
                    setup = setups.of(model, dataset)
                    data = data_label(dataset, setup)
                    own = against_paper(setup, dataset)
                    size = max(setup.test_size) if setup is not None and setup.test_size else None
                    notes += [f"{dataset}: {note}" for note in own if note != data]
                    comparable = cell is not None and not own
                n = int(cell.n_seeds) if cell is not None else 0
                rows.append(
                    {
                        "table": layout.number,
                        "task_type": layout.task_type,
                        "source": "yours",
                        "row": model,
                        "model": model,
                        "dataset": dataset,
                        "mean": cell.mean if cell is not None else math.nan,
                        "halfwidth": cell.ci_halfwidth if cell is not None and n >= 2 else math.nan,
                        "n_seeds": n,
                        "interval_rule": _interval_rule(n) if cell is not None else "",
                        "data": data,
                        "test_size": size,
                        "paper_test_size": PAPER_TEST_INSTANCES.get(dataset),
                        "comparable": bool(comparable),
                        "selected_lrs": getattr(cell, "selected_lrs", "") if cell is not None else "",
                    }
                )
            differences.setdefault(model, [])
            differences[model] += [n for n in notes if n not in differences[model]]
    outside = [m for m in models if not any(t in types for t in cells.loc[cells["model"] == m, "task_type"])]
    return Comparison(pd.DataFrame(rows, columns=COLUMNS), layouts, models, differences, outside)


def _shared_notes(notes: list[str], datasets: list[str]) -> list[str]:
    """Per-dataset notes grouped: 'sst2: 100 steps (paper 1,000)' on sst2 only -> '100 steps (paper
    1,000) (sst2)'; a note shared by all of the table's `datasets` names none."""
    grouped: dict[str, list[str]] = {}
    for note in notes:
        dataset, _, what = note.partition(": ")
        grouped.setdefault(what, []).append(dataset)
    return [what if sorted(on) == sorted(datasets) else f"{what} ({', '.join(on)})" for what, on in grouped.items()]


def _row_data(group: pd.DataFrame) -> str:
    """A row's data in a few words: 'paper test sets', or 'toy or partial: 64/64/64 of the paper's
    872/40,430/9,815 test rows/queries' in the table's column order."""
    cells = group[group["dataset"] != AVERAGE]
    if cells.empty:
        return MISSING
    if all(label.startswith("paper test set") for label in cells["data"]):
        return "paper test sets"
    if cells["test_size"].isna().all():
        return "; ".join(sorted(set(cells["data"])))

    def sizes(column):
        return "/".join("?" if pd.isna(v) else f"{int(v):,}" for v in cells[column])

    return f"toy or partial: {sizes('test_size')} of the paper's {sizes('paper_test_size')} test instances"


def comparison_markdown(comparison: Comparison, source: str) -> str:
    lines = [
        "# Your models beside the paper's published rows",
        "",
        f"Source: {source}; the paper's rows: its published values ({PAPER_CITATION}).",
        "",
        f"Every cell is mean ± half-width by {paper_rule_label()}; a cell of 1 seed has none; "
        f"{PASSES_MARK}: mean ± half-width passes 0 or 100 (the rule as the paper prints it, not clipped). "
        "The paper's rows: 5 seeds, the full test splits. A row of yours marked **not comparable** was tested on "
        "other data or fine-tuned otherwise (listed under each table): it shows where your model sits among the "
        "paper's, not whether it is better.",
        "",
    ]
    cells = comparison.cells
    for layout in comparison.layouts:
        table = cells[cells["table"] == layout.number]
        header = ["row", "source", *(display for _, display in layout.columns), "seeds", "data"]
        lines += [f"## {layout.caption}", "", "| " + " | ".join(header) + " |"]
        lines.append("|" + "|".join(["---", "---"] + ["---:"] * len(layout.columns) + ["---:", "---"]) + "|")
        for (source_kind, row), group in table.groupby(["source", "row"], sort=False):
            values = {r.dataset: r for r in group.itertuples()}
            shown = [
                paper_rule_cell(values[d].mean, values[d].halfwidth)
                if d in values and not pd.isna(values[d].mean)
                else MISSING
                for d, _ in layout.columns
            ]
            seeds = sorted({int(r.n_seeds) for r in group.itertuples() if r.n_seeds})
            if source_kind == "published":
                kind, data = "published", "paper test sets"
            else:
                comparable = bool(group["comparable"].all())
                kind = "yours" if comparable else "yours, **not comparable**"
                data = _row_data(group)
            lines.append(
                f"| {row} | {kind} | " + " | ".join(shown) + f" | {'/'.join(map(str, seeds)) or MISSING} | {data} |"
            )
        mine = [m for m in comparison.models if (table["model"] == m).any() and (table["source"] == "yours").any()]
        notes = []
        for model in mine:
            own = [n for n in comparison.differences.get(model, []) if n.split(": ")[0] in dict(layout.columns)]
            if own:
                named = [d for d, _ in layout.columns if d != AVERAGE]
                notes.append(f"- {model}: " + "; ".join(_shared_notes(own, named)))
        chosen = []
        for model in mine:
            rows = table[(table["model"] == model) & (table["source"] == "yours") & (table["dataset"] != AVERAGE)]
            picked = [
                f"{r.dataset} {r.selected_lrs.replace(';', '/')}"
                for r in rows.itertuples()
                if isinstance(r.selected_lrs, str)
            ]
            if picked:
                chosen.append(f"- {model}: " + "; ".join(picked))
        if notes:
            lines += ["", "What differs from the paper's protocol:", "", *notes]
        if chosen:
            lines += ["", "The LR chosen on validation, per seed (ties: the smallest LR):", "", *chosen]
        lines.append("")
    if comparison.outside:
        lines += [f"Not in these tables' task types: {', '.join(comparison.outside)}.", ""]
    return "\n".join(lines)


def write_comparison(comparison: Comparison, out_dir: str | Path, source: str) -> list[Path]:
    """compare.md, compare.csv and compare.json (the settings and provenance) into out_dir."""
    out = Path(out_dir)
    written = [
        atomic_write_text(out / "compare.md", comparison_markdown(comparison, source)),
        atomic_write_text(out / "compare.csv", comparison.cells.to_csv(index=False)),
    ]
    meta = {
        "source": source,
        "tables": [layout.number for layout in comparison.layouts],
        "models": comparison.models,
        "not_comparable": {m: d for m, d in comparison.differences.items() if d},
        "written": utc_now(),
        "git_sha": git_sha(),
        "package_versions": package_versions(),
    }
    written.append(atomic_write_json(out / "compare.json", json.loads(json.dumps(meta, default=str))))
    return written
