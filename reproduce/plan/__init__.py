"""A reproduction's options and its plan (issue 79): `ReproduceConfig` (config.py, OUT/reproduce.yaml),
the paper's studies as checkpoints (studies.py), and the `StudyPlan` that `build_plan` (builder.py)
computes from the options once: every run, folder, job and figure, the one input of the executors,
written as OUT/plan.json (study_plan.py) for `status`, `resubmit` and a moved study to read."""

from reproduce.plan.builder import build_plan, study_plan_at  # noqa: F401 - the registry: imported in them
from reproduce.plan.config import (  # noqa: F401 - the options and folders, as the stages import them
    CONFIG_DIR,
    DEFAULT_LRS,
    DEFAULT_SEEDS,
    REDUCED,
    REPO_ROOT,
    SCALE_DEFAULTS,
    TOY_DATA_EFFICIENCY_REPLICATES,
    TOY_DATA_EFFICIENCY_STEPS,
    TOY_PRETRAIN_STEPS,
    TOY_WORLD,
    WORLD_VOCAB_SIZE,
    ReproduceConfig,
    ReproduceError,
    data_dir,
    finetune_dir,
    out_dir,
    pretrain_length,
    pretraining_dir,
    shard_cache_dir,
    study_sizes,
    task_data_root,
    tokenizer_path,
    world_dir,
    world_documents,
    write_if_changed,
    write_reproduce_config,
)
from reproduce.plan.study_plan import (  # noqa: F401
    PLAN_FILE,
    FinetuneJob,
    PretrainingRun,
    RandomInit,
    StudyPlan,
    load_study_config,
    read_plan,
    write_study_config,
)
