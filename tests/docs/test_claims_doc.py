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
