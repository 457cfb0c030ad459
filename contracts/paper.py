"""Facts of the paper (arXiv 2507.00994 v4) that several stages need: datasets, task types, sizes.

Dataset ids name the paper's datasets; `released_folder` is the folder of each in the paper's
released raw results (results/<model>/<task type>/<folder>/..., hgissbkh/EncodEval), so that
`analysis import-released` maps the release onto the same ids as our harness (docs/release.md).
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
    id: str  # our dataset id, e.g. "squad_v2" (run records, task specs)
    display: str  # name printed in the paper's tables, e.g. "SQuAD-v2"
    task_type: str  # SC | TC | QA | IR
    metric: str  # as printed: accuracy | F1 | NDCG@10
    released_folder: str  # its folder in the released results, e.g. "mnli_m" (under SC/)


# Order within a task type = column order of the paper's tables.
DATASETS: tuple[PaperDataset, ...] = (
    PaperDataset("sst2", "SST-2", "SC", "accuracy", "sst2"),
    PaperDataset("qqp", "QQP", "SC", "accuracy", "qqp"),
    PaperDataset("mnli", "MNLI", "SC", "accuracy", "mnli_m"),
    PaperDataset("ontonotes5", "OntoNotes", "TC", "F1", "ontonotes"),
    PaperDataset("conll2003", "CoNLL", "TC", "F1", "conll2003_en"),
    PaperDataset("uner", "UNER", "TC", "F1", "uner_en"),
    PaperDataset("squad", "SQuAD", "QA", "F1", "squad"),
    PaperDataset("squad_v2", "SQuAD-v2", "QA", "F1", "squad_v2"),
    PaperDataset("record", "ReCoRD", "QA", "F1", "record"),
    PaperDataset("nq", "NQ", "IR", "NDCG@10", "nq"),
    PaperDataset("msmarco", "MS MARCO", "IR", "NDCG@10", "msmarco"),
    PaperDataset("mldr_en", "MLDR", "IR", "NDCG@10", "mldr_en"),
)
DATASET_BY_ID = {d.id: d for d in DATASETS}
DATASET_BY_DISPLAY = {d.display: d for d in DATASETS}
# Datasets that exist in the release but are not reported by the paper: folder -> task type
# (imported under the folder name as dataset id).
UNREPORTED_DATASETS = {"qed": "QA"}
# Every dataset folder of the release: (task type, folder) -> our dataset id.
RELEASED_FOLDERS: dict[tuple[str, str], str] = {
    **{(d.task_type, d.released_folder): d.id for d in DATASETS},
    **{(task_type, folder): folder for folder, task_type in UNREPORTED_DATASETS.items()},
}

# The metric the paper's released harness (EncodEval) computed per task type (reported x100, the
# mean of per-instance scores): SC accuracy; TC the per-sentence macro-F1 over word tags
# (scikit-learn f1_score); QA the F1 between predicted and gold answer-token position sets; IR
# scikit-learn ndcg_score on the top 10 documents. These are the `metric` names of run records
# under the "paper" protocol (contracts.run_record), shared with benchmarks.metrics.
PAPER_PROTOCOL_METRICS = {"SC": "accuracy", "TC": "sentence_macro_f1", "QA": "answer_token_f1",
                          "IR": "retrieved_ndcg@10"}

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
