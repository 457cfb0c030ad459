"""The DAG of a reproduction as Slurm jobs (`--slurm`, always at `--scale paper`): `SlurmWriter`
writes one script per job and `submit.sh`, which submits them chained with `--dependency`; cluster
specifics come from one YAML file (`ClusterConfig`, reproduce/slurm/cluster.py).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from reproduce.plan import (
    ReproduceConfig,
    ReproduceError,
    build_plan,
    finetune_dir,
    out_dir,
    with_absolute_folders,
    write_if_changed,
    write_study_config,
)
from reproduce.plan.inventory import check_no_links
from reproduce.slurm.cluster import (
    CONFIG_DIR,
    load_cluster_config,
    requeue_time_problem,
)
from reproduce.slurm.jobs import AnalysisJob, DataJob, FinetuneArrays, PretrainingJobs, ScriptBase, _q
from reproduce.slurm.ledger import (
    ARRAYS_FILE,
    KILL_ON_INVALID_DEP,
    LEDGER_FILE,
    SCRIPTS_FILE,
    ledger_shell_function,
    read_ledger,
    submission_lock,
)
from reproduce.slurm.permissions import check_writable, team_study, team_umask


class SlurmWriter(DataJob, PretrainingJobs, FinetuneArrays, AnalysisJob, ScriptBase):
    """Writes `<out>/slurm/*`: one script per job (reproduce/slurm/jobs.py, by job kind) and
    `submit.sh`, which submits them chained."""

    def write(self) -> dict:
        """Write every script and `submit.sh`; returns {"submit": path, "commands": [...], counts}."""
        import yaml

        from benchmarks import matrix

        cfg, plan, out = self.cfg, self.plan, out_dir(self.cfg)
        self.check_paths()
        self.logs.mkdir(parents=True, exist_ok=True)
        config_path = write_study_config(plan)
        scripts = {"data": self.dir / "data.sbatch"}
        write_if_changed(scripts["data"], self.data_script(config_path))
        python = self.dir / "python.sh"
        write_if_changed(python, self.python_wrapper())
        umask = os.umask(0)
        os.umask(umask)
        python.chmod(0o777 & ~umask)  # executable, and the group's to write in a team's study (umask 0002)
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
        runs = plan.run_names
        run_var = {}
        for i, run in enumerate(plan.runs):
            name, body = run.name, run.body()
            if self.cluster.data_cache_dir:
                body["data"]["cache_dir"] = f"{self.cluster.data_cache_dir}/{name}"
                body["data"]["cache_limit"] = self.cluster.data_cache_limit
            run_config = out / "configs" / "pretraining" / f"{name}.yaml"
            write_if_changed(run_config, yaml.safe_dump(body, sort_keys=False))
            pt = self.dir / f"pretrain_{name}.sbatch"
            write_if_changed(pt, self.pretraining_script(name, run_config))
            # a CPT run starts from its base's final export, a CPT decay branch from the main CPT run's
            # kept state: after that run's job, not just the data
            after = f'"${run_var[run.starts_from]}"' if run.starts_from else '"$data"'
            run_var[name] = f"pt{i}"
            commands += [
                f"pt{i}=$(sbatch --parsable --dependency=afterok:{after} {KILL_ON_INVALID_DEP} {pt.name})",
                f"pt{i}=${{pt{i}%%;*}}",
                f'ledger "$pt{i}" pretraining {name} {pt.name} "" ""',
            ]
        # the pretrained models after their run's job, the untrained references after the data job
        made_by = {model: f'"${run_var[run]}"' for model, run in plan.made_by.items()}
        made_by.update(dict.fromkeys(plan.random_init_models, '"$data"'))
        models = plan.finetuned_models
        throttle_n, lanes = self.finetune_lanes(len(models), plan.finetune_jobs(models[0]))
        throttle = f"%{throttle_n}" if throttle_n else ""
        arrays = {"throttle": throttle_n, "lanes": lanes, "models": models}
        write_if_changed(out / ARRAYS_FILE, json.dumps(arrays, indent=1, sort_keys=True) + "\n")
        model_arrays: list[list[str]] = []  # the array variables of each model, for the next in its lane
        for j, model in enumerate(models):
            jobs = plan.finetune_jobs(model)
            jobs_path = finetune_dir(cfg) / "jobs" / f"{model}.jsonl"
            write_if_changed(jobs_path, matrix.job_list_text(jobs))
            ft = self.dir / f"finetune_{model}.sh"
            write_if_changed(
                ft,
                matrix.slurm_script(jobs_path, jobs, throttle_n, self.dir, self.finetune_options(), python=str(python)),
            )
            n_runs += len(jobs)
            lane_after = ""
            if lanes and j >= lanes:  # however their arrays ended
                # after every earlier model of its lane, not only the last: an array cancelled early (its
                # pretraining lost) ends at once, and the next would start beside the one before it
                # (issue 89: 2 tasks against a cap of 1)
                earlier = [v for k in range(j - lanes, -1, -lanes) for v in model_arrays[k]]
                lane_after = ",afterany:" + ":".join(f'"${v}"' for v in earlier)
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
                    f"fine-tuning arrays of {len(models)} models ({n_runs} runs) -> "
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
            "checkpoints": len(models),
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


def half_submitted(out: Path, submit: Path, stderr: str, ledger_before: int, rewrite: str = "") -> str:
    """One line for a submit.sh that stopped: why (sbatch's last line), the jobs it queued before
    (from the ledger, which it appends as each sbatch returns) and the two ways on (issue 65); a cause
    in the scripts (a setting of the cluster config) needs them written again first (`rewrite`, the
    command that does it: issue 80)."""
    queued = [e.job for e in read_ledger(out)[0][ledger_before:]]
    why = ([line for line in stderr.strip().splitlines() if not line.startswith("submit.sh: ")] or ["(no message)"])[-1]
    if not queued:
        return f"submitting {submit} failed before any job was queued: {why}"
    return (
        f"submitting {submit} stopped after queuing {len(queued)} job(s) ({' '.join(queued)}): {why}; mend the "
        "cause (a setting of the cluster config: mend it, then write the scripts again with "
        f"{rewrite or 'the same command and --dry-run'}), then python -m reproduce resubmit {out} submits the "
        f"rest, or scancel {' '.join(queued)} withdraws them"
    )


def reproduce_slurm(
    cfg: ReproduceConfig,
    cluster_file: str | Path,
    dry_run: bool = False,
    container: bool = True,
    log=print,
    mfu: float | None = None,
    gpu_tflops: float | None = None,
    force: bool = False,
) -> dict:
    """Write the Slurm scripts of the DAG; submit them unless `dry_run` (then print the sbatch
    commands). One study per folder (reproduce.slurm.folder): a folder holding another submitted or
    finished study is refused, unless `force` and none of its jobs still runs. At paper scale, also
    print what it costs (reproduce.slurm.cost, at `mfu` of `gpu_tflops`) and check that what the
    offline jobs read is in place (reproduce.slurm.preflight): a dry run lists what is missing, a
    submission stops at it."""
    import subprocess

    from benchmarks.matrix import not_ready
    from reproduce.slurm.cost import DEFAULT_MFU, H100_BF16_TFLOPS, cost_report
    from reproduce.slurm.folder import check_study_folder, move_aside
    from reproduce.slurm.preflight import image_commit_note, image_problems, preflight

    cluster = load_cluster_config(cluster_file)
    # every folder absolute: the jobs run from the checkout (issue 80: a relative --out given elsewhere
    # made the data job write into the checkout and the analysis find no record)
    cfg = with_absolute_folders(cfg, data_dir=cluster.data_dir, runs_dir=cluster.runs_dir, data_root=cluster.task_data)
    team = team_study(out_dir(cfg), cluster.team)  # before anything is made (reproduce.slurm.jobs.ScriptBase)
    with team_umask(out_dir(cfg), team):  # a team's study: what this writes stays the group's
        plan = build_plan(cfg)  # once, with the cluster's folders; a selection outside the study fails here
        replaced = check_study_folder(cfg, dry_run, force)  # before anything is written
        check_no_links(plan)  # no write through a link inside the study (issue 88)
        paper = cfg.scale == "paper"
        too_short = requeue_time_problem(plan, cluster, mfu or DEFAULT_MFU, gpu_tflops or H100_BF16_TFLOPS)
        if too_short:  # before anything is written
            raise ReproduceError(f"{cluster_file}: {too_short}")
        cost = cost_report(plan, mfu or DEFAULT_MFU, gpu_tflops or H100_BF16_TFLOPS) if paper else []
        out_dir(cfg).mkdir(parents=True, exist_ok=True)
        if replaced:
            log(f"slurm: the study this folder held moved to {move_aside(out_dir(cfg), replaced)} (--force)")
        written = SlurmWriter(plan, cluster, container, team).write()
        log(
            f"slurm: study {cfg.study}: wrote {written['pretraining_jobs']} pretraining jobs, {written['checkpoints']} "
            f"checkpoints x {written['finetune_runs'] // max(1, written['checkpoints'])} = {written['finetune_runs']} "
            "fine-tuning runs "
            f"in {written['finetune_array_tasks']} array tasks, data and analysis jobs -> {written['submit'].parent}"
        )
        for line in cost:
            log(line)
        # a toy study in container mode runs in the image too: its check always (issue 65)
        problems = preflight(plan, cluster, container) if paper else image_problems(cluster.image) if container else []
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
        with submission_lock(out):  # one submission of a study at a time (issue 89)
            # before the first sbatch: submit.sh appends to the ledger, the jobs log into OUT/slurm
            check_writable(out, [out / LEDGER_FILE, out / "slurm", out / "slurm" / "slurm_logs"])
            before = len(read_ledger(out)[0])
            result = subprocess.run(["bash", str(written["submit"])], capture_output=True, text=True)
        if result.returncode != 0:
            rewrite = f"python -m reproduce --config {out / 'reproduce.yaml'} --slurm --cluster "
            rewrite += str(Path(cluster_file).absolute())
            rewrite += f"{'' if container else ' --no-container'} --dry-run"
            raise ReproduceError(half_submitted(out, written["submit"], result.stderr, before, rewrite))
        log(result.stdout.strip())
        written["submitted"] = result.stdout.strip()
        return written
