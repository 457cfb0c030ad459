"""`--scale paper --dry-run`: the Slurm scripts of the whole DAG (15 pretraining jobs, 5,400 runs)."""

import json
import os
import re
import subprocess
import sys

import pytest
import yaml

from reproduce import cli, plan, slurm
from tests.reproduce.slurm_study import toy_cluster_body

EXAMPLE = slurm.CONFIG_DIR / "cluster.example.yaml"


def dry_run(out, *extra):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "reproduce",
            "--figure",
            "3",
            "--scale",
            "paper",
            "--out",
            str(out),
            "--dry-run",
            *extra,
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def paper(tmp_path_factory):
    out = tmp_path_factory.mktemp("paper")
    stdout = dry_run(out, "--cluster", str(EXAMPLE))
    return out, stdout


def test_example_cluster_config_loads():
    cluster = slurm.load_cluster_config(EXAMPLE)
    assert cluster.gpus_per_node * cluster.pretraining_nodes == 192
    assert cluster.image.endswith(".sif")


def test_the_example_sends_the_gpu_free_jobs_to_a_cpu_partition(paper):
    """Issue 65: the data and analysis jobs (no GPU) went to the GPU partition, the data job for 48 h."""
    out, _ = paper
    for name in ("data.sbatch", "analysis.sbatch"):
        text = (out / "slurm" / name).read_text()
        assert "#SBATCH --partition=cpu" in text and "--gpus" not in text, name
    assert "#SBATCH --time=04:00:00" in (out / "slurm" / "data.sbatch").read_text()
    assert "#SBATCH --partition=gpu" in (out / "slurm" / "pretrain_610m-clm-42k.sbatch").read_text()


def test_complete_set_of_scripts(paper):
    out, stdout = paper
    scripts_dir = out / "slurm"
    pretraining = sorted(scripts_dir.glob("pretrain_*.sbatch"))
    assert len(pretraining) == 15
    names = {p.name[len("pretrain_") : -len(".sbatch")] for p in pretraining}
    objectives = ("mlm20", "mlm30", "mlm40", "mlm50", "clm")
    assert names == {f"{s}-{o}-42k" for s in ("210m", "610m", "1b") for o in objectives}
    jobs = [
        json.loads(line) for f in (out / "finetune" / "jobs").glob("*.jsonl") for line in f.read_text().splitlines()
    ]
    assert len(jobs) == 15 * 12 * 6 * 5 == 5400
    assert len({j["id"] for j in jobs}) == 5400
    assert {j["config"]["lr"] for j in jobs} == {1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4}
    assert {j["config"]["seed"] for j in jobs} == {0, 1, 2, 3, 4}
    assert len(sorted(scripts_dir.glob("finetune_*.sh"))) == 15
    # the pretraining configs are the registry's paper configs of the released names
    body = yaml.safe_load((out / "configs" / "pretraining" / "610m-mlm30-42k.yaml").read_text())
    assert body["train"]["max_steps"] == 42000 and body["objective"]["mlm_ratio"] == 0.3
    assert body["model"]["preset"] == "610m" and body["train"]["global_batch_size"] == 1152
    assert body["data"]["path"] == slurm.load_cluster_config(EXAMPLE).data_dir
    assert body["data"]["cache_dir"] == "/tmp/mlm-vs-clm-mds/610m-mlm30-42k"  # node-local, one per run
    # submit.sh: data -> 15 pretraining jobs -> 45 arrays -> analysis, chained; printed, not submitted
    submit = (scripts_dir / "submit.sh").read_text()
    assert submit.count("sbatch --parsable") == 1 + 15 + 45 + 1
    assert len(re.findall(r'--dependency=afterok:"\$pt\d+"', submit)) == 30
    assert len(re.findall(r'--dependency=aftercorr:"\$ir_train\d+"', submit)) == 15
    analysis_dep = re.search(r"analysis=\$\(sbatch --parsable --dependency=afterany:(\S+) ", submit).group(1)
    assert analysis_dep.count("$") == 45
    assert "array=0-269%64" in submit and "array=0-29%64" in submit
    assert "dry run, not submitted" in stdout and stdout.count("sbatch --parsable") == 62


