import random

import pytest

from analysis.aggregate import select_best_lr_per_seed
from tests.analysis.analysis_testlib import make_record


def test_each_seed_gets_its_own_best_lr():
    records = [
        make_record(lr=1e-5, seed=0, val=80, test=70),
        make_record(lr=1e-4, seed=0, val=85, test=60),
        make_record(lr=1e-5, seed=1, val=90, test=75),
        make_record(lr=1e-4, seed=1, val=82, test=99),
    ]
    selected = select_best_lr_per_seed(records).set_index("seed")
    assert selected.loc[0, "lr"] == 1e-4 and selected.loc[0, "test_score"] == 60
    assert selected.loc[1, "lr"] == 1e-5 and selected.loc[1, "test_score"] == 75
    assert selected["n_lrs"].tolist() == [2, 2]


def test_ties_go_to_the_smallest_lr_whatever_the_order():
    records = [make_record(lr=lr, seed=0, val=80, test=10 * i) for i, lr in enumerate([5e-4, 1e-5, 2e-5])]
    for _ in range(5):
        random.Random(_).shuffle(records)
        selected = select_best_lr_per_seed(records)
        assert selected["lr"].tolist() == [1e-5] and selected["test_score"].tolist() == [10]


def test_groups_are_separate_per_model_dataset_and_train_set():
    records = [
        make_record(model="a", lr=1e-5, val=1),
        make_record(model="a", lr=1e-4, val=2),
        make_record(model="b", lr=1e-5, val=3),
        make_record(model="b", lr=1e-4, val=2),
        make_record(model="a", dataset="qqp", lr=1e-5, val=9),
        make_record(model="a", task_type="IR", dataset="nq", lr=1e-5, val=9, train_set="msmarco_pairs"),
    ]
    selected = select_best_lr_per_seed(records)
    assert len(selected) == 4
    lrs = {(r.model, r.dataset): r.lr for r in selected.itertuples()}
    assert lrs[("a", "sst2")] == 1e-4 and lrs[("b", "sst2")] == 1e-5
    assert set(selected["train_set"]) == {"", "msmarco_pairs"}


def test_duplicate_runs_are_an_error():
    with pytest.raises(ValueError, match="duplicate run records.*lr=1e-05 seed=0"):
        select_best_lr_per_seed([make_record(), make_record(test=12)])


def test_mldr_selection_matches_the_paper(mldr_records):
    selected = select_best_lr_per_seed(mldr_records).set_index("seed")
    assert selected["lr"].tolist() == [1e-4, 2e-5, 5e-5, 2e-5, 2e-5]
    assert selected["test_score"].round(2).tolist() == [59.66, 60.14, 61.73, 59.59, 60.13]
