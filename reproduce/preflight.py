"""Before a paper-scale reproduction is submitted: is everything its offline jobs read in place?

The jobs run with HF_HUB_OFFLINE=1 on compute nodes that may not reach the internet
(docs/cluster.md), so what they read must be fetched on the login node first:

- the Apptainer image (`cluster.image`, unless --no-container);
- the prepared pretraining shards (`cluster.data_dir`): a finished prepare-data folder (manifest.json)
  whose every shard of index.json is there with its recorded size (`verify-data` checks the hashes
  too; that reads every byte, too slow to repeat before each submission);
- the pretraining tokenizer the run configs name by hub id, in `cluster.hf_cache`;
- the task mirror (`cluster.task_data`, benchmarks.datasets.fetch) for every task the fine-tuning
  arrays run.

`preflight` returns one line per missing piece, each naming it and the command that fetches it.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from reproduce.plan import ReproduceConfig, data_dir, pretraining_config, pretraining_runs, task_data_root


def _data_problems(folder: Path, seq_len: int, prepare: str) -> list[str]:
    manifest, index = folder / "manifest.json", folder / "index.json"
    if not manifest.is_file() or not index.is_file():
        return [
            f"prepared pretraining data {folder} is missing (no manifest.json): prepare it once on the login node or "
            f"a CPU job with network, on the shared disk: `{prepare}`"
        ]
    prepared = json.loads(manifest.read_text()).get("seq_len")
    if prepared != seq_len:
        return [f"prepared pretraining data {folder} has samples of {prepared} tokens, the runs read {seq_len}"]
    for shard in json.loads(index.read_text())["shards"]:
        info = shard["zip_data"] or shard["raw_data"]
        path = folder / info["basename"]
        if not path.is_file() or path.stat().st_size != info["bytes"]:
            return [
                f"prepared pretraining data {folder}: shard {info['basename']} is missing or truncated "
                f"(`python -m pretraining verify-data {folder}` checks every shard)"
            ]
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


def preflight(cfg: ReproduceConfig, cluster, container: bool = True) -> list[str]:
    """What the Slurm jobs of `cfg` (paper scale) would miss, one line each; [] when ready."""
    from benchmarks.datasets.fetch import mirror_problems
    from benchmarks.tasks import with_ir_training

    problems = []
    if container and not Path(cluster.image).is_file():
        problems.append(
            f"image {cluster.image} does not exist: build it on the login node (`make container IMAGE={cluster.image}`)"
        )
    bodies = [pretraining_config(cfg, name) for name in pretraining_runs(cfg)]
    if bodies:
        args = " ".join(shlex.quote(a) for a in cluster.prepare_data_args)
        seq_len = bodies[0]["data"]["seq_len"]
        prepare = (
            f"HF_HOME={shlex.quote(cluster.hf_cache)} python -m pretraining prepare-data {args} "
            f"--seq-len {seq_len} --out {data_dir(cfg)}"
        )
        problems += _data_problems(data_dir(cfg), seq_len, prepare)
    for name in dict.fromkeys(body["tokenizer"] for body in bodies):
        problems += _tokenizer_problems(name, cluster.hf_cache)
    tasks = with_ir_training(cfg.tasks)  # NQ and MLDR evaluate the model the MS MARCO runs train
    problems += mirror_problems(task_data_root(cfg), tasks, given_as="task_data in the cluster config")
    return problems
