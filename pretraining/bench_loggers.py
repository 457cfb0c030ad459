"""What watching costs: one pretraining config trained with no tracker and with each tracker, in
alternation, each into a fresh folder; prints the wall time of every run and the median overhead
(docs/watching.md, "What it costs").

    python -m pretraining.bench_loggers RUN.yaml [--repeat 2] [--trackers tensorboard,mlflow]

With no tracker a run has the file logger only (loss.jsonl, train.log) and no monitors; with one,
Composer's SpeedMonitor and LRMonitor are added and log every step."""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path


def _plain_config(path: Path, folder: Path) -> Path:
    """The run config itself: a finished run's config.yaml wraps it with its provenance."""
    import yaml

    from contracts.bounded import read_yaml
    from contracts.config import CONFIG_BYTES_LIMIT

    body = read_yaml(path, CONFIG_BYTES_LIMIT)
    if isinstance(body, dict) and isinstance(body.get("config"), dict) and "config_hash" in body:
        path = folder / "run.yaml"
        path.write_text(yaml.safe_dump(body["config"]))
    return path


def _timed_run(config: Path, folder: Path, name: str, tracker: str | None) -> float:
    from pretraining.config import load_pretrain_config
    from pretraining.train import train

    overrides = [f"name={name}", f"run_dir={folder / name}", f"data.cache_dir={folder / 'cache' / name}"]
    overrides.append(f"loggers.{tracker}={{}}" if tracker else "loggers={}")
    cfg = load_pretrain_config(config, overrides)
    start = time.perf_counter()
    train(cfg)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pretraining.bench_loggers", description=__doc__.split("\n\n")[0])
    parser.add_argument("config", type=Path, help="a pretraining run config (e.g. a toy run's config.yaml)")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each variant (alternating)")
    parser.add_argument("--trackers", default="tensorboard,mlflow", help="comma-separated logger names")
    args = parser.parse_args(argv)
    variants = [None, *[t for t in args.trackers.split(",") if t]]
    times: dict[str, list[float]] = {str(v or "none"): [] for v in variants}
    with tempfile.TemporaryDirectory(prefix="bench-loggers-") as tmp:
        config = _plain_config(args.config, Path(tmp))
        for rep in range(args.repeat):
            for tracker in variants:
                label = tracker or "none"
                seconds = _timed_run(config, Path(tmp), f"{label}-{rep}", tracker)
                times[label].append(seconds)
                print(f"bench-loggers: {label} run {rep + 1}: {seconds:.1f} s", flush=True)
    base = statistics.median(times["none"])
    for label, values in times.items():
        median = statistics.median(values)
        print(f"bench-loggers: {label:<12} median {median:6.1f} s  ({100 * (median / base - 1):+5.1f}% vs none)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
