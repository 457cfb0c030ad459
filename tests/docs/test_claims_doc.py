"""docs/claims.md's verdicts on the published numbers are generated from the code
(analysis.claims.report.docs_claims_table / docs_verdict_sentence, between `<!-- generated: NAME -->`
markers) and compared here, so the page cannot go stale (issue 81: it listed a claim as leaning
against that the report calls inconclusive). `python -m analysis claims-doc docs/claims.md`
rewrites the blocks; `--check` only says whether they are current."""

from pathlib import Path

import pytest

import analysis.claims
from analysis.claims.report import regenerate_doc
from analysis.cli import main

DOC = Path(__file__).resolve().parents[2] / "docs" / "claims.md"


def test_the_generated_blocks_of_docs_claims_are_current(published_claims_report):
    text = DOC.read_text()
    assert regenerate_doc(text, published_claims_report) == text


@pytest.fixture
def computed(monkeypatch, published_claims_report):
    """The CLI's claims computation replaced by the session's report (the same arguments)."""
    monkeypatch.setattr(analysis.claims, "evaluate_claims", lambda inputs, reps, rng_seed: published_claims_report)


def test_claims_doc_rewrites_a_stale_page_and_check_refuses_it(tmp_path, computed, capsys):
    page = tmp_path / "claims.md"
    stale = DOC.read_text().replace("leans against: `", "leans against: `stale_claim`, `", 1)
    page.write_text(stale)
    assert main(["claims-doc", str(page), "--check"]) == 1
    assert "generated blocks are stale" in capsys.readouterr().err and page.read_text() == stale
    assert main(["claims-doc", str(page)]) == 0
    assert page.read_text() == DOC.read_text()
    assert main(["claims-doc", str(page), "--check"]) == 0


def test_claims_doc_refuses_a_page_without_markers_in_one_line(tmp_path, capsys):
    page = tmp_path / "claims.md"
    page.write_text("# no markers\n")
    assert main(["claims-doc", str(page)]) == 2
    err = capsys.readouterr().err
    assert "has no '<!-- generated: published-verdicts -->'" in err and err.count("\n") == 1
    assert page.read_text() == "# no markers\n"


@pytest.fixture
def never_computed(monkeypatch):
    """The claims computation fails the test: a refused page is refused before it."""

    def computed(*args, **kwargs):
        raise AssertionError("the claims were computed for a page that is refused")

    monkeypatch.setattr(analysis.claims, "evaluate_claims", computed)


@pytest.mark.parametrize("kind", ["oversized", "not-utf8", "dangling-link"])
def test_claims_doc_refuses_a_page_it_cannot_read_whole_in_one_line(tmp_path, capsys, never_computed, kind):
    """Issue 88: the page was read unbounded (the FIFO and /dev/zero cases are tests/test_cli_audit.py's);
    a page over 1 MiB, bytes that are not UTF-8 (they would be written back replaced) or a dangling
    link are one line naming the page and the fix, exit 2, nothing written."""
    page = tmp_path / "claims.md"
    if kind == "oversized":
        page.write_text("<!-- generated: published-verdicts -->\n" + "x" * (1 << 20))
    elif kind == "not-utf8":
        page.write_bytes(DOC.read_bytes() + b"\xff\xfe")
    else:
        page.symlink_to(tmp_path / "nowhere.md")
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["claims-doc", str(page)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {page}: ") and err.count("\n") == 1, err
    assert "give the Markdown page" in err and "nothing written" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_claims_doc_refuses_to_rewrite_a_page_through_a_link(tmp_path, capsys, never_computed):
    """Issue 88: the atomic rewrite replaces the path it is given: a link to the page would have become
    a file of its own and the page it points to stayed stale. Refused before the claims are computed;
    `--check` writes nothing, so it reads through the link."""
    target = tmp_path / "claims.md"
    target.write_text("# no markers\n")
    link = tmp_path / "link.md"
    link.symlink_to(target)
    assert main(["claims-doc", str(link)]) == 2
    err = capsys.readouterr().err
    assert f"{link}: a link" in err and str(target) in err and err.count("\n") == 1, err
    assert link.is_symlink() and target.read_text() == "# no markers\n"
    assert main(["claims-doc", str(link), "--check"]) == 2  # read through the link: it holds no block
    assert "link.md has no generated block" in capsys.readouterr().err


README = DOC.parents[1] / "README.md"


def _block(text: str, name: str) -> str:
    return text.partition(f"<!-- generated: {name} -->")[2].partition(f"<!-- end generated: {name} -->")[0]


def test_a_changed_published_cell_makes_every_numeric_block_stale(monkeypatch, published_claims_report):
    """Issue 92: numbers about the published cells were written by hand in docs/claims.md and
    README.md and stayed stale after a cell changed. Every block with such numbers is generated: one
    published cell moved by a point (610M MLM-40 on SST-2) changes each of them, so `claims-doc
    --check` fails on both pages."""
    import analysis.claims.inputs as inputs
    from analysis.claims import evaluate_claims
    from analysis.claims.report import PAGE_BLOCKS

    original = inputs.load_published_cells

    def edited():
        cells = original().copy()
        cell = (cells["model"] == "610m-mlm40-42k") & (cells["dataset"] == "sst2")
        cells.loc[cell, "mean"] += 1.0
        return cells

    monkeypatch.setattr(inputs, "load_published_cells", edited)
    report = evaluate_claims(inputs.inputs_from_published(), reps=10000, rng_seed=0)
    for page in (DOC, README):
        text = page.read_text()
        new = regenerate_doc(text, report, str(page))
        numeric = [n for n in PAGE_BLOCKS[page.name] if n != "verdict-sentence"]  # names claims, no numbers
        for name in numeric:
            assert _block(new, name) != _block(text, name), (page.name, name)
        assert regenerate_doc(text, published_claims_report, str(page)) == text  # current as committed


def test_claims_doc_keeps_the_readme_current(tmp_path, computed, capsys):
    page = tmp_path / "README.md"
    page.write_text(README.read_text().replace("| 3.42 [3.11, 3.73] |", "| 3.40 [3.11, 3.73] |", 1))
    assert main(["claims-doc", str(page), "--check"]) == 1
    assert main(["claims-doc", str(page)]) == 0 and page.read_text() == README.read_text()
