"""`python -m analysis ...`: import released runs, aggregate, regenerate Tables 2-17, audit, claims.

`table`, `tables` and `audit` aggregate the scores of one evaluation protocol (`--protocol paper`,
the default, or `standard`; docs/release.md). Every error is one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import Counter
from pathlib import Path

from analysis.options import FAIL_ON, FORMATS, QUESTIONS, table_numbers
from contracts.run_record import PROTOCOLS, RunRecordError

# The commands import what they run (pandas, scipy, the aggregation, the release reader) when they
# run: `python -m analysis --help` and a usage error load none of it (issue 77).


class UsageError(Exception):
    """A command line that cannot run; reported as one line, exit 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse prints usage + message; keep errors to one line
        raise UsageError(f"{self.prog}: {message} (see --help)")


def _check_exist(paths: list[str]) -> None:
    for path in paths:
        if not Path(path).exists():
            raise UsageError(f"{path}: no such run-record file, run store or directory")


def _load_runs(paths: list[str]):
    from contracts.run_store import iter_records_in

    _check_exist(paths)
    records = list(iter_records_in(paths))
    if not records:
        raise UsageError(f"no run records in {', '.join(paths)}")
    return records


def _runs_under(records, protocol: str, paths: list[str]):
    """The records' scores under `protocol`; a note on stderr for those left out."""
    from analysis.protocols import records_under

    kept, note = records_under(records, protocol)
    if note:
        print(note, file=sys.stderr)
    if not kept:
        raise UsageError(
            f"no run record in {', '.join(paths)} has '{protocol}' scores; "
            f"try --protocol {'standard' if protocol == 'paper' else 'paper'}"
        )
    return kept


def _selected_runs(paths: list[str], protocol: str, datasets: set[str] | None = None, setups=None):
    """(selected, runs) of analysis.aggregate.scan_runs for the records in `paths` under
    `protocol`: column-wise from run stores, record by record otherwise. `setups`
    (analysis.setups.Setups), when given, collects what each (model, dataset) was run with."""
    from analysis.aggregate import TIE_RULE, lr_grid_gaps, scan_runs, validation_ties
    from analysis.stored_runs import scan_store
    from contracts.run_store import is_run_store, iter_store_records

    _check_exist(paths)
    if all(is_run_store(p) for p in paths):
        selected, runs, note = scan_store(paths, protocol, datasets)
        if note:
            print(note, file=sys.stderr)
        if selected.empty:
            _no_runs(paths, protocol, bool(note))
        if setups is not None:  # the provenance only: one more column-light pass
            for path in paths:
                for record in iter_store_records(path, instance_scores=False):
                    setups.add(record)
    else:
        records = _runs_under(_load_runs(paths), protocol, paths)
        if setups is not None:
            records = list(setups.watch(records))
        selected, runs = scan_runs(r for r in records if datasets is None or r.dataset in datasets)
    gaps = lr_grid_gaps(runs)
    for line in gaps[:5]:
        print(f"warning: {line}", file=sys.stderr)
    if len(gaps) > 5:
        print(f"warning: {len(gaps) - 5} more seeds lack an LR of their cell's grid", file=sys.stderr)
    ties = validation_ties(runs)
    if ties:
        shown = "; ".join(ties[:5]) + (f"; and {len(ties) - 5} more" if len(ties) > 5 else "")
        print(f"note: {len(ties)} seed(s) with tied best validation scores, {TIE_RULE}: {shown}", file=sys.stderr)
    return selected, runs


def _mixing(setups, models, strict: bool, where: str) -> list[str]:
    """The lines saying where the rows `models` were run differently; under --strict, a UsageError."""
    from analysis.setups import mixing_lines
    from contracts.paper import DATASETS

    lines = mixing_lines(setups, models, [d.id for d in DATASETS])
    if lines:
        if strict:
            raise UsageError(
                f"{where}: the rows were not fine-tuned or tested alike ({lines[0]}"
                + (f"; and {len(lines) - 1} more" if len(lines) > 1 else "")
                + "); run them alike or drop --strict; nothing written"
            )
        print(f"warning: mixed setups in {where}: " + "; ".join(lines), file=sys.stderr)
    return lines


