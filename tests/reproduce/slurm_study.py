"""Helpers of the reproduce tests that submit toy studies to the local Slurm cluster (tests.slurm)."""


def toy_cluster_body(tmp_path, partition: str, **settings) -> dict:
    """The settings of a cluster config for toy studies (no image: --no-container; CPU jobs), its
    folders under tmp_path."""
    import sys

    return {
        "partition": partition,
        "image": str(tmp_path / "absent.sif"),
        "data_dir": str(tmp_path / "data"),
        "runs_dir": str(tmp_path / "runs"),
        "hf_cache": str(tmp_path / "hf"),
        "gpus_per_node": 0,
        "cpus_per_task": 1,
        "python": sys.executable,
        **settings,
    }


def toy_cluster_config(tmp_path, local_slurm, monkeypatch, **settings):
    """A cluster config for toy studies on the local Slurm cluster (toy_cluster_body), written to
    tmp_path/cluster.yaml, with this test's environment pointed at that cluster."""
    import yaml

    from tests.slurm.cluster import PARTITION

    body = toy_cluster_body(tmp_path, PARTITION, **settings)
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(body))
    for key in ("SLURM_CONF", "PATH"):
        monkeypatch.setenv(key, local_slurm.env[key])
    return path


def held_sbatch(folder, path: str) -> str:
    """A PATH whose first `sbatch` submits every job held (`--hold`; sbatch 22.05 ignores SBATCH_HOLD,
    issue 89), ahead of `path`; the jobs run once `scontrol release` frees them."""
    import shlex
    import shutil
    from pathlib import Path

    wrapper = Path(folder) / "held-sbatch" / "sbatch"
    wrapper.parent.mkdir(parents=True, exist_ok=True)
    wrapper.write_text(f'#!/bin/bash\nexec {shlex.quote(shutil.which("sbatch", path=path))} --hold "$@"\n')
    wrapper.chmod(0o755)
    return f"{wrapper.parent}:{path}"


SIF_HEADER = b"#!/usr/bin/env run-singularity\n".ljust(32, b"\0") + b"SIF_MAGIC\0"


def stand_in_image(path, size: int | None = None):
    """A stand-in for `make container`'s image: a SIF header in a sparse file of the smallest size the
    preflight takes for an image (reproduce.slurm.preflight.MIN_IMAGE_BYTES; no disk blocks behind it)."""
    import os

    from reproduce.slurm.preflight import MIN_IMAGE_BYTES

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(SIF_HEADER)
    os.truncate(path, MIN_IMAGE_BYTES if size is None else size)
    return path
