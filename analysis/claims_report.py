"""Writing the claims report: CSV, Markdown and a forest plot (PNG and PDF), each atomically."""

from __future__ import annotations

import io
import math
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from analysis.claims import ALPHA, CONTRADICTED, INCONCLUSIVE, NOT_TESTABLE, SUPPORTED
from contracts.provenance import atomic_write_bytes, atomic_write_text, utc_now

VERDICT_COLORS = {SUPPORTED: "#1b7837", CONTRADICTED: "#b2182b", INCONCLUSIVE: "#7f7f7f", NOT_TESTABLE: "#bbbbbb"}
VERDICT_RULE = (
    f"Verdict rule: p-values are two-sided and Holm-adjusted across every testable claim "
    f"(statsmodels multipletests). A directional claim is *supported* when p_holm < {ALPHA} and "
    f"the estimate has the claimed sign, *contradicted* when p_holm < {ALPHA} with the opposite "
    f"sign, *inconclusive* otherwise. The equivalence claim is *supported* when its TOST p_holm < "
    f"{ALPHA}, *contradicted* when its 95% interval lies entirely outside +-margin, *inconclusive* "
    f"otherwise. *{NOT_TESTABLE}*: the source lacks what the claim needs (reason given)."
)


MODELS = (
    "Models (statsmodels; docs/claims.md): difference, trend and curvature claims are linear "
    "contrasts of cell means, fitted by OLS with one mean per cell and HC2 covariance (t with "
    "Welch-Satterthwaite df); the equivalence claim by TOST on the per-seed contrasts "
    "(DescrStatsW.ttost_mean); spread claims by a paired t-test over the matched groups. From "
    "published numbers, a cell's seed sd is its printed half-width x sqrt(5) / 1.96 (the paper's "
    "interval rule) and the fits use 5 pseudo-seeds per cell with the printed mean and that sd."
)


