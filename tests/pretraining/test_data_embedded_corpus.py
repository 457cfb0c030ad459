"""The shipped corpus: FineWeb-Edu schema, honest metadata, and the wikitext cleaner that made it."""

import pyarrow.parquet as pq

from pretraining.assets import EMBEDDED_CORPUS
from pretraining.data.embedded_corpus import FINEWEB_EDU_SCHEMA, clean_wikitext, write_corpus
from pretraining.tokenizer import load_tokenizer


def test_shipped_corpus_has_the_fineweb_edu_schema_and_provenance():
    table = pq.read_table(EMBEDDED_CORPUS)
    assert table.schema.names == FINEWEB_EDU_SCHEMA.names
    assert [str(t) for t in table.schema.types] == [str(t) for t in FINEWEB_EDU_SCHEMA.types]
    rows = table.to_pylist()
    assert len(rows) == 574 and len({r["id"] for r in rows}) == 574
    assert {r["dump"] for r in rows} == {"embedded-enwiki-sample", "embedded-python-3.11-docs"}
    assert all(r["language"] == "en" and r["score"] is None and r["int_score"] is None for r in rows)
    assert all(r["url"].startswith(("https://en.wikipedia.org/wiki/", "https://docs.python.org/3.11/")) for r in rows)
    backend = load_tokenizer("embedded").backend_tokenizer
    for row in rows[:3] + rows[-3:]:
        assert row["token_count"] == len(backend.encode(row["text"], add_special_tokens=False).ids)


def test_clean_wikitext():
    raw = (
        "{{Infobox|name={{nested}}}}'''Anarchism''' is a [[political philosophy]] that "
        "advocates [[self-governance|self-governed]] societies.<ref>Source</ref>\n"
        "== History ==\n* The [[File:x.png|thumb|a [[link]] inside]]term &amp; more "
        "[http://example.org an example].<!-- hidden -->\n[[Category:Anarchism]]\n"
        "{| class=wikitable\n| cell\n|}"
    )
    assert clean_wikitext(raw) == (
        "Anarchism is a political philosophy that advocates self-governed "
        "societies.\nHistory\nThe term & more an example."
    )


def test_write_corpus_is_deterministic(tmp_path):
    docs = [
        {
            "text": f"document {i} " * 50,
            "id": str(i),
            "dump": "d",
            "url": f"u{i}",
            "file_path": "f",
            "language": "en",
            "language_score": None,
            "token_count": None,
            "score": None,
            "int_score": None,
        }
        for i in range(5)
    ]
    a = write_corpus(docs, tmp_path / "a.parquet").read_bytes()
    b = write_corpus(docs, tmp_path / "b.parquet").read_bytes()
    assert a == b
