"""The Slurm scripts of a study, one class per job kind (reproduce/slurm/writer.py assembles them
into `SlurmWriter`): what is common to every script (`ScriptBase`: the container prefix, the binds,
the environment, the #SBATCH header), then the data job, the pretraining jobs (with their stall
guard), the fine-tuning arrays (the Python wrapper they call, their options and lanes) and the
analysis job. Add a job kind here (docs/architecture.md, "A new Slurm job kind")."""

from __future__ import annotations

import re
from pathlib import Path

from contracts.layout import CHECKPOINT_PATTERN, CHECKPOINTS_DIR, FINISHED_FILE
from reproduce.plan import (
    REPO_ROOT,
    ReproduceError,
    StudyPlan,
    data_dir,
    out_dir,
    pretraining_dir,
    task_data_root,
    world_dir,
)
from reproduce.slurm.cluster import (
    MAX_STALLED_RESTARTS,
    ClusterConfig,
)
from reproduce.slurm.permissions import TEAM_UMASK, team_study


def _q(text) -> str:
    import shlex

    return shlex.quote(str(text))


class ScriptBase:
    """What every script of the study shares."""

    def __init__(self, plan: StudyPlan, cluster: ClusterConfig, container: bool = True, team: bool | None = None):
        self.plan, self.cluster, self.container = plan, cluster, container
        self.cfg = plan.config
        # a team's study (issue 89), decided once, before the writer makes the study folder (under a
        # umask of 002 the new folder itself would read as group-writable)
        self.team = team_study(out_dir(self.cfg), cluster.team) if team is None else team
        self.dir = out_dir(self.cfg) / "slurm"
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
        if self.team:  # what the jobs create stays the group's (issue 89)
            lines.append(f"umask {TEAM_UMASK:04o}")
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


class DataJob:
    """The data job: prepares the pretraining data (and the toy world) before anything trains."""

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


class PretrainingJobs:
    """One job per pretraining run, requeued by the time-limit signal, with a guard for stalled restarts."""

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
        if c.data_cache_dir:  # node-local, one folder per Unix user (issue 89), named when the job runs
            train += f' data.cache_dir={_q(c.data_cache_dir)}-"$(id -un)"/{_q(name)}'
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


class FinetuneArrays:
    """The fine-tuning job arrays (`python -m benchmarks job`), their wrapper, options and lanes."""

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


class AnalysisJob:
    """The analysis job: the tables, figures and audit once every array has ended."""

    def analysis_script(self, config_path: Path) -> str:
        c = self.cluster
        lines = (
            self.header("mlmclm-analysis", "analysis", [f"--cpus-per-task={c.cpus_per_task}"])
            + self.body_start()
            + [f"{self.prefix()}{_q(c.python)} -m reproduce --config {_q(config_path)} --stage analysis"]
        )
        return "\n".join(lines) + "\n"