def _no_runs(paths: list[str], protocol: str, other_protocol: bool):
    if other_protocol:
        raise UsageError(
            f"no run record in {', '.join(paths)} has '{protocol}' scores; "
            f"try --protocol {'standard' if protocol == 'paper' else 'paper'}"
        )
    raise UsageError(f"no run records in {', '.join(paths)}")


def _cmd_import_released(args) -> int:
    from analysis.released import (
        ReleasedImportError,
        import_released_to_store,
        read_released,
        unreported_datasets,
    )
    from contracts.paper import UNREPORTED_DATASETS
    from contracts.run_record import write_run_records

    if Path(args.output).suffix == ".jsonl":
        records, skipped = read_released(args.directory, args.skip_bad)
        if not records:
            raise ReleasedImportError(f"{args.directory}: no run could be imported ({len(skipped)} bad files)")
        write_run_records(args.output, records)
        runs, models = len(records), {r.model for r in records}
        with_instances = sum(r.test_instance_scores is not None for r in records)
        datasets = Counter(r.dataset for r in records)
        where = args.output
    else:
        done = import_released_to_store(args.directory, args.output, args.skip_bad)
        runs, models, with_instances, skipped = done.runs, done.models, done.with_instances, done.skipped
        datasets = done.datasets
        where = (
            f"{args.output} (run store: {done.parts_written} parts written"
            + (f", {done.parts_kept} kept from an earlier import" if done.parts_kept else "")
            + ")"
        )
    print(f"imported {runs} runs of {len(models)} models ({with_instances} with test instance scores) -> {where}")
    for dataset in unreported_datasets(datasets):
        kind = UNREPORTED_DATASETS.get(dataset, "unknown")
        print(
            f"note: dataset '{dataset}' ({datasets[dataset]} runs, task type {kind}) is not reported by the "
            "paper; imported with provenance.reported_by_paper = false",
            file=sys.stderr,
        )
    for path, reason in skipped:
        print(f"warning: skipped {path}: {reason}", file=sys.stderr)
    if skipped:
        print(f"warning: {len(skipped)} bad file(s) or folder(s) skipped (--skip-bad)", file=sys.stderr)
    return 0


def _readable(cells) -> str:
    import pandas as pd

    from analysis.aggregate import BOOTSTRAP_HIERARCHICAL
    from analysis.intervals import format_bounds, paper_rule_label, readable_seeds, scale_legend
    from analysis.tables import paper_rule_cell

    clipped = list(cells["interval_clipped"] == True) if "interval_clipped" in cells else [False] * len(cells)  # noqa: E712

    def bounds(low, high, keep=None):
        keep = [True] * len(low) if keep is None else keep
        return [
            format_bounds(lo, hi, c) if k and pd.notna(lo) else "—" for lo, hi, k, c in zip(low, high, keep, clipped)
        ]

    view = pd.DataFrame(
        {
            "model": cells["model"],
            "task": cells["task_type"],
            "dataset": cells["dataset"],
            "seeds": [readable_seeds(n) for n in cells["n_seeds"]],
            "mean ± paper's rule": [paper_rule_cell(m, h) for m, h in zip(cells["mean"], cells["ci_halfwidth"])],
            "95% CI over seeds": bounds(cells["seed_boot_low"], cells["seed_boot_high"]),
            "95% CI over seeds x instances": bounds(
                cells["boot_low"], cells["boot_high"], list(cells["bootstrap"] == BOOTSTRAP_HIERARCHICAL)
            ),
            "selected LR per seed": cells["selected_lrs"],
        }
    )
    legend = (
        f"mean ± {paper_rule_label()}; 95% CI over seeds: t-calibrated bootstrap of the seeds; over seeds x "
        "instances: t-calibrated bootstrap of seeds and test instances (only where per-instance scores exist); "
        "both cover 93-97% at 3, 5 and 10 seeds in `python -m analysis coverage`"
    )
    return "\n".join([view.to_string(index=False), legend, *scale_legend(view.to_numpy().ravel(), cells["n_seeds"])])


