"""Fixtures: the released MLDR runs of 610m-mlm40-42k (read from shared/paper beside the clone, see
analysis_testlib.DATA) rebuilt in the release's raw layout."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.released import import_released
from contracts.run_record import RunRecord
from tests.analysis.analysis_testlib import write_released_tree


@pytest.fixture(scope="session")
def released_root(tmp_path_factory) -> Path:
    return write_released_tree(tmp_path_factory.mktemp("released"))


@pytest.fixture(scope="session")
def mldr_records(released_root) -> list[RunRecord]:
    records, _ = import_released(released_root)
    return records
