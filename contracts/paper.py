"""Facts of the paper (arXiv 2507.00994 v4) that several stages need: datasets, task types, sizes.

Dataset ids are the folder names of the paper's released raw results (SPEC section 5), so records
imported from the release and records written by our harness join without translation.
"""
from __future__ import annotations

from dataclasses import dataclass

PAPER_CITATION = (
    "Gisserot-Boukhlef et al., 'Should We Still Pretrain Encoders with Masked Language Modeling?', "
    "ICLR 2026, arXiv:2507.00994 (v4)"
)

TASK_TYPES = ("SC", "TC", "QA", "IR")


@dataclass(frozen=True)
class PaperDataset:
    id: str  # folder name in the released results, e.g. "squad_v2"
    display: str  # name printed in the paper's tables, e.g. "SQuAD-v2"
    task_type: str  # SC | TC | QA | IR
    metric: str  # as printed: accuracy | F1 | NDCG@10


# Order within a task type = column order of the paper's tables.
DATASETS: tuple[PaperDataset, ...] = (
    PaperDataset("sst2", "SST-2", "SC", "accuracy"),
    PaperDataset("qqp", "QQP", "SC", "accuracy"),
    PaperDataset("mnli", "MNLI", "SC", "accuracy"),
    PaperDataset("ontonotes5", "OntoNotes", "TC", "F1"),
    PaperDataset("conll2003", "CoNLL", "TC", "F1"),
    PaperDataset("uner", "UNER", "TC", "F1"),
    PaperDataset("squad", "SQuAD", "QA", "F1"),
    PaperDataset("squad_v2", "SQuAD-v2", "QA", "F1"),
    PaperDataset("record", "ReCoRD", "QA", "F1"),
    PaperDataset("nq", "NQ", "IR", "NDCG@10"),
    PaperDataset("msmarco", "MS MARCO", "IR", "NDCG@10"),
    PaperDataset("mldr_en", "MLDR", "IR", "NDCG@10"),
)
DATASET_BY_ID = {d.id: d for d in DATASETS}
DATASET_BY_DISPLAY = {d.display: d for d in DATASETS}
# Datasets that exist in the release but are not reported by the paper.
UNREPORTED_DATASETS = {"qed": "QA"}

AVERAGE = "average"  # pseudo-dataset id of a category average


def datasets_of(task_type: str) -> tuple[PaperDataset, ...]:
    return tuple(d for d in DATASETS if d.task_type == task_type)


def average_display(task_type: str) -> str:
    """The printed label of a category average, e.g. 'Average (SST-2/QQP/MNLI)'."""
    return "Average (" + "/".join(d.display for d in datasets_of(task_type)) + ")"


PAPER_SIZES = ("210m", "610m", "1b")
MASKING_RATIOS = (0.2, 0.3, 0.4, 0.5)
FINETUNE_LRS = (1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4)
FINETUNE_SEEDS = (0, 1, 2, 3, 4)