def _note_at_chance(cells) -> None:
    from analysis.aggregate import at_chance_note

    note = at_chance_note(cells)
    if note:
        print(note, file=sys.stderr)


def _cmd_table(args) -> int:
    from analysis.aggregate import aggregate_selected
    from analysis.setups import Setups
    from contracts.provenance import atomic_write_text

    setups = Setups()
    selected, _ = _selected_runs(args.runs, args.protocol, setups=setups)
    lines = _mixing(setups, sorted(set(selected["model"])), args.strict, "table")
    cells = aggregate_selected(selected, reps=args.reps, rng_seed=args.rng_seed)
    print(f"protocol: {args.protocol}")
    if lines:
        print("Mixed setups (these rows were not fine-tuned or tested alike): " + "; ".join(lines))
    print(_readable(cells))
    _note_at_chance(cells)
    if args.csv:
        atomic_write_text(args.csv, cells.to_csv(index=False))
        print(f"wrote {len(cells)} cells -> {args.csv}")
    return 0


def _cmd_tables(args) -> int:
    formats = tuple(f.strip() for f in args.format.split(",") if f.strip())
    unknown = sorted(set(formats) - set(FORMATS))
    if unknown or not formats:
        raise UsageError(f"--format: unknown format(s) {unknown or formats}; choose from {','.join(FORMATS)}")
    if args.published == bool(args.runs):
        raise UsageError("tables: give run-record files or --published (exactly one of them)")
    _write_tables(args, args.out, formats)
    return 0


def _write_tables(args, out: str, formats: tuple[str, ...]) -> None:
    """Tables 2-17 from args.runs (or the published values) under args.protocol/reps/rng_seed."""
    from analysis.aggregate import aggregate_selected
    from analysis.published import load_published_cells
    from analysis.tables import write_tables

    mixing = None
    if args.published:
        cells, source = load_published_cells(), "the paper's published values (arXiv 2507.00994 v4)"
    else:
        from analysis.setups import Setups, mixing_lines
        from analysis.tables import table_datasets

        setups = Setups()
        selected, _ = _selected_runs(args.runs, args.protocol, setups=setups)
        _mixing(setups, sorted(set(selected["model"])), getattr(args, "strict", False), "tables")
        cells = aggregate_selected(selected, reps=args.reps, rng_seed=args.rng_seed)
        source = "run records " + ", ".join(args.runs) + f" (protocol {args.protocol})"

        def mixing(layout):
            return mixing_lines(setups, [model for _, model in layout.rows], table_datasets(layout))

    written = write_tables(cells, out, formats, source=source, mixing=mixing)
    print(f"wrote {len(written)} files -> {out}")
    _note_at_chance(cells)


def _cmd_compare(args) -> int:
    from analysis.aggregate import aggregate_selected
    from analysis.compare import compare_with_published, write_comparison
    from analysis.setups import Setups

    try:
        tables = table_numbers(args.tables)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    setups = Setups()
    selected, _ = _selected_runs(args.runs, args.protocol, setups=setups)
    _mixing(setups, sorted(set(selected["model"])), args.strict, "compare")
    cells = aggregate_selected(selected, reps=args.reps, rng_seed=args.rng_seed)
    comparison = compare_with_published(cells, setups, tables)
    source = "run records " + ", ".join(args.runs) + f" (protocol {args.protocol})"
    written = write_comparison(comparison, args.out, source)
    print(comparison.summary_line())
    for path in written:
        print(f"wrote {path}")
    print(f"the figure: python -m paper_figures compare {args.out}")
    _note_at_chance(cells)
    return 0


