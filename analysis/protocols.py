"""Evaluation protocols in the analysis: pick the scores of one protocol, and compare the two.

A run record holds the scores of its own protocol ("paper": the released harness's metrics,
"standard": seqeval, official SQuAD, pytrec_eval) and, where one prediction serves both, the
other protocol's in `other_scores` (contracts.run_record). The analysis aggregates one protocol
at a time; the audit reports how far the two metrics lie apart on the runs that hold both
(docs/release.md).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import numpy as np
import pandas as pd

from contracts.paper import DATASETS
from contracts.run_record import PROTOCOLS, RunRecord

DIFFERENCE_COLUMNS = ["task_type", "dataset", "paper_metric", "standard_metric", "runs", "mean_diff", "max_abs_diff"]


def records_under(records: Iterable[RunRecord], protocol: str) -> tuple[list[RunRecord], str | None]:
    """The records viewed under `protocol` (RunRecord.scores_under), and a one-line note on the
    records left out because they hold no scores of that protocol (None when none is)."""
    records = list(records)
    served = [r.scores_under(protocol) for r in records]
    kept = [s for s in served if s is not None]
    left = [r for r, s in zip(records, served) if s is None]
    if not left:
        return kept, None
    return kept, left_out_note(Counter((r.protocol, r.dataset) for r in left), protocol, len(records))


def left_out_note(groups: Counter, protocol: str, total: int) -> str:
    """One line on the records left out under `protocol`: `groups` counts them by (their own
    protocol, dataset), of `total` records."""
    by_protocol = {}
    for (own, dataset), count in sorted(groups.items()):
        by_protocol.setdefault(own, []).append(f"{dataset} {count}")
    why = "; ".join(f"scored under '{own}' only: {', '.join(parts)}" for own, parts in by_protocol.items())
    return (
        f"note: --protocol {protocol}: left out {sum(groups.values())} of {total} run records that "
        f"hold no '{protocol}' scores ({why})"
    )


def metric_differences(records: Iterable[RunRecord]) -> pd.DataFrame:
    """Per dataset, over the records that hold both protocols' scores: paper minus standard test
    score (x100 points), its mean and its largest absolute value; DIFFERENCE_COLUMNS."""
    rows = []
    for record in records:
        if record.protocol not in PROTOCOLS:
            continue  # unknown protocol: its scores are not known to be either
        paper, standard = record.scores_under("paper"), record.scores_under("standard")
        if paper is None or standard is None:
            continue
        rows.append(
            {
                "task_type": record.task_type,
                "dataset": record.dataset,
                "paper_metric": paper.metric,
                "standard_metric": standard.metric,
                "diff": paper.test_score - standard.test_score,
            }
        )
    if not rows:
        return pd.DataFrame(columns=DIFFERENCE_COLUMNS)
    frame = pd.DataFrame(rows).fillna({"paper_metric": "?", "standard_metric": "?"})
    out = (
        frame.groupby(["task_type", "dataset", "paper_metric", "standard_metric"])
        .agg(runs=("diff", "size"), mean_diff=("diff", "mean"), max_abs_diff=("diff", lambda d: float(np.abs(d).max())))
        .reset_index()
    )
    order = {d.id: i for i, d in enumerate(DATASETS)}  # the paper's column order
    out = out.assign(_order=[order.get(d, len(order)) for d in out["dataset"]]).sort_values(
        ["_order", "dataset"], kind="mergesort"
    )
    return out[DIFFERENCE_COLUMNS].reset_index(drop=True)
