"""What a cluster is to a study (`--slurm`, `--cluster FILE`): the one YAML file of its specifics
(`ClusterConfig`, configs/cluster.example.yaml), the Slurm values it may hold (checked as sbatch
reads them) and whether its pretraining time limit leaves room for a checkpoint before the requeue
signal."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, fields
from pathlib import Path

from contracts.paper import PAPER_CORPUS

CONFIG_DIR = Path(__file__).resolve().parent.parent / "configs"


JOB_KINDS = ("data", "pretraining", "finetune", "analysis")
JOB_SETTINGS = ("partition", "time", "mem", "sbatch_options")


# What sbatch accepts, checked before anything is written or submitted (issue 65: "4 hours" passed,
# and submit.sh stopped at the first job that used it, with earlier jobs already queued).
SLURM_TIME = re.compile(r"(\d+-\d{1,2}(:\d{1,2}){0,2}|\d+(:\d{1,2}){0,2}|UNLIMITED|INFINITE)", re.IGNORECASE)
# sbatch takes a size with an optional unit, and the unit with an optional B (issue 80: "16GB" ran on
# Slurm 22.05.8 but was refused here)
SLURM_MEMORY = re.compile(r"\d+([KMGT]B?)?", re.IGNORECASE)
SLURM_NAME = re.compile(r"[A-Za-z0-9_.,+-]+")  # partition (a comma-separated list), account, qos


def check_slurm_value(name: str, value) -> None:
    """A ValueError naming the setting and the format sbatch wants, unless `value` has it (or is None)."""
    if value is None:
        return
    text, setting = str(value), name.rsplit(".", 1)[-1]
    if setting.endswith("time") and not SLURM_TIME.fullmatch(text):
        raise ValueError(
            f'{name}: {text!r} is not a Slurm time limit; write hours:minutes:seconds (e.g. "04:00:00"), '
            'days-hours:minutes:seconds ("2-00:00:00") or minutes ("30")'
        )
    if setting == "mem" and not SLURM_MEMORY.fullmatch(text):
        raise ValueError(
            f"{name}: {text!r} is not a Slurm memory size; write a number with K, M, G or T (e.g. 64G or 64GB)"
        )
    if setting in ("partition", "account", "qos") and not SLURM_NAME.fullmatch(text):
        raise ValueError(
            f"{name}: {text!r} is not a Slurm {setting} name (letters, digits and _ . , + - only); put other "
            "options such as --exclusive in sbatch_options"
        )


# Requeue (issue 65, item 5). Slurm sends USR1 this long before a pretraining job's time limit and
# the job requeues itself; a limit not longer than this lead, a start and one checkpoint interval
# never saves a checkpoint, so each requeued job starts from the same state (a 10-minute limit
# requeued 4 times in 9 minutes). A start that finds the same newest checkpoint as the start before
# it is a restart without progress; after MAX_STALLED_RESTARTS of them the job stops (FAILED).
REQUEUE_SIGNAL_LEAD_S = 600
JOB_START_ALLOWANCE_S = 300  # imports, the model, the data, loading the checkpoint, compiling
# A bound on a toy step where no FLOP estimate applies (CPU jobs, toy presets): 10x toy_l's measured
# 0.10 s (Composer, 26 x 80 tokens, one thread of the 2-core EPYC, 2026-11-27; toy_s 0.06 s).
TOY_STEP_BOUND_S = 1.0
MAX_STALLED_RESTARTS = 3


def slurm_time_seconds(text: str) -> int | None:
    """Seconds of a Slurm time limit (sbatch's formats: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S); None for
    UNLIMITED / INFINITE. The text has passed check_slurm_value."""
    text = str(text)
    if text.upper() in ("UNLIMITED", "INFINITE"):
        return None
    days, _, rest = text.rpartition("-")
    parts = [int(p) for p in rest.split(":")]
    if days:  # D-H, D-H:M, D-H:M:S
        h, m, sec = (parts + [0, 0])[:3]
        return ((int(days) * 24 + h) * 60 + m) * 60 + sec
    if len(parts) == 1:
        return parts[0] * 60
    if len(parts) == 2:
        return parts[0] * 60 + parts[1]
    return (parts[0] * 60 + parts[1]) * 60 + parts[2]


def step_seconds_estimate(body: dict, cluster, mfu: float, gpu_tflops: float) -> tuple[float, str]:
    """A pretraining step's seconds on the cluster, and how it was estimated: the paper presets on GPU
    jobs by their FLOPs (6 N D, reproduce.slurm.cost's model) at `mfu` of `gpu_tflops` on the job's GPUs;
    anything else TOY_STEP_BOUND_S."""
    from contracts.paper import PAPER_SHAPES
    from paper_figures.flops import count_parameters, training_flops

    preset = body["model"]["preset"]
    if cluster.gpus_per_node > 0 and preset in PAPER_SHAPES:
        gpus = cluster.pretraining_nodes * cluster.gpus_per_node
        tokens = body["train"]["global_batch_size"] * body["data"]["seq_len"]
        flops = training_flops(1, count_parameters(PAPER_SHAPES[preset])["matmul"], tokens)
        return flops / (mfu * gpu_tflops * 1e12 * gpus), f"at MFU {mfu:.0%} of {gpu_tflops:g} TFLOP/s on {gpus} GPUs"
    return TOY_STEP_BOUND_S, f"at most {TOY_STEP_BOUND_S:g} s a step (10x the largest toy preset's measured step)"


def requeue_time_problem(plan, cluster, mfu: float, gpu_tflops: float) -> str | None:
    """One line when the pretraining time limit leaves no time for a checkpoint before the requeue
    signal: limit <= lead + start + one resume interval (of the slowest run) at the estimated step."""
    name, text = cluster.time_setting("pretraining")
    limit = slurm_time_seconds(text)
    if limit is None:
        return None
    worst = None
    for run, body in ((r.name, r.config) for r in plan.runs):  # plan: a reproduce.plan.StudyPlan
        step_s, how = step_seconds_estimate(body, cluster, mfu, gpu_tflops)
        interval = min(body["train"]["resume_interval"], body["train"]["max_steps"])
        if worst is None or interval * step_s > worst[0]:
            worst = (interval * step_s, run, interval, how)
    if worst is None:
        return None
    need = REQUEUE_SIGNAL_LEAD_S + JOB_START_ALLOWANCE_S + worst[0]
    if limit > need:
        return None
    hours, rest = divmod(math.ceil(need / 60) * 60, 3600)
    return (
        f"{name}: {text!r} ({limit:,} s) leaves no time for a checkpoint: USR1 comes {REQUEUE_SIGNAL_LEAD_S} s before "
        f"the limit, a start takes up to {JOB_START_ALLOWANCE_S} s and one checkpoint interval of {worst[1]} "
        f"(train.resume_interval {worst[2]:,} steps) about {worst[0]:,.0f} s {worst[3]}, so every requeued job would "
        f'end before saving; set it to at least "{hours:02d}:{rest // 60:02d}:00"'
    )


@dataclass(frozen=True)
class ClusterConfig:
    """Cluster specifics of `--slurm` / `--scale paper` (one YAML file, see configs/cluster.example.yaml)."""

    partition: str
    image: str  # the Apptainer image (`make container`)
    data_dir: str  # prepared pretraining data (data.path); prepared by the first job if it lacks manifest.json
    runs_dir: str  # pretraining run directories (checkpoints, hf exports)
    hf_cache: str  # HF_HOME inside the jobs: the hub's tokenizer and datasets, pre-downloaded (jobs run offline)
    # The task mirror the fine-tuning jobs read (`python -m benchmarks fetch-data --out <task_data>` on
    # the login node); null: the reproduction's data_root (the jobs cannot read the Hub offline)
    task_data: str | None = None
    # Each pretraining job copies the shards it reads into <data_cache_dir>-<user>/<run name> on its
    # nodes (node-local; streaming's cache; one folder per Unix user, issue 89: a teammate's job that
    # created the folder first made the others fail), so concurrent jobs never share (or race to
    # decompress) shard files. null: read `data_dir` in place (only safe for one job at a time).
    data_cache_dir: str | None = "/tmp/mlm-vs-clm-mds"
    data_cache_limit: str | None = None  # e.g. "500gb": streaming evicts shards beyond this
    account: str | None = None
    qos: str | None = None
    gpus_per_node: int = 8  # 0: CPU jobs (no --gpus, no Composer launcher), e.g. a local test cluster
    cpus_per_gpu: int = 8
    cpus_per_task: int = 2  # CPU jobs (gpus_per_node 0) and the data / analysis jobs
    pretraining_nodes: int = 24  # nodes of each pretraining job (24 x 8 = the paper's 192 GPUs)
    # CPU jobs (gpus_per_node 0): ranks per node of a pretraining job; > 1 launches them as the GPU
    # jobs are (srun, one Composer launcher per node, gloo), e.g. to exercise the multi-rank path
    cpu_ranks_per_node: int = 1
    pretraining_time: str = "48:00:00"  # a job hitting it is requeued and resumes (autoresume)
    finetune_time: str = "04:00:00"
    analysis_time: str = "02:00:00"
    data_time: str = "48:00:00"
    array_throttle: int | None = None  # at most N fine-tuning array tasks of one array at once
    # At most N jobs queued by one submission, array tasks counted one each as Slurm's MaxSubmitJobs
    # counts them (e.g. your site's limit); over it, the submission is refused before any sbatch
    max_submitted_jobs: int | None = None
    # At most N fine-tuning array tasks running at once over all arrays: the models' arrays run in
    # lanes (a model's arrays start after the previous model of its lane ended, afterany), so lanes x
    # arrays per model x array_throttle <= N (the throttle lowered to fit where needed)
    max_running_finetune_tasks: int | None = None
    # A study shared by a team of Unix users in one group (docs/cluster.md): every file and folder the
    # jobs create is group-writable (umask 0002), whatever each member's umask. Also on when the study
    # folder is group-writable or setgid at submission.
    team: bool = False
    master_port: int = 29500
    python: str = "python"  # inside the image (or on the nodes with --no-container)
    binds: tuple[str, ...] = ()  # more paths to bind into the container
    sbatch_options: tuple[str, ...] = ()  # more #SBATCH options for every job, e.g. "--constraint=a100"
    prepare_data_args: tuple[str, ...] = (
        "--hf-dataset",
        PAPER_CORPUS[0],
        "--hf-config",
        PAPER_CORPUS[1],
        "--tokenizer",
        "meta-llama/Meta-Llama-3-8B",
    )  # paper scale only: the toy scale builds its toy world (`python -m reproduce --stage data`)
    # Per job kind (data, pretraining, finetune, analysis): partition, time, mem and more sbatch
    # options, over the settings above (a CPU partition for the data job, --mem where a site needs it)
    jobs: dict[str, dict] = field(default_factory=dict, hash=False)
    # Environment variables every job exports and passes into the container (APPTAINERENV_*, as the
    # jobs run with --cleanenv): NCCL / libfabric settings, a tracker's endpoint, ...
    env: dict[str, str] = field(default_factory=dict, hash=False)

    def __post_init__(self):
        per_kind = [
            (f"jobs.{kind}.{key}", settings.get(key))
            for kind, settings in self.jobs.items()
            if isinstance(settings, dict)
            for key in ("time", "mem", "partition")
        ]
        top = [(f"{kind}_time", getattr(self, f"{kind}_time")) for kind in ("pretraining", "finetune", "analysis")]
        top += [(name, getattr(self, name)) for name in ("data_time", "partition", "account", "qos")]
        for name, value in [*top, *per_kind]:
            check_slurm_value(name, value)
        for name in ("max_submitted_jobs", "max_running_finetune_tasks", "array_throttle"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1 (null: no limit)")
        if self.gpus_per_node < 0 or min(self.pretraining_nodes, self.cpus_per_task, self.cpu_ranks_per_node) < 1:
            raise ValueError("gpus_per_node must be >= 0, pretraining_nodes, cpus_per_task and cpu_ranks_per_node >= 1")
        for kind, settings in self.jobs.items():
            if kind not in JOB_KINDS:
                raise ValueError(f"jobs.{kind}: not a job kind; use one of {list(JOB_KINDS)}")
            if not isinstance(settings, dict) or set(settings) - set(JOB_SETTINGS):
                unknown = (
                    sorted(set(settings) - set(JOB_SETTINGS)) if isinstance(settings, dict) else ["(not a mapping)"]
                )
                raise ValueError(f"jobs.{kind}.{unknown[0]}: not a job setting; use some of {list(JOB_SETTINGS)}")
            from benchmarks.matrix import MatrixError, check_sbatch_options

            options = settings.get("sbatch_options") or []
            if not isinstance(options, list):
                raise ValueError(f"jobs.{kind}.sbatch_options: a list of options, e.g. ['--exclusive']")
            values = [str(v) for k, v in settings.items() if k != "sbatch_options" and v is not None]
            try:
                check_sbatch_options([*values, *map(str, options)], f"jobs.{kind}")
            except MatrixError as exc:
                raise ValueError(str(exc)) from None
        for name, value in self.env.items():
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", str(name)):
                raise ValueError(f"env.{name}: not an environment variable name (letters, digits, _)")
            if "\n" in str(value) or "\r" in str(value):
                raise ValueError(f"env.{name}: one line only (it becomes an export line of every job)")
        # Every string here lands in a #SBATCH line or a script line: one line each (docs/reliability.md).
        from benchmarks.matrix import MatrixError, check_sbatch_options

        for name, value in ((f.name, getattr(self, f.name)) for f in fields(self)):
            values = value if isinstance(value, tuple) else (value,)
            try:
                check_sbatch_options([v for v in values if isinstance(v, str)], name)
            except MatrixError as exc:
                raise ValueError(str(exc)) from None

    def time_setting(self, kind: str) -> tuple[str, str]:
        """(the setting's name, its value) of a job kind's time limit: `jobs.<kind>.time` over `<kind>_time`."""
        own = self.jobs.get(kind, {}).get("time")
        return (f"jobs.{kind}.time", own) if own else (f"{kind}_time", getattr(self, f"{kind}_time"))


def load_cluster_config(path: str | Path) -> ClusterConfig:
    from contracts.config import load_config

    return load_config(ClusterConfig, path)


def default_cluster_file() -> Path:
    mine = CONFIG_DIR / "cluster.yaml"
    return mine if mine.exists() else CONFIG_DIR / "cluster.example.yaml"
