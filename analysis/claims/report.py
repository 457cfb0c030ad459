"""Writing the claims report: CSV, Markdown and a forest plot (PNG and PDF), each atomically."""

from __future__ import annotations

import io
import math
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from analysis.claims.engine import ONE_PRETRAINING_RUN, POWER_NOTE, WEAKEST_CAVEAT
from analysis.claims.hypothesis_tests import ALPHA, CONTRADICTED, INCONCLUSIVE, LEANS_AGAINST, SUPPORTED
from analysis.claims.inputs import NOT_TESTABLE, PUBLISHED_SEEDS
from analysis.claims.power import SENTENCE_POWER_TARGET
from contracts.paper import TOY_SIZES
from contracts.provenance import atomic_write_bytes, atomic_write_text, utc_now

VERDICT_COLORS = {
    SUPPORTED: "#1b7837",
    CONTRADICTED: "#b2182b",
    LEANS_AGAINST: "#e08214",
    INCONCLUSIVE: "#7f7f7f",
    NOT_TESTABLE: "#bbbbbb",
}
VERDICT_RULE = (
    'Verdict rule (docs/claims.md, "Verdicts"): a claim is its components (e.g. one per size); '
    "each is tested against the boundary the sentence sets (0; -margin for non-inferiority), "
    "p-values two-sided (twice the one-sided p in the claimed direction). The claim's p is the "
    "largest component p (intersection-union: every component must hold; no adjustment needed), "
    "its p against the smallest component p the other way times the number of components "
    "(Bonferroni). Both are Holm-adjusted over the pre-registered family of every confirmatory claim "
    "(primary: the abstract's findings; secondary: the other finding sentences), as two families (support, "
    "contradiction): false *supported* is at most 5% report-wide, false *contradicted* at most 5% report-wide, "
    "so any wrong conclusive word at most 10%; a sensitivity claim (another reading) as if it alone were added "
    "to that family. "
    f"*supported*: p_holm < {ALPHA}; "
    f"*contradicted*: p_against_holm < {ALPHA}; otherwise *{LEANS_AGAINST}* when some component's estimate "
    "lies on the wrong side of its boundary (the data point against the sentence, without significance), "
    "*inconclusive* when every estimate is on the claimed side (more seeds could decide it). The estimate shown is the "
    "claim's pre-registered headline component; the weakest component, which decides (the largest p), "
    "is given beside it. Equivalence components (TOST) would be at 5% per side "
    f"with a 90% interval. *{NOT_TESTABLE}*: the source lacks what the claim needs (reason given)."
)


# The first line of a report on toy runs (issue 52): toy verdicts are checks of the pipeline.
TOY_LABEL = (
    "Toy run: these verdicts test the pipeline on toy models (toy_s, toy_m and toy_l standing in for the "
    "paper's 210M, 610M and 1B), trained on a toy world; they are no evidence about the paper's claims."
)


def toy_models_label(models) -> str | None:
    """The report's first line for a source of toy models used under their own names: the claims
    select the paper's sizes, so none can use them (None when no model is a toy one)."""
    toy = sorted({m for m in models if str(m).split("-")[0] in TOY_SIZES})
    if not toy:
        return None
    return (
        f"{TOY_LABEL} This source holds {len(toy)} toy models under their own names ({', '.join(toy[:3])}"
        f"{', ...' if len(toy) > 3 else ''}): the claims select the paper's sizes (210m, 610m, 1b), so none "
        "can use them and each is not testable; `make reproduce FIGURE=N REPLICATES=2` writes the toy "
        "claims report, with each toy size standing in for its paper size."
    )


MODELS = (
    "Models (docs/claims.md): a component is a linear contrast of cell means with variance "
    "sum w^2 s^2 / n (what OLS score ~ 0 + C(cell) with HC2 covariance gives) and a t with "
    "Welch-Satterthwaite df; spread claims are ratios of variance components (seed noise removed, "
    "method of moments) with a Fieller interval. From published numbers, a cell's seed sd is its "
    "printed half-width x sqrt(5) / 1.96 (the paper's interval rule). Bootstrap intervals are "
    "t-calibrated for 5 seeds (percentile interval widened by sqrt(V / V_boot) x t_df / z)."
)


