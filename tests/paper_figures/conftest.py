"""Shared inputs of the paper_figures tests: the published cells and small synthetic run records."""

import pytest

from contracts.run_record import RunRecord


@pytest.fixture(scope="session")
def published_cells():
    from analysis.published import load_published_cells

    return load_published_cells()


@pytest.fixture(scope="session")
def published_raw():
    from analysis.published import load_published_raw

    return load_published_raw()


def run(model, dataset, lr, seed, test, validation=50.0, task_type=None):
    from contracts.paper import DATASET_BY_ID

    return RunRecord.create(
        model,
        task_type=task_type or DATASET_BY_ID[dataset].task_type,
        dataset=dataset,
        lr=lr,
        seed=seed,
        validation_score=validation,
        test_score=test,
    )
