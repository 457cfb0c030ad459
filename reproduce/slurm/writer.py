"""The DAG of a reproduction as Slurm jobs (`--slurm`, always at `--scale paper`): `SlurmWriter`
writes one script per job and `submit.sh`, which submits them chained with `--dependency`; cluster
specifics come from one YAML file (`ClusterConfig`, reproduce/slurm/cluster.py).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import replace
from pathlib import Path

from contracts.layout import CHECKPOINT_PATTERN, CHECKPOINTS_DIR, FINISHED_FILE
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
from reproduce.slurm.cluster import (
    CONFIG_DIR,
    MAX_STALLED_RESTARTS,
    ClusterConfig,
    load_cluster_config,
    requeue_time_problem,
)
from reproduce.slurm.ledger import (
    ARRAYS_FILE,
    KILL_ON_INVALID_DEP,
    LEDGER_FILE,
    SCRIPTS_FILE,
    ledger_shell_function,
    read_ledger,
)
from reproduce.status_index import write_study_config


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
        # every job id goes to the ledger as soon as sbatch returns it (reproduce.slurm.ledger): status and
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
    commands). At paper scale, also print what it costs (reproduce.slurm.cost, at `mfu` of `gpu_tflops`)
    and check that what the offline jobs read is in place (reproduce.slurm.preflight): a dry run lists
    what is missing, a submission stops at it."""
    import subprocess

    from benchmarks.matrix import not_ready
    from reproduce.slurm.cost import DEFAULT_MFU, H100_BF16_TFLOPS, cost_report
    from reproduce.slurm.preflight import image_commit_note, image_problems, preflight

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