def _num(value, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    return f"{round(float(value), digits) + 0.0:.{digits}f}"


def _p(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{value:.2g}" if value >= 1e-4 else "<1e-4"


def _bound(value, digits: int) -> str:
    return ("-inf" if value < 0 else "inf") if math.isinf(value) else _num(value, digits)


def _interval(low, high, digits: int = 2) -> str:
    return "—" if pd.isna(low) else f"[{_bound(low, digits)}, {_bound(high, digits)}]"


def _mcse(row, name: str) -> str:
    low, high = row.get(f"{name}_low_mcse"), row.get(f"{name}_high_mcse")
    return "" if pd.isna(low) else f" (MC error {_num(max(low, high), 3)})"


def _sd(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return "any" if value == math.inf else f"{value:.2f}"


def _estimate(r: dict) -> str:
    if r["verdict"] == NOT_TESTABLE:
        return "—"
    level = r.get("ci_level")
    label = "" if pd.isna(level) or round(float(level), 2) == 0.95 else f" ({float(level):.0%} CI)"
    return f"{_num(r['estimate'])} {_interval(r['ci_low'], r['ci_high'])}{label}"


def _weakest(r: dict) -> str:
    """The deciding component and its interval, where it is not the headline (else "")."""
    if r["verdict"] == NOT_TESTABLE or pd.isna(r.get("weakest")) or r.get("weakest") == r.get("shown"):
        return ""
    return f"{r['weakest']}: {_num(r['weakest_estimate'])} {_interval(r['weakest_ci_low'], r['weakest_ci_high'])}*"


def _shown(r: dict) -> str:
    return "" if r["verdict"] == NOT_TESTABLE or pd.isna(r.get("shown")) else str(r["shown"])


def _is_fragile(r: dict) -> bool:
    return bool(r.get("fragile")) if pd.notna(r.get("fragile")) else False


def _text(value) -> str:
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)


def _flip(value) -> str:
    if pd.isna(value):
        return "—"
    if value == math.inf:
        return "none: not supported at any margin (its other components decide)"
    if value == 0:
        return "0 (supported with no margin)"
    return f"supported when the margin exceeds {value:.3f}"


def margin_lines(report: pd.DataFrame) -> list[str]:
    """One line per non-inferiority claim: its margin, where the number comes from, and the margin at
    which the verdict would flip."""
    margins = report["margins"] if "margins" in report else pd.Series("", index=report.index)
    rows = report[(report["margin"].notna() | margins.map(bool)) & (report["verdict"] != NOT_TESTABLE)]
    return [
        f"margin: {r['claim']}: "
        + (f"{r['margin']:g} {r['unit']}" if pd.notna(r["margin"]) else f"per task type {r['margins']} {r['unit']}")
        + f" ({_text(r.get('margin_source'))}); verdict {r['verdict']}"
        + (f", {_flip(r.get('flip_margin'))}" if pd.notna(r["margin"]) else "")
        for r in rows.to_dict("records")
    ]


REPLICATES_NOTE = (
    "Some configurations were pretrained more than once (`-rep<k>` names): the SD of a pretraining run's "
    "effect is estimated per task type from them (method of moments, 95% chi-square interval; "
    'docs/claims.md, "Pretraining replicates") and added to every claim whose contrast crosses '
    "pretraining runs; task types without replicates use --pretraining-sd."
)


def _has_sd(sd) -> bool:
    return isinstance(sd, str) or (sd is not None and not pd.isna(sd) and sd > 0)


def _sd_text(sd) -> str:
    return sd if isinstance(sd, str) else f"{sd:g} points"


def pretraining_lines(report: pd.DataFrame) -> list[str]:
    """One line per task type whose pretraining SD is estimated from replicates, with its interval."""
    return ["estimated pretraining SD " + e.describe() for e in report.attrs.get("pretraining_sd_estimates", [])]


TOY_TAG = "[toy]"  # on every verdict and summary line of a toy run's report


def claims_markdown(
    report: pd.DataFrame, reps: int | None, rng_seed: int | None, label: str | None = None, tag: str = ""
) -> str:
    """The Markdown report; `label`, when given, is its first line (a toy run says what it is); `tag`
    (e.g. TOY_TAG) opens the summary, every verdict and every pretraining-SD line."""
    tagged = f"{tag} " if tag else ""
    source = report["source"].iloc[0] if len(report) else ""
    testable = report[report["verdict"] != NOT_TESTABLE]
    counts = report["verdict"].value_counts()
    records = report.to_dict("records")
    sd = report["pretraining_sd"].iloc[0] if len(report) else 0.0
    lines = [f"**{label}**", ""] if label else []
    lines += [
        f"# {tagged}The paper's claims as tested hypotheses",
        "",
        f"Source: {source}. Written {utc_now()}."
        + (f" Bootstrap: {reps} replicates, generator seed {rng_seed}." if reps else "")
        + (f" Pretraining SD added to every cell: {_sd_text(sd)}." if _has_sd(sd) else ""),
        "",
        f"{tagged}Summary: "
        + ", ".join(
            f"{counts.get(v, 0)} {v}" for v in (SUPPORTED, CONTRADICTED, LEANS_AGAINST, INCONCLUSIVE, NOT_TESTABLE)
        )
        + ".",
        "",
    ]
    estimated = pretraining_lines(report)
    if estimated:
        lines += ["**Pretraining replicates.** " + REPLICATES_NOTE, ""] + [f"- {tagged}{e}" for e in estimated] + [""]
    else:
        lines += [f"**One pretraining run per configuration.** {ONE_PRETRAINING_RUN}", ""]
    warned = [r for r in records if _text(r.get("warning"))]
    if warned:
        lines += ["**Coverage warnings** (these verdicts do not cover every cell the claim needs):", ""]
        lines += [f"- `{r['claim']}`: {r['warning']}" for r in warned]
        lines.append("")
    lines += [
        VERDICT_RULE,
        "",
        MODELS,
        "",
        "## Verdicts",
        "",
        WEAKEST_CAVEAT + " Weakest intervals are marked *.",
        "",
        "| claim | the paper says | what must hold | headline | estimate [95% CI] | weakest (deciding) | unit "
        "| qualifying | p | p (Holm) | verdict |",
        "|---|---|---|---|---:|---|---|---|---:|---:|---|",
    ]
    for r in records:
        quote = f'"{r["quote"]}"' if r.get("verbatim") is True else f"{_text(r.get('quote'))} (paraphrase)"
        role = {"sensitivity": " (sensitivity reading, exploratory)", "secondary": " (secondary)"}.get(
            r.get("role"), ""
        )
        lines.append(
            f"| `{r['claim']}`{role} | {quote} ({r['location']}) | {r['scope']} | {_shown(r)} | {_estimate(r)} | "
            f"{_weakest(r)} | {r['unit']} | {_text(r.get('qualifying'))} | {_p(r['p_value'])} | {_p(r['p_holm'])} "
            f"| **{tagged}{r['verdict']}** |"
        )
    lines += holm_family_lines(report)
    if not testable.empty:
        lines += [
            "",
            "## Components",
            "",
            "Every component with its estimate and 95% interval (seed noise only); a U-shape curve's right "
            "end also gives the vertex of its fitted quadratic.",
            "",
            "| claim | components |",
            "|---|---|",
        ]
        lines += [f"| `{r['claim']}` | {r['components']} |" for r in testable.to_dict("records")]
        lines += [
            "",
            "## Coverage, pretraining variance and the next experiment",
            "",
            "Cells: used of needed (the paper's design cells the claim's selectors match). Tipping "
            "pretraining SD: the largest SD (points) of a pretraining run's effect, shared by a model's "
            "datasets, at which the verdict still holds, every claim re-tested and re-adjusted ('any': up "
            "to 50 points; '—' for inconclusive claims, which more variance cannot settle). A verdict whose "
            "tipping SD is below the planning SD is fragile. " + POWER_NOTE,
            "",
            "| claim | verdict | cells | tipping pretraining SD | planning SD | power at the observed effects | "
            "seeds for 80% "
            "| runs x seeds for 80% |",
            "|---|---|---:|---:|---:|---:|---|---|",
        ]
        for r in testable.to_dict("records"):
            fragile = " (fragile)" if _is_fragile(r) else ""
            lines.append(
                f"| `{r['claim']}` | {r['verdict']}{fragile} | {int(r['cells_used'])} of {int(r['cells_needed'])} | "
                f"{_sd(r['tipping_pretraining_sd'])} | {_sd(r['planning_pretraining_sd'])} | "
                f"{_num(r.get('decision_power'))} | {_text(r['seeds_for_80'])} | {_text(r['design_for_80'])} |"
            )
    margins = margin_lines(report)
    if margins:
        lines += [
            "",
            "## Margins",
            "",
            "Each non-inferiority margin is on the paper's own scale, with its source; the flip margin is "
            "the margin above which the claim would be supported, every other claim fixed and Holm re-applied "
            '(docs/claims.md, "Margins").',
            "",
        ]
        lines += [f"- {m.removeprefix('margin: ')}" for m in margins]
    powered = testable[testable["power_alone"].notna()] if "power_alone" in testable else testable.iloc[:0]
    if not powered.empty:
        lines += [
            "",
            "## Power of each sentence at the paper's effects",
            "",
            "If the true effects were the estimates above, with the paper's "
            f"{PUBLISHED_SEEDS} seeds per cell: **power at the observed effects (with Holm)**, the chance that "
            "this report says supported (every component, Holm across the family as run; simulated, the figure to "
            "size seeds from; post hoc: biased upward for a claim that has just passed), and, labelled apart, the "
            "power of the claim's own test alone (no Holm), which is higher; "
            f'below {SENTENCE_POWER_TARGET:.0%}, why (docs/claims.md, "Power at the paper\'s effects").',
            "",
            "| claim | power at the observed effects (with Holm) | power alone (no Holm) | why below 50% |",
            "|---|---:|---:|---|",
        ]
        lines += [
            f"| `{r['claim']}` | {_num(r.get('decision_power'))} | {_num(r['power_alone'])} | {_why_below(r)} |"
            for r in powered.to_dict("records")
        ]
    if "seed_boot_low" in report and report["seed_boot_low"].notna().any():
        lines += [
            "",
            "## Bootstrap intervals (runs only)",
            "",
            "Seed bootstrap: seeds resampled within each cell. Seeds x instances: seeds resampled within "
            "each cell and, per replicate, one resample of each test set's instances shared by every "
            "model scored on it. Both are percentile intervals of the shown component widened for 5 seeds "
            "(sqrt(V / V_boot) x t_df / z). MC error: the larger Monte-Carlo standard error of the two "
            "bounds (binomial order-statistic approximation).",
            "",
            "| claim | shown | model | runs | seed bootstrap | seeds x instances bootstrap |",
            "|---|---|---|---:|---:|---:|",
        ]
        for r in testable.to_dict("records"):
            lines.append(
                f"| `{r['claim']}` | {_shown(r)} | {r['model']} | {r['n_runs']} | "
                f"{_interval(r.get('seed_boot_low'), r.get('seed_boot_high'))}{_mcse(r, 'seed_boot')} | "
                f"{_interval(r.get('instance_boot_low'), r.get('instance_boot_high'))}{_mcse(r, 'instance_boot')} |"
            )
    if "iqm_difference" in report and report["iqm_difference"].notna().any():
        lines += [
            "",
            "## rliable metrics (runs only)",
            "",
            "Over the matched groups of the shown component. IQM difference: interquartile mean of the "
            "treatment's runs minus the control's, scores centred on the control's mean of each group; "
            "probability of improvement: mean over groups of P(treatment run > control run). Point values "
            "only: with 5 runs per group their stratified-bootstrap intervals cover far less than 95%, "
            'even widened (docs/claims.md, "Intervals").',
            "",
            "| claim | shown | IQM difference | P(improvement) |",
            "|---|---|---:|---:|",
        ]
        for r in report[report["iqm_difference"].notna()].to_dict("records"):
            lines.append(
                f"| `{r['claim']}` | {_shown(r)} | {_num(r['iqm_difference'])} | {_num(r['prob_improvement'], 3)} |"
            )
    if "crossover" in report and report["crossover"].notna().any():
        lines += [
            "",
            "## Crossover steps",
            "",
            "Where treatment - control first reaches 0 (interpolated in log10 steps), per task "
            "type and over all datasets, with a 95% interval by test inversion: the steps at which the "
            "interpolated difference is not significantly different from 0 (Welch t), and their hull.",
            "",
        ]
        for r in report[report["crossover"].notna() & (report["crossover"] != "")].to_dict("records"):
            lines.append(f"- `{r['claim']}`: {r['crossover']}")
    untestable = report[report["verdict"] == NOT_TESTABLE]
    if not untestable.empty:
        lines += ["", f"## {NOT_TESTABLE.capitalize()}", "", "| claim | reason |", "|---|---|"]
        lines += [f"| `{r['claim']}` | {r['reason']} |" for r in untestable.to_dict("records")]
    return "\n".join(lines) + "\n"


def _why_below(r: dict) -> str:
    """Why P(verdict supported) is below SENTENCE_POWER_TARGET: the sentence's own reason when its
    test alone is below it too, else the Holm step across the family (issue 63)."""
    if _text(r.get("power_note")):
        return str(r["power_note"])
    decision = r.get("decision_power")
    if decision is not None and not pd.isna(decision) and decision < SENTENCE_POWER_TARGET:
        return "Holm across the family: its own test alone would reach " + _num(r["power_alone"])
    return ""


def holm_family_lines(report: pd.DataFrame) -> list[str]:
    """The pre-registered Holm family with each raw and adjusted p, then the sensitivity claims,
    each adjusted as if it alone were added to it (docs/claims.md, "The Holm family")."""
    testable = report[report["verdict"] != NOT_TESTABLE].to_dict("records")
    family = [r for r in testable if r.get("role") != "sensitivity"]
    others = [r for r in testable if r.get("role") == "sensitivity"]
    lines = [
        "",
        "## The Holm family",
        "",
        f"Pre-registered in analysis/claims/definitions.py: every confirmatory claim, primary (the abstract's "
        f"findings) and secondary (another finding sentence), in one family; the {len(family)} testable here "
        "are Holm-adjusted together, so the chance that any true-at-its-boundary sentence is called supported "
        "is at most 5% report-wide. Each sensitivity claim (another reading of a sentence) is adjusted as "
        "if it alone were added to that family.",
        "",
        "| claim | role | p | p (Holm) | verdict |",
        "|---|---|---:|---:|---|",
    ]
    lines += [
        f"| `{r['claim']}` | {r['role']} | {_p(r['p_value'])} | {_p(r['p_holm'])} | {r['verdict']} |"
        for r in family + others
    ]
    return lines


def forest_plot(report: pd.DataFrame) -> Figure:
    """One row per claim, each on its own scale (units differ): the headline component's estimate and
    interval, the weakest (deciding) one dashed below it where it differs, the boundary the claim
    must clear; colour = verdict."""
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
        boundary = float(r["boundary"]) if pd.notna(r.get("boundary")) else 0.0
        weakest = bool(_weakest(r))
        extra = (r["weakest_ci_low"], r["weakest_ci_high"], r["weakest_estimate"]) if weakest else ()
        marks = [m for m in (low, high, estimate, boundary, *extra) if math.isfinite(m)]
        if r["test"] == "equivalence":
            marks += [-r["margin"], r["margin"]]
            for m in (-r["margin"], r["margin"]):
                ax.axvline(m, color="0.6", ls=":", lw=1)
        ax.axvline(boundary, color="0.3", lw=0.8)
        span = (max(marks) - min(marks)) or 1.0
        left, right = min(marks) - 0.1 * span, max(marks) + 0.1 * span
        ax.plot([max(low, left), min(high, right)], [0, 0], color=color, lw=2.5)
        ax.plot([estimate], [0], "o", color=color, ms=6)
        if weakest:  # the deciding component, selected after the fact: open marker, thin line
            w_low, w_high, w_est = extra
            ax.plot([max(w_low, left), min(w_high, right)], [-0.4, -0.4], color=color, lw=1, ls="--")
            ax.plot([w_est], [-0.4], "o", mfc="none", color=color, ms=5)
            ax.set_ylim(-1, 0.6)
        ax.set_xlim(left, right)
        ax.xaxis.set_major_locator(MaxNLocator(5))
        ax.tick_params(axis="x", labelsize=7)
        ax.text(
            1.01,
            0.5,
            f"{r['verdict']} ({r['qualifying']})\n{r['shown']}" + (f"\n* {r['weakest']}" if weakest else ""),
            transform=ax.transAxes,
            fontsize=7,
            va="center",
            color=color,
        )
    fig.suptitle(
        "Claims of arXiv 2507.00994: headline component (filled) and, dashed, the weakest one* (each row on its "
        "own scale)\n* selected after the fact: its interval is not a 95% interval",
        fontsize=9,
    )
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
    label: str | None = None,
    tag: str = "",
) -> list[Path]:
    """Write what was asked for; `figure` is a path stem (a .png/.pdf suffix is dropped); `label`
    the Markdown's first line (toy runs), `tag` on its every verdict and summary line."""
    written = []
    if csv:
        frame = report.copy()
        for column in frame.columns:
            if frame[column].dtype == object:
                frame[column] = frame[column].where(frame[column].notna(), "")
        written.append(atomic_write_text(csv, frame.to_csv(index=False, float_format="%.6g")))
    if markdown:
        written.append(atomic_write_text(markdown, claims_markdown(report, reps, rng_seed, label, tag)))
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


def readme_tables(report: pd.DataFrame) -> tuple[str, str]:
    """README.md's two claims tables (verdicts; robustness and designs) from the published report:
    what `tests/docs/test_readme_claims.py` and `test_readme_tables_are_the_published_report` check."""
    units = {"steps": "steps", "u_shape": "curves", "monotone": "curves", "trend": "curves"}
    verdicts = [
        "| claim (headline component; qualifying; weakest*) | estimate [95% CI] | p (Holm) | verdict |",
        "|---|---|---|---|",
    ]
    robust = [
        "| claim | verdict | tipping pretraining SD | seeds for 80% | pretraining runs x seeds for 80% (planning SD) |",
        "|---|---|---|---|---|",
    ]
    for r in report.to_dict("records"):
        role = {"sensitivity": " (sensitivity, exploratory)", "secondary": ""}.get(r.get("role"), "")
        if r["verdict"] == NOT_TESTABLE:
            verdicts.append(f"| `{r['claim']}`{role} | — | — | not testable from published means |")
            continue
        detail = ""
        if r.get("shown") != "all":
            weakest = _weakest(r)
            detail = f" ({r['shown']}; {r['qualifying']} {units.get(r['test'], 'components')}"
            detail += f"; weakest {weakest})" if weakest else ")"
        verdicts.append(f"| `{r['claim']}`{detail}{role} | {_estimate(r)} | {_p(r['p_holm'])} | {r['verdict']} |")
        fragile = " (fragile)" if _is_fragile(r) else ""
        design = str(r["design_for_80"])
        design = "none" if design.startswith("none") else f"{design} ({r['planning_pretraining_sd']:.2f})"
        robust.append(
            f"| `{r['claim']}` | {r['verdict']}{fragile} | {_sd(r['tipping_pretraining_sd'])} | "
            f"{_text(r['seeds_for_80'])} | {design} |"
        )
    return "\n".join(verdicts), "\n".join(robust)


def docs_claims_table(report: pd.DataFrame) -> str:
    """docs/claims.md's table of the verdicts on the published numbers ("On the published numbers"),
    generated here and compared with the page by tests/docs/test_claims_doc.py, so it cannot go stale."""
    roles = {"sensitivity": " (sensitivity, exploratory)", "secondary": " (secondary)"}
    lines = [
        "| claim | headline | estimate [95% CI] | weakest (deciding)* | qualifying | p | p (Holm) | verdict |",
        "|---|---|---:|---|---|---:|---:|---|",
    ]
    for r in report.to_dict("records"):
        role = roles.get(r.get("role"), "")
        if r["verdict"] == NOT_TESTABLE:
            lines.append(f"| `{r['claim']}`{role} | — | — | — | — | — | — | **{NOT_TESTABLE}** |")
            continue
        fragile = " (fragile)" if _is_fragile(r) else ""
        lines.append(
            f"| `{r['claim']}`{role} | {_shown(r)} | {_estimate(r)} | {_weakest(r)} | {_text(r.get('qualifying'))} "
            f"| {_p(r['p_value'])} | {_p(r['p_holm'])} | **{r['verdict']}**{fragile} |"
        )
    return "\n".join(lines)


def docs_verdict_sentence(report: pd.DataFrame) -> str:
    """docs/claims.md's sentence naming the claims of each undecided verdict on the published numbers
    (generated, tested against the page: issue 81 found it listing a claim under the wrong word)."""
    parts = []
    for verdict in (CONTRADICTED, LEANS_AGAINST, INCONCLUSIVE):
        claims = [f"`{c}`" for c in report.loc[report["verdict"] == verdict, "claim"]]
        parts.append(f"{verdict}: {', '.join(claims) if claims else 'none'}")
    return "On the published numbers, " + "; ".join(parts) + "."


def docs_components(report: pd.DataFrame) -> str:
    """Every testable claim's components with their estimates and 95% intervals (the report's
    "Components" table): docs/claims.md lists them generated, not by hand (issue 92: a hand-written
    list stayed stale after a published cell changed)."""
    testable = report[report["verdict"] != NOT_TESTABLE]
    lines = ["| claim | components (estimate [95% CI], seed noise only) |", "|---|---|"]
    lines += [f"| `{r['claim']}` | {r['components']} |" for r in testable.to_dict("records")]
    return "\n".join(lines)


DOC_BLOCKS = {
    "published-verdicts": docs_claims_table,
    "verdict-sentence": docs_verdict_sentence,
    "components": docs_components,
    "readme-verdicts": lambda report: readme_tables(report)[0],
    "readme-robustness": lambda report: readme_tables(report)[1],
}
# The blocks each page must hold (any other page: at least one block of DOC_BLOCKS).
PAGE_BLOCKS = {
    "claims.md": ("published-verdicts", "verdict-sentence", "components"),
    "README.md": ("readme-verdicts", "readme-robustness"),
}


def _markers(name: str) -> tuple[str, str]:
    return f"<!-- generated: {name} -->", f"<!-- end generated: {name} -->"


def check_doc_markers(text: str, where: str = "the page") -> list[str]:
    """The generated blocks of `text`; ValueError (one line) when a block the page must hold
    (PAGE_BLOCKS, by its file name) lacks a marker, a block is not closed, or there is none."""
    required = PAGE_BLOCKS.get(Path(where).name, ())
    for name in required:
        start, end = _markers(name)
        if start not in text or end not in text.partition(start)[2]:
            raise ValueError(f"{where} has no '{start}' ... '{end}' block; add both markers where {name} goes")
    present = []
    for name in DOC_BLOCKS:
        start, end = _markers(name)
        if start in text:
            if end not in text.partition(start)[2]:
                raise ValueError(f"{where}: '{start}' is not closed by '{end}'; add it where the block ends")
            present.append(name)
    if not present:
        raise ValueError(
            f"{where} has no generated block ('<!-- generated: NAME -->' ... '<!-- end generated: NAME -->', "
            f"NAME one of {', '.join(DOC_BLOCKS)})"
        )
    return present


def regenerate_doc(text: str, report: pd.DataFrame, where: str = "the page") -> str:
    """`text` with each generated block it holds (between `<!-- generated: NAME -->` and
    `<!-- end generated: NAME -->`) rewritten from `report`."""
    for name in check_doc_markers(text, where):
        start, end = _markers(name)
        head, _, rest = text.partition(start)
        tail = rest.partition(end)[2]
        text = f"{head}{start}\n{DOC_BLOCKS[name](report)}\n{end}{tail}"
    return text


def verdict_table(report: pd.DataFrame) -> str:
    """What is printed on the terminal: the verdicts, then the pretraining-run sentence and one
    line per claim that does not cover every cell it needs."""
    view = pd.DataFrame(
        {
            "claim": report["claim"],
            "headline": [_shown(r) for r in report.to_dict("records")],
            "estimate [CI]": [_estimate(r) for r in report.to_dict("records")],
            "weakest [CI]*": [_weakest(r) for r in report.to_dict("records")],
            "qualifying": report["qualifying"].map(_text),
            "p_holm": [_p(p) for p in report["p_holm"]],
            "verdict": [
                v + (" (fragile)" if _is_fragile(r) else "")
                for v, r in zip(report["verdict"], report.to_dict("records"))
            ],
            "cells": [
                "" if pd.isna(u) else f"{int(u)}/{int(n)}" for u, n in zip(report["cells_used"], report["cells_needed"])
            ],
            "tipping SD": [_sd(v) for v in report["tipping_pretraining_sd"]],
            "power at observed effects": [_num(p) for p in report["decision_power"]],
            "seeds for 80%": report["seeds_for_80"].map(_text),
            "runs x seeds (planning SD)": [
                f"{_text(d)} ({_sd(t)})" if _text(d) else ""
                for d, t in zip(report["design_for_80"], report["planning_pretraining_sd"])
            ],
        }
    )
    estimated = pretraining_lines(report)
    lines = [view.to_string(index=False), "", "* " + WEAKEST_CAVEAT]
    lines += [REPLICATES_NOTE, *estimated] if estimated else [ONE_PRETRAINING_RUN]
    lines += margin_lines(report)
    lines += [f"warning: {c}: {w}" for c, w in zip(report["claim"], report["warning"]) if _text(w)]
    return "\n".join(lines)
