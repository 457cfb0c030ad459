"""`python -m paper_figures figureN|all --source published|runs [--runs RUNS.jsonl ...] --out DIR`."""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from contracts.paper import TOKENS_PER_STEP_TABLE1, TOKENS_PER_STEP_TEXT
from paper_figures.errors import LossLogError, NeedsRunRecords
from paper_figures.flops import DEFAULT_TOKENS_PER_STEP


class _Drawer:
    """A figure function of a paper_figures module, imported when first called: `--help` and a usage
    error load no matplotlib, pandas or scipy (issue 77)."""

    def __init__(self, module: str, function: str):
        self.module, self.function = module, function

    def __call__(self, *args, **kwargs):
        return getattr(importlib.import_module(f"paper_figures.{self.module}"), self.function)(*args, **kwargs)


def save_figure(*args, **kwargs):
    from paper_figures.output import save_figure as save

    return save(*args, **kwargs)


CELL_FIGURES = {f"figure{n}": _Drawer("from_cells", f"figure_{n}") for n in (2, 3, 4, 6, 8, 9, 10, 11)}
RUN_FIGURES = {f"figure{n}": _Drawer("from_runs", f"figure_{n}") for n in (5, 7)}
LOG_FIGURES = {"figure12": _Drawer("from_logs", "figure_12")}
ALL_FIGURES = sorted([*CELL_FIGURES, *RUN_FIGURES, *LOG_FIGURES], key=lambda n: int(n[6:]))

EPILOG = f"""\
figures and what they need:
  figure2, 3, 4, 6, 8, 9, 10, 11   a cells table: --source published (the paper's Tables 2-17) or
                                   --source runs (run records aggregated by analysis.aggregate)
  figure5, figure7                 raw run records (every LR and seed): --source runs only
  figure12                         training logs: --logs RUN_DIR ... (CPT pretraining run folders with
                                   loss.jsonl, e.g. runs/610m-clm-dec42k-mlm40-64k); no published version
  compare DIR                      your models among the paper's (the folder of `python -m analysis compare`)
  all                              every figure the source allows (published: 5 and 7 are skipped;
                                   12 only with --logs)
the whole pipeline of a figure's study (pretraining, fine-tuning, analysis, then these figures) is
`python -m reproduce --figure N` (see `python -m reproduce -h`).
outputs in --out: <figure>.png, <figure>.pdf, <figure>_points.csv (one row per plotted or
missing value, with a note column), <figure>_meta.json (caption, source, git sha, versions).
Figure 10 uses {DEFAULT_TOKENS_PER_STEP:,} tokens/step by default (the paper's Table 1; its text says
{TOKENS_PER_STEP_TEXT:,}): change it with --tokens-per-step.
"""


class CliError(Exception):
    pass


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m paper_figures",
        description="Draw the paper's figures from published tables or run records.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("figure", choices=[*ALL_FIGURES, "all"], metavar="FIGURE", help="figure2 ... figure12, or all")
    parser.add_argument(
        "--source",
        choices=["published", "runs"],
        default="published",
        help="published: the paper's printed tables; runs: our run records (--runs)",
    )
    parser.add_argument(
        "--runs",
        nargs="+",
        default=[],
        metavar="RUNS",
        help="run-record .jsonl files or folders of record.json files (--source runs)",
    )
    parser.add_argument(
        "--logs",
        nargs="+",
        default=[],
        metavar="RUN_DIR",
        help="figure12: CPT pretraining run folders (or their loss.jsonl)",
    )
    parser.add_argument("--ema", type=float, default=0.1, help="figure12: EMA weight of the newest loss (1 = raw)")
    parser.add_argument(
        "--out", type=Path, default=None, help="output folder (default outputs/<figure>, or outputs/figures for all)"
    )
    parser.add_argument(
        "--tokens-per-step",
        type=int,
        default=DEFAULT_TOKENS_PER_STEP,
        help=f"Figure 10 tokens per step (default {TOKENS_PER_STEP_TABLE1:,}, Table 1; "
        f"the paper's text: {TOKENS_PER_STEP_TEXT:,})",
    )
    parser.add_argument(
        "--n-params",
        type=int,
        default=None,
        help="Figure 10 parameter count N (default: computed from the 610M shapes)",
    )
    parser.add_argument("--dpi", type=int, default=150)
    return parser


class _Sources:
    """Loads the published cells, the run records and their aggregation once, when first needed."""

    def __init__(self, source: str, runs: list[str]):
        self.source, self.runs = source, runs
        self._records = self._cells = None

    def records(self):
        if self.source != "runs":
            raise NeedsRunRecords(
                "needs raw run records (every LR and seed): the published "
                "tables are aggregates; use --source runs --runs RUNS.jsonl"
            )
        if self._records is None:
            from contracts.run_store import iter_records_in

            self._records = list(iter_records_in(self.runs))
            if not self._records:
                raise CliError(f"no run records found in {self.runs}")
        return self._records

    def cells(self):
        if self._cells is None:
            if self.source == "published":
                from analysis.published import load_published_cells

                self._cells = load_published_cells()
            else:
                try:
                    from analysis.aggregate import aggregate_runs
                except ImportError as exc:
                    raise CliError(
                        "--source runs needs analysis.aggregate.aggregate_runs, which is not "
                        f"available ({exc}); use --source published"
                    ) from None
                self._cells = aggregate_runs(self.records())
        return self._cells


