"""What each row of a table was fine-tuned and tested with, read from its run records (issue 90).

A table whose rows were fine-tuned for 4 and 20 steps, or tested on 64 rows and on the paper's
3,453, compares setups as much as models. `Setups` collects, per (model, dataset), the steps,
batch, LRs, seeds and test size the records state; `mixing_lines` says where the rows of a table
differ, `against_paper` where a model's runs differ from the paper's protocol (Section 4: 1,000
steps or one epoch, batch 32, the 6 LRs, 5 seeds, the full test split). A record that does not
state a quantity (the release's records state no steps) is never counted as differing on it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from contracts.paper import DATASET_BY_ID, FINETUNE_BATCH, FINETUNE_LRS, FINETUNE_SEEDS, PAPER_TEST_INSTANCES

# The differences a row is checked for, in the order they are printed.
ASPECTS = ("steps", "batch", "LRs", "seeds", "test size")


@dataclass
class Setup:
    """One (model, dataset)'s runs: the values each aspect took (empty: not stated)."""

    steps: set[int] = field(default_factory=set)
    batch: set[int] = field(default_factory=set)
    lrs: set[float] = field(default_factory=set)
    seeds: set[int] = field(default_factory=set)
    test_size: set[int] = field(default_factory=set)
    released: bool = False  # imported from the paper's release (its own protocol)

    def value(self, aspect: str) -> str | None:
        """The aspect as printed, None when no record states it."""
        if aspect == "LRs":
            return ", ".join(f"{x:g}" for x in sorted(self.lrs)) or None
        if aspect == "seeds":
            return str(len(self.seeds)) if self.seeds else None
        values = {"steps": self.steps, "batch": self.batch, "test size": self.test_size}[aspect]
        return "/".join(f"{v:,}" for v in sorted(values)) or None


def _test_size(provenance: dict) -> int | None:
    sizes = (provenance.get("splits") or {}).get("sizes") or {}
    test = sizes.get("test") if isinstance(sizes, dict) else None
    if isinstance(test, dict):  # IR: {"queries": n, "corpus": m}
        test = test.get("queries")
    return int(test) if isinstance(test, int) and not isinstance(test, bool) else None


def _steps(record) -> int | None:
    train = (record.provenance or {}).get("train")
    steps = train.get("steps") if isinstance(train, dict) else None
    if isinstance(steps, int) and not isinstance(steps, bool):
        return steps
    if str(record.model).endswith("-zero-shot"):  # benchmarks.run.ZERO_SHOT_SUFFIX: scored as it is
        return 0
    return None


class Setups:
    """Accumulates the setup of every (model, dataset) from a stream of run records."""

    def __init__(self) -> None:
        self.by_cell: dict[tuple[str, str], Setup] = {}

    def add(self, record) -> None:
        provenance = record.provenance or {}
        setup = self.by_cell.setdefault((record.model, record.dataset), Setup())
        setup.released |= provenance.get("source") == "released"
        setup.lrs.add(float(record.lr))
        setup.seeds.add(int(record.seed))
        steps, size = _steps(record), _test_size(provenance)
        if steps is not None:
            setup.steps.add(steps)
        train = provenance.get("train")
        batch = train.get("batch_size") if isinstance(train, dict) else None
        if isinstance(batch, int) and not isinstance(batch, bool):
            setup.batch.add(batch)
        if size is not None:
            setup.test_size.add(size)

    def watch(self, records: Iterable) -> Iterable:
        """`records`, passed through, each added on the way."""
        for record in records:
            self.add(record)
            yield record

    def of(self, model: str, dataset: str) -> Setup | None:
        return self.by_cell.get((model, dataset))

    def models(self) -> list[str]:
        return sorted({m for m, _ in self.by_cell})


def data_label(dataset: str, setup: Setup | None) -> str:
    """'paper test set' / 'toy or partial data: 64 of the paper's 3,453 test rows' / 'test size not recorded'."""
    paper = PAPER_TEST_INSTANCES.get(dataset)
    if setup is None or paper is None:
        return "not a paper dataset" if paper is None else "test size not recorded"
    if setup.released and not setup.test_size:
        return "the paper's released runs"
    if not setup.test_size:
        return "test size not recorded"
    size = max(setup.test_size)
    unit = "queries" if DATASET_BY_ID[dataset].task_type == "IR" else "rows"
    if size == paper:
        return f"paper test set ({paper:,} {unit})"
    kind = "toy or partial data" if size < paper else "a different test set"
    return f"{kind}: {size:,} of the paper's {paper:,} test {unit}"


def is_paper_data(dataset: str, setup: Setup | None) -> bool:
    """True when the runs were tested on the paper's full test split (or are the paper's own)."""
    if setup is None:
        return False
    if setup.released and not setup.test_size:
        return True
    return setup.test_size == {PAPER_TEST_INSTANCES.get(dataset)}


def against_paper(setup: Setup | None, dataset: str) -> list[str]:
    """How a (model, dataset)'s runs differ from the paper's protocol, one phrase per aspect."""
    if setup is None or setup.released:
        return []
    out = []
    if setup.steps and DATASET_BY_ID.get(dataset) and DATASET_BY_ID[dataset].id not in ("conll2003", "uner"):
        if setup.steps != {1000}:
            out.append(f"{setup.value('steps')} steps (paper 1,000)")
    if setup.batch and setup.batch != {FINETUNE_BATCH}:
        out.append(f"batch {setup.value('batch')} (paper {FINETUNE_BATCH})")
    if setup.lrs and setup.lrs != set(FINETUNE_LRS):
        out.append(f"LRs {setup.value('LRs')} (paper {', '.join(f'{x:g}' for x in FINETUNE_LRS)})")
    if setup.seeds and len(setup.seeds) < len(FINETUNE_SEEDS):
        out.append(f"{len(setup.seeds)} seed(s) (paper {len(FINETUNE_SEEDS)})")
    if setup.test_size and not is_paper_data(dataset, setup):
        out.append(data_label(dataset, setup))
    return out


def mixing_lines(setups: Setups, models: Iterable[str], datasets: Iterable[str]) -> list[str]:
    """One line per aspect on which the rows `models` differ on some of `datasets`: e.g.
    'steps differ: all-MiniLM-L6-v2 4, tiny-bert 20 (sst2, qqp)'. Empty: the rows share a setup
    as far as their records state it."""
    models, datasets = list(dict.fromkeys(models)), list(dict.fromkeys(datasets))
    lines = []
    for aspect in ASPECTS:
        where: dict[tuple, list[str]] = {}
        for dataset in datasets:
            values = {}
            for model in models:
                setup = setups.of(model, dataset)
                value = setup.value(aspect) if setup is not None else None
                if value is not None:
                    values[model] = value
            if len(set(values.values())) > 1:
                where.setdefault(tuple(sorted(values.items())), []).append(dataset)
        for values, on in where.items():
            shown = "; ".join(f"{model} {value}" for model, value in values)
            lines.append(f"{aspect} differ: {shown} (on {', '.join(on)})")
    return lines
