"""`score TASK PREDICTIONS REFERENCES [--protocol paper|standard] [--per-instance OUT]`: score
prediction files with the task's metric under an evaluation protocol (docs/protocol.md; default
`paper`) and print `{"task", "protocol", "metric", "score", "n"}` as JSON (score x100).

File formats (JSON Lines follow the inputs of the `evaluate` library's metrics):
- SC (sst2, qqp, mnli), accuracy under both protocols: one JSON value per line (the predicted /
  gold label, id or name), or objects `{"id": ..., "prediction": ...}` / `{"id": ..., "label": ...}`
  (matched by id).
- TC (conll2003, ontonotes5, uner): one JSON list of word tag strings per line (one sentence);
  `paper`: mean sentence macro-F1 (scikit-learn), `standard`: seqeval entity F1.
- QA `paper` (squad, squad_v2, record): `{"id", "positions": [...]}` in both files, the input
  token positions inside the answer ([] = no answer); mean F1 of the position sets.
- QA `standard`: squad `{"id", "prediction_text"}` / `{"id", "answers": {"text": [...],
  "answer_start": [...]}}`; squad_v2 predictions also carry `no_answer_probability` (optional;
  "" = no answer); record `{"idx", "prediction_text"}` / `{"idx", "answers"}` with `answers` a list
  of strings or a SQuAD-style dict; `idx` may be any JSON value (e.g. {"passage": 0, "query": 3});
  `id` works too. A question without a prediction scores 0, as in the official scripts.
- IR (msmarco, nq, mldr_en): TREC text files, run lines `qid Q0 docid rank score tag` and qrels
  lines `qid 0 docid relevance`; or JSON objects `{qid: {docid: score|relevance}}`. `paper`:
  scikit-learn NDCG of each query's 10 best documents, `standard`: pytrec_eval NDCG@10.
A prediction file with another number of lines (TC) or other ids (SC by id, QA `paper`) than the
references is an error. `--per-instance OUT` writes one `{"id", "score"}` line per reference
instance.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from benchmarks import metrics
from benchmarks.tasks import TASKS, get_task
from contracts.provenance import atomic_write_text
from contracts.run_record import PROTOCOLS


class ScoringInputError(ValueError):
    pass


MAX_FILE_BYTES = 1 << 30  # a predictions or references file (the largest test split's: tens of MB)


def _text(path: Path) -> str:
    """A regular file of at most MAX_FILE_BYTES (a FIFO or /dev/zero is refused, not read forever)."""
    from contracts.bounded import read_text

    return read_text(path, MAX_FILE_BYTES)


def _jsonl(path: Path) -> list:
    rows = []
    for number, line in enumerate(_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise ScoringInputError(f"{path}:{number}: not valid JSON ({exc.msg})") from None
    if not rows:
        raise ScoringInputError(f"{path}: no rows; pass the predictions (or references) file of a run")
    return rows


def _key(row: dict, path: Path):
    for name in ("id", "idx"):
        if name in row:
            value = row[name]
            return json.dumps(value, sort_keys=True) if isinstance(value, (dict, list)) else value
    raise ScoringInputError(f"{path}: a row has neither 'id' nor 'idx': {row}")


def _field(row: dict, name: str, path: Path):
    if name not in row:
        raise ScoringInputError(f"{path}: row {_key(row, path)!r} has no {name!r} field")
    return row[name]


def _check_labels(values, allowed: set, path: Path, spec) -> None:
    """Refuse a label (SC: an id or a name; TC: a tag name) outside the task's label set: it would
    be scored as a plain miss (or, as gold, count an impossible class) without a word."""
    for number, value in enumerate(values, start=1):
        for label in value if spec.task_type == "TC" else [value]:
            if isinstance(label, bool) or not isinstance(label, (int, str)) or label not in allowed:
                names = ", ".join(spec.label_names)
                ids = f"ids 0-{spec.num_labels - 1} or " if spec.task_type == "SC" else ""
                raise ScoringInputError(
                    f"{path}: entry {number}: label {label!r} is not one of the {spec.num_labels} labels of "
                    f"{spec.name} ({ids}{names})"
                )


def _labels_of(spec) -> set:
    return set(spec.label_names) | (set(range(spec.num_labels)) if spec.task_type == "SC" else set())


def _read_accuracy(pred_path: Path, ref_path: Path, spec):
    preds, refs = _jsonl(pred_path), _jsonl(ref_path)
    if refs and isinstance(refs[0], dict):
        gold = {_key(r, ref_path): _field(r, "label", ref_path) for r in refs}
        got = {_key(p, pred_path): _field(p, "prediction", pred_path) for p in preds}
        missing = [k for k in gold if k not in got]
        if missing:
            raise ScoringInputError(f"{pred_path}: no prediction for id {missing[0]!r}")
        preds, refs, ids = [got[k] for k in gold], list(gold.values()), list(gold)
    elif len(preds) != len(refs):
        raise ScoringInputError(f"{pred_path} has {len(preds)} lines, {ref_path} {len(refs)}")
    else:
        ids = None
    _check_labels(refs, _labels_of(spec), ref_path, spec)
    _check_labels(preds, _labels_of(spec), pred_path, spec)
    return metrics.accuracy(preds, refs, ids) if ids is not None else metrics.accuracy(preds, refs)


def _read_trec(path: Path, kind: str) -> dict:
    text = _text(path)
    if not text.strip():
        raise ScoringInputError(f"{path}: empty; pass the {kind} file of a run (TREC format or JSON)")
    if text.lstrip().startswith("{"):
        return json.loads(text)
    out: dict = {}
    for number, line in enumerate(text.splitlines(), start=1):
        parts = line.split()
        if not parts:
            continue
        if kind == "run":
            if len(parts) != 6:
                raise ScoringInputError(f"{path}:{number}: expected 'qid Q0 docid rank score tag'")
            out.setdefault(parts[0], {})[parts[2]] = float(parts[4])
        else:
            if len(parts) != 4:
                raise ScoringInputError(f"{path}:{number}: expected 'qid 0 docid relevance'")
            out.setdefault(parts[0], {})[parts[2]] = int(parts[3])
    return out


def _read_sentences(pred_path: Path, ref_path: Path, spec) -> tuple[list, list]:
    """Word tag lists, one sentence per line, aligned line by line, every tag one of the task's."""
    preds, refs = _jsonl(pred_path), _jsonl(ref_path)
    if len(preds) != len(refs):
        raise ScoringInputError(
            f"{pred_path}: {len(preds)} sentences (lines), but {ref_path} has "
            f"{len(refs)}; give one line of tags per reference sentence"
        )
    for number, (pred, gold) in enumerate(zip(preds, refs), start=1):
        if not isinstance(pred, list) or not isinstance(gold, list):
            raise ScoringInputError(f"{pred_path}:{number}: each line must be a JSON list of tags")
        if len(pred) != len(gold):
            raise ScoringInputError(
                f"{pred_path}:{number}: {len(pred)} tags for the {len(gold)} words "
                f"of {ref_path}:{number}; give one tag per word"
            )
    _check_labels(refs, _labels_of(spec), ref_path, spec)
    _check_labels(preds, _labels_of(spec), pred_path, spec)
    return preds, refs


