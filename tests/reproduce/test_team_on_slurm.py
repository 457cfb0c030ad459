"""Issue 89 on the local Slurm cluster: a study shared by two Unix users of one group, set up as
docs/cluster.md's recipe says (a setgid group folder; the owner's umask 002, the teammate's 022).

The owner submits the toy DAG with every job held (`sbatch --hold`: sbatch 22.05 ignores SBATCH_HOLD);
the CLM pretraining job and one fine-tuning task are cancelled; the teammate runs status, a user outside
the group is refused in one line with no job queued, the teammate resubmits; another task is cancelled
and both users resubmit it at the same moment; the jobs are released. Then: every job of either user
is in the ledger, none FAILED (a permission or a lock), Slurm's own start and end times show at most
the lane's one fine-tuning task at a time, the study finishes, every file the users and jobs made
(study, runs, data) is group-writable, and each user's pretraining jobs cached shards in their own
folder. It replaces issue 80's lanes test, whose jobs were never held (SBATCH_HOLD)."""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from reproduce.slurm.ledger import read_ledger
from tests.reproduce.slurm_study import held_sbatch, toy_cluster_body
from tests.reproduce.test_resubmit_on_slurm import _most_at_once, _task_spans

REPO = Path(__file__).resolve().parents[2]
GROUP, OWNER, MATE, STRANGER = "mlmclm-team", "mlmclm-owner", "mlmclm-mate", "mlmclm-stranger"


def _ensure_users() -> None:
    """The group and its two members, and a user outside it (created once: useradd, as root)."""
    if os.geteuid() != 0 or shutil.which("useradd") is None:
        pytest.skip("needs root and useradd (two Unix users in one group)")
    try:
        grp.getgrnam(GROUP)
    except KeyError:
        subprocess.run(["groupadd", GROUP], check=True)
    for user, group in ((OWNER, GROUP), (MATE, GROUP), (STRANGER, "nogroup")):
        try:
            pwd.getpwnam(user)
        except KeyError:
            subprocess.run(["useradd", "-M", "-N", "-g", group, "-s", "/bin/bash", user], check=True)


