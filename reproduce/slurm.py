"""The DAG of a reproduction as Slurm jobs (`--slurm`, always at `--scale paper`): `SlurmWriter`
writes one script per job and `submit.sh`, which submits them chained with `--dependency`; cluster
specifics come from one YAML file (`ClusterConfig`, configs/cluster.example.yaml).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from contracts.layout import CHECKPOINT_PATTERN, CHECKPOINTS_DIR, FINISHED_FILE
from contracts.paper import PAPER_CORPUS
from reproduce.ledger import (
    ARRAYS_FILE,
    KILL_ON_INVALID_DEP,
    LEDGER_FILE,
    SCRIPTS_FILE,
    ledger_shell_function,
    read_ledger,
)
from reproduce.plan import (
    REPO_ROOT,
    ReproduceConfig,
    ReproduceError,
    data_dir,
    finetune_dir,
    finetune_jobs,
    finetuned_models,
    out_dir,
    pretraining_config,
    pretraining_dir,
    pretraining_runs,
    random_init_models,
    starts_from,
    study_checkpoints,
    task_data_root,
    world_dir,
    write_if_changed,
)
from reproduce.status import write_study_config

CONFIG_DIR = Path(__file__).resolve().parent / "configs"


JOB_KINDS = ("data", "pretraining", "finetune", "analysis")
JOB_SETTINGS = ("partition", "time", "mem", "sbatch_options")


# What sbatch accepts, checked before anything is written or submitted (issue 65: "4 hours" passed,
# and submit.sh stopped at the first job that used it, with earlier jobs already queued).
SLURM_TIME = re.compile(r"(\d+-\d{1,2}(:\d{1,2}){0,2}|\d+(:\d{1,2}){0,2}|UNLIMITED|INFINITE)", re.IGNORECASE)
SLURM_MEMORY = re.compile(r"\d+[KMGT]?", re.IGNORECASE)
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
        raise ValueError(f"{name}: {text!r} is not a Slurm memory size; write a number with K, M, G or T (e.g. 64G)")
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
    jobs by their FLOPs (6 N D, reproduce.cost's model) at `mfu` of `gpu_tflops` on the job's GPUs;
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


def requeue_time_problem(cfg: ReproduceConfig, cluster, mfu: float, gpu_tflops: float) -> str | None:
    """One line when the pretraining time limit leaves no time for a checkpoint before the requeue
    signal: limit <= lead + start + one resume interval (of the slowest run) at the estimated step."""
    name, text = cluster.time_setting("pretraining")
    limit = slurm_time_seconds(text)
    if limit is None:
        return None
    worst = None
    for run in pretraining_runs(cfg):
        body = pretraining_config(cfg, run)
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
    # Each pretraining job copies the shards it reads into <data_cache_dir>/<run name> on its nodes
    # (node-local; streaming's cache), so concurrent jobs never share (or race to decompress) shard
    # files. null: read `data_dir` in place (only safe for one job at a time).
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


def _q(text) -> str:
    import shlex

    return shlex.quote(str(text))


class SlurmWriter:
    """Writes `<out>/slurm/*`: one script per job and `submit.sh`, which submits them chained."""

    def __init__(self, cfg: ReproduceConfig, cluster: ClusterConfig, container: bool = True):
        self.cfg, self.cluster, self.container = cfg, cluster, container
        self.dir = out_dir(cfg) / "slurm"
        self.logs = self.dir / "slurm_logs"  # where the benchmarks.matrix scripts log too

    # what every job runs its commands through
    def binds(self) -> list[str]:
        c = self.cluster
        paths = [REPO_ROOT, out_dir(self.cfg), data_dir(self.cfg), pretraining_dir(self.cfg), c.hf_cache, *c.binds]
        if self.cfg.scale == "toy":
            paths.append(world_dir(self.cfg))
        if task_data_root(self.cfg):
            paths.append(task_data_root(self.cfg))
        return list(dict.fromkeys(str(Path(p)) for p in paths))

    def prefix(self) -> str:
        """`apptainer exec --nv --bind ... IMAGE` (nothing with --no-container)."""
        if not self.container:
            return ""
        nv = "--nv " if self.cluster.gpus_per_node > 0 else ""
        return (
            f"apptainer exec {nv}--cleanenv --bind {_q(','.join(self.binds()))} --pwd {_q(REPO_ROOT)} "
            f"{_q(self.cluster.image)} "
        )

    def check_paths(self) -> None:
        """Paths go unquoted into `srun bash -c '...'` and `--bind a,b`: keep them plain."""
        import re

        for path in [*self.binds(), self.cluster.image, self.cluster.python]:
            if not re.fullmatch(r"[\w@%+=:./-]+", str(path)):
                raise ReproduceError(
                    f"path {path!r} (cluster config or --out) has characters the generated "
                    "scripts cannot carry (spaces, quotes, commas): use a plain path"
                )

    def environment(self) -> list[str]:
        c = self.cluster
        env = {
            "HF_HOME": c.hf_cache,
            "HF_HUB_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
        }
        if c.gpus_per_node == 0:
            env["OMP_NUM_THREADS"] = "1"
        env.update({str(k): str(v) for k, v in c.env.items()})  # the cluster config's `env:` last: it wins
        lines = [f"export {k}={_q(v)}" for k, v in env.items()]
        if self.container:  # --cleanenv: pass them explicitly
            lines += [f"export APPTAINERENV_{k}={_q(v)}" for k, v in env.items()]
        return lines

    def job_options(self, kind: str) -> list[str]:
        """--partition, --time, --mem and the sbatch options of a job kind: `jobs.<kind>` over the
        cluster-wide settings (partition, <kind>_time, sbatch_options)."""
        c = self.cluster
        own = c.jobs.get(kind, {})
        opts = [
            f"--partition={own.get('partition') or c.partition}",
            f"--time={c.time_setting(kind)[1]}",
        ]
        opts += [f"--mem={own['mem']}"] if own.get("mem") else []
        opts += [f"--account={c.account}"] if c.account else []
        opts += [f"--qos={c.qos}"] if c.qos else []
        return opts + list(c.sbatch_options) + [str(o) for o in own.get("sbatch_options") or []]

    def header(self, job_name: str, kind: str, extra: list[str]) -> list[str]:
        opts = [f"--job-name={job_name}", f"--output={self.logs}/%x_%j.out"]
        return ["#!/bin/bash", *[f"#SBATCH {o}" for o in opts + extra + self.job_options(kind)]]

    def body_start(self) -> list[str]:
        return ["set -euo pipefail", f"cd {_q(REPO_ROOT)}", *self.environment(), ""]

    # the jobs
    def data_script(self, config_path: Path) -> str:
        c, out = self.cluster, data_dir(self.cfg)
        head = self.header("mlmclm-data", "data", [f"--cpus-per-task={c.cpus_per_task}"]) + self.body_start()
        python = f"{self.prefix()}{_q(c.python)}"
        if self.cfg.scale == "toy":
            # the toy world, its shards and the untrained reference models, as a local reproduction
            # makes them (reproduce.local.stage_data)
            return "\n".join([*head, f"{python} -m reproduce --config {_q(config_path)} --stage data"]) + "\n"
        args = [*c.prepare_data_args, "--seq-len", "2048"]
        cmd = f"{python} -m pretraining prepare-data {' '.join(map(_q, args))} --out {_q(out)}"
        lines = head + [f"if [[ -f {_q(out / 'manifest.json')} ]]; then echo 'data: reusing {out}'; exit 0; fi", cmd]
        return "\n".join(lines) + "\n"

    def pretraining_script(self, name: str, config_path: Path) -> str:
        c = self.cluster
        run_dir = pretraining_dir(self.cfg) / name
        gpu = c.gpus_per_node > 0
        ranks_per_node = c.gpus_per_node if gpu else c.cpu_ranks_per_node
        launcher = gpu or ranks_per_node > 1
        extra = ["--requeue", "--signal=B:USR1@600"]
        if gpu:
            extra += [
                f"--nodes={c.pretraining_nodes}",
                "--ntasks-per-node=1",
                f"--gpus-per-node={c.gpus_per_node}",
                f"--cpus-per-task={c.cpus_per_gpu * c.gpus_per_node}",
            ]
        elif launcher:
            extra += [
                f"--nodes={c.pretraining_nodes}",
                "--ntasks-per-node=1",
                f"--cpus-per-task={c.cpus_per_task * ranks_per_node}",
            ]
        else:
            extra += ["--nodes=1", "--ntasks=1", f"--cpus-per-task={c.cpus_per_task}"]
        lines = (
            self.header(f"mlmclm-pt-{name}", "pretraining", extra)
            + self.body_start()
            + [
                "# Requeued (node failure, preemption, or the USR1 sent 10 min before the time limit), the job",
                "# runs again with the same run_dir: Composer's autoresume continues from the last checkpoint.",
                'trap \'echo "time limit near: requeue $SLURM_JOB_ID"; scontrol requeue "$SLURM_JOB_ID"\' USR1',
                f"if [[ -f {_q(run_dir / FINISHED_FILE)} ]]; then echo 'pretraining: {name} is finished'; exit 0; fi",
                *self.stall_guard(name, run_dir),
            ]
        )
        train = f"-m pretraining train {_q(config_path)}"
        if launcher:
            world = c.pretraining_nodes * ranks_per_node
            lines += [
                'MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
                "export MASTER_ADDR",
                f"srun --kill-on-bad-exit=1 bash -c '{self.prefix()}composer -n {ranks_per_node} "
                f'--world_size {world} --node_rank "$SLURM_NODEID" --master_addr "$MASTER_ADDR" '
                f"--master_port {c.master_port} {train}' &",
            ]
        else:
            lines.append(f"{self.prefix()}{_q(c.python)} {train} &")
        lines += ["wait $!  # in the background so that the USR1 trap runs during training"]
        return "\n".join(lines) + "\n"

    def stall_guard(self, name: str, run_dir: Path) -> list[str]:
        """Script lines that stop a pretraining job requeued MAX_STALLED_RESTARTS times without a new
        checkpoint (a restart, SLURM_RESTART_COUNT > 0, finding the newest checkpoint the start before
        it found); OUT/slurm/requeue/<run>.state holds the count and that checkpoint's name. A new
        job (a resubmission) starts the count again."""
        state = self.dir / "requeue" / f"{name}.state"
        pattern = CHECKPOINT_PATTERN.format(batch="[0-9]+", rank=0).replace(".", r"\.")
        # the checkpoint's name expands in double quotes; the rest is quoted for the shell as a whole
        said = (
            f"restarts without a new checkpoint: not training again; raise the pretraining time limit or lower "
            f"train.resume_interval, then python -m reproduce resubmit {out_dir(self.cfg)}"
        )
        stop = f'"pretraining {name}, newest checkpoint ${{newest:-none}}: {MAX_STALLED_RESTARTS} "{_q(said)}'
        return [
            f"# Requeue only while it makes progress: after {MAX_STALLED_RESTARTS} restarts that find no new",
            "# checkpoint, stop (FAILED) instead of requeueing for ever.",
            f"state={_q(state)}",
            f"newest=$(ls -1 {_q(run_dir / CHECKPOINTS_DIR)} 2>/dev/null | grep -E '^{pattern}$' | sort -V | tail -n 1"
            " || true)",
            'stalled=0; before=""',
            'if [[ -f "$state" ]]; then read -r stalled before < "$state" || true; fi',
            '[[ "$stalled" =~ ^[0-9]+$ ]] || stalled=0',
            'if [[ "${SLURM_RESTART_COUNT:-0}" -gt 0 && "$newest" == "$before" ]]; then stalled=$((stalled + 1)); '
            "else stalled=0; fi",
            f"if (( stalled >= {MAX_STALLED_RESTARTS} )); then echo {stop} >&2; exit 1; fi",
            'mkdir -p "$(dirname "$state")"',
            'printf \'%s %s\\n\' "$stalled" "$newest" > "$state.tmp" && mv "$state.tmp" "$state"',
        ]

    def python_wrapper(self) -> str:
        """`$PYTHON` of the benchmarks.matrix array scripts: python inside the image."""
        return (
            "\n".join(
                [
                    "#!/bin/bash",
                    "# python of the fine-tuning array tasks (benchmarks.matrix scripts)",
                    *self.environment(),
                    f'exec {self.prefix()}{_q(self.cluster.python)} "$@"',
                ]
            )
            + "\n"
        )

    def analysis_script(self, config_path: Path) -> str:
        c = self.cluster
        lines = (
            self.header("mlmclm-analysis", "analysis", [f"--cpus-per-task={c.cpus_per_task}"])
            + self.body_start()
            + [f"{self.prefix()}{_q(c.python)} -m reproduce --config {_q(config_path)} --stage analysis"]
        )
        return "\n".join(lines) + "\n"

    def finetune_options(self) -> list[str]:
        c = self.cluster
        resources = (
            ["--gpus=1", f"--cpus-per-task={c.cpus_per_gpu}"]
            if c.gpus_per_node
            else [f"--cpus-per-task={c.cpus_per_task}"]
        )
        return resources + self.job_options("finetune")

    def finetune_lanes(self, n_models: int, jobs: list[dict]) -> tuple[int | None, int | None]:
        """(array throttle, lanes): without max_running_finetune_tasks, the configured throttle and no
        lanes; with it, a throttle and a number of lanes whose product with the arrays a model runs at
        once (those of `jobs`, one model's) stays within it."""
        from benchmarks import matrix

        cap, throttle = self.cluster.max_running_finetune_tasks, self.cluster.array_throttle
        if cap is None:
            return throttle, None
        arrays = sum(1 for size in matrix.array_sizes(jobs).values() if size) or 1
        if cap < arrays:
            raise ReproduceError(
                f"max_running_finetune_tasks {cap} in the cluster config is less than the {arrays} arrays one "
                f"model runs at once (finetune, ir_train, ir_eval): set it to {arrays} or more"
            )
        throttle = min(throttle or cap, cap // arrays)
        return throttle, min(n_models, max(1, cap // (arrays * throttle)))

    def write(self) -> dict:
        """Write every script and `submit.sh`; returns {"submit": path, "commands": [...], counts}."""
        import yaml

        from benchmarks import matrix

        cfg, out = self.cfg, out_dir(self.cfg)
        self.check_paths()
        self.logs.mkdir(parents=True, exist_ok=True)
        config_path = write_study_config(cfg)
        scripts = {"data": self.dir / "data.sbatch"}
        write_if_changed(scripts["data"], self.data_script(config_path))
        python = self.dir / "python.sh"
        write_if_changed(python, self.python_wrapper())
        python.chmod(0o755)
        # every job id goes to the ledger as soon as sbatch returns it (reproduce.ledger): status and
        # resubmit read it; afterok dependants of a failed job are cancelled (--kill-on-invalid-dep),
        # not left pending forever, and the analysis runs afterany on what finished
        commands = [
            "cd " + _q(self.dir),
            f"mkdir -p {_q(self.logs)}",
            *ledger_shell_function(out / LEDGER_FILE),
            "data=$(sbatch --parsable data.sbatch)",
            "data=${data%%;*}",
            'ledger "$data" data data data.sbatch "" ""',
        ]
        after_finetune, n_runs, n_tasks = [], 0, 0
        runs = pretraining_runs(cfg)
        run_var = {}
        for i, name in enumerate(runs):
            body = pretraining_config(cfg, name)
            if self.cluster.data_cache_dir:
                body["data"]["cache_dir"] = f"{self.cluster.data_cache_dir}/{name}"
                body["data"]["cache_limit"] = self.cluster.data_cache_limit
            run_config = out / "configs" / "pretraining" / f"{name}.yaml"
            write_if_changed(run_config, yaml.safe_dump(body, sort_keys=False))
            pt = self.dir / f"pretrain_{name}.sbatch"
            write_if_changed(pt, self.pretraining_script(name, run_config))
            # a CPT run starts from its base's final export, a CPT decay branch from the main CPT run's
            # kept state: after that run's job, not just the data
            source = starts_from(cfg, name)
            after = f'"${run_var[source]}"' if source else '"$data"'
            run_var[name] = f"pt{i}"
            commands += [
                f"pt{i}=$(sbatch --parsable --dependency=afterok:{after} {KILL_ON_INVALID_DEP} {pt.name})",
                f"pt{i}=${{pt{i}%%;*}}",
                f'ledger "$pt{i}" pretraining {name} {pt.name} "" ""',
            ]
        # the pretrained models after their run's job, the untrained references after the data job
        made_by = {c.name: f'"${run_var[c.run_name]}"' for c in study_checkpoints(cfg)}
        made_by.update(dict.fromkeys(random_init_models(cfg), '"$data"'))
        models = finetuned_models(cfg)
        throttle_n, lanes = self.finetune_lanes(len(models), finetune_jobs(cfg, models[0], check_models=False))
        throttle = f"%{throttle_n}" if throttle_n else ""
        arrays = {"throttle": throttle_n, "lanes": lanes, "models": models}
        write_if_changed(out / ARRAYS_FILE, json.dumps(arrays, indent=1, sort_keys=True) + "\n")
        model_arrays: list[list[str]] = []  # the array variables of each model, for the next in its lane
        for j, model in enumerate(models):
            jobs = finetune_jobs(cfg, model, check_models=False)
            jobs_path = finetune_dir(cfg) / "jobs" / f"{model}.jsonl"
            write_if_changed(jobs_path, "".join(json.dumps(j, sort_keys=True) + "\n" for j in jobs))
            ft = self.dir / f"finetune_{model}.sh"
            write_if_changed(
                ft,
                matrix.slurm_script(jobs_path, jobs, throttle_n, self.dir, self.finetune_options(), python=str(python)),
            )
            n_runs += len(jobs)
            lane_after = ""
            if lanes and j >= lanes:  # after the previous model of this lane, however its arrays ended
                lane_after = ",afterany:" + ":".join(f'"${v}"' for v in model_arrays[j - lanes])
            model_arrays.append([])
            for group, size in matrix.array_sizes(jobs).items():
                if size == 0:
                    continue
                dep = (
                    f'aftercorr:"$ir_train{j}" {KILL_ON_INVALID_DEP}'
                    if group == "ir_eval"
                    else f"afterok:{made_by[model]}{lane_after} {KILL_ON_INVALID_DEP}"
                )
                var = f"{group}{j}"
                model_arrays[-1].append(var)
                commands += [
                    f"{var}=$(sbatch --parsable --job-name=mlmclm-{group}-{model} --array=0-{size - 1}"
                    f"{throttle} --dependency={dep} {ft.name} {group})",
                    f"{var}=${{{var}%%;*}}",
                    f'ledger "${var}" finetune {model} {ft.name} {group} 0-{size - 1}{throttle}',
                ]
                after_finetune.append(f'"${var}"')
                n_tasks += size
        analysis = self.dir / "analysis.sbatch"
        write_if_changed(analysis, self.analysis_script(config_path))
        commands += [
            f"analysis=$(sbatch --parsable --dependency=afterany:{':'.join(after_finetune)} {analysis.name})",
            "analysis=${analysis%%;*}",
            'ledger "$analysis" analysis analysis analysis.sbatch "" ""',
            f'echo "job ledger: {out / LEDGER_FILE}; python -m reproduce status {out}"',
            'echo "submitted: data $data, pretraining'
            + "".join(f" ${v}" for v in run_var.values())
            + ', analysis $analysis"',
        ]
        # what resubmit may submit: these scripts, as written now (issue 66: it submitted the script the
        # ledger named, wherever it was)
        written = [scripts["data"], python, *(self.dir / f"pretrain_{n}.sbatch" for n in runs), analysis]
        written += [self.dir / f"finetune_{m}.sh" for m in models]
        hashes = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in written}
        write_if_changed(out / SCRIPTS_FILE, json.dumps(hashes, indent=1, sort_keys=True) + "\n")
        submit = self.dir / "submit.sh"
        write_if_changed(
            submit,
            "\n".join(
                [
                    "#!/bin/bash",
                    f"# Study {cfg.study} at scale {cfg.scale}: data -> {len(runs)} pretraining jobs -> "
                    f"fine-tuning arrays of {len(finetuned_models(cfg))} models ({n_runs} runs) -> "
                    "analysis, chained with --dependency.",
                    "# Written by `python -m reproduce`; run with bash to submit (from a login node).",
                    "set -euo pipefail",
                    # run by hand: a failing sbatch stops here, with the jobs queued so far in the ledger
                    "trap 'echo \"submit.sh: stopped at line $LINENO; the jobs it queued are in the ledger: "
                    "after the fix, python -m reproduce resubmit ${PWD%/slurm} submits the rest (python -m "
                    "reproduce status ${PWD%/slurm} lists them, for scancel)\" >&2' ERR",
                    *commands,
                ]
            )
            + "\n",
        )
        return {
            "submit": submit,
            "commands": commands,
            "pretraining_jobs": len(runs),
            "checkpoints": len(finetuned_models(cfg)),
            "finetune_runs": n_runs,
            "finetune_array_tasks": n_tasks,
        }


def submit_volume_problems(written: dict, cap: int | None) -> list[str]:
    """One line when the submission would queue more jobs than `cap` (array tasks counted one each)."""
    jobs = 2 + written["pretraining_jobs"] + written["finetune_array_tasks"]
    if cap is None or jobs <= cap:
        return []
    return [
        f"this submission queues {jobs:,} jobs (data, {written['pretraining_jobs']} pretraining, "
        f"{written['finetune_array_tasks']:,} fine-tuning array tasks, analysis), over max_submitted_jobs "
        f"{cap:,} of the cluster config (Slurm counts each array task): submit fewer checkpoints at a time "
        "(--sizes, --ratios or --checkpoints; a later submission skips finished runs), or raise the cap "
        "where your site allows"
    ]


def half_submitted(out: Path, submit: Path, stderr: str, ledger_before: int) -> str:
    """One line for a submit.sh that stopped: why (sbatch's last line), the jobs it queued before
    (from the ledger, which it appends as each sbatch returns) and the two ways on (issue 65)."""
    queued = [e.job for e in read_ledger(out)[0][ledger_before:]]
    why = ([line for line in stderr.strip().splitlines() if not line.startswith("submit.sh: ")] or ["(no message)"])[-1]
    if not queued:
        return f"submitting {submit} failed before any job was queued: {why}"
    return (
        f"submitting {submit} stopped after queuing {len(queued)} job(s) ({' '.join(queued)}): {why}; mend the "
        f"cause, then python -m reproduce resubmit {out} submits the rest, or scancel {' '.join(queued)} withdraws them"
    )


def reproduce_slurm(
    cfg: ReproduceConfig,
    cluster_file: str | Path,
    dry_run: bool = False,
    container: bool = True,
    log=print,
    mfu: float | None = None,
    gpu_tflops: float | None = None,
) -> dict:
    """Write the Slurm scripts of the DAG; submit them unless `dry_run` (then print the sbatch
    commands). At paper scale, also print what it costs (reproduce.cost, at `mfu` of `gpu_tflops`)
    and check that what the offline jobs read is in place (reproduce.preflight): a dry run lists
    what is missing, a submission stops at it."""
    import subprocess

    from benchmarks.matrix import not_ready
    from reproduce.cost import DEFAULT_MFU, H100_BF16_TFLOPS, cost_report
    from reproduce.preflight import image_commit_note, image_problems, preflight

    cluster = load_cluster_config(cluster_file)
    cfg = replace(
        cfg,
        data_dir=cfg.data_dir or cluster.data_dir,
        runs_dir=cfg.runs_dir or cluster.runs_dir,
        data_root=cfg.data_root or cluster.task_data,
    )
    paper = cfg.scale == "paper"
    too_short = requeue_time_problem(cfg, cluster, mfu or DEFAULT_MFU, gpu_tflops or H100_BF16_TFLOPS)
    if too_short:  # before anything is written
        raise ReproduceError(f"{cluster_file}: {too_short}")
    cost = cost_report(cfg, mfu or DEFAULT_MFU, gpu_tflops or H100_BF16_TFLOPS) if paper else []
    out_dir(cfg).mkdir(parents=True, exist_ok=True)
    written = SlurmWriter(cfg, cluster, container).write()
    log(
        f"slurm: study {cfg.study}: wrote {written['pretraining_jobs']} pretraining jobs, {written['checkpoints']} "
        f"checkpoints x {written['finetune_runs'] // max(1, written['checkpoints'])} = {written['finetune_runs']} "
        "fine-tuning runs "
        f"in {written['finetune_array_tasks']} array tasks, data and analysis jobs -> {written['submit'].parent}"
    )
    for line in cost:
        log(line)
    # a toy study in container mode runs in the image too: its check always (issue 65)
    problems = preflight(cfg, cluster, container) if paper else image_problems(cluster.image) if container else []
    note = image_commit_note(cluster.image) if container and not problems else None
    if note:
        log(note)
    problems += submit_volume_problems(written, cluster.max_submitted_jobs)
    if dry_run:
        if problems:
            log(f"preflight: {len(problems)} missing for the offline jobs (a submission stops here):")
            for line in problems:
                log("  " + line)
        elif paper:
            log("preflight: ready: the image, the prepared data, the tokenizer and the task data are in place")
        log("slurm: dry run, not submitted; the sbatch commands (bash " + str(written["submit"]) + " runs them):")
        for line in written["commands"]:
            log("  " + line)
        return written
    if Path(cluster_file).resolve() == (CONFIG_DIR / "cluster.example.yaml").resolve():
        raise ReproduceError(
            f"{cluster_file} is the example cluster config: copy it to "
            f"{CONFIG_DIR / 'cluster.yaml'} (or pass --cluster FILE) and set your partition, "
            "image and paths before submitting"
        )
    if problems:
        raise ReproduceError(not_ready(problems))
    out = out_dir(cfg)
    before = len(read_ledger(out)[0])
    result = subprocess.run(["bash", str(written["submit"])], capture_output=True, text=True)
    if result.returncode != 0:
        raise ReproduceError(half_submitted(out, written["submit"], result.stderr, before))
    log(result.stdout.strip())
    written["submitted"] = result.stdout.strip()
    return written