def test_scripts_are_valid_bash_and_run_in_the_image(paper):
    out, _ = paper
    cluster = slurm.load_cluster_config(EXAMPLE)
    scripts = sorted((out / "slurm").glob("*.s*"))
    assert len(scripts) == 1 + 15 + 15 + 1 + 1 + 1  # data, pretraining, fine-tuning, analysis, python.sh, submit
    for script in scripts:
        result = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        assert result.returncode == 0, f"{script}: {result.stderr}"
    binds = [cluster.data_dir, cluster.runs_dir, cluster.hf_cache, str(out), str(plan.REPO_ROOT)]
    for script in [
        *(out / "slurm").glob("pretrain_*.sbatch"),
        out / "slurm" / "python.sh",
        out / "slurm" / "analysis.sbatch",
        out / "slurm" / "data.sbatch",
    ]:
        text = script.read_text()
        assert "apptainer exec --nv --cleanenv --bind " in text and cluster.image in text, script
        bind = re.search(r"--bind (\S+)", text).group(1).split(",")
        assert all(b in bind for b in binds), script
    pt = (out / "slurm" / "pretrain_1b-clm-42k.sbatch").read_text()
    for needle in (
        "#SBATCH --nodes=24",
        "#SBATCH --gpus-per-node=8",
        "#SBATCH --requeue",
        "--partition=gpu",
        'composer -n 8 --world_size 192 --node_rank "$SLURM_NODEID"',
        "-m pretraining train",
        "scontrol requeue",
        "FINISHED.json",
    ):
        assert needle in pt
    ft = (out / "slurm" / "finetune_1b-clm-42k.sh").read_text()
    assert f"PYTHON=${{PYTHON:-{out}/slurm/python.sh}}" in ft and "#SBATCH --gpus=1" in ft
    assert "-m reproduce --config" in (out / "slurm" / "analysis.sbatch").read_text()


def test_no_container_runs_the_same_commands(tmp_path, capsys):
    argv = ["--scale", "paper", "--sizes", "210m", "--cluster", str(EXAMPLE), "--dry-run"]
    assert cli.main([*argv, "--out", str(tmp_path / "image")]) == 0
    assert cli.main([*argv, "--out", str(tmp_path / "bare"), "--no-container"]) == 0
    capsys.readouterr()
    image, bare = tmp_path / "image" / "slurm", tmp_path / "bare" / "slurm"
    for script in bare.glob("*.s*"):
        assert "apptainer" not in script.read_text()
        with_image = (image / script.name).read_text().replace(str(tmp_path / "image"), str(tmp_path / "bare"))
        commands = [line for line in script.read_text().splitlines() if "pretraining train" in line]
        for line in commands:  # the same command line, only without the `apptainer exec ... IMAGE` prefix
            assert (
                re.sub(
                    r"apptainer exec .*?\.sif ",
                    "",
                    next(text for text in with_image.splitlines() if "pretraining train" in text),
                )
                == line
            )
    assert "composer -n 8" in (bare / "pretrain_210m-clm-42k.sbatch").read_text()


def test_submitting_with_the_example_config_is_refused(tmp_path, capsys):
    assert cli.main(["--scale", "paper", "--sizes", "210m", "--out", str(tmp_path), "--cluster", str(EXAMPLE)]) == 2
    assert "example cluster config" in capsys.readouterr().err


