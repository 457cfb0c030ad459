"""The facts of the paper (arXiv 2507.00994 v4), stated once: every stage imports them from here.

Model sizes and their Table 1 shapes, the toy sizes that stand in for them, the pretraining step
grids (Section 3: 42k steps, WSD warmup and decay, intermediate checkpoints, biphasic splits, CPT),
masking ratios, the fine-tuning grid and the dataset table. The checkpoint-name grammar built on
these is contracts.model_names; the layout of run directories is contracts.layout.

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
PAPER_PROTOCOL_METRICS = {
    "SC": "accuracy",
    "TC": "sentence_macro_f1",
    "QA": "answer_token_f1",
    "IR": "retrieved_ndcg@10",
}

AVERAGE = "average"  # pseudo-dataset id of a category average


def datasets_of(task_type: str) -> tuple[PaperDataset, ...]:
    return tuple(d for d in DATASETS if d.task_type == task_type)


def average_display(task_type: str) -> str:
    """The printed label of a category average, e.g. 'Average (SST-2/QQP/MNLI)'."""
    return "Average (" + "/".join(d.display for d in datasets_of(task_type)) + ")"


FINETUNE_LRS = (1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4)
PAPER_CENTRE_LR = 5e-5  # the middle of the grid: a one-LR design's LR (reproduce budget, rescaled)
FINETUNE_SEEDS = (0, 1, 2, 3, 4)
FINETUNE_BATCH = 32  # sequences per step (benchmarks/configs/paper.yaml)
# Instances of each dataset's test split in the released runs (hgissbkh/EncodEval results: the
# length of their `scores_i` lists; docs/analysis.md, "Scale"): a run record whose test split is
# smaller was scored on toy or partial data, and its score is not the published cell's quantity.
# IR: test queries.
PAPER_TEST_INSTANCES = {
    "sst2": 872,
    "qqp": 40430,
    "mnli": 9815,
    "ontonotes5": 8262,
    "conll2003": 3453,
    "uner": 2077,
    "squad": 10570,
    "squad_v2": 11873,
    "record": 10000,
    "nq": 1726,
    "msmarco": 6980,
    "mldr_en": 800,
}


# --- models (Table 1) -------------------------------------------------------------------------------
VOCAB_SIZE = 128_256  # the Llama-3 tokenizer
MAX_CONTEXT = 2048


@dataclass(frozen=True)
class ModelShape:
    """Llama-style (EuroBERT) transformer shape: no biases, SwiGLU, RMSNorm, untied LM head."""

    layers: int
    hidden: int
    ffn: int
    heads: int
    kv_heads: int
    vocab: int | None = VOCAB_SIZE  # None: the tokenizer's vocabulary size (toy sizes)
    context: int = MAX_CONTEXT
    tied_embeddings: bool = False

    @property
    def head_dim(self) -> int:
        if self.hidden % self.heads:
            raise ValueError(f"hidden {self.hidden} is not divisible by heads {self.heads}")
        return self.hidden // self.heads


PAPER_SHAPES: dict[str, ModelShape] = {
    "210m": ModelShape(layers=12, hidden=768, ffn=3072, heads=12, kv_heads=12),
    "610m": ModelShape(layers=26, hidden=1152, ffn=4096, heads=18, kv_heads=6),
    "1b": ModelShape(layers=28, hidden=1728, ffn=5120, heads=18, kv_heads=6),
}
PAPER_SIZES = tuple(PAPER_SHAPES)  # ("210m", "610m", "1b")
# CPU-sized stand-ins of the paper's sizes (toy scale: tests and `make reproduce`), not in the paper.
# Two layers and 16-dimensional heads each, growing in width: all 15 toy runs of Figure 3 and their
# fine-tuning fit the 10-minute budget of `make reproduce-figure3` on 2 cores (docs/reproduce.md).
TOY_SHAPES: dict[str, ModelShape] = {
    "toy_s": ModelShape(layers=2, hidden=64, ffn=128, heads=4, kv_heads=2, vocab=None, context=256),
    "toy_m": ModelShape(layers=2, hidden=80, ffn=160, heads=5, kv_heads=1, vocab=None, context=256),
    "toy_l": ModelShape(layers=2, hidden=96, ffn=192, heads=6, kv_heads=2, vocab=None, context=256),
}
TOY_SIZES = tuple(TOY_SHAPES)
TOY_SIZE = dict(zip(PAPER_SIZES, TOY_SIZES))  # paper size -> the toy size that stands in for it
TOY_STEP_DIVISOR = 1000  # toy runs take every paper step count divided by this (at least 1 step)
# Toy pretraining blocks: split into two windows of 12..68 tokens (40 on average) as the paper's
# 2,048-token blocks are split (docs/pretraining.md), next to toy-world pages of about 66 tokens, as
# FineWeb-Edu documents of about 1,000 tokens sit next to 1,024-token windows (docs/reproduce.md,
# "Toy learning"); 26 blocks a step keep the toy step at about 2,048 tokens. Every toy fine-tuning
# input (at most 64 tokens) fits in a window.
TOY_SEQ_LEN = 80
TOY_BATCH_SEQUENCES = 26  # packed samples of TOY_SEQ_LEN tokens per toy pretraining step
# The toy runs' peak LR (the paper's is 5e-4 over 42k steps). 3e-3 made the MLM runs write large
# activations over every token in their first steps, which fine-tuning could not undo (docs/reproduce.md).
TOY_PRETRAIN_LR = 1e-3

# Tokens per optimizer step: Table 1 prints 2,359,296 (= 2,304 x 1,024), the text 2,373,120
# (12 sequences x 192 GPUs; docs/choices.md). We use Table 1: 1,152 packed sequences x 2,048 tokens.
TOKENS_PER_STEP_TABLE1 = 2_359_296
TOKENS_PER_STEP_TEXT = 2_373_120
PRETRAIN_BATCH_SEQUENCES = TOKENS_PER_STEP_TABLE1 // MAX_CONTEXT


# --- pretraining steps and objectives (Section 3) ----------------------------------------------------
PRETRAIN_STEPS = 42_000  # every single-objective run: WSD with 2k warmup, 38k at 5e-4, 2k linear decay

# The FineWeb-Edu subset the paper-scale runs read (docs/choices.md, "data volume"): the 42k base
# run and the longest CPT after it read 64,000 x 1,152 = 73,728,000 blocks of 2,048 tokens (151.0B
# Llama-3 tokens) without a repeat; sample-100BT (~100B GPT-2 tokens) probably holds fewer than the
# base run alone, sample-350BT about twice what both need. `verify-data --for-run` checks a prepared folder.
PAPER_CORPUS = ("HuggingFaceFW/fineweb-edu", "sample-350BT")
PAPER_DATA_PATH = f"data/fineweb-edu-350BT-llama3-{MAX_CONTEXT}"
WARMUP_STEPS = 2_000
DECAY_STEPS = 2_000
# Intermediate checkpoints of the 610M CLM and MLM-40 runs, taken before the decay (Tables 6-9).
INTERMEDIATE_STEPS = (1_000, 2_000, 5_000, 10_000, 20_000, 40_000)
MASKING_RATIOS = (0.2, 0.3, 0.4, 0.5)
DEFAULT_MASKING_RATIO = 0.4
# Biphasic CLM -> MLM-40 (Tables 10-13): budget -> CLM steps at the nominal CLM shares below
# (0: MLM only, the budget: CLM only); one WSD schedule spans the budget.
BIPHASIC_CLM_SHARES = (0, 25, 50, 75, 100)
BIPHASIC_SPLITS: dict[int, tuple[int, ...]] = {
    12_000: (0, 3_000, 6_000, 9_000, 12_000),
    22_000: (0, 5_000, 11_000, 17_000, 22_000),
    42_000: (0, 10_000, 21_000, 32_000, 42_000),
}
# Masking ratio after CLM (Figure 7): 40k CLM steps, then 2k MLM steps at each ratio.
CLM_STEPS_BEFORE_MASKING = 40_000
# Continued pretraining (Tables 14-17): MLM-40 steps after the decayed 42k CLM or MLM-40 base.
CPT_STEPS = (2_000, 12_000, 22_000)
# How this package trains them (docs/pretraining.md, "Continued pretraining"; pretraining.registry):
# the recipes of the CPT runs, and where a CPT run's optimizer starts (a fresh AdamW, or the base's).
CPT_RECIPES = ("separate", "branches", "literal")
CPT_OPTIMIZERS = ("fresh", "continued")


# --- compute the paper reports (v4, Section 2) ----------------------------------------------------------
@dataclass(frozen=True)
class PaperCompute:
    """One stage of the compute the paper reports: its GPU-hours (AMD MI250X GPUs of Adastra, 24
    nodes x 8), the models it counts and the optimizer steps (pretraining) or runs (evaluation)."""

    stage: str
    gpu_hours: int
    models: int
    size: str | None  # the model size the steps ran at (None: several)
    steps: int | None  # pretraining steps of the stage, as the paper states them
    runs: int | None = None  # fine-tuning runs (evaluation)


PAPER_GPU = "AMD MI250X"
PAPER_GPUS = 192  # 24 Adastra nodes x 8 GPUs, 12 sequences each
# Dense bf16 peak of one of those GPUs: an MI250X package (2 dies) peaks at 383 TFLOP/s and Adastra
# counts each die as a GPU (8 per node), so 191.5 each (AMD's data sheet; not in the paper).
PAPER_GPU_BF16_TFLOPS = 191.5
PAPER_COMPUTE: tuple[PaperCompute, ...] = (
    PaperCompute("pretraining", 81_000, 15, None, 15 * PRETRAIN_STEPS),  # 210m, 610m, 1b x 5 objectives
    PaperCompute("biphasic", 16_000, 17, "610m", 120_000),  # "120k additional steps"
    # "26k steps" with checkpoints shared (one 22k continuation of a base with two 2k decay branches);
    # the paper does not say whether per base or for both: taken as stated.
    PaperCompute("cpt", 4_000, 6, "610m", 26_000),
    PaperCompute("evaluation", 9_000, 42, None, None, runs=15_120),  # "about 9k", 42 models x 360 runs
)
PAPER_COMPUTE_TOTAL_GPU_HOURS = 110_000