def make_figure(name: str, sources: _Sources, args) -> tuple:
    if name in LOG_FIGURES:
        if not args.logs:
            raise NeedsRunRecords("needs training logs: --logs RUN_DIR ... (CPT pretraining run folders)")
        try:
            return LOG_FIGURES[name](args.logs, alpha=args.ema)
        except LossLogError as exc:
            raise CliError(str(exc)) from None
    if name in RUN_FIGURES:
        try:
            data = sources.records()
        except NeedsRunRecords as exc:
            raise NeedsRunRecords(f"{name} {exc}") from None
        return RUN_FIGURES[name](data)
    kwargs = {}
    if name == "figure10":
        kwargs = {"tokens_per_step": args.tokens_per_step, "n_params": args.n_params}
    return CELL_FIGURES[name](sources.cells(), **kwargs)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    from contracts.cli import run_command

    return run_command("paper_figures", lambda: _main(argv))


def build_compare_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m paper_figures compare",
        description="Your models among the paper's: the figure of DIR/compare.csv (python -m analysis compare).",
    )
    parser.add_argument("folder", type=Path, help="the --out folder of `python -m analysis compare`")
    parser.add_argument("--out", type=Path, help="output folder (default: the same folder)")
    parser.add_argument("--dpi", type=int, default=150)
    return parser


def _compare_main(argv: list[str]) -> int:
    """`python -m paper_figures compare DIR`: the figure of `analysis compare` (DIR/compare.csv)."""
    parser = build_compare_parser()
    args = parser.parse_args(argv)
    if args.dpi < 1:
        parser.error(f"--dpi {args.dpi}: must be a positive integer")
    from paper_figures.beside import ComparisonFileError, figure_compare, read_comparison

    try:
        comparison = read_comparison(args.folder)
    except ComparisonFileError as exc:
        print(f"paper_figures: error: {exc}", file=sys.stderr)
        return 2
    fig, points = figure_compare(comparison)
    for path in save_figure(fig, points, args.out or args.folder, "compare", {"source": str(args.folder)}, args.dpi):
        print(path)
    return 0


def _main(argv: list[str]) -> int:
    if argv[:1] == ["compare"]:
        return _compare_main(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.source == "runs" and not args.runs:
        parser.error("--source runs needs --runs RUNS.jsonl [...]")
    if args.source == "published" and args.runs:
        parser.error("--runs is only read with --source runs")
    # checked before anything is drawn: matplotlib raises on a dpi of 0 only when saving, and a
    # tokens-per-step or N of 0 would draw Figure 10 against zero FLOPs
    for option, value, valid in (
        ("--dpi", args.dpi, args.dpi >= 1),
        ("--ema", args.ema, 0 < args.ema <= 1),
        ("--tokens-per-step", args.tokens_per_step, args.tokens_per_step >= 1),
        ("--n-params", args.n_params, args.n_params is None or args.n_params >= 1),
    ):
        if not valid:
            bound = "in (0, 1] (1 = the raw loss)" if option == "--ema" else "a positive integer"
            parser.error(f"{option} {value:g}: must be {bound}")
    out = args.out or Path("outputs") / ("figures" if args.figure == "all" else args.figure)
    names = ALL_FIGURES if args.figure == "all" else [args.figure]
    sources = _Sources(args.source, args.runs)
    provenance = {"source": args.source, "runs": [str(p) for p in args.runs]}
    if args.logs:
        provenance.update(logs=[str(p) for p in args.logs], ema_alpha=args.ema)
    for name in names:
        try:
            fig, points = make_figure(name, sources, args)
        except NeedsRunRecords as exc:
            if args.figure == "all":
                print(f"skipped {name}: {exc}", file=sys.stderr)
                continue
            print(f"paper_figures: error: {exc}", file=sys.stderr)
            return 2
        except CliError as exc:
            print(f"paper_figures: error: {exc}", file=sys.stderr)
            return 2
        extra = (
            {"tokens_per_step": args.tokens_per_step, "n_params": int(points["n_params"].iloc[0])}
            if name == "figure10"
            else {}
        )
        for path in save_figure(fig, points, out, name, {**provenance, **extra}, dpi=args.dpi):
            print(path)
        missing = int(points["mean"].isna().sum()) if "mean" in points else int(points["std"].isna().sum())
        if missing:
            print(
                f"{name}: {missing} expected value(s) missing from the source (see {name}_points.csv)", file=sys.stderr
            )
    return 0
