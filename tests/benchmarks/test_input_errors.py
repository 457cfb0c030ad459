"""Fine-tuning inputs that were a traceback or silently something else (issue 35, item 14): a
broken --config, `--max-length 0`, a truncated or wrongly typed row of a task's data. Each is one
line naming the file or field; docs/reliability.md lists them."""

from __future__ import annotations

import json
import shutil

import pytest

from benchmarks.datasets import TOY_DATA_ROOT, load_task_data
from benchmarks.datasets.loading import DatasetError
from benchmarks.run import load_run_config
from benchmarks.tasks import TASKS
from contracts.config import ConfigError

VALUES = {"model": "m", "task": "sst2", "lr": 1e-5, "seed": 0}


def test_a_broken_run_config_is_one_line(tmp_path):
    broken = tmp_path / "c.yaml"
    broken.write_text("batch_size: [1,\n")
    with pytest.raises(ConfigError) as caught:
        load_run_config(VALUES, broken)
    assert str(caught.value).startswith(f"{broken}: not valid YAML: ") and "\n" not in str(caught.value)


def test_max_length_zero_is_refused_not_read_as_the_model_maximum():
    with pytest.raises(ConfigError, match=r"max_length must be >= 1 \(null: the model maximum\), got 0"):
        load_run_config({**VALUES, "max_length": 0})
    assert load_run_config(VALUES).max_length is None


@pytest.mark.parametrize(
    "row, says",
    [
        (None, "Trailing data"),  # the last row cut in the middle
        ({"sentence": "a b", "label": "great", "idx": 5}, 'Invalid string class label "great"'),
    ],
)
def test_a_truncated_or_wrongly_typed_row_is_one_line_naming_the_file(tmp_path, row, says):
    root = tmp_path / "mirror"
    shutil.copytree(TOY_DATA_ROOT / "nyu-mll" / "glue" / "sst2", root / "nyu-mll" / "glue" / "sst2")
    train = root / "nyu-mll" / "glue" / "sst2" / "train.jsonl"
    lines = train.read_text().splitlines()
    if row is None:
        lines[-1] = lines[-1][: len(lines[-1]) // 2]
    else:
        lines[5] = json.dumps(row)
    train.write_text("\n".join(lines) + "\n")
    with pytest.raises(DatasetError) as caught:
        load_task_data(TASKS["sst2"], root)
    message = str(caught.value)
    assert message.startswith(f"{train}: a row cannot be read with the dataset's columns and types (")
    assert says in message and "\n" not in message and f"fetch-data --check {root}" in message
