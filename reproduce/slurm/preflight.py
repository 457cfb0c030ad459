"""Before a paper-scale reproduction is submitted: is everything its offline jobs read in place?

The jobs run with HF_HUB_OFFLINE=1 on compute nodes that may not reach the internet
(docs/cluster.md), so what they read must be fetched on the login node first:

- the Apptainer image (`cluster.image`, unless --no-container): a SIF file, by its header, whose build
  record (`IMAGE.build.json`, written by `make container`) names this checkout's requirements.lock
  and the image's size;
- the prepared pretraining shards (`cluster.data_dir`): a finished prepare-data folder (manifest.json)
  whose every shard of index.json is there with its recorded size (`verify-data` checks the hashes
  too; that reads every byte, too slow to repeat before each submission), holding the samples
  every pretraining run reads (`verify-data --for-run`'s data budget);
- the pretraining tokenizer the run configs name by hub id, in `cluster.hf_cache`;
- the task mirror (`cluster.task_data`, benchmarks.datasets.fetch) for every task the fine-tuning
  arrays run.

`preflight` returns one line per missing piece, each naming it and the command that fetches it.
"""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

from contracts.bounded import LARGE, SMALL, BoundedReadError, read_json_object
from reproduce.plan import StudyPlan, data_dir, task_data_root


def _data_problems(folder: Path, seq_len: int, prepare: str) -> list[str]:
    manifest, index = folder / "manifest.json", folder / "index.json"
    if not manifest.is_file() or not index.is_file():
        return [
            f"prepared pretraining data {folder} is missing (no manifest.json): prepare it once on the login node or "
            f"a CPU job with network, on the shared disk: `{prepare}`"
        ]
    try:  # bounded (both list files: the inputs, the shards): an index.json of gigabytes is one line
        prepared = read_json_object(manifest, LARGE).get("seq_len")
        shards = read_json_object(index, LARGE)["shards"] if prepared == seq_len else []
    except BoundedReadError as exc:
        return [f"prepared pretraining data {folder} is unreadable ({exc}): prepare it again: `{prepare}`"]
    if prepared != seq_len:
        return [f"prepared pretraining data {folder} has samples of {prepared} tokens, the runs read {seq_len}"]
    for shard in shards:
        info = shard["zip_data"] or shard["raw_data"]
        path = folder / info["basename"]
        if not path.is_file() or path.stat().st_size != info["bytes"]:
            return [
                f"prepared pretraining data {folder}: shard {info['basename']} is missing or truncated "
                f"(`python -m pretraining verify-data {folder}` checks every shard)"
            ]
    return []


def _budget_problems(folder: Path, bodies: list[dict]) -> list[str]:
    """Each run's samples against the prepared ones (`verify-data --for-run`'s arithmetic,
    pretraining.data.config.data_budget): one line for the first run that would run out, with the
    count of the others. Only once the data folder itself is complete (_data_problems)."""
    from contracts.config import config_from_dict
    from pretraining.config import PretrainConfig
    from pretraining.data.config import DataBudgetError, data_budget

    samples = read_json_object(folder / "manifest.json", LARGE)["counts"]["samples"]
    short = []
    for body in bodies:
        run = config_from_dict(PretrainConfig, body, f"pretraining config of {body['name']}")
        try:
            data_budget(samples, run.data, run.train.max_steps, run.train.global_batch_size)
        except DataBudgetError as exc:
            short.append(f"run {body['name']}: {exc}")
    if not short:
        return []
    others = f" (and {len(short) - 1} other runs)" if len(short) > 1 else ""
    return [f"prepared pretraining data too small{others}: {short[0]}"]


SIF_MAGIC_AT = 32  # a SIF file: a 32-byte launch script ("#!/usr/bin/env run-singularity"), then SIF_MAGIC
# No image of container/mlm_vs_clm.def is smaller: torch's own libraries in the lock's wheel are
# 1.5 GB (libtorch_cpu.so alone 427 MB), squashed to well over this, the CUDA base aside (issue 65:
# a 4 kB file with a SIF header and a matching build record passed). Only stand-ins fall below it.
MIN_IMAGE_BYTES = 256 << 20


def image_problems(image: str) -> list[str]:
    """The image is a regular SIF file (its magic) of a plausible size whose build record matches this
    checkout's lock, not a stand-in, a folder, a device or a partial copy."""
    path = Path(image)
    build = f"build it on the login node (`make container IMAGE={image}`)"
    if not path.exists():
        return [f"image {image} does not exist: {build}"]
    if not path.is_file():  # a folder, a FIFO (opening it would wait for a writer) or a device
        return [f"image {image} is not a regular file (a folder, FIFO or device): {build}"]
    with open(path, "rb") as handle:
        head = handle.read(SIF_MAGIC_AT + 10)
    if head[SIF_MAGIC_AT : SIF_MAGIC_AT + 9] != b"SIF_MAGIC":
        return [f"image {image} is not a SIF image ({path.stat().st_size:,} bytes, no SIF_MAGIC header): {build}"]
    if path.stat().st_size < MIN_IMAGE_BYTES:
        return [
            f"image {image} is {path.stat().st_size:,} bytes, too small for an image of this project (torch alone "
            f"squashes to more than {MIN_IMAGE_BYTES >> 20} MiB): a stand-in or a partial copy; {build}"
        ]
    return _image_identity_problems(path, build)


