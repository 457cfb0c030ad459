"""The Slurm side of a reproduction (`--slurm`, docs/cluster.md), one concept in one folder:

  cluster.py    the cluster's YAML (`ClusterConfig`), its Slurm values, the requeue time check
  jobs.py       the scripts, one class per job kind (data, pretraining, fine-tuning arrays, analysis)
  writer.py     the DAG as scripts (`SlurmWriter`): every script, submit.sh chaining them, the submission
  ledger.py     the job ledger (`slurm/ledger.jsonl`: every submission) and what Slurm says of its jobs
  resubmit.py   submit again only what a study lacks (failed or missing jobs and array tasks)
  preflight.py  what is checked before anything is submitted (image, data, models, budgets)
  cost.py       what a paper-scale study costs in GPU-hours, printed with its DAG
  view.py       the Slurm view of `reproduce status`: the ledger's jobs and their states

The local executor (reproduce/local.py, its processes in reproduce/workers.py) and `status`
(reproduce/status.py, reading the study plan of reproduce/plan/) sit beside it.
The names other modules use are imported here.
"""

from reproduce.slurm.cluster import (
    CONFIG_DIR,
    ClusterConfig,
    check_slurm_value,
    default_cluster_file,
    load_cluster_config,
    requeue_time_problem,
    slurm_time_seconds,
)
from reproduce.slurm.writer import SlurmWriter, reproduce_slurm

__all__ = [
    "CONFIG_DIR",
    "ClusterConfig",
    "SlurmWriter",
    "check_slurm_value",
    "default_cluster_file",
    "load_cluster_config",
    "reproduce_slurm",
    "requeue_time_problem",
    "slurm_time_seconds",
]
