"""Tables 2-17 in the paper's layout, from cells (aggregated runs or the published values).

The row set and row order of every table come from the published CSV (its `table` column), so
the layout is the paper's; a cell without data is rendered as MISSING, never filled in.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd

from analysis.intervals import (
    PASSES_MARK,
    PASSES_NOTE,
    SEEDS_CI_LABEL,
    coverage_checked,
    format_bounds,
    not_checked_note,
    paper_rule_label,
    passes_scale,
    scale_legend,
)
from analysis.options import FORMATS
from analysis.published import load_published_raw
from contracts.paper import AVERAGE, datasets_of
from contracts.provenance import atomic_write_text

MISSING = "—"
TASK_NAMES = {
    "SC": "sequence classification",
    "TC": "token classification",
    "QA": "question answering",
    "IR": "information retrieval",
}
_FAMILIES = (  # (first table, last table, title, row label built from the published columns)
    (2, 5, "by model size and pretraining objective (42k steps)", lambda r: f"{r.model_size} {r.objective}"),
    (
        6,
        9,
        "of 610M intermediate checkpoints, MLM-40 vs CLM",
        lambda r: f"{r.model_size} {r.objective} @ {int(r.pretraining_steps) // 1000}k steps",
    ),
    (
        10,
        13,
        "of biphasic CLM then MLM-40 pretraining at fixed budgets",
        lambda r: f"{int(r.pretraining_steps) // 1000}k budget: {r.objective}",
    ),
    (
        14,
        17,
        "of continued pretraining (CPT) with MLM-40 from decayed 42k CLM or MLM models",
        lambda r: f"{r.objective}",
    ),
)
# Known inconsistencies of the paper (docs/choices.md): recorded, not corrected; the values stay as transcribed.
TABLE_NOTES = {
    10: "Known inconsistency (docs/choices.md): the paper's SC biphasic table is mislabelled. "
    "Values are rendered as transcribed in published_results.csv, under the checkpoint "
    "each value is attributed to there; nothing was corrected.",
}


@dataclass(frozen=True)
class TableLayout:
    number: int | None  # None for the extra table of models outside the paper's tables
    task_type: str
    metric: str
    title: str
    rows: tuple[tuple[str, str], ...]  # (row label, model name)
    columns: tuple[tuple[str, str], ...]  # (dataset id, printed name)
    note: str | None = None

    @property
    def name(self) -> str:
        return f"table_{self.number:02d}" if self.number is not None else f"extra_{self.task_type}"

    @property
    def caption(self) -> str:
        head = f"Table {self.number}" if self.number is not None else f"Extra ({self.task_type})"
        return f"{head}: {TASK_NAMES[self.task_type]} ({self.metric}) {self.title}"


def _columns(task_type: str) -> tuple[tuple[str, str], ...]:
    return tuple((d.id, d.display) for d in datasets_of(task_type)) + ((AVERAGE, "Average"),)


def paper_layouts() -> list[TableLayout]:
    """Tables 2-17, rows in the order the published CSV lists them."""
    raw = load_published_raw()
    layouts = []
    for number, table in raw.groupby("table", sort=True):
        first, last, title, label = next(f for f in _FAMILIES if f[0] <= number <= f[1])
        models = table.drop_duplicates("hf_model_id_inferred")
        task_type = table["task_type"].iloc[0]
        layouts.append(
            TableLayout(
                number=int(number),
                task_type=task_type,
                metric=table["metric"].iloc[0],
                title=title,
                rows=tuple((label(r), r.hf_model_id_inferred) for r in models.itertuples()),
                columns=_columns(task_type),
                note=TABLE_NOTES.get(int(number)),
            )
        )
    return layouts


def extra_layouts(cells: pd.DataFrame, layouts: list[TableLayout]) -> list[TableLayout]:
    """One table per task type for models of `cells` that no paper table has (e.g. toy models)."""
    known = {(t.task_type, m) for t in layouts for _, m in t.rows}
    extras = []
    for task_type in TASK_NAMES:
        models = sorted(
            {m for m, t in zip(cells["model"], cells["task_type"]) if t == task_type and (task_type, m) not in known}
        )
        if models:
            metric = datasets_of(task_type)[0].metric
            extras.append(
                TableLayout(
                    None,
                    task_type,
                    metric,
                    "of models outside the paper's tables",
                    tuple((m, m) for m in models),
                    _columns(task_type),
                )
            )
    return extras


def format_cell(mean: float | None, halfwidth: float | None) -> str:
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return MISSING
    if halfwidth is None or math.isnan(halfwidth):
        return f"{mean:.2f}"
    return f"{mean:.2f} ± {halfwidth:.2f}"


def paper_rule_cell(mean: float | None, halfwidth: float | None) -> str:
    """format_cell, with PASSES_MARK when mean ± halfwidth passes 0 or 100 (the half-width itself is
    the paper's rule as printed: never clipped, issue 90)."""
    text = format_cell(mean, halfwidth)
    if text != MISSING and halfwidth is not None and not math.isnan(halfwidth) and passes_scale(mean, halfwidth):
        text += PASSES_MARK
    return text


def render_table(layout: TableLayout, cells: pd.DataFrame) -> pd.DataFrame:
    """The table as strings: Setup, Checkpoint, one column per dataset, Average.

    When `cells` has a `table` column (published values), a cell is taken from that table only.
    A cell whose mean ± half-width passes 0 or 100 carries PASSES_MARK (`paper_rule_cell`).
    """
    if "table" in cells.columns and layout.number is not None:
        cells = cells[cells["table"] == layout.number]
    cells = cells[cells["task_type"] == layout.task_type]
    lookup = {}
    for row in cells.itertuples():
        lookup.setdefault((row.model, row.dataset), (row.mean, row.ci_halfwidth))
    body = []
    for label, model in layout.rows:
        entry = {"Setup": label, "Checkpoint": model}
        for dataset, display in layout.columns:
            entry[display] = paper_rule_cell(*lookup.get((model, dataset), (None, None)))
        body.append(entry)
    return pd.DataFrame(body, columns=["Setup", "Checkpoint", *(d for _, d in layout.columns)])


def render_intervals(layout: TableLayout, cells: pd.DataFrame) -> pd.DataFrame | None:
    """The calibrated interval of each cell of `render_table` ("[low, high]", SEEDS_CI_LABEL: the
    t-calibrated seeds bootstrap, covering 93-97% at 3, 5 and 10 seeds), or None when no cell of
    the table has one (the published values: the paper printed its rule only). A bound clipped at
    the scale's end carries CLIPPED_MARK; a cell whose seed count was not simulated says "coverage
    not checked at N seeds" (issue 90)."""
    if "seed_boot_low" not in cells.columns:
        return None
    cells = cells[cells["task_type"] == layout.task_type]
    lookup = {}
    for row in cells.itertuples():
        if pd.notna(row.seed_boot_low) and pd.notna(row.seed_boot_high):
            clipped = bool(getattr(row, "interval_clipped", False) == 1)  # NaN (cells from before the column): no
            text = format_bounds(row.seed_boot_low, row.seed_boot_high, clipped)
            if not coverage_checked(row.n_seeds):
                text += f" ({not_checked_note(row.n_seeds)})"
            lookup.setdefault((row.model, row.dataset), text)
    if not any((model, dataset) in lookup for _, model in layout.rows for dataset, _ in layout.columns):
        return None
    body = [[lookup.get((model, dataset), MISSING) for dataset, _ in layout.columns] for _, model in layout.rows]
    return pd.DataFrame(body, columns=[display for _, display in layout.columns])


def beside(frame: pd.DataFrame, intervals: pd.DataFrame | None, joined: bool) -> pd.DataFrame:
    """The paper-rule cells with the calibrated intervals beside them: in the same cell (`joined`,
    Markdown: "78.72 ± 0.20 [78.41, 79.02]") or as a column after each dataset's (CSV)."""
    if intervals is None:
        return frame
    out = frame.copy()
    if joined:
        for column in intervals.columns:
            out[column] = [
                cell if interval == MISSING else f"{cell} {interval}"
                for cell, interval in zip(frame[column], intervals[column])
            ]
        return out
    for column in intervals.columns:
        out.insert(out.columns.get_loc(column) + 1, f"{column}: {SEEDS_CI_LABEL}", list(intervals[column]))
    return out


def _is_empty(frame: pd.DataFrame) -> bool:
    return bool((frame.iloc[:, 2:] == MISSING).all().all())


def table_datasets(layout: TableLayout) -> list[str]:
    """The dataset ids of a table's columns (its average left out)."""
    return [dataset for dataset, _ in layout.columns if dataset != AVERAGE]


def _markdown(frame: pd.DataFrame) -> str:
    lines = [
        "| " + " | ".join(frame.columns) + " |",
        "|" + "|".join(["---"] * 2 + ["---:"] * (len(frame.columns) - 2)) + "|",
    ]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines)


_TEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "_": r"\_",
    "#": r"\#",
    "$": r"\$",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\^{}",
}


def _tex_escape(text: str) -> str:
    return "".join(_TEX_SPECIAL.get(char, char) for char in text)


def _tex_cell(value: str) -> str:
    if value == MISSING:
        return "--"
    mark = value.endswith(PASSES_MARK)
    value = value.removesuffix(PASSES_MARK)
    return "$" + value.replace(" ± ", r" \pm ") + (r"^{\ddagger}" if mark else "") + "$"


def tex_caption_rule() -> str:
    """What ± means, for the .tex captions: the same words as every other output (paper_rule_label)."""
    return r"Cells: mean $\pm$ half-width, " + _tex_escape(paper_rule_label()) + "."


def tex_passes_note() -> str:
    return r"$^{\ddagger}$ " + _tex_escape(PASSES_NOTE.removeprefix(PASSES_MARK + " = ")).replace("±", r"$\pm$")


def _latex(layout: TableLayout, frame: pd.DataFrame) -> str:
    n_values = len(frame.columns) - 2
    lines = [
        r"\begin{table}[ht]",
        r"\centering",
        r"\small",
        rf"\caption{{{_tex_escape(layout.caption)}. {tex_caption_rule()}}}",
        rf"\label{{tab:{layout.name.replace('_', '-')}}}",
        r"\begin{tabular}{ll" + "c" * n_values + "}",
        r"\toprule",
        " & ".join(_tex_escape(c) for c in frame.columns) + r" \\",
        r"\midrule",
    ]
    for row in frame.itertuples(index=False):
        values = list(row)
        lines.append(
            " & ".join(
                [_tex_escape(values[0]), r"\texttt{" + _tex_escape(values[1]) + "}"]
                + [_tex_cell(v) for v in values[2:]]
            )
            + r" \\"
        )
    lines += [r"\bottomrule", r"\end{tabular}"]
    if layout.note:
        lines.append(r"\par\footnotesize " + _tex_escape(layout.note))
    if any(str(v).endswith(PASSES_MARK) for row in frame.itertuples(index=False) for v in list(row)[2:]):
        lines.append(r"\par\footnotesize " + tex_passes_note())
    lines.append(r"\end{table}")
    return "\n".join(lines)