def image_commit_note(image: str) -> str | None:
    """A line when the image was built from another commit than the checkout's. Not a problem (the
    jobs run the checkout's code; the lock, which decides the packages, is checked), but said."""
    from contracts.image_record import build_record_path
    from reproduce.plan import REPO_ROOT

    try:
        commit = str(read_json_object(build_record_path(Path(image)), SMALL)["commit"])
        head = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=30
        ).stdout.strip()
    except (OSError, ValueError, KeyError, TypeError, subprocess.TimeoutExpired):
        return None  # no record or no git: image_problems says what matters
    if not head or commit == head:
        return None
    return (
        f"image: built from commit {commit[:12]}, this checkout is {head[:12]}; the same requirements.lock, so the "
        "jobs run this checkout's code on the image's packages (rebuild only if you changed the definition)"
    )


def _image_identity_problems(path: Path, build: str) -> list[str]:
    """The image's build record (container.build.write_build_record) against this checkout: the same
    requirements.lock (the jobs run the checkout's code on the image's packages) and the same size
    (not another file copied over the image since)."""
    import hashlib

    from contracts.image_record import build_record_path
    from reproduce.plan import REPO_ROOT

    lock = REPO_ROOT / "requirements.lock"

    record_path = build_record_path(path)
    try:
        record = read_json_object(record_path, SMALL)  # BoundedReadError is a ValueError
        commit, lock_sha, size = (
            str(record["commit"]),
            str(record["requirements_lock_sha256"]),
            int(record["image_bytes"]),
        )
    except FileNotFoundError:
        return [f"image {path} has no build record {record_path.name} (make container writes it): {build}"]
    except (OSError, ValueError, KeyError, TypeError):
        return [f"image {path}: its build record {record_path} is unreadable: {build}"]
    if lock_sha != hashlib.sha256(lock.read_bytes()).hexdigest():
        return [
            f"image {path} was built from commit {commit[:12]} with another requirements.lock than this checkout's "
            f"(the jobs run this checkout's code on the image's packages): {build}"
        ]
    if size != path.stat().st_size:
        return [
            f"image {path} changed since it was built ({size:,} bytes recorded, {path.stat().st_size:,} now): {build}"
        ]
    return []
    return []


def _tokenizer_problems(name: str, hf_cache: str) -> list[str]:
    from huggingface_hub import try_to_load_from_cache

    if Path(name).is_dir():
        return []
    cache = Path(hf_cache) / "hub"
    if all(
        isinstance(try_to_load_from_cache(name, f, cache_dir=cache), str)
        for f in ("tokenizer_config.json", "tokenizer.json")
    ):
        return []
    fetch = f"HF_HOME={shlex.quote(hf_cache)} python -m pretraining fetch-model {name} --cache --include '*.json'"
    return [
        f"tokenizer {name} is not in hf_cache {hf_cache} (the jobs run offline): on the login node `{fetch}` "
        "(a gated repo: accept its terms on the Hub and `hf auth login` first)"
    ]


def preflight(plan: StudyPlan, cluster, container: bool = True) -> list[str]:
    """What the Slurm jobs of the plan (paper scale) would miss, one line each; [] when ready."""
    from benchmarks.datasets.fetch import mirror_problems
    from benchmarks.tasks import with_ir_training

    cfg = plan.config
    problems = []
    if container:
        problems += image_problems(cluster.image)
    bodies = [run.config for run in plan.runs]
    if bodies:
        args = " ".join(shlex.quote(a) for a in cluster.prepare_data_args)
        seq_len = bodies[0]["data"]["seq_len"]
        prepare = (
            f"HF_HOME={shlex.quote(cluster.hf_cache)} python -m pretraining prepare-data {args} "
            f"--seq-len {seq_len} --out {data_dir(cfg)}"
        )
        missing = _data_problems(data_dir(cfg), seq_len, prepare)
        problems += missing or _budget_problems(data_dir(cfg), bodies)
    for name in dict.fromkeys(body["tokenizer"] for body in bodies):
        problems += _tokenizer_problems(name, cluster.hf_cache)
    tasks = with_ir_training(cfg.tasks)  # NQ and MLDR evaluate the model the MS MARCO runs train
    problems += mirror_problems(task_data_root(cfg), tasks, given_as="task_data in the cluster config")
    return problems
