"""Does a toy reproduction learn? Per task, the chance level and the mean test score of the
pretrained and of the untrained (random-initialisation) models; per size and over all models, the
12-task averages of both (docs/reproduce.md, "Toy learning"). Pure pandas, from cells.csv.

Two checks, as issue 11 states them: every task's pretrained mean is at least `MARGIN` points above
its chance level (accuracy and F1 points; 0.1 NDCG = 10 points, scores are x100), and the
pretrained models' average is above the random-initialisation average.
"""

from __future__ import annotations

import pandas as pd

from contracts.paper import AVERAGE

MARGIN = 10.0  # points above chance (0.1 NDCG@10 on the records' 0-100 scale)
COLUMNS = ["scope", "name", "task_type", "metric", "chance", "pretrained", "random_init", "margin", "passes"]


def learning_table(
    cells: pd.DataFrame, chance: pd.DataFrame, pretrained: dict[str, str], random_init: dict[str, str]
) -> pd.DataFrame:
    """`cells`: aggregated cells (analysis schema); `chance`: reproduce.local.chance_levels rows;
    `pretrained` / `random_init`: model name -> size. One row per task (scope "task": pretrained
    mean minus chance >= MARGIN), per size and for all sizes (scope "size" / "all": pretrained
    average minus random-initialisation average > 0)."""
    per_task = cells[cells["dataset"] != AVERAGE].pivot_table(index="model", columns="dataset", values="mean")
    rows = []
    for level in chance.itertuples():
        mine = per_task.reindex(index=list(pretrained))[level.dataset] if level.dataset in per_task else None
        untrained = per_task.reindex(index=list(random_init))[level.dataset] if level.dataset in per_task else None
        mean = float(mine.mean()) if mine is not None else float("nan")
        rows.append(
            {
                "scope": "task",
                "name": level.dataset,
                "task_type": level.task_type,
                "metric": level.metric,
                "chance": level.chance,
                "pretrained": mean,
                "random_init": float(untrained.mean()) if untrained is not None and len(random_init) else float("nan"),
                "margin": mean - level.chance,
                "passes": bool(mean - level.chance >= MARGIN),
            }
        )
    tasks = [row["name"] for row in rows]
    average = per_task.reindex(columns=tasks).mean(axis=1)  # a model's 12-task average (NaN if a task is missing)
    sizes = sorted(set(pretrained.values()) & set(random_init.values()))
    groups = [
        (size, [m for m, s in pretrained.items() if s == size], [m for m, s in random_init.items() if s == size])
        for size in sizes
    ]
    if random_init:
        groups.append(("all", list(pretrained), list(random_init)))
    for name, mine, untrained in groups:
        ours, theirs = float(average.reindex(mine).mean()), float(average.reindex(untrained).mean())
        rows.append(
            {
                "scope": "all" if name == "all" else "size",
                "name": name,
                "task_type": AVERAGE,
                "metric": "12-task average",
                "chance": float("nan"),
                "pretrained": ours,
                "random_init": theirs,
                "margin": ours - theirs,
                "passes": bool(ours > theirs),
            }
        )
    return pd.DataFrame(rows, columns=COLUMNS)


def summary_line(table: pd.DataFrame) -> str:
    """One line: how many tasks pass, the weakest margin, and pretrained vs random-init averages."""
    tasks = table[table["scope"] == "task"]
    weakest = tasks.loc[tasks["margin"].idxmin()] if len(tasks) else None
    text = f"learning: {int(tasks['passes'].sum())}/{len(tasks)} tasks >= {MARGIN:g} points above chance"
    if weakest is not None:
        text += f" (weakest {weakest['name']}: {weakest['margin']:+.1f})"
    overall = table[table["scope"] == "all"]
    if len(overall):
        row = overall.iloc[0]
        text += f"; pretrained average {row['pretrained']:.1f} vs random initialisation {row['random_init']:.1f}"
    return text
