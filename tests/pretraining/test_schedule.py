"""WSD schedule: paper values, shape properties, and the Composer adapter on a real State."""

import pytest
import torch
from composer.core import State, Time

from pretraining.schedule import AtStepEnd, WSDScheduler, wsd_multiplier

PAPER = dict(warmup=2000, stable_end=40000, total=42000)


def test_paper_schedule_values():
    assert wsd_multiplier(0, **PAPER) == 0.0
    assert wsd_multiplier(1000, **PAPER) == 0.5
    assert wsd_multiplier(2000, **PAPER) == 1.0
    assert wsd_multiplier(39999, **PAPER) == 1.0
    assert wsd_multiplier(41000, **PAPER) == 0.5
    assert wsd_multiplier(42000, **PAPER) == 0.0
    assert wsd_multiplier(41000, **PAPER, decay_shape="1-sqrt") == pytest.approx(1 - 0.5**0.5)


@pytest.mark.parametrize("shape", ["linear", "1-sqrt"])
def test_bounds_continuity_and_monotone_decay(shape):
    values = [wsd_multiplier(s, 20, 80, 100, shape, alpha_f=0.1) for s in range(0, 101)]
    assert all(0.0 <= v <= 1.0 for v in values)
    assert values[20] == 1.0 and values[80] == 1.0 and values[100] == pytest.approx(0.1)
    decay = values[80:]
    assert all(a >= b for a, b in zip(decay, decay[1:]))
    assert abs(values[20] - values[19]) <= 1 / 20 + 1e-9  # no jump at the warmup end


def test_stable_only_run_never_decays_and_bad_arguments_fail():
    assert wsd_multiplier(100, 10, 100, 100) == 1.0
    with pytest.raises(ValueError):
        wsd_multiplier(0, 50, 40, 100)
    with pytest.raises(ValueError):
        wsd_multiplier(0, 10, 40, 100, decay_shape="cosine")


def _state(max_duration="100ba"):
    model = torch.nn.Linear(2, 2)
    return State(
        model=model,
        rank_zero_seed=0,
        run_name="t",
        device="cpu",
        max_duration=max_duration,
        optimizers=torch.optim.SGD(model.parameters(), lr=1.0),
    )


def test_composer_adapter_reads_the_batch_count():
    scheduler = WSDScheduler(warmup=10, stable_end=90, total=100)
    state = _state()
    for step, expected in [(0, 0.0), (5, 0.5), (50, 1.0), (95, 0.5), (100, 0.0)]:
        state.timestamp = state.timestamp.copy(batch=Time.from_batch(step))
        assert scheduler(state) == pytest.approx(expected)


def test_composer_adapter_refuses_non_batch_durations():
    with pytest.raises(ValueError, match="batches"):
        WSDScheduler(warmup=1, stable_end=2, total=3)(_state("1ep"))


def test_at_step_end_sets_the_lr_of_the_step_about_to_run():
    # Composer asks when it builds the Trainer (no batch yet: the LR of step 1) and after the
    # optimizer step of batch k, before its clock counts it (the LR of step k + 2, 1-based).
    scheduler = AtStepEnd(WSDScheduler(warmup=10, stable_end=90, total=100))
    state = _state()
    assert state.batch is None and scheduler(state) == pytest.approx(0.1)  # step 1: above 0
    state.batch = {"input_ids": torch.zeros(1)}
    state.timestamp = state.timestamp.copy(batch=Time.from_batch(8))
    assert scheduler(state) == pytest.approx(1.0)  # step 10 (after batch 8 = step 9): the peak
    assert int(state.timestamp.batch) == 8  # the state itself is untouched