def _cmd_audit(args) -> int:
    from analysis.aggregate import aggregate_selected
    from analysis.audit import audit_headline, exit_code, margins_for, pretraining_priors, run_audit
    from analysis.protocols import metric_differences
    from analysis.published import load_published_cells
    from analysis.recipe import add_origin
    from analysis.setups import Setups
    from contracts.run_store import is_run_store, iter_records_in, iter_store_records

    published = load_published_cells()
    margins_for(args.margin, published)  # MarginError before any run is read
    pretraining_priors(args.pretraining_sd, published)
    selected, runs = _selected_runs(args.runs, args.protocol)
    lr_grids = {key: set(group["lr"]) for key, group in runs.groupby(["model", "task_type", "dataset"])}
    cells = aggregate_selected(selected, reps=args.reps, rng_seed=args.rng_seed)
    # Both protocols' test scores of every run (instance scores are not needed), and what each
    # record says about its model's origin (the checkpoint or the recipe question, analysis.recipe).
    origins: dict[str, set[str]] = {}
    setups = Setups()

    def records():
        for path in args.runs:
            stream = iter_store_records(path, instance_scores=False) if is_run_store(path) else iter_records_in([path])
            for r in stream:
                add_origin(origins, r)
                setups.add(r)
                yield r

    differences = metric_differences(records())
    summary = run_audit(
        cells,
        args.out,
        sources=list(args.runs),
        protocol=args.protocol,
        differences=differences,
        margin=args.margin,
        reproduces=args.reproduces,
        origins=origins,
        pretraining_sd=args.pretraining_sd,
        lr_grids=lr_grids,
        setups=setups,
        pool_pretraining_sd=args.pool_pretraining_sd,
    )
    _note_at_chance(cells)
    asked = Counter(q["question"] for q in summary["questions"].values())
    question = ", ".join(f"{kind} {asked[kind]}" for kind in ("checkpoint", "recipe") if asked[kind])
    print(
        f"audit (protocol {args.protocol}; question: {question or 'none'}): {audit_headline(summary)} "
        f"-> {Path(args.out) / 'audit.md'}"
    )
    return exit_code(summary, args.fail_on)


def _cmd_claims(args) -> int:
    # Imported here: statsmodels and matplotlib take seconds to load and only this command needs them.
    from analysis.claims import (
        NOT_TESTABLE,
        evaluate_claims,
        inputs_from_published,
        inputs_from_records,
        inputs_from_selected,
    )
    from analysis.claims.report import toy_models_label, verdict_table, write_claims_report
    from analysis.released import import_released
    from contracts.paper import DATASET_BY_ID
    from contracts.run_store import is_run_store, iter_records_in

    sources = [bool(args.runs), bool(args.released), args.published]
    if sum(sources) != 1:
        raise UsageError("claims: give run-record files, --released DIR or --published (exactly one)")
    if args.tables and args.released:
        raise UsageError(
            "claims --tables: import the release first (import-released DIR -o runs.parquet), then pass that store"
        )
    if not args.pretraining_sd >= 0:
        raise UsageError(f"--pretraining-sd must be >= 0 points, got {args.pretraining_sd}")
    if args.published:
        inputs = inputs_from_published()
    elif args.runs and all(is_run_store(p) for p in args.runs):
        selected, runs = _selected_runs(args.runs, args.protocol, set(DATASET_BY_ID))
        source = f"run stores {', '.join(args.runs)} ({args.protocol} protocol)"
        inputs = inputs_from_selected(selected, runs, source, args.reps, args.rng_seed)
    else:
        if args.released:
            records, source = import_released(args.released)[0], f"released runs in {args.released}"
        else:
            _check_exist(args.runs)
            # A stream: only each seed's best-validation run keeps its instance scores in memory.
            records, source = iter_records_in(args.runs), "run records " + ", ".join(args.runs)
        under = (r for r in (r.scores_under(args.protocol) for r in records) if r is not None)
        inputs = inputs_from_records(under, f"{source} ({args.protocol} protocol)", args.reps, args.rng_seed)
    report = evaluate_claims(inputs, reps=args.reps, rng_seed=args.rng_seed, pretraining_sd=args.pretraining_sd)
    label = toy_models_label(inputs.cells["model"])
    if label:
        print(label)
    print(verdict_table(report))
    for path in write_claims_report(report, args.csv, args.md, args.figure, args.reps, args.rng_seed, label):
        print(f"wrote {path}")
    if args.tables:  # in this process: the libraries are loaded once (docs/claims.md, "Scale")
        del inputs  # the claims' instance scores: the tables read their own selection
        _write_tables(args, args.tables, FORMATS)
    untestable = int((report["verdict"] == NOT_TESTABLE).sum())
    if untestable:
        print(
            f"note: {untestable} claim(s) {NOT_TESTABLE}; the reasons are in the Markdown/CSV report", file=sys.stderr
        )
    return 0


