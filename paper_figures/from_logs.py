"""Figure 12: MLM training loss during continued pretraining (CPT), from the runs' `loss.jsonl`.

The paper draws it from training logs, which it did not publish: there is no published version
here, only ours. Each CPT run writes one JSON line per optimizer step (pretraining.train.LossLog:
step, loss, lr, objective, tokens, seconds); a resumed run may have logged some steps twice, the
last line of a step wins (it is the one the resumed run kept).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from contracts.layout import LOSS_LOG_FILE
from contracts.model_names import parse_model_name
from paper_figures.errors import LossLogError
from paper_figures.lookup import points_frame
from paper_figures.plotting import add_caption, color

SERIES = {"clm": "CPT from CLM", "mlm": "CPT from MLM"}


def read_loss_log(path: str | Path) -> pd.DataFrame:
    """step, loss, lr, objective, tokens of one run (a run folder or its loss.jsonl), one row per step."""
    path = Path(path)
    path = path / LOSS_LOG_FILE if path.is_dir() else path
    if not path.is_file():
        raise LossLogError(
            f"{path}: no loss log; give a pretraining run folder (python -m pretraining train "
            "writes <run_dir>/loss.jsonl) or the loss.jsonl itself"
        )
    rows = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            rows.append(
                {
                    "step": int(row["step"]),
                    "loss": float(row["loss"]),
                    "lr": float(row.get("lr", math.nan)),
                    "objective": row.get("objective"),
                    "tokens": row.get("tokens"),
                }
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise LossLogError(
                f"{path}:{number}: not a loss line ({exc}); each line is a JSON object with 'step' and 'loss'"
            ) from None
    if not rows:
        raise LossLogError(f"{path}: empty loss log; the run has not trained a step yet")
    frame = pd.DataFrame(rows).drop_duplicates("step", keep="last").sort_values("step")
    return frame.reset_index(drop=True)


def smooth(values: pd.Series, alpha: float) -> pd.Series:
    """Exponential moving average (alpha = weight of the newest value; 1 = no smoothing)."""
    return values.ewm(alpha=alpha, adjust=False).mean()


def figure_12(runs: list[str | Path], alpha: float = 0.1) -> tuple[Figure, pd.DataFrame]:
    """MLM loss vs CPT step of each CPT run (a run folder named like `610m-clm-dec42k-mlm40-64k`)."""
    rows = []
    seen: dict[Path, Path] = {}  # loss log -> the argument that named it
    for run in runs:
        run = Path(run)
        log_file = (run / LOSS_LOG_FILE if run.is_dir() else run).resolve()
        if log_file in seen:  # its points were drawn and written twice (issue 88)
            raise LossLogError(f"{run}: the same loss log as {seen[log_file]}, given before it; give each CPT run once")
        seen[log_file] = run
        name = run.name if run.is_dir() else run.parent.name
        desc = parse_model_name(name)
        if desc is None or desc.objective != "cpt":
            raise LossLogError(
                f"{run}: {name!r} is not a CPT run name (e.g. 610m-clm-dec42k-mlm40-64k); Figure 12 "
                "draws the loss of continued-pretraining runs"
            )
        log = read_loss_log(run)
        series = f"{SERIES[desc.cpt_base_objective]}, {desc.cpt_steps:,} steps"
        for step, loss, value in zip(log["step"], log["loss"], smooth(log["loss"], alpha)):
            rows.append(
                {
                    "figure": "12",
                    "panel": "MLM loss",
                    "series": series,
                    "x": step,
                    "x_label": str(step),
                    "model": name,
                    "task_type": None,
                    "dataset": None,
                    "mean": value,
                    "ci_halfwidth": math.nan,
                    "boot_low": math.nan,
                    "boot_high": math.nan,
                    "n_seeds": math.nan,
                    "note": "",
                    "raw_loss": loss,
                    "cpt_base_objective": desc.cpt_base_objective,
                    "cpt_steps": desc.cpt_steps,
                    "smoothing_alpha": alpha,
                }
            )
    if not rows:
        raise LossLogError("Figure 12 needs at least one CPT run folder")
    points = points_frame(rows)
    fig = Figure(figsize=(9, 5.5), layout="constrained")
    ax = fig.subplots()
    order = points.drop_duplicates("series").sort_values(["cpt_base_objective", "cpt_steps"])["series"]
    for i, series in enumerate(order):
        line = points[points["series"] == series]
        base = line["cpt_base_objective"].iloc[0]
        longest = points[points["cpt_base_objective"] == base]["cpt_steps"].max()
        ax.plot(
            line["x"],
            line["mean"],
            label=series,
            color=color(SERIES[base], i),
            alpha=1.0 if line["cpt_steps"].iloc[0] == longest else 0.55,
            lw=1.5,
        )
    ax.set_xlabel("continued-pretraining step")
    ax.set_ylabel("MLM training loss (EMA)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.suptitle("Figure 12: MLM loss during continued pretraining from decayed CLM and MLM bases", fontsize=12)
    caption = (
        f"Training loss of each CPT run (MLM at 40%), exponential moving average with alpha = {alpha} "
        "(raw values in the points CSV, column raw_loss). From the runs' loss.jsonl; the paper's logs "
        "are not published, so there is no published version to compare with."
    )
    add_caption(fig, caption)
    points.attrs["caption"] = caption
    return fig, points
