"""The data-efficiency study's arc report (`OUT/claims/arc.md`, `arc.csv`): CLM ahead early, MLM-40
ahead late, per size, on the means of the pretraining replicates (analysis.claims.arc), with the
curve it is read from. At toy scale every line carries the toy label: toy verdicts test the
pipeline and the toy world, not the paper."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from analysis.claims.report import TOY_TAG
from contracts.provenance import atomic_write_text

TOY_PREFIX = f"{TOY_TAG} "


def curve_table(cells: pd.DataFrame, random_init: dict[str, str]) -> pd.DataFrame:
    """Per size, objective and step: the mean over replicates of the runs' 12-task and task-type
    scores (runs = how many), with each size's random-init model as step 0."""
    from analysis.claims.arc import run_scores

    scores = run_scores(cells)
    for model, size in random_init.items():
        of_model = cells[cells["model"] == model]
        if len(of_model):
            rows = [{"scope": "12-task", "score": float(of_model["mean"].mean())}] + [
                {"scope": str(t), "score": float(g["mean"].mean())} for t, g in of_model.groupby("task_type")
            ]
            extra = pd.DataFrame(rows).assign(size=size, objective="random init", step=0, replicate=1, datasets=0)
            scores = pd.concat([scores, extra], ignore_index=True)
    table = (
        scores.groupby(["size", "objective", "step", "scope"])["score"]
        .agg(["mean", "count"])
        .reset_index()
        .pivot_table(index=["size", "objective", "step"], columns="scope", values=["mean", "count"])
    )
    out = table["mean"].reset_index()
    out.insert(3, "runs", table["count"].max(axis=1).to_numpy(int))
    return out


def write_arc_report(cells: pd.DataFrame, folder: Path, toy: bool, source: str, random_init: dict[str, str]) -> str:
    """Writes arc.md and arc.csv in `folder`; returns a one-line summary."""
    from analysis.claims.arc import arc_frame, arc_readings
    from analysis.claims.report import TOY_LABEL

    readings = arc_readings(cells)
    prefix = TOY_PREFIX if toy else ""
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_text(folder / "arc.csv", arc_frame(readings).assign(toy=toy).to_csv(index=False))
    curve = curve_table(cells, random_init)
    lines = [
        f"# {prefix}Data-efficiency arc: CLM ahead early, MLM-40 ahead late",
        "",
        *([f"**{TOY_LABEL}**", ""] if toy else []),
        f"Source: {source}.",
        "",
        "Each reading compares the means of the pretraining runs of each objective at one checkpoint; its 95% "
        "interval is a t interval whose variance is the run-to-run variance of a run's score, pooled over "
        "every objective and checkpoint of the size (it holds the pretraining SD and the fine-tuning noise; "
        "analysis/claims/arc.py). 'ahead (interval above 0)' is the reading's claim with its error rate at "
        "most 2.5% when the objectives are equal (tests/analysis/test_arc.py).",
        "",
        *[f"- {r.line(prefix)}" for r in readings],
        "",
        f"## {prefix}The curve (mean of the runs; random init as step 0)",
        "",
        curve.to_markdown(index=False, floatfmt=".1f"),
        "",
    ]
    atomic_write_text(folder / "arc.md", "\n".join(lines))
    if not readings:
        return "no size has both objectives at 2 checkpoints"
    return "; ".join(f"{prefix}{r.size} {r.name} {r.difference:+.1f} ({r.verdict})" for r in readings)


def arc_sentence(cells: pd.DataFrame) -> str:
    """One caption sentence of what the runs show, from the arc's readings (cells under paper or toy
    names), e.g. 'CLM - MLM-40 at 5k, 12-task: +10.8 (210M), +12.4 (610M); MLM-40 - CLM at 42k, TC: ...'."""
    from analysis.claims.arc import arc_readings
    from contracts.steps import format_steps
    from paper_figures.plotting import SIZE_LABELS

    readings = arc_readings(cells)
    if not readings:
        return ""
    parts = []
    for name in dict.fromkeys(r.name for r in readings):
        mine = [r for r in readings if r.name == name]
        first = mine[0]
        values = ", ".join(
            f"{r.difference:+.1f} ({SIZE_LABELS.get(r.size, r.size)}"
            + (", interval above 0)" if r.low > 0 else ", interval includes 0)" if r.difference > 0 else ")")
            for r in mine
        )
        parts.append(
            f"{'MLM-40' if first.ahead == 'mlm40' else 'CLM'} - {'CLM' if first.behind == 'clm' else 'MLM-40'} at "
            f"{format_steps(first.step)}, {first.scope}: {values}"
        )
    return "What the runs show (points, means of the runs): " + "; ".join(parts) + "."
