"""A throw-away single-node Slurm cluster for tests (munged + slurmctld + slurmd in a temp folder).

Use the session-scoped fixture ``local_slurm`` (register this module as a pytest plugin, or import
the fixture into a conftest). It gives a :class:`LocalSlurm` with ``submit``, ``wait_for`` and
``job_state``. The configuration (docs/container.md, Debian slurm-wlm 22.05):
``batch_sched_delay=0`` so a trivial job finishes in about a second, ``cred_expire=20`` so a
requeued job waits 21 s before it starts again (Slurm's default: 121 s), 8 CPUs over-declared with
``config_overrides``, ``proctrack/linuxproc`` and ``task/none`` (no cgroups), ``jobcomp/filetxt``.

Missing Debian packages are installed with apt-get when running as root (about 10 s on a fresh
machine, as on CI). When not root, or when the install or the start fails, the fixture skips with
the reason; set ``MLM_VS_CLM_REQUIRE_SLURM=1`` to turn those skips into failures. Nothing is
written outside the temp folder except the Debian package files themselves.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

DEBIAN_PACKAGES = ("slurmctld", "slurmd", "slurm-client", "munge")
DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "scontrol", "scancel", "sinfo")
NODE_CPUS = 8
PARTITION = "debug"
POLL_S = 0.2
# States after which a job never runs again (scontrol's JobState values).
FINISHED_STATES = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
    }
)
_SBIN_PATH = os.pathsep.join(["/usr/sbin", "/sbin", "/usr/bin", "/bin"])


class SlurmUnavailable(RuntimeError):
    """The cluster cannot be started here (the fixture turns this into a skip)."""


def _which(name: str) -> str | None:
    path = os.environ.get("PATH", "") + os.pathsep + _SBIN_PATH
    return shutil.which(name, path=path)


def _missing_binaries() -> list[str]:
    return [name for name in DAEMONS + CLIENTS if _which(name) is None]


def ensure_installed() -> None:
    """Install slurm and munge from Debian when absent (root only; apt-get update on a miss)."""
    missing = _missing_binaries()
    if not missing:
        return
    if os.geteuid() != 0:
        raise SlurmUnavailable(f"Slurm binaries missing ({', '.join(missing)}) and not root to install them")
    apt = _which("apt-get")
    if apt is None:
        raise SlurmUnavailable(f"Slurm binaries missing ({', '.join(missing)}) and no apt-get")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    install = [apt, "install", "-y", "-q", "--no-install-recommends", *DEBIAN_PACKAGES]
    result = subprocess.run(install, env=env, capture_output=True, text=True, timeout=600)
    if result.returncode != 0:  # an empty or stale package index: refresh once and retry
        subprocess.run([apt, "update", "-q"], env=env, capture_output=True, text=True, timeout=600)
        result = subprocess.run(install, env=env, capture_output=True, text=True, timeout=600)
    if result.returncode != 0 or _missing_binaries():
        raise SlurmUnavailable(
            f"apt-get install {' '.join(DEBIAN_PACKAGES)} failed (rc {result.returncode}): "
            f"{result.stderr.strip()[-500:]}"
        )


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _total_memory_mb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024
    return 4096


def slurm_conf(root: Path, host: str, ctld_port: int, slurmd_port: int) -> str:
    """slurm.conf for one node named ``host`` whose state, spool, logs and munge socket live in ``root``."""
    memory = max(1024, _total_memory_mb() - 1024)
    return f"""\
ClusterName=testcluster
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={root}/munge/munge.socket,cred_expire=20
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd.log
MailProg=/bin/true
MpiDefault=none
SwitchType=switch/none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc={root}/log/jobcomp.txt
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0
DependencyParameters=kill_invalid_depend
MinJobAge=3600
MessageTimeout=60
KillWait=5
ReturnToService=2
SlurmdParameters=config_overrides
NodeName={host} NodeAddr=127.0.0.1 NodeHostname={host} CPUs={NODE_CPUS} RealMemory={memory} State=UNKNOWN
PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


# A controller too busy to answer in time (a loaded CI machine) is asked again, not a failure.
CONTROLLER_UNANSWERED = ("Socket timed out on send/recv operation", "Unable to contact slurm controller")


def parse_scontrol_records(text: str) -> list[dict[str, str]]:
    """Records of ``scontrol -o show ...``: one line each, ``Key=Value`` fields (values may hold '=')."""
    field = re.compile(r"([A-Za-z][\w:/]*)=(.*?)(?= [A-Za-z][\w:/]*=|$)")
    return [dict(field.findall(line.strip())) for line in text.splitlines() if line.strip()]