def _read_positions(path: Path) -> dict:
    rows = {}
    for row in _jsonl(path):
        if not isinstance(row, dict):
            raise ScoringInputError(f'{path}: each line must be an object {{"id", "positions"}}')
        key = _key(row, path)
        positions = _field(row, "positions", path)
        if not isinstance(positions, list) or not all(isinstance(p, int) and p >= 0 for p in positions):
            raise ScoringInputError(
                f"{path}: 'positions' of id {key!r} must be a list of token positions (integers >= 0)"
            )
        if key in rows:
            raise ScoringInputError(f"{path}: id {key!r} appears twice")
        rows[key] = positions
    return rows


def _read_answer_positions(pred_path: Path, ref_path: Path) -> tuple[dict, dict]:
    preds, refs = _read_positions(pred_path), _read_positions(ref_path)
    missing = [key for key in refs if key not in preds]
    extra = [key for key in preds if key not in refs]
    if missing or extra:
        problem = f"no line for id {missing[0]!r}" if missing else f"id {extra[0]!r} is not in {ref_path}"
        raise ScoringInputError(
            f"{pred_path}: {len(preds)} lines for the {len(refs)} of {ref_path}: "
            f"{problem}; give one line per reference id"
        )
    return preds, refs


def score_files(
    task: str,
    predictions: Path,
    references: Path,
    *,
    protocol: str = "paper",
    no_answer_threshold: float = 1.0,
    relevance: str = "binary",
    seqeval_mode: str | None = None,
) -> metrics.MetricResult:
    """Score two files with the task's metric under `protocol`; the options apply to `standard`."""
    spec = get_task(task)
    metric = spec.metric_under(protocol)
    if metric == "accuracy":
        return _read_accuracy(predictions, references, spec)
    if metric == "sentence_macro_f1":
        return metrics.sentence_macro_f1(*_read_sentences(predictions, references, spec))
    if metric == "answer_token_f1":
        return metrics.answer_token_f1(*_read_answer_positions(predictions, references))
    if metric == "retrieved_ndcg@10":
        return metrics.retrieved_ndcg_at_10(_read_trec(predictions, "run"), _read_trec(references, "qrels"))
    if metric == "seqeval_f1":
        return metrics.seqeval_f1(*_read_sentences(predictions, references, spec), mode=seqeval_mode)
    if metric in ("squad_f1", "squad_v2_f1", "record_f1"):
        preds, refs = _jsonl(predictions), _jsonl(references)
        got = {_key(p, predictions): _field(p, "prediction_text", predictions) for p in preds}
        gold = {_key(r, references): _field(r, "answers", references) for r in refs}
        if metric == "squad_v2_f1":
            probs = {_key(p, predictions): float(p.get("no_answer_probability", 0.0)) for p in preds}
            return metrics.squad_v2(got, gold, probs, no_answer_threshold)
        return (metrics.squad_v1 if metric == "squad_f1" else metrics.record_f1)(got, gold)
    if metric == "ndcg@10":
        return metrics.ndcg_at_10(_read_trec(predictions, "run"), _read_trec(references, "qrels"), relevance=relevance)
    raise AssertionError(metric)


