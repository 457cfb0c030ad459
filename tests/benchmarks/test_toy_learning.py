"""The fine-tuning pipeline learns: an untrained toy_s model, fine-tuned by `benchmarks.run` on the
committed toy data, ends at least 10 points above both the task's chance level (benchmarks.chance)
and the same model after one step at LR 1e-9 (a model that does not learn), on SST-2, MNLI, the three NER tasks and
ReCoRD. A bug that broke learning (labels, masks, loss, LR schedule, heads, scoring) shows here.

Left out, measured in docs/reproduce.md ("Toy learning"): QQP, SQuAD and SQuAD-v2 (not learnt
reliably in a short budget) and the IR tasks (an untrained mean-pooled encoder already ranks the
toy documents by word overlap, as well as a fine-tuned one). Pretrained toy models are not checked:
their 42 steps leave collapsed representations that fine-tune worse than random initialisation.
"""

from __future__ import annotations

import pytest

from benchmarks.chance import chance_score
from benchmarks.datasets import TOY_DATA_ROOT
from benchmarks.kinds.common import load_tokenizer
from benchmarks.run import CONFIG_DIR, load_run_config, run
from tests.benchmarks.tiny import one_torch_thread  # noqa: F401 (autouse fixture)

# Batch 16; steps per task (measured on seeds 0-2: docs/reproduce.md, "Toy learning").
STEPS = {"record": 100}
TASKS = ["sst2", "mnli", "conll2003", "ontonotes5", "uner", "record"]


@pytest.fixture(scope="module")
def untrained(tmp_path_factory):
    from pretraining.export import export_random_init

    return export_random_init("toy_s", tmp_path_factory.mktemp("init") / "toy_s-random-init")


def _score(model, out, task, lr, steps):
    values = {
        "model": str(model),
        "model_name": "toy_s-random-init",
        "task": task,
        "lr": lr,
        "seed": 0,
        "out": str(out),
        "data_root": str(TOY_DATA_ROOT),
        "batch_size": 16,
        "max_steps": steps,
        # This package's head: our exports' own EuroBERT-style heads (issue 37; N(0, 0.02), dense +
        # GELU for SC) learn too slowly for this budget (CoNLL 37.1 against a floor of 39.7, ReCoRD
        # 22.4 against 26.8, measured here); the check is about the pipeline, not the head
        "head": "package",
    }
    cfg = load_run_config(values, CONFIG_DIR / "toy.yaml")
    record, _ = run(cfg)
    return record, cfg


@pytest.mark.parametrize("task", TASKS)
def test_an_untrained_model_learns_each_task_well_above_chance(untrained, tmp_path, task):
    # an untrained model wants a large LR
    learnt, cfg = _score(untrained, tmp_path / "learnt", task, 2e-3, STEPS.get(task, 40))
    frozen, _ = _score(untrained, tmp_path / "frozen", task, 1e-9, 1)
    chance = chance_score(task, TOY_DATA_ROOT, learnt.protocol, load_tokenizer(str(untrained)), cfg.max_length)
    floor = max(chance, frozen.test_score)
    assert learnt.test_score >= floor + 10, (
        f"{task}: {learnt.test_score:.1f} after fine-tuning, chance {chance:.1f}, LR 1e-9 {frozen.test_score:.1f}"
    )