def scale_notes(cells: pd.DataFrame, rendered) -> list[str]:
    """The legend lines for the marks the rendered tables carry (issue 90, `scale_legend`): a
    paper's ± passing 0 or 100, a bound clipped there, the seed counts whose coverage was not
    simulated (of the shown cells that have an interval)."""
    texts = [
        v
        for _, frame, intervals in rendered
        for table in (frame.iloc[:, 2:], intervals)
        if table is not None
        for v in table.to_numpy().ravel()
    ]
    counts = []
    if "seed_boot_low" in cells.columns:
        shown = {(model, layout.task_type) for layout, _, _ in rendered for _, model in layout.rows}
        with_interval = cells[cells["seed_boot_low"].notna()]
        counts = [
            n
            for m, t, n in zip(with_interval["model"], with_interval["task_type"], with_interval["n_seeds"])
            if (m, t) in shown
        ]
    return [note[0].upper() + note[1:] for note in scale_legend(texts, counts)]


def write_tables(
    cells: pd.DataFrame,
    out_dir: str | Path,
    formats=FORMATS,
    source: str = "",
    only: tuple[int, ...] | None = None,
    rename: dict[str, str] | None = None,
    mixing: Callable[[TableLayout], list[str]] | None = None,
) -> list[Path]:
    """Render Tables 2-17 (+ extra tables for models outside them) into out_dir.

    md -> tables.md, tex -> tables.tex (all tables); csv -> one <name>.csv per table.
    only: these table numbers (None: all). rename: paper checkpoint -> the model of `cells` shown in
    its row (toy reproductions: `610m-clm-42k` -> `toy_m-clm-42`; the Setup label stays the paper's).
    mixing: the lines that say where a table's rows were fine-tuned or tested differently
    (analysis.setups.mixing_lines), printed under its caption. A paper table without one cell of
    `cells` is left out (named in tables.md) when another table has data and `only` is None: runs
    of models of one's own fill the extra tables only (issue 90).
    """
    out_dir = Path(out_dir)
    layouts = [t for t in paper_layouts() if only is None or t.number in only]
    if rename:
        layouts = [
            replace(t, rows=tuple((label, rename.get(model, model)) for label, model in t.rows)) for t in layouts
        ]
    layouts += extra_layouts(cells, layouts)
    rendered = [(layout, render_table(layout, cells), render_intervals(layout, cells)) for layout in layouts]
    # a study's own tables (`only`) are written whole, as planned; of all 16, the empty ones are left out
    empty = [layout for layout, frame, _ in rendered if layout.number is not None and _is_empty(frame)]
    if empty and len(empty) < len(rendered) and only is None:
        rendered = [entry for entry in rendered if entry[0] not in empty]
    else:
        empty = []
    mixed = {layout.name: mixing(layout) if mixing else [] for layout, _, _ in rendered}
    calibrated = any(intervals is not None for _, _, intervals in rendered)
    written = []
    if "md" in formats:
        title = "Tables 2-17" if only is None else ", ".join(f"Table {n}" for n in only) or "Extra tables"
        what = f"Cells are mean ± half-width by {paper_rule_label()}, which reproduces the printed cells"
        if calibrated:
            what += f"; [low, high] beside it is the {SEEDS_CI_LABEL}, which covers 93-97% at 3, 5 and 10 seeds"
        parts = [
            f"# {title} in the paper's layout",
            "",
            f"Source: {source}. {what}; {MISSING} = no data for this cell.",
            "",
            *(f"{note}\n" for note in scale_notes(cells, rendered)),
        ]
        if empty:
            numbers = ", ".join(str(layout.number) for layout in empty)
            parts += [
                f"Left out: Tables {numbers}, which have no cell of these runs (their rows are the paper's "
                "checkpoints). `python -m analysis compare RUNS --out DIR` puts your models beside the paper's "
                "published rows.",
                "",
            ]
        for layout, frame, intervals in rendered:
            parts += [f"## {layout.caption}", ""]
            if mixed[layout.name]:
                parts += [
                    "**Mixed setups: these rows were not fine-tuned or tested alike**, so they compare setups "
                    "as much as models:",
                    "",
                    *(f"- {line}" for line in mixed[layout.name]),
                    "",
                ]
            parts += [_markdown(beside(frame, intervals, joined=True)), ""]
            if layout.note:
                parts += [f"Note: {layout.note}", ""]
        written.append(atomic_write_text(out_dir / "tables.md", "\n".join(parts)))
    if "csv" in formats:
        for layout, frame, intervals in rendered:
            table = beside(frame, intervals, joined=False)
            written.append(atomic_write_text(out_dir / f"{layout.name}.csv", table.to_csv(index=False)))
    if "tex" in formats:
        text = (
            "% Requires \\usepackage{booktabs}. "
            + f"Source: {source}\n"
            + f"% Cells: mean \\pm half-width by {paper_rule_label()}\n\n"
            + "\n\n".join(_latex(layout, frame) for layout, frame, _ in rendered)
            + "\n"
        )
        written.append(atomic_write_text(out_dir / "tables.tex", text))
    return written