def _cmd_score(args: argparse.Namespace) -> int:
    try:
        if args.protocol == "paper" and (
            args.no_answer_threshold != 1.0 or args.relevance != "binary" or args.seqeval_mode != "default"
        ):
            raise ScoringInputError(
                "--no-answer-threshold, --relevance and --seqeval-mode apply to --protocol standard only"
            )
        result = score_files(
            args.task,
            args.predictions,
            args.references,
            protocol=args.protocol,
            no_answer_threshold=args.no_answer_threshold,
            relevance=args.relevance,
            seqeval_mode=None if args.seqeval_mode == "default" else "strict",
        )
    except (ScoringInputError, ValueError, KeyError, FileNotFoundError) as exc:
        print(f"score: error: {exc}", file=sys.stderr)
        return 2
    if args.per_instance:
        lines = "".join(
            json.dumps({"id": i, "score": s}) + "\n" for i, s in zip(result.instance_ids, result.instance_scores)
        )
        atomic_write_text(args.per_instance, lines)
    print(
        json.dumps(
            {
                "task": args.task,
                "protocol": args.protocol,
                "metric": result.metric,
                "score": round(result.score, 4),
                "n": result.n,
            }
        )
    )
    return 0


def register(subparsers) -> argparse.ArgumentParser:
    """Add the `score` command to an argparse subparsers object; sets `func` (args -> exit code)."""
    parser = subparsers.add_parser(
        "score",
        help="score a predictions file against references with the task's metric",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("task", choices=list(TASKS), metavar="TASK", help=f"one of: {', '.join(TASKS)}")
    parser.add_argument("predictions", type=Path, metavar="PREDICTIONS")
    parser.add_argument("references", type=Path, metavar="REFERENCES")
    parser.add_argument(
        "--protocol",
        choices=PROTOCOLS,
        default="paper",
        help="evaluation protocol whose metric is computed (default paper: the "
        "released harness's; standard: seqeval, official SQuAD/ReCoRD, "
        "pytrec_eval; docs/protocol.md)",
    )
    parser.add_argument(
        "--per-instance", type=Path, metavar="OUT", help="write per-instance scores (JSON Lines {id, score})"
    )
    parser.add_argument(
        "--no-answer-threshold",
        type=float,
        default=1.0,
        help="standard squad_v2: no_answer_probability above this means 'no answer' "
        "(default 1.0 = never; abstain by predicting '')",
    )
    parser.add_argument(
        "--relevance",
        choices=("binary", "graded"),
        default="binary",
        help="standard IR gains: binary (grade >= 1, default, as the released harness) or graded",
    )
    parser.add_argument(
        "--seqeval-mode",
        choices=("default", "strict"),
        default="default",
        help="standard TC seqeval mode (default: conlleval-compatible)",
    )
    parser.set_defaults(func=_cmd_score)
    return parser


def main(argv: list[str] | None = None) -> int:
    """`python -m benchmarks.scoring score TASK PREDICTIONS REFERENCES ...`."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scoring")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    from contracts.cli import run_command

    return run_command(None, lambda: args.func(args))


if __name__ == "__main__":
    sys.exit(main())