def _cmd_claims_coverage(args) -> int:
    from analysis.claims.simulation import coverage_study, format_study
    from contracts.provenance import atomic_write_text

    result = coverage_study(args.sims, args.rng_seed, args.reps, decision_only=args.decision_only)
    print(format_study(result))
    if args.json:
        atomic_write_text(args.json, json.dumps(result, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


PAGE_FIX = "give the Markdown page whose generated blocks claims-doc rewrites (e.g. docs/claims.md); nothing written"


def _check_page_kind(path: Path, writes: bool) -> None:
    """A page claims-doc may read (a regular file, a link to one) and, when it `writes`, replace: a
    link would become a file and leave the page it points to stale, so it is refused."""
    import stat

    if not path.exists():
        raise UsageError(f"{path}: no such file (or a dangling link); {PAGE_FIX}")
    if not stat.S_ISREG(path.stat().st_mode):
        raise UsageError(f"{path}: not a regular file (a FIFO, device or folder); {PAGE_FIX}")
    if writes and path.is_symlink():
        raise UsageError(
            f"{path}: a link, which the rewrite would replace by a file; give the page itself, {path.resolve()}; "
            "nothing written"
        )


def _read_page(path: Path, writes: bool) -> str:
    """The page, bounded (issue 88: it was read whole: a FIFO hung the command, /dev/zero ended in a
    MemoryError traceback); docs/claims.md is about 80 kB, the bound 1 MiB."""
    from contracts.bounded import SMALL, BoundedReadError, read_text

    _check_page_kind(path, writes)
    try:
        return read_text(path, SMALL, errors="strict")  # the text is written back: no byte replaced
    except BoundedReadError as exc:
        raise UsageError(f"{exc}; {PAGE_FIX}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text (byte {exc.start}); {PAGE_FIX}") from None


def _cmd_claims_doc(args) -> int:
    from analysis.claims import evaluate_claims, inputs_from_published
    from analysis.claims.report import check_doc_markers, regenerate_doc
    from contracts.provenance import atomic_write_text

    path = Path(args.page)
    text = _read_page(path, writes=not args.check)
    check_doc_markers(text, str(path))  # before the claims are computed
    new = regenerate_doc(text, evaluate_claims(inputs_from_published(), reps=10000, rng_seed=0), str(path))
    if new == text:
        print(f"{path}: the generated blocks are current")
        return 0
    if args.check:
        print(
            f"error: {path}: the generated blocks are stale; run python -m analysis claims-doc {path}", file=sys.stderr
        )
        return 1
    _check_page_kind(path, writes=True)  # again: the claims took seconds, the page may have been replaced
    atomic_write_text(path, new)
    print(f"{path}: generated blocks rewritten from `python -m analysis claims --published --reps 10000 --rng-seed 0`")
    return 0


def _cmd_coverage(args) -> int:
    import pandas as pd

    from analysis.coverage import SEED_COUNTS, NoiseModel, format_coverage, table_coverage
    from contracts.provenance import atomic_write_text

    if args.cells < 3:
        raise UsageError("--cells must be >= 3 (one simulated model has 3 datasets)")
    if not args.seed_sd or any(not (sd > 0 and math.isfinite(sd)) for sd in args.seed_sd):
        raise UsageError("--seed-sd: give one or more finite SDs > 0 (points)")
    repeated = [sd for sd in dict.fromkeys(args.seed_sd) if args.seed_sd.count(sd) > 1]
    if repeated:  # the same table twice, its rows twice in --csv (issue 88)
        raise UsageError(f"--seed-sd: {', '.join(map(str, repeated))} given more than once; give each SD once")
    parts, tables = [], []
    for seed_sd in args.seed_sd:
        noise = NoiseModel(seed_sd=seed_sd)
        table = table_coverage(SEED_COUNTS, args.cells, args.reps, args.rng_seed, noise)
        parts.append(format_coverage(table, noise))
        tables.append(table.assign(seed_sd=seed_sd))
    text = "\n\n".join(parts)
    print(text)
    if args.md:
        atomic_write_text(args.md, text + "\n")
        print(f"wrote {args.md}")
    if args.csv:
        atomic_write_text(args.csv, pd.concat(tables).to_csv(index=False))
        print(f"wrote {args.csv}")
    return 0


def _cmd_bench_claims(args) -> int:
    from analysis.bench import benchmark

    result = benchmark(args.out, args.models, args.instances, args.reps, args.rng_seed)
    print(
        f"{result['records']} synthetic run records ({result['models']} checkpoints, "
        f"{result['instances_per_run']} test instances each, {result['runs_jsonl_mb']} MB of JSON Lines, "
        f"{result['reps']} bootstrap replicates, {result['cpu_count']} CPUs, "
        f"OMP_NUM_THREADS={result['omp_num_threads']})"
    )
    for step in ("claims", "tables"):
        print(
            f"  {step:7s} {result[step]['seconds']:7.2f} s  (CPU {result[step]['cpu_seconds']:6.2f} s)  "
            f"peak {result[step]['peak_mb']:7.1f} MB"
        )
    print(
        f"  total   {result['total_seconds']:7.2f} s  peak {result['peak_mb']:7.1f} MB "
        f"-> {Path(args.out) / 'benchmark.json'}"
    )
    return 0


def _cmd_bench(args) -> int:
    from analysis.release_bench import benchmark_release

    r = benchmark_release(args.out, args.models, args.reps, args.rng_seed, args.max_instances)
    steps = ", ".join(
        f"{step} {r[step]['seconds']:.1f} s (CPU {r[step]['cpu_seconds']:.1f} s, peak {r[step]['peak_mb']:.0f} MB)"
        for step in ("import", "tables", "audit", "claims")
    )
    print(
        f"bench: {r['models']} models, {r['runs']} runs, {r['instance_scores']:,} instance scores, "
        f"tree {r['tree_mb']:.0f} MB, store {r['store_mb']:.0f} MB, {r['reps']} replicates; {steps}; "
        f"tables+audit {r['tables_audit_seconds']:.1f} s; peak {r['peak_mb']:.0f} MB; "
        f"load {r['load_average_before'][0]:.2f} on {r['cpu_count']} CPUs -> {Path(args.out) / 'benchmark.json'}"
    )
    return 0


def _add_strict(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--strict",
        action="store_true",
        help="refuse (exit 2, nothing written) when the rows were fine-tuned or tested differently "
        "(steps, batch, LR grid, seeds, test size); default: say so in the header",
    )


def _add_bootstrap_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--reps", type=int, default=10000, help="bootstrap replicates (default 10000)")
    parser.add_argument("--rng-seed", type=int, default=0, help="bootstrap RNG seed (default 0)")


def _add_aggregation_options(parser: argparse.ArgumentParser) -> None:
    _add_bootstrap_options(parser)
    parser.add_argument(
        "--protocol",
        choices=PROTOCOLS,
        default="paper",
        help="scores to aggregate: 'paper' (the released harness's metrics, default) "
        "or 'standard' (seqeval, official SQuAD, pytrec_eval)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m analysis", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser, metavar="COMMAND")

    p = sub.add_parser("import-released", help="released results/ tree -> run store (.parquet) or run records (.jsonl)")
    p.add_argument("directory", help="the released 'results' folder or its parent")
    p.add_argument(
        "-o",
        "--output",
        required=True,
        help="run store folder to write (e.g. runs.parquet; an interrupted import resumes) or run-record file (.jsonl)",
    )
    p.add_argument(
        "--skip-bad",
        action="store_true",
        help="skip files that cannot be imported, list them at the end (default: stop at the first)",
    )
    p.set_defaults(func=_cmd_import_released)

    p = sub.add_parser("table", help="aggregate run records into cells; print them, optionally write CSV")
    p.add_argument("runs", nargs="+", help="run-record .jsonl files, run stores (.parquet) or folders of record.json")
    p.add_argument("--csv", help="write the cells (one row per model/dataset/average) here")
    _add_strict(p)
    _add_aggregation_options(p)
    p.set_defaults(func=_cmd_table)

    p = sub.add_parser("tables", help="regenerate Tables 2-17 in the paper's layout")
    p.add_argument("runs", nargs="*", help="run-record .jsonl files, run stores (.parquet) or folders of record.json")
    p.add_argument("--published", action="store_true", help="render the paper's own values instead")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--format", default=",".join(FORMATS), help="comma-separated: md,csv,tex (default all)")
    _add_strict(p)
    _add_aggregation_options(p)
    p.set_defaults(func=_cmd_tables)

    p = sub.add_parser(
        "compare", help="your models' cells beside the paper's published rows (Tables 2-5 by default), and a figure"
    )
    p.add_argument("runs", nargs="+", help="run-record .jsonl files, run stores (.parquet) or folders of record.json")
    p.add_argument(
        "--published",
        action="store_true",
        help="the paper's rows are its published values (the default and, for now, the only source)",
    )
    p.add_argument("--out", required=True, help="output folder: compare.md, compare.csv, compare.json")
    p.add_argument(
        "--tables",
        default="2,3,4,5",
        help="the paper's tables to compare with, comma-separated numbers 2-17 (default 2,3,4,5: the 42k models)",
    )
    _add_strict(p)
    _add_aggregation_options(p)
    p.set_defaults(func=_cmd_compare)

    p = sub.add_parser("audit", help="compare regenerated cells with the published tables")
    p.add_argument("runs", nargs="+", help="run-record .jsonl files, run stores (.parquet) or folders of record.json")
    p.add_argument("--out", required=True, help="output folder for audit.md and audit.json")
    p.add_argument(
        "--fail-on",
        choices=FAIL_ON,
        default="none",
        help="exit 1 when a cell differs (any-differs: verdicts resting on an assumed pretraining SD not "
        "counted; any-differs-incl-assumed: counted), or when any audited cell is not reproduced on measured "
        "noise (not-reproduced: differs, inconclusive, or reproduced only under an assumed pretraining SD); "
        "default: never",
    )
    p.add_argument(
        "--margin",
        help="equivalence margin in points: one number for every cell, KEY=VALUE pairs with KEY a dataset "
        "id, a task type or '<task type> average', or 'paper-effects' (half each dataset's smallest MLM-40 vs "
        "CLM gap) (default: 2.40 x the paper's median printed half-width of each dataset; docs/analysis.md, "
        "'Audit')",
    )
    p.add_argument(
        "--reproduces",
        choices=QUESTIONS,
        default="auto",
        help="what the runs reproduce: the paper's checkpoint (fine-tuning noise only) or its recipe (pretraining "
        "again: the pretraining SD enters); auto (default) decides per configuration from replicates and the "
        "records' model origin, and says why in audit.md",
    )
    p.add_argument(
        "--pretraining-sd",
        metavar="POINTS",
        help="recipe rows without replicates: the SD of a pretraining run's effect, one number or KEY=VALUE pairs "
        "as for --margin (default: the spread measured on the other, replicated configurations if any, else "
        "assumed equal to the published cell's fine-tuning seed SD; both marked as assumed)",
    )
    p.add_argument(
        "--pool-pretraining-sd",
        action="store_true",
        help="recipe rows with replicates: pool the between-run spread over the replicated configurations (assumes "
        "they share one pretraining SD; each row names the assumption and prints its own spread) instead of each "
        "configuration's own spread with its own runs - 1 df (default)",
    )
    _add_aggregation_options(p)
    p.set_defaults(func=_cmd_audit)

    p = sub.add_parser("claims", help="test the paper's claims (published numbers, released or your runs)")
    p.add_argument("runs", nargs="*", help="run-record .jsonl files, run stores (.parquet) or folders of record.json")
    p.add_argument("--released", metavar="DIR", help="the released 'results' folder (or its parent)")
    p.add_argument("--published", action="store_true", help="the paper's printed Tables 2-17")
    p.add_argument("--csv", help="write the report as CSV here")
    p.add_argument("--md", help="write the report as Markdown here")
    p.add_argument("--figure", help="write the forest plot here (path stem: .png and .pdf)")
    p.add_argument("--tables", metavar="DIR", help="also write Tables 2-17 (as the tables command, all formats) here")
    p.add_argument(
        "--protocol",
        choices=PROTOCOLS,
        default="paper",
        help="which scores of the run records to test (default paper: the paper's harness)",
    )
    p.add_argument(
        "--pretraining-sd",
        type=float,
        default=0.0,
        metavar="POINTS",
        help="SD of a pretraining run's effect added to every model (default 0: the paper's one run per "
        "configuration, verdicts about those runs; the report gives each verdict's tipping SD). With "
        "replicated runs (<name>-rep<k>) the SD is estimated per task type and this is the fallback for task "
        "types without replicates",
    )
    _add_bootstrap_options(p)
    p.set_defaults(func=_cmd_claims)

    p = sub.add_parser(
        "claims-coverage", help="simulate the published design: coverage of every claims interval, false-sentence trees"
    )
    p.add_argument("--sims", type=int, default=2000, help="simulated release trees per study (default 2000)")
    p.add_argument("--reps", type=int, default=1000, help="bootstrap replicates per simulation (default 1000)")
    p.add_argument("--rng-seed", type=int, default=0, help="simulation seed (default 0)")
    p.add_argument("--json", help="also write the numbers here")
    p.add_argument(
        "--decision-only",
        action="store_true",
        help="only the check of the printed P(verdict supported) against the whole decision re-run",
    )
    p.set_defaults(func=_cmd_claims_coverage)

    p = sub.add_parser(
        "claims-doc", help="rewrite the generated blocks of docs/claims.md or README.md (the published verdicts)"
    )
    p.add_argument("page", help="the page holding <!-- generated: NAME --> blocks: docs/claims.md, README.md")
    p.add_argument("--check", action="store_true", help="exit 1 when a block is stale; write nothing")
    p.set_defaults(func=_cmd_claims_doc)

    p = sub.add_parser(
        "coverage",
        help="simulate cells with a known truth: coverage of every interval the tables print (3, 5, 10 seeds)",
    )
    p.add_argument("--cells", type=int, default=3000, help="simulated dataset cells per seed count (default 3000)")
    p.add_argument(
        "--seed-sd",
        type=float,
        nargs="+",
        default=[0.6, 3.0],
        metavar="POINTS",
        help="fine-tuning seed SDs to simulate, one table each (default 0.6 3.0: the test set's or the seeds' "
        "noise dominating)",
    )
    p.add_argument("--md", help="also write the tables (Markdown) here")
    p.add_argument("--csv", help="also write the numbers (CSV) here")
    p.add_argument("--reps", type=int, default=1000, help="bootstrap replicates per cell (default 1000)")
    p.add_argument("--rng-seed", type=int, default=0, help="simulation seed (default 0)")
    p.set_defaults(func=_cmd_coverage)

    p = sub.add_parser("bench", help="time import-released/tables/audit/claims on a synthetic release-shaped tree")
    p.add_argument("--out", required=True, help="folder for the synthetic results/ tree, the store and the outputs")
    p.add_argument("--models", type=int, default=2, help="first N of the 50 release checkpoints (default 2)")
    p.add_argument("--max-instances", type=int, help="cap the instances per split (default: the real counts)")
    _add_bootstrap_options(p)
    p.set_defaults(func=_cmd_bench)

    p = sub.add_parser("bench-claims", help="time claims + tables on synthetic release-shaped run records")
    p.add_argument("--out", required=True, help="folder for the synthetic runs and the outputs")
    p.add_argument("--models", type=int, help="first N release checkpoints (default all 50)")
    p.add_argument("--instances", type=int, default=300, help="test instances per run (default 300)")
    _add_bootstrap_options(p)
    p.set_defaults(func=_cmd_bench_claims)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if getattr(args, "reps", 1) < 1:
            raise UsageError("--reps must be >= 1")
        from contracts.cli import run_command

        return run_command(None, lambda: args.func(args))
    except (UsageError, RunRecordError, ValueError, OSError) as exc:  # ReleasedImportError is a ValueError
        print(f"error: {exc}", file=sys.stderr)
        return 2
