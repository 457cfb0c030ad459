"""`benchmarks run` for several tasks in one process, keeping each run's per-step losses.

One launch of the Composer launcher then covers every task (each launched rank spends ~12 s CPU
importing torch and Composer on a 2-core machine). The per-step losses are what
benchmarks.finetune.fit returns (the record keeps only the last one); rank 0 writes them as JSON
{task: [loss of step 1, ...]} to LOSSES_FILE:

    composer -n N -m tests.benchmarks.multirank_runs LOSSES_FILE TASK[,TASK...] RUN_OPTIONS...
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path


@contextlib.contextmanager
def step_losses_of_fit(losses: list[list[float]]) -> Iterator[None]:
    """While open, every benchmarks.finetune.fit call appends its per-step losses to `losses`."""
    import benchmarks.finetune as finetune

    fit = finetune.fit

    def fit_keeping_losses(*args, **kwargs) -> dict:
        info = fit(*args, **kwargs)
        losses.append(info["step_losses"])
        return info

    finetune.fit = fit_keeping_losses  # benchmarks.run imports fit from the module when it runs
    try:
        yield
    finally:
        finetune.fit = fit


def run_tasks(tasks: Sequence[str], options: Sequence[str]) -> dict[str, list[float]]:
    """`benchmarks run --task TASK OPTIONS` for each task in turn: {task: its per-step losses}."""
    from benchmarks.__main__ import main

    out = {}
    for task in tasks:
        losses: list[list[float]] = []
        with step_losses_of_fit(losses):
            status = main(["run", "--task", task, *options])
        if status != 0:
            raise SystemExit(f"benchmarks run --task {task}: exit status {status}")
        (out[task],) = losses  # each of these tasks trains exactly once
    return out


if __name__ == "__main__":
    from composer.utils import dist

    losses_file, tasks, *run_options = sys.argv[1:]
    losses_by_task = run_tasks(tasks.split(","), run_options)
    if dist.get_global_rank() == 0:
        Path(losses_file).write_text(json.dumps(losses_by_task))
