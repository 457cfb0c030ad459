"""Figures and tables are written with the usual file mode (0666 minus the umask: 0644 under 022), not
the owner-only 0600 of a temporary file, so collaborators on a shared folder can read them."""

import os
import stat

import pandas as pd
import pytest
from matplotlib.figure import Figure

from analysis.published import load_published_cells
from analysis.tables import write_tables
from paper_figures.output import save_figure


@pytest.fixture
def umask_022():
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def _modes(paths) -> dict[str, str]:
    return {os.path.basename(p): oct(stat.S_IMODE(os.stat(p).st_mode)) for p in paths}


def test_figures_are_readable_by_everyone(tmp_path, umask_022):
    fig = Figure(figsize=(2, 2))
    fig.add_subplot().plot([0, 1], [0, 1])
    written = save_figure(fig, pd.DataFrame({"x": [0, 1], "mean": [0.0, 1.0]}), tmp_path, "figure")
    assert len(written) == 4
    assert set(_modes(written).values()) == {"0o644"}


def test_tables_are_readable_by_everyone(tmp_path, umask_022):
    written = write_tables(load_published_cells(), tmp_path, only=(2,))
    assert {"tables.md", "tables.tex", "table_02.csv"} <= set(_modes(written))
    assert set(_modes(written).values()) == {"0o644"}


def test_the_mode_follows_the_umask(tmp_path):
    previous = os.umask(0o077)
    try:
        written = write_tables(load_published_cells(), tmp_path, only=(2,), formats=("csv",))
    finally:
        os.umask(previous)
    assert set(_modes(written).values()) == {"0o600"}