class LocalSlurm:
    """A running single-node cluster; every client call goes through :meth:`command` (own SLURM_CONF)."""

    def __init__(self, root: Path):
        self.root = root
        self.conf = root / "slurm.conf"
        self.munge_socket = root / "munge" / "munge.socket"
        self.jobcomp = root / "log" / "jobcomp.txt"
        # Our SLURM_CONF only; SLURM_* variables of an enclosing real job would confuse the clients.
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        self.env["SLURM_CONF"] = str(self.conf)
        self.env["PATH"] = self.env.get("PATH", "") + os.pathsep + _SBIN_PATH

    # -- lifecycle -------------------------------------------------------------------------------
    @classmethod
    def start(cls, base: str | None = None) -> LocalSlurm:
        if os.geteuid() != 0:
            raise SlurmUnavailable("needs root (the test cluster runs slurmctld and slurmd as root)")
        ensure_installed()
        root = Path(tempfile.mkdtemp(prefix="slurm-", dir=base or "/tmp"))  # short: unix socket paths
        cluster = cls(root)
        try:
            cluster._start_daemons()
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def _start_daemons(self) -> None:
        root = self.root
        root.chmod(0o755)  # munged needs execute permission for all on the socket's parents
        for sub in ("munge", "state", "spool", "log"):
            (root / sub).mkdir(mode=0o755)
        key = root / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        munged = [
            _which("munged"),
            f"--socket={self.munge_socket}",
            f"--key-file={key}",
            f"--pid-file={root}/munge/munged.pid",
            f"--log-file={root}/log/munged.log",
            f"--seed-file={root}/munge/munged.seed",
        ]
        self._daemon(munged, "munged")
        host = socket.gethostname().split(".")[0]
        ctld_port, slurmd_port = _free_ports(2)
        self.conf.write_text(slurm_conf(root, host, ctld_port, slurmd_port))
        self._daemon([_which("slurmctld"), "-c"], "slurmctld")  # -c: clean state
        self._daemon([_which("slurmd")], "slurmd")
        deadline = time.monotonic() + 30
        state = ""
        while time.monotonic() < deadline:
            state = self.command("sinfo", "-h", "-N", "-o", "%T", check=False).stdout.strip()
            if state == "idle":
                return
            time.sleep(0.1)
        raise SlurmUnavailable(f"node never became idle (last state {state!r})\n{self.log_tail()}")

    def _daemon(self, argv: list[str], name: str) -> None:
        result = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=60)
        if result.returncode != 0:
            raise SlurmUnavailable(
                f"{name} did not start (rc {result.returncode}): {result.stderr.strip()[-500:]}\n{self.log_tail()}"
            )

    def log_tail(self, lines: int = 15) -> str:
        out = []
        for log in sorted((self.root / "log").glob("*.log")):
            tail = log.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"--- {log.name}\n" + "\n".join(tail))
        return "\n".join(out)

    def stop(self) -> None:
        """Cancel every job, wait for the queue to drain, stop the daemons by pid file, remove the folder."""
        if self.conf.exists() and _which("scancel"):
            self.command("scancel", f"--partition={PARTITION}", check=False)
            deadline = time.monotonic() + 20  # KillWait=5 bounds a job's exit after SIGTERM
            while time.monotonic() < deadline:
                queue = self.command("squeue", "-h", "-o", "%i", check=False)
                if queue.returncode != 0 or not queue.stdout.strip():
                    break
                time.sleep(POLL_S)
        for name in ("slurmctld", "slurmd"):
            _terminate(self.root / f"{name}.pid")
        if self.munge_socket.exists():
            subprocess.run(
                [_which("munged"), "--stop", f"--socket={self.munge_socket}"], capture_output=True, timeout=30
            )
        _terminate(self.root / "munge" / "munged.pid")  # no-op once --stop has worked
        shutil.rmtree(self.root, ignore_errors=True)

    # -- clients ---------------------------------------------------------------------------------
    def command(
        self, *argv: str, check: bool = True, cwd: str | Path | None = None, timeout: float = 60
    ) -> subprocess.CompletedProcess:
        """Run a Slurm client (sbatch, squeue, scontrol, ...) against this cluster."""
        result = subprocess.run(list(argv), env=self.env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
        if check and result.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed (rc {result.returncode}): {result.stderr.strip()}")
        return result

    def submit(self, script_path: str | Path, *sbatch_args: str) -> str:
        """``sbatch`` a script from its own folder (the job's default working and output folder); the job id."""
        script = Path(script_path).resolve()
        result = self.command("sbatch", "--parsable", *sbatch_args, str(script), cwd=script.parent)
        return result.stdout.strip().split(";")[0]

    def wait_for(self, job_ids: str | list[str], timeout: float = 60) -> None:
        """Poll ``squeue -h -j`` every 0.2 s until none of the jobs (or array tasks) is queued or running.

        A job whose dependency can never be met is cancelled (``kill_invalid_depend``), so it ends too.
        """
        ids = [job_ids] if isinstance(job_ids, str) else list(job_ids)
        if not ids:
            return
        deadline = time.monotonic() + timeout
        while True:
            queue = self.command("squeue", "-h", "-o", "%i", "-j", ",".join(ids), check=False)
            if queue.returncode == 0 and not queue.stdout.strip():
                return
            unanswered = queue.returncode != 0 and any(text in queue.stderr for text in CONTROLLER_UNANSWERED)
            if queue.returncode != 0 and not unanswered:
                if "Invalid job id" not in queue.stderr:
                    raise RuntimeError(f"squeue failed: {queue.stderr.strip()}")
                # purged ids are finished; keep polling the others
                return self.wait_for([i for i in ids if self._known(i)], max(0.0, deadline - time.monotonic()))
            if time.monotonic() > deadline:
                state = f"squeue: {queue.stderr.strip()}" if unanswered else queue.stdout.split()
                raise TimeoutError(f"jobs still queued after {timeout} s: {state}\n{self.log_tail()}")
            time.sleep(POLL_S)

    def _known(self, job_id: str) -> bool:
        return self.command("scontrol", "-o", "show", "job", job_id, check=False).returncode == 0

    def job_records(self, job_id: str) -> list[dict[str, str]]:
        """``scontrol -o show job ID`` as dicts (one per job, or per task of an array); sacct needs slurmdbd."""
        return parse_scontrol_records(self.command("scontrol", "-o", "show", "job", str(job_id)).stdout)

    def job_states(self, job_id: str) -> dict[str, str]:
        """State of each record of a job: ``{"12": "COMPLETED"}`` or ``{"12_0": ..., "12_1": ...}`` for arrays."""
        states = {}
        for record in self.job_records(job_id):
            task = record.get("ArrayTaskId")
            key = f"{record['ArrayJobId']}_{task}" if task and "ArrayJobId" in record else record["JobId"]
            states[key] = record["JobState"]
        return states

    def job_state(self, job_id: str) -> str:
        """The JobState of a job, an array task (``12_1``) or a whole array whose tasks all agree."""
        states = set(self.job_states(job_id).values())
        if len(states) != 1:
            raise ValueError(f"job {job_id} has tasks in several states {sorted(states)}: use job_states()")
        return states.pop()

    def exit_code(self, job_id: str) -> str:
        """``ExitCode`` of a single job or array task, as ``code:signal``."""
        (record,) = self.job_records(job_id)
        return record["ExitCode"]


def _terminate(pid_file: Path, timeout: float = 15) -> None:
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)