def _num(value, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    return f"{round(float(value), digits) + 0.0:.{digits}f}"


def _p(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{value:.2g}" if value >= 1e-4 else "<1e-4"


def _interval(low, high, digits: int = 2) -> str:
    return "—" if pd.isna(low) else f"[{_num(low, digits)}, {_num(high, digits)}]"


def _mcse(row, name: str) -> str:
    low, high = row.get(f"{name}_low_mcse"), row.get(f"{name}_high_mcse")
    return "" if pd.isna(low) else f" (MC error {_num(max(low, high), 3)})"


def claims_markdown(report: pd.DataFrame, reps: int | None, rng_seed: int | None) -> str:
    source = report["source"].iloc[0] if len(report) else ""
    testable = report[report["verdict"] != NOT_TESTABLE]
    counts = report["verdict"].value_counts()
    lines = [
        "# The paper's claims as tested hypotheses",
        "",
        f"Source: {source}. Written {utc_now()}."
        + (f" Bootstrap: {reps} replicates, generator seed {rng_seed}." if reps else ""),
        "",
        "Summary: "
        + ", ".join(f"{counts.get(v, 0)} {v}" for v in (SUPPORTED, CONTRADICTED, INCONCLUSIVE, NOT_TESTABLE))
        + ".",
        "",
        VERDICT_RULE,
        "",
        MODELS,
        "",
        "## Verdicts",
        "",
        "| claim | the paper says | estimate [95% CI] | unit | p | p (Holm) | verdict |",
        "|---|---|---:|---|---:|---:|---|",
    ]
    for r in report.to_dict("records"):
        estimate = (
            "—" if r["verdict"] == NOT_TESTABLE else f"{_num(r['estimate'])} {_interval(r['ci_low'], r['ci_high'])}"
        )
        unit = r["unit"] + (f" (margin ±{r['margin']:g})" if pd.notna(r.get("margin")) else "")
        lines.append(
            f"| `{r['claim']}` | {r['sentence']} ({r['location']}) | {estimate} | {unit} | "
            f"{_p(r['p_value'])} | {_p(r['p_holm'])} | **{r['verdict']}** |"
        )
    if not testable.empty:
        lines += [
            "",
            "## Models and intervals",
            "",
            "Paper's interval: the estimate +- 1.96 sqrt(sum w_k^2 sd_k^2 / n_k) over the cells "
            "of the contrast (the paper's rule applied to the claim). Seed bootstrap: seeds "
            "resampled within each cell. Seeds x instances: seeds resampled within each cell "
            "and, per replicate, one resample of each test set's instances shared by every "
            "model scored on it. MC error: the larger Monte-Carlo standard error of the two "
            "bounds (binomial order-statistic approximation).",
            "",
            "| claim | model | runs | paper's interval | seed bootstrap | seeds x instances bootstrap |",
            "|---|---|---:|---:|---:|---:|",
        ]
        for r in testable.to_dict("records"):
            lines.append(
                f"| `{r['claim']}` | {r['model']} | {r['n_runs']} | "
                f"{_interval(r.get('paper_low'), r.get('paper_high'))} | "
                f"{_interval(r.get('seed_boot_low'), r.get('seed_boot_high'))}{_mcse(r, 'seed_boot')} | "
                f"{_interval(r.get('instance_boot_low'), r.get('instance_boot_high'))}{_mcse(r, 'instance_boot')} |"
            )
    if "iqm_difference" in report and report["iqm_difference"].notna().any():
        lines += [
            "",
            "## rliable metrics (runs only)",
            "",
            "IQM difference: interquartile mean of the treatment's runs minus the control's, "
            "scores centred on the control's mean of each matched group; probability of "
            "improvement: mean over groups of P(treatment run > control run). 95% stratified "
            "bootstrap intervals (runs resampled within each group).",
            "",
            "| claim | IQM difference [95% CI] | P(improvement) [95% CI] |",
            "|---|---:|---:|",
        ]
        for r in report[report["iqm_difference"].notna()].to_dict("records"):
            lines.append(
                f"| `{r['claim']}` | {_num(r['iqm_difference'])} {_interval(r['iqm_low'], r['iqm_high'])} | "
                f"{_num(r['prob_improvement'], 3)} {_interval(r['poi_low'], r['poi_high'], 3)} |"
            )
    if "crossover" in report and report["crossover"].notna().any():
        lines += [
            "",
            "## Crossover steps",
            "",
            "Where treatment - control first reaches 0 (interpolated in log10 steps), per task "
            "type and over all datasets, with a 95% bootstrap interval (runs: seed bootstrap; "
            "published numbers: normal draws of each cell mean with its recovered standard error).",
            "",
        ]
        for r in report[report["crossover"].notna()].to_dict("records"):
            lines.append(f"- `{r['claim']}`: {r['crossover']}")
    untestable = report[report["verdict"] == NOT_TESTABLE]
    if not untestable.empty:
        lines += ["", f"## {NOT_TESTABLE.capitalize()}", "", "| claim | reason |", "|---|---|"]
        lines += [f"| `{r['claim']}` | {r['reason']} |" for r in untestable.to_dict("records")]
    return "\n".join(lines) + "\n"


def forest_plot(report: pd.DataFrame) -> Figure:
    """One row per claim, each on its own scale (units differ): estimate, 95% CI, zero line,
    the equivalence margin where there is one; colour = verdict."""
    height = 0.55 * len(report) + 1.2
    fig = Figure(figsize=(9, height))  # fixed margins: a layout engine costs seconds per row
    fig.subplots_adjust(left=0.3, right=0.78, top=1 - 0.6 / height, bottom=0.5 / height, hspace=1.6)
    axes = fig.subplots(len(report), 1, squeeze=False)[:, 0]
    for ax, r in zip(axes, report.to_dict("records")):
        color = VERDICT_COLORS[r["verdict"]]
        ax.set_yticks([])
        ax.set_ylabel(r["claim"], rotation=0, ha="right", va="center", fontsize=8)
        for side in ("top", "right", "left"):
            ax.spines[side].set_visible(False)
        if r["verdict"] == NOT_TESTABLE:
            ax.set_xticks([])
            ax.spines["bottom"].set_visible(False)
            ax.text(0.5, 0.5, NOT_TESTABLE, transform=ax.transAxes, ha="center", va="center", fontsize=8, color=color)
            continue
        low, high, estimate = r["ci_low"], r["ci_high"], r["estimate"]
        marks = [low, high, estimate, 0.0]
        if pd.notna(r.get("margin")):
            marks += [-r["margin"], r["margin"]]
            for m in (-r["margin"], r["margin"]):
                ax.axvline(m, color="0.6", ls=":", lw=1)
        ax.axvline(0.0, color="0.3", lw=0.8)
        ax.plot([low, high], [0, 0], color=color, lw=2.5)
        ax.plot([estimate], [0], "o", color=color, ms=6)
        span = (max(marks) - min(marks)) or 1.0
        ax.set_xlim(min(marks) - 0.1 * span, max(marks) + 0.1 * span)
        ax.xaxis.set_major_locator(MaxNLocator(5))
        ax.tick_params(axis="x", labelsize=7)
        ax.text(1.01, 0.5, f"{r['verdict']}\n{r['unit']}", transform=ax.transAxes, fontsize=7, va="center", color=color)
    fig.suptitle("Claims of arXiv 2507.00994: estimate and 95% interval (each row on its own scale)", fontsize=10)
    return fig


def _figure_bytes(fig: Figure, fmt: str) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format=fmt, dpi=150)
    return buffer.getvalue()


def write_claims_report(
    report: pd.DataFrame,
    csv: str | None = None,
    markdown: str | None = None,
    figure: str | None = None,
    reps: int | None = None,
    rng_seed: int | None = None,
) -> list[Path]:
    """Write what was asked for; `figure` is a path stem (a .png/.pdf suffix is dropped)."""
    written = []
    if csv:
        frame = report.copy()
        for column in frame.columns:
            if frame[column].dtype == object:
                frame[column] = frame[column].where(frame[column].notna(), "")
        written.append(atomic_write_text(csv, frame.to_csv(index=False, float_format="%.6g")))
    if markdown:
        written.append(atomic_write_text(markdown, claims_markdown(report, reps, rng_seed)))
    if figure:
        stem = Path(figure)
        if stem.suffix.lower() in (".png", ".pdf"):
            stem = stem.with_suffix("")
        fig = forest_plot(report)
        written += [
            atomic_write_bytes(stem.with_suffix(".png"), _figure_bytes(fig, "png")),
            atomic_write_bytes(stem.with_suffix(".pdf"), _figure_bytes(fig, "pdf")),
        ]
    return written


def verdict_table(report: pd.DataFrame) -> str:
    """The short table printed on the terminal."""
    view = pd.DataFrame(
        {
            "claim": report["claim"],
            "estimate [95% CI]": [
                "—" if v == NOT_TESTABLE else f"{_num(e)} {_interval(lo, hi)}"
                for v, e, lo, hi in zip(report["verdict"], report["estimate"], report["ci_low"], report["ci_high"])
            ],
            "p_holm": [_p(p) for p in report["p_holm"]],
            "verdict": report["verdict"],
        }
    )
    return view.to_string(index=False)
