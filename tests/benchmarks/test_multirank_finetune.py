"""`benchmarks run` on 1, 2 and 4 CPU ranks through the Composer launcher (gloo).

The same toy fine-tuning runs (SC sst2, TC conll2003, IR msmarco) give the same per-step losses,
scores and run directories on any number of ranks (docs/benchmarks.md, "Several ranks"). The
training sets are cut to 38 examples, so that with the global batch of 8 the fifth and last step
of the epoch has 6 examples, which 4 ranks share unevenly (2, 2, 1, 1): the loss weighting over
ranks of different sizes and IR's gathered documents of different counts are exercised too.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from safetensors.torch import load_file

from benchmarks.datasets import TOY_DATA_ROOT
from benchmarks.run import CONFIG_DIR
from contracts.layout import finetune_run_dir
from tests.benchmarks.multirank_runs import run_tasks
from tests.benchmarks.tiny import one_torch_thread, save_tiny_model  # noqa: F401 (autouse fixture)

pytestmark = pytest.mark.multiprocess

ROOT = Path(__file__).resolve().parents[2]
TASKS = ("sst2", "conll2003", "msmarco")
# training files cut so that each task has 38 training examples (the sst2 loader drops 2 of 40)
CUT_TRAIN = {
    "nyu-mll/glue/sst2/train.jsonl": 40,
    "hgissbkh/conll2003-en/default/train.jsonl": 38,
    "hgissbkh/msmarco-pairs/default/train.jsonl": 38,
}
STEPS = 5
REL = 1e-5
TIMES = ("started", "finished", "wall_s")


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("multirank_finetune")
    data = root / "toy"
    shutil.copytree(TOY_DATA_ROOT, data)
    for name, lines in CUT_TRAIN.items():
        path = data / name
        path.write_text("".join(path.read_text().splitlines(keepends=True)[:lines]))
    return {"root": root, "model": save_tiny_model(root / "bert", "bert"), "data": data}


def run_options(setup: dict, out: Path) -> list[str]:
    return [
        "--model",
        str(setup["model"]),
        "--lr",
        "1e-3",
        "--seed",
        "0",
        "--data-root",
        str(setup["data"]),
        "--config",
        str(CONFIG_DIR / "toy.yaml"),
        "--max-steps",
        str(STEPS),
        "--out",
        str(out),
    ]


def launch(ranks: int, setup: dict, out: Path) -> dict[str, list[float]]:
    """`composer -n RANKS -m tests.benchmarks.multirank_runs` on CPU: the per-step losses."""
    losses_file = out.with_name(f"losses{ranks}.json")
    env = {k: v for k, v in os.environ.items() if k != "MASTER_PORT"}  # the launcher picks a free one
    env.update(OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    command = [sys.executable, "-m", "composer.cli.launcher", "-n", str(ranks), "-m", "tests.benchmarks.multirank_runs"]
    command += [str(losses_file), ",".join(TASKS), *run_options(setup, out)]
    result = subprocess.run(command, env=env, cwd=setup["root"], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"{ranks} ranks: rc {result.returncode}\n{result.stderr[-3000:]}"
    return json.loads(losses_file.read_text())


@pytest.fixture(scope="module")
def runs(setup) -> dict[int, tuple[Path, dict]]:
    """The three tasks on 1 (in this process, without the launcher), 2 and 4 ranks, each written
    to the same `out` and then moved aside: {ranks: (its out directory, {task: per-step losses})}."""
    out = {}
    runs_dir = setup["root"] / "runs"
    for ranks in (1, 2, 4):
        losses = run_tasks(TASKS, run_options(setup, runs_dir)) if ranks == 1 else launch(ranks, setup, runs_dir)
        out[ranks] = runs_dir.rename(setup["root"] / f"ranks{ranks}"), losses
    return out


def files_of(run_dir: Path) -> list[str]:
    return sorted(str(path.relative_to(run_dir)) for path in run_dir.rglob("*") if path.is_file())


def record_without_times(run_dir: Path) -> dict:
    record = json.loads((run_dir / "record.json").read_text())
    for key in TIMES:
        record["provenance"].pop(key)
    return record


@pytest.mark.e2e
@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("task", TASKS)
def test_a_run_on_several_ranks_equals_the_single_process_run(runs, task, ranks):
    (one_dir, one_losses), (many_dir, many_losses) = runs[1], runs[ranks]
    assert len(one_losses[task]) == STEPS
    assert many_losses[task] == pytest.approx(one_losses[task], rel=REL)
    one = finetune_run_dir(one_dir, "bert", task, 1e-3, 0)
    many = finetune_run_dir(many_dir, "bert", task, 1e-3, 0)
    assert files_of(many) == files_of(one)  # rank 0 alone wrote it: config, record (IR: model/)
    expected, got = record_without_times(one), record_without_times(many)
    trained, expected_trained = got["provenance"].pop("train"), expected["provenance"].pop("train")
    assert (trained["ranks"], expected_trained["ranks"]) == (ranks, 1)
    assert (trained["n_examples"], trained["steps"]) == (38, STEPS)  # the last step: 6 examples
    assert trained["device_microbatch_size"] == 8 // ranks
    assert trained["final_train_loss"] == pytest.approx(expected_trained["final_train_loss"], rel=REL)
    assert got == expected  # scores, instance scores, other protocol's scores, provenance
    configs = [yaml.safe_load((d / "config.yaml").read_text()) for d in (one, many)]
    assert configs[0].pop("written") and configs[1].pop("written")
    assert configs[0] == configs[1]
    if task == "msmarco":  # the trained IR model
        weights = [load_file(d / "model" / "model.safetensors") for d in (one, many)]
        assert weights[0].keys() == weights[1].keys()
        for key, tensor in weights[0].items():
            assert weights[1][key].allclose(tensor, rtol=1e-4, atol=1e-5), key