# One cluster per test session even when the fixture is registered both as a plugin and through a
# conftest import (two fixture definitions): start on first use, stop when the last user finishes.
_lock = threading.Lock()
_shared: dict = {"cluster": None, "users": 0, "skip": None}


def _acquire() -> LocalSlurm:
    with _lock:
        if _shared["skip"]:
            raise SlurmUnavailable(_shared["skip"])
        if _shared["cluster"] is None:
            try:
                _shared["cluster"] = LocalSlurm.start()
            except (SlurmUnavailable, OSError, subprocess.SubprocessError) as error:
                _shared["skip"] = f"local Slurm cluster unavailable: {error}"
                raise SlurmUnavailable(_shared["skip"]) from error
        _shared["users"] += 1
        return _shared["cluster"]


def _release() -> None:
    with _lock:
        _shared["users"] -= 1
        if _shared["users"] == 0 and _shared["cluster"] is not None:
            _shared["cluster"].stop()
            _shared["cluster"] = None


@pytest.fixture(scope="session")
def local_slurm() -> LocalSlurm:
    """A running single-node Slurm cluster for the whole session; skips where one cannot run."""
    try:
        cluster = _acquire()
    except SlurmUnavailable as error:
        if os.environ.get("MLM_VS_CLM_REQUIRE_SLURM") == "1":
            pytest.fail(str(error))
        pytest.skip(str(error))
    try:
        yield cluster
    finally:
        _release()