def _as(user: str, umask: str, env: dict, *argv: str, background: bool = False):
    """`python -m reproduce ARGV` as `user` with `umask`, from the checkout (its packages, not a copy)."""
    command = f"umask {umask}; exec {shlex.quote(sys.executable)} -m reproduce {shlex.join(argv)}"
    run = ["runuser", "-u", user, "--", "bash", "-c", command]
    if background:
        return subprocess.Popen(run, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return subprocess.run(run, env=env, cwd=REPO, capture_output=True, text=True, timeout=600)


@contextlib.contextmanager
def _reachable_by_other_users(*paths: str):
    """Let other users traverse the folders above `paths` (the interpreter, the checkout), for the test:
    a pyenv Python under /root (0700) cannot be run by another user. Each folder's mode is restored."""
    changed = {}
    for path in paths:
        for folder in Path(os.path.realpath(path)).parents:
            mode = folder.stat().st_mode
            if not mode & 0o001 and folder not in changed:
                changed[folder] = mode
                folder.chmod((mode & 0o7777) | 0o001)
    try:
        yield
    finally:
        for folder, mode in changed.items():
            folder.chmod(mode & 0o7777)


@pytest.mark.slurm
@pytest.mark.e2e
def test_a_team_of_two_users_shares_a_study_on_slurm(local_slurm):
    _ensure_users()
    base = Path(tempfile.mkdtemp(prefix="team-", dir="/tmp"))
    try:
        with _reachable_by_other_users(sys.executable, sys.prefix, str(REPO), sys.base_prefix):
            _team_study(local_slurm, base)
    finally:
        for job in local_slurm.command("squeue", "-h", "-o", "%i", check=False).stdout.split():
            local_slurm.command("scancel", job, check=False)
        shutil.rmtree(base, ignore_errors=True)


def _team_study(local_slurm, base: Path) -> None:
    import yaml

    base.chmod(0o755)
    # docs/cluster.md, "A study shared by a team": a folder of the group, setgid, group-writable
    project = base / "project"
    project.mkdir()
    shutil.chown(project, group=GROUP)
    project.chmod(0o2775)
    scratch = base / "scratch"  # the nodes' temporary space: everyone may create folders there
    scratch.mkdir()
    scratch.chmod(0o1777)
    homes = {}
    for user in (OWNER, MATE, STRANGER):
        homes[user] = base / f"home-{user}"
        homes[user].mkdir()
        shutil.chown(homes[user], user=user)
    cluster = project / "cluster.yaml"
    body = toy_cluster_body(project, "debug", array_throttle=1, max_running_finetune_tasks=1)
    body.update(data_cache_dir=str(scratch / "cache"), pretraining_time="00:30:00", finetune_time="00:30:00")
    body.update(analysis_time="00:30:00", data_time="00:30:00", python=sys.executable)
    cluster.write_text(yaml.safe_dump(body))
    cluster.chmod(0o644)
    # every sbatch holds its job (sbatch 22.05 ignores SBATCH_HOLD): released once the team has acted
    held = held_sbatch(base, local_slurm.env["PATH"])

    def env(user: str, holding: bool = True) -> dict:
        path = held if holding else local_slurm.env["PATH"]
        return {"SLURM_CONF": local_slurm.env["SLURM_CONF"], "PATH": path, "HOME": str(homes[user]), "USER": user}

    out = project / "out"
    argv = ["--figure", "3", "--scale", "toy", "--slurm", "--no-container", "--cluster", str(cluster)]
    argv += ["--out", str(out), "--sizes", "toy_s", "--ratios", "0.4", "--tasks", "sst2,qqp,mnli"]
    argv += ["--lrs", "5e-4", "--seeds", "0", "--pretrain-steps", "8", "--reps", "200"]
    submitted = _as(OWNER, "002", env(OWNER), *argv)
    assert submitted.returncode == 0, submitted.stderr
    entries, _ = read_ledger(out)
    clm = next(e for e in entries if e.kind == "pretraining" and "clm" in e.name)
    mlm_array = next(e for e in entries if e.kind == "finetune" and "mlm" in e.name)
    local_slurm.command("scancel", clm.job)  # lost before it ran: the teammate reruns it (its own cache)
    local_slurm.command("scancel", f"{mlm_array.job}_1")  # one task of a held array

    shown = _as(MATE, "022", env(MATE), "status", str(out))
    assert shown.returncode == 0, shown.stderr
    # a user outside the group may read the study, not write its ledger: one line, no sbatch call
    refused = _as(STRANGER, "022", env(STRANGER), "resubmit", str(out))
    err = refused.stderr.strip().splitlines()
    assert refused.returncode == 2 and len(err) == 1 and "cannot write it (owner " in err[0], refused.stderr
    assert local_slurm.command("squeue", "-h", "-t", "all", "-u", STRANGER, "-o", "%A").stdout.split() == []
    # the teammate resubmits what was lost: the CLM pretraining (its jobs cache under their own folder)
    # and its array, the cancelled task (behind its array's live tasks) and the analysis
    mine = _as(MATE, "022", env(MATE), "resubmit", str(out))
    assert mine.returncode == 0, mine.stderr
    assert "resubmitted pretraining toy_s-clm-8" in mine.stdout, mine.stdout
    assert f"resubmitted finetune {mlm_array.name} finetune tasks 1%1" in mine.stdout, mine.stdout
    # another task lost; the teammate and the owner resubmit it at the same moment: one plans and
    # submits under the lock, the other waits for it and then finds it queued
    untrained = next(e for e in entries if e.kind == "finetune" and "random-init" in e.name)
    local_slurm.command("scancel", f"{untrained.job}_2")
    racing = [
        _as(user, mask, env(user), "resubmit", str(out), background=True)
        for user, mask in ((MATE, "022"), (OWNER, "002"))
    ]
    said = [proc.communicate(timeout=600) for proc in racing]
    for proc, (_, stderr) in zip(racing, said):
        assert proc.returncode == 0, stderr
    both = "".join(stdout for stdout, _ in said)
    assert both.count(f"resubmitted finetune {untrained.name} finetune tasks 2%1") == 1, both
    assert both.count("resubmit: nothing to submit") == 1, both
    shown = _as(OWNER, "002", env(OWNER), "status", str(out))
    assert shown.returncode == 0, shown.stderr

    entries, _ = read_ledger(out)
    for entry in entries:
        local_slurm.command("scontrol", "release", entry.job, check=False)
    analyses = [e.job for e in entries if e.kind == "analysis"]
    local_slurm.wait_for(analyses, timeout=900)

    # every job either user queued is in the ledger, and none failed
    ledger = {e.job for e in read_ledger(out)[0]}
    queued = local_slurm.command("squeue", "-h", "-t", "all", "-o", "%F|%u").stdout.split()  # %F: an array's id
    theirs = {line.split("|")[0] for line in queued if line.split("|")[1] in (OWNER, MATE)}
    assert theirs <= ledger, theirs - ledger
    logs = "\n".join(f"--- {p.name}\n{p.read_text()[-600:]}" for p in sorted((out / "slurm" / "slurm_logs").glob("*")))
    for job in ledger:
        states = set(local_slurm.job_states(job).values())
        assert states <= {"COMPLETED", "CANCELLED"}, (job, states, logs)
    assert {local_slurm.job_state(job) for job in analyses} == {"COMPLETED"}, logs
    finetune = [e.job for e in read_ledger(out)[0] if e.kind == "finetune"]
    spans = _task_spans(local_slurm, finetune)
    assert _most_at_once(spans) == 1, spans  # one lane, one task at a time
    shown = _as(MATE, "022", env(MATE), "status", str(out))
    assert "finished (every Slurm job ended" in shown.stdout.splitlines()[0], shown.stdout
    # what the users and their jobs made is the group's, whatever the teammate's umask
    made = [p for top in (out, project / "runs", project / "data") for p in top.rglob("*") if not p.is_symlink()]
    assert made and [p for p in made if not os.stat(p).st_mode & 0o020] == []
    assert {p.name for p in scratch.iterdir()} >= {f"cache-{OWNER}", f"cache-{MATE}"}