def test_bad_cluster_config_names_the_field(tmp_path, capsys):
    bad = tmp_path / "cluster.yaml"
    bad.write_text(EXAMPLE.read_text().replace("gpus_per_node: 8", "gpus_per_node: eight"))
    assert cli.main(["--scale", "paper", "--out", str(tmp_path / "o"), "--cluster", str(bad), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "gpus_per_node" in err and str(bad) in err


def test_matrix_expand_can_skip_the_model_check(tmp_path):
    from benchmarks.kinds.checkpoint import ModelLoadError
    from benchmarks.matrix import expand
    from benchmarks.run import RunConfig

    base = RunConfig(model="-", task="sst2", lr=1.0, seed=0, out=str(tmp_path))
    future = str(tmp_path / "not-yet" / "hf" / "step-42")
    with pytest.raises(ModelLoadError):
        expand(base, [future], ["sst2"], [1e-4], [0])
    jobs = expand(base, [future], ["sst2"], [1e-4], [0], check_models=False)
    assert [j["config"]["model"] for j in jobs] == [future]


def test_a_newline_in_a_cluster_option_is_refused_before_any_script_is_written(tmp_path, capsys):
    """A newline in sbatch_options (or partition, account, ...) became a shell line of its own in
    every script (docs/reliability.md)."""
    bad = tmp_path / "cluster.yaml"
    body = yaml.safe_load(EXAMPLE.read_text())
    body["sbatch_options"] = ["--constraint=a100\ntouch PWNED"]
    bad.write_text(yaml.safe_dump(body))
    out = tmp_path / "o"
    assert cli.main(["--scale", "paper", "--out", str(out), "--cluster", str(bad), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(bad) in err[0] and "sbatch_options '--constraint=a100\\ntouch PWNED'" in err[0], err
    assert not out.exists()


def test_each_job_kind_has_its_own_partition_time_and_memory_and_env_reaches_the_container(tmp_path):
    """Issue 53, item 4: one partition and one set of options for every job put the CPU data job on
    the GPU partition for 48 h with no --mem; `jobs.<kind>` sets a kind's partition, time, mem and
    options, and `env:` is exported in every job and passed into the container (--cleanenv)."""
    body = yaml.safe_load(EXAMPLE.read_text())
    body["jobs"] = {
        "data": {"partition": "cpu", "time": "12:00:00", "mem": "64G"},
        "pretraining": {"mem": "0", "sbatch_options": ["--exclusive"]},
        "finetune": {"partition": "gpu-short", "mem": "32G"},
    }
    body["env"] = {"NCCL_DEBUG": "INFO", "FI_PROVIDER": "efa"}
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump(body))
    out = tmp_path / "o"
    dry_run(out, "--cluster", str(cluster), "--sizes", "210m", "--ratios", "0.4", "--no-clm", "--tasks", "sst2")
    scripts = out / "slurm"
    data = (scripts / "data.sbatch").read_text()
    assert "#SBATCH --partition=cpu" in data and "#SBATCH --time=12:00:00" in data and "#SBATCH --mem=64G" in data
    pretraining = (scripts / "pretrain_210m-mlm40-42k.sbatch").read_text()
    assert "#SBATCH --partition=gpu" in pretraining and "#SBATCH --time=48:00:00" in pretraining
    assert "#SBATCH --mem=0" in pretraining and "#SBATCH --exclusive" in pretraining
    analysis = (scripts / "analysis.sbatch").read_text()
    assert "#SBATCH --partition=gpu" in analysis and "--mem" not in analysis
    finetune = "\n".join(p.read_text() for p in scripts.glob("*.sh") if "array" in p.read_text())
    assert "--partition=gpu-short" in finetune and "--mem=32G" in finetune
    for script in (data, pretraining):
        assert "export NCCL_DEBUG=INFO" in script and "export APPTAINERENV_NCCL_DEBUG=INFO" in script
        assert "export APPTAINERENV_FI_PROVIDER=efa" in script


@pytest.mark.parametrize(
    ("jobs", "env", "field"),
    [
        ({"gpu": {"time": "1:00:00"}}, {}, "jobs.gpu: not a job kind"),
        ({"data": {"memory": "8G"}}, {}, "jobs.data.memory: not a job setting"),
        ({"data": {"mem": "8G\ntouch PWNED"}}, {}, "jobs.data"),
        ({}, {"NCCL-DEBUG": "INFO"}, "env.NCCL-DEBUG: not an environment variable name"),
        ({}, {"TOKEN": "a\nb"}, "env.TOKEN: one line only"),
        ({"finetune": {"time": "4 hours"}}, {}, "jobs.finetune.time: '4 hours' is not a Slurm time limit"),
        ({"data": {"partition": "cpu --exclusive"}}, {}, "jobs.data.partition: 'cpu --exclusive' is not a Slurm"),
        ({"data": {"mem": "64 GB"}}, {}, "jobs.data.mem: '64 GB' is not a Slurm memory size"),
    ],
)
def test_a_bad_job_kind_setting_or_env_is_one_line_naming_the_field(tmp_path, capsys, jobs, env, field):
    body = yaml.safe_load(EXAMPLE.read_text())
    body.update(jobs=jobs, env=env)
    bad = tmp_path / "cluster.yaml"
    bad.write_text(yaml.safe_dump(body))
    out = tmp_path / "o"
    assert cli.main(["--scale", "paper", "--out", str(out), "--cluster", str(bad), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and field in err[0] and str(bad) in err[0], err
    assert not out.exists()


def _example_cluster_and_recording_sbatch(tmp_path, monkeypatch, **settings):
    """The example cluster config with CPU jobs and `settings`, written to tmp_path, and an sbatch on
    PATH that only appends its arguments to the returned file (and answers job id 1)."""
    body = yaml.safe_load(EXAMPLE.read_text())
    body.update(gpus_per_node=0, **settings)
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump(body))
    calls = tmp_path / "sbatch_calls"
    fake = tmp_path / "bin" / "sbatch"
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/bash\necho "$@" >> {calls}\necho 1\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:{os.environ['PATH']}")
    return body, cluster, calls


def test_a_submission_over_the_cluster_job_cap_is_refused_before_any_sbatch(tmp_path, capsys, monkeypatch):
    """Issue 53, item 3: 4,950 array tasks exceed common per-user submit limits (Slurm's MaxSubmitJobs
    counts each task). Over `max_submitted_jobs`, the dry run lists it and a submission stops in one
    line before any sbatch (an sbatch that only records its calls shows none was made)."""
    body, cluster, calls = _example_cluster_and_recording_sbatch(
        tmp_path, monkeypatch, image=str(tmp_path / "img.sif"), max_submitted_jobs=8
    )
    argv = ["--figure", "3", "--scale", "toy", "--slurm", "--no-container", "--cluster", str(cluster)]
    argv += ["--out", str(tmp_path / "out"), "--sizes", "toy_s", "--ratios", "0.4", "--tasks", "sst2,qqp"]
    argv += ["--lrs", "5e-4", "--seeds", "0"]
    assert cli.main([*argv, "--dry-run"]) == 0
    # data, 2 pretraining runs, 3 models x 2 tasks, analysis
    assert "this submission queues 10 jobs (data, 2 pretraining, 6 fine-tuning array tasks, analysis), over " in (
        capsys.readouterr().out
    )
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "over max_submitted_jobs 8 of the cluster config" in err[0]
    assert not calls.exists()
    body["max_submitted_jobs"] = 0
    cluster.write_text(yaml.safe_dump(body))
    assert cli.main([*argv, "--dry-run"]) == 2
    assert "max_submitted_jobs must be >= 1" in capsys.readouterr().err


def test_a_global_limit_on_running_fine_tuning_tasks_runs_the_arrays_in_lanes(tmp_path, capsys):
    """Issue 53, item 4: array_throttle limits one array; with max_running_finetune_tasks the models'
    arrays run in lanes (a model after the previous model of its lane, afterany), so lanes x arrays
    per model x throttle stays within the limit."""
    body = yaml.safe_load(EXAMPLE.read_text())
    body.update(image=str(tmp_path / "img.sif"), gpus_per_node=0, array_throttle=1, max_running_finetune_tasks=2)
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump(body))
    argv = ["--figure", "3", "--scale", "toy", "--slurm", "--no-container", "--cluster", str(cluster), "--dry-run"]
    argv += ["--out", str(tmp_path / "out"), "--sizes", "toy_s", "--ratios", "0.4", "--tasks", "sst2,qqp"]
    argv += ["--lrs", "5e-4", "--seeds", "0"]
    assert cli.main(argv) == 0
    capsys.readouterr()
    submit = (tmp_path / "out" / "slurm" / "submit.sh").read_text()
    deps = dict(re.findall(r"(finetune\d)=\$\(sbatch .*?--array=0-1%1 --dependency=(\S+) ", submit))
    # 3 models, 1 array each (no IR task), throttle 1: 2 lanes; the third model waits for the first
    assert deps == {
        "finetune0": 'afterok:"$pt0"',
        "finetune1": 'afterok:"$pt1"',
        "finetune2": 'afterok:"$data",afterany:"$finetune0"',
    }
    assert "--kill-on-invalid-dep=yes finetune_toy_s-random-init.sh" in submit
    writer = slurm.SlurmWriter(
        plan.build_plan(plan.ReproduceConfig(out=str(tmp_path / "x"))), slurm.load_cluster_config(cluster)
    )
    three_arrays = [{"group": g, "index": 0} for g in ("finetune", "ir_train", "ir_eval")]
    with pytest.raises(plan.ReproduceError, match="less than the 3 arrays one model runs at once"):
        writer.finetune_lanes(15, three_arrays)  # a model alone would run 3 tasks at once
    body.update(array_throttle=64, max_running_finetune_tasks=400)
    cluster.write_text(yaml.safe_dump(body))
    writer = slurm.SlurmWriter(
        plan.build_plan(plan.ReproduceConfig(out=str(tmp_path / "x"))), slurm.load_cluster_config(cluster)
    )
    assert writer.finetune_lanes(15, three_arrays) == (64, 2)  # 2 x 3 x 64 = 384 <= 400


@pytest.mark.parametrize(
    ("setting", "value"),
    [("finetune_time", "4 hours"), ("pretraining_time", "48h"), ("partition", "cpu --exclusive"), ("qos", "a;b")],
)
def test_a_value_sbatch_would_refuse_is_one_line_before_anything_is_written(tmp_path, capsys, setting, value):
    """Issue 65: `time: "4 hours"` passed the check, and submit.sh queued the data and pretraining
    jobs, then died at the first array; a partition with a space went into #SBATCH --partition=."""
    body = yaml.safe_load(EXAMPLE.read_text())
    body[setting] = value
    bad = tmp_path / "cluster.yaml"
    bad.write_text(yaml.safe_dump(body))
    out = tmp_path / "o"
    assert cli.main(["--scale", "paper", "--out", str(out), "--cluster", str(bad), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{setting}: {value!r} is not a Slurm" in err[0] and str(bad) in err[0], err
    assert not out.exists()


def test_the_slurm_formats_sbatch_takes_pass():
    for value in ("30", "30:00", "04:00:00", "2-00", "2-12:00", "2-00:00:00", "UNLIMITED"):
        slurm.check_slurm_value("finetune_time", value)
    for value in ("0", "64G", "500M", "1t", 4096, "16GB", "500mb"):  # issue 80: sbatch takes the B too
        slurm.check_slurm_value("jobs.data.mem", value)
    for value in ("gpu", "gpu,gpu-short", "a100_80g", "proj.123"):
        slurm.check_slurm_value("partition", value)
    slurm.check_slurm_value("account", None)


def test_resubmit_keeps_the_throttle_and_lanes_of_arrays_the_first_submission_never_queued(
    tmp_path, monkeypatch, capsys
):
    """Issue 65, item 2: a DAG that stopped before its arrays (data and pretraining queued, then an
    sbatch failed) was resubmitted with `--array=0-1`, no throttle; now the throttle and lanes come
    from OUT/slurm/arrays.json, written with the scripts. Slurm's answer is stubbed (the data and
    pretraining jobs running); the local-Slurm test runs a real resubmission."""
    from reproduce.slurm import resubmit
    from reproduce.slurm.ledger import ARRAYS_FILE, LedgerEntry, SlurmState, append_ledger

    # one array a model: throttle 2, one lane
    body = toy_cluster_body(tmp_path, "debug", array_throttle=2, max_running_finetune_tasks=2)
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump(body))
    out = tmp_path / "out"
    argv = ["--figure", "3", "--scale", "toy", "--slurm", "--no-container", "--cluster", str(cluster), "--dry-run"]
    argv += ["--out", str(out), "--sizes", "toy_s", "--ratios", "0.4", "--tasks", "sst2,qqp", "--pretrain-steps", "8"]
    assert cli.main(argv) == 0, capsys.readouterr().err
    capsys.readouterr()
    arrays = json.loads((out / ARRAYS_FILE).read_text())
    assert arrays == {"throttle": 2, "lanes": 1, "models": ["toy_s-mlm40-8", "toy_s-clm-8", "toy_s-random-init"]}
    for job, kind, name, script in [
        ("101", "data", "data", "data.sbatch"),
        ("102", "pretraining", "toy_s-mlm40-8", "pretrain_toy_s-mlm40-8.sbatch"),
        ("103", "pretraining", "toy_s-clm-8", "pretrain_toy_s-clm-8.sbatch"),
    ]:
        append_ledger(out, LedgerEntry(job, kind, name, script))
    running = {job: SlurmState("RUNNING") for job in ("101", "102", "103")}
    monkeypatch.setattr(resubmit, "query_slurm", lambda jobs: (running, ["squeue"]))
    assert cli.main(["resubmit", str(out), "--dry-run"]) == 0, capsys.readouterr().err
    shown = [line for line in capsys.readouterr().out.splitlines() if "sbatch --parsable" in line]
    arrays_shown = [line for line in shown if "--array=" in line]
    assert len(arrays_shown) == 3 and all("--array=0-1%2" in line for line in arrays_shown), shown
    # one lane: each model's array after the previous model's (afterany), the first after its maker
    assert "afterok:102" in arrays_shown[0] and "afterany" not in arrays_shown[0]
    assert "afterok:103" in arrays_shown[1] and "afterany:$finetune0" in arrays_shown[1], arrays_shown
    assert "afterok:101" in arrays_shown[2] and "afterany:$finetune1" in arrays_shown[2], arrays_shown


def test_a_submission_that_stops_half_way_names_the_queued_jobs_and_the_ways_on(tmp_path, capsys, monkeypatch):
    """Issue 65, item 3: submit.sh queued the data and pretraining jobs, died at the first array, and
    the one-line error said neither that jobs were queued nor what to do. An sbatch that queues three
    jobs and refuses the fourth stands in for the cluster."""
    body = yaml.safe_load(EXAMPLE.read_text())
    body.update(image=str(tmp_path / "img.sif"), gpus_per_node=0)
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump(body))
    count = tmp_path / "sbatch_count"
    fake = tmp_path / "bin" / "sbatch"
    fake.parent.mkdir()
    fake.write_text(
        f"#!/bin/bash\nn=$(( $(cat {count} 2>/dev/null || echo 0) + 1 )); echo $n > {count}\n"
        'if [ "$n" -gt 3 ]; then echo "sbatch: error: Invalid --time specification" >&2; exit 1; fi\n'
        'echo "10$n"\n'
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:{os.environ['PATH']}")
    out = tmp_path / "out"
    argv = ["--figure", "3", "--scale", "toy", "--slurm", "--no-container", "--cluster", str(cluster)]
    argv += ["--out", str(out), "--sizes", "toy_s", "--ratios", "0.4", "--tasks", "sst2", "--lrs", "5e-4"]
    assert cli.main([*argv, "--seeds", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "stopped after queuing 3 job(s) (101 102 103): sbatch: error: Invalid --time specification" in err[0]
    assert f"python -m reproduce resubmit {out} submits the rest, or scancel 101 102 103 withdraws them" in err[0]
    # issue 80: a cause in the scripts needs them written again first; the line says how, and that works
    rewrite = err[0].split("write the scripts again with python -m reproduce ")[1].split(")")[0].split()
    assert rewrite[:2] == ["--config", str(out / "reproduce.yaml")] and rewrite[-1] == "--dry-run", rewrite
    assert cli.main(rewrite) == 0, capsys.readouterr().err
    capsys.readouterr()
    # run by hand, submit.sh says the same at its end
    count.write_text("0")
    (out / "slurm" / "ledger.jsonl").unlink()
    by_hand = subprocess.run(["bash", str(out / "slurm" / "submit.sh")], capture_output=True, text=True)
    assert by_hand.returncode != 0
    assert by_hand.stderr.strip().splitlines()[-1].startswith("submit.sh: stopped at line ")
    assert f"python -m reproduce resubmit {out} submits the rest" in by_hand.stderr


def test_a_toy_study_in_container_mode_checks_its_image_before_any_sbatch(tmp_path, capsys, monkeypatch):
    """Issue 65, item 6: a toy `--slurm` study in container mode skipped the image preflight, so its
    jobs failed on the nodes one by one. Now: absent, not a file, a stand-in of 4 kB, then a good
    image from another commit (a note, not a refusal)."""
    from container.build import write_build_record
    from container.definition import LOCK
    from tests.reproduce.slurm_study import stand_in_image

    image = tmp_path / "img.sif"
    _, cluster, calls = _example_cluster_and_recording_sbatch(tmp_path, monkeypatch, image=str(image))
    argv = ["--figure", "3", "--scale", "toy", "--slurm", "--cluster", str(cluster), "--out", str(tmp_path / "out")]
    argv += ["--sizes", "toy_s", "--ratios", "0.4", "--tasks", "sst2", "--lrs", "5e-4", "--seeds", "0"]

    assert cli.main([*argv, "--dry-run"]) == 0
    assert f"preflight: 1 missing for the offline jobs (a submission stops here):\n  image {image} does not exist" in (
        capsys.readouterr().out
    )
    image.mkdir()
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"image {image} is not a regular file (a folder, FIFO or device)" in err[0], err
    image.rmdir()
    stand_in_image(image, 4096)
    write_build_record(image, "0" * 40, LOCK)
    assert cli.main(argv) == 2
    assert "is 4,096 bytes, too small for an image of this project" in capsys.readouterr().err
    assert not calls.exists()  # nothing submitted

    stand_in_image(image)
    write_build_record(image, "0" * 40, LOCK)
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "image: built from commit 000000000000, this checkout is " in out and "the same requirements.lock" in out
    assert len(calls.read_text().splitlines()) == 7  # data, 2 pretraining, 3 models x 1 array, analysis


def test_resubmit_submits_only_the_scripts_the_study_wrote_unchanged(tmp_path, monkeypatch, capsys):
    """Issue 66, item 1: resubmit sent the ledger's `script` field to sbatch (a script outside
    OUT/slurm, or `--wrap=touch FILE`, read by sbatch as an option). The scripts are the study's own,
    checked against the sha256 recorded when they were written (OUT/slurm/scripts.json): a changed
    script, a link in its place or a missing record is one line before any sbatch line."""
    from reproduce.slurm import resubmit
    from reproduce.slurm.ledger import SCRIPTS_FILE, LedgerEntry, append_ledger

    body = toy_cluster_body(tmp_path, "debug", array_throttle=2)
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump(body))
    out = tmp_path / "out"
    argv = ["--figure", "3", "--scale", "toy", "--slurm", "--no-container", "--cluster", str(cluster), "--dry-run"]
    argv += ["--out", str(out), "--sizes", "toy_s", "--ratios", "0.4", "--tasks", "sst2", "--pretrain-steps", "8"]
    assert cli.main(argv) == 0, capsys.readouterr().err
    capsys.readouterr()
    append_ledger(out, LedgerEntry("101", "data", "data", "--wrap=touch /tmp/pwned"))  # the ledger's field
    monkeypatch.setattr(resubmit, "query_slurm", lambda jobs: ({}, ["squeue"]))
    assert cli.main(["resubmit", str(out), "--dry-run"]) == 0, capsys.readouterr().err
    shown = capsys.readouterr().out
    assert "data.sbatch" in shown and "--wrap" not in shown

    script = out / "slurm" / "pretrain_toy_s-clm-8.sbatch"
    original = script.read_text()
    script.write_text(original + "touch /tmp/pwned\n")
    assert cli.main(["resubmit", str(out), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{script}: changed since the study wrote it" in err[0], err
    script.unlink()
    (tmp_path / "mine.sbatch").write_text(original)
    script.symlink_to(tmp_path / "mine.sbatch")
    assert cli.main(["resubmit", str(out), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()  # the containment rule's line (issue 78)
    assert len(err) == 1 and f"({script} is a link: links are not followed into reads or writes)" in err[0], err
    script.unlink()
    script.write_text(original)
    (out / SCRIPTS_FILE).unlink()
    assert cli.main(["resubmit", str(out), "--dry-run"]) == 2
    assert "no record of the scripts the study wrote: write the study again" in capsys.readouterr().err
