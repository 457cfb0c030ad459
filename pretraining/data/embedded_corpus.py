"""Build the embedded English corpus (a FineWeb-Edu-schema parquet) from offline sources.

Run once by a maintainer; the output is committed under pretraining/assets/ (see its README.md):

    apt-get install -y python3.11-doc
    pip download --no-deps gensim==4.4.0 -d /tmp/gensim && unzip -q -d /tmp/gensim /tmp/gensim/gensim-*.whl
    python -m pretraining.data.embedded_corpus --python-docs /usr/share/doc/python3.11/html/_sources \
        --wiki /tmp/gensim/gensim/test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2

Sources, in this order: the English Wikipedia articles of the sample dump shipped in gensim's test
data (CC BY-SA; redirects dropped, wikitext markup stripped with the rules below), then the Python
3.11 documentation sources shipped by Debian's python3.11-doc (PSF licence; reStructuredText as
is). Same inputs -> byte-identical parquet.
"""

from __future__ import annotations

import argparse
import bz2
import html
import re
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pretraining.assets import EMBEDDED_CORPUS, EMBEDDED_TOKENIZER_DIR

# FineWeb-Edu's columns and types (dataset card of HuggingFaceFW/fineweb-edu). FineWeb also has a
# `date` column (crawl date); FineWeb-Edu does not. Our reader needs only `text`.
FINEWEB_EDU_SCHEMA = pa.schema(
    [
        ("text", pa.string()),
        ("id", pa.string()),
        ("dump", pa.string()),
        ("url", pa.string()),
        ("file_path", pa.string()),
        ("language", pa.string()),
        ("language_score", pa.float64()),
        ("token_count", pa.int64()),
        ("score", pa.float64()),
        ("int_score", pa.int64()),
    ]
)
_ID_NAMESPACE = uuid.UUID("5b0c1f0e-7d0b-4c55-9a59-6a4f3f6c2d11")
MIN_CHARS = 500  # drop stubs: a document shorter than this is mostly markup left-overs

_WIKI_NS = "{http://www.mediawiki.org/xml/export-0.10/}"


def _strip_nested(text: str, open_: str, close: str) -> str:
    """Remove balanced (possibly nested) spans like {{...}} or {|...|}."""
    out, depth, i = [], 0, 0
    while i < len(text):
        if text.startswith(open_, i):
            depth += 1
            i += len(open_)
        elif depth and text.startswith(close, i):
            depth -= 1
            i += len(close)
        else:
            if not depth:
                out.append(text[i])
            i += 1
    return "".join(out)


# [[File:...]], [[Category:...]], interlanguage [[de:...]] links, with links nested in captions
_LINK_DROP = re.compile(
    r"\[\[(?:File|Image|Category|[a-z]{2,3}(?:-[a-z]+)?):[^\[\]]*(?:\[\[[^\]]*\]\][^\[\]]*)*\]\]", re.IGNORECASE
)
_LINK = re.compile(r"\[\[(?:[^\]|]*\|)?([^\]]*)\]\]")
_EXTLINK = re.compile(r"\[(?:https?|ftp)://[^\s\]]+\s*([^\]]*)\]")
_REF = re.compile(r"<ref[^>/]*/>|<ref[^>]*>.*?</ref>", re.DOTALL | re.IGNORECASE)
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_TAG = re.compile(r"</?[a-zA-Z][^>]*>")
_HEADING = re.compile(r"^=+\s*(.*?)\s*=+\s*$", re.MULTILINE)
_EMPHASIS = re.compile(r"'{2,}")
_LIST = re.compile(r"^[*#:;]+\s*", re.MULTILINE)
_BLANKS = re.compile(r"\n{3,}")


def clean_wikitext(text: str) -> str:
    """Plain text of a wikitext article: templates, tables, refs, files and categories removed."""
    text = _COMMENT.sub("", text)
    text = _REF.sub("", text)
    text = _strip_nested(text, "{{", "}}")
    text = _strip_nested(text, "{|", "|}")
    text = _LINK_DROP.sub("", text)
    text = _LINK.sub(r"\1", text)
    text = _EXTLINK.sub(r"\1", text)
    text = html.unescape(text)
    text = _TAG.sub("", text)
    text = _HEADING.sub(r"\1", text)
    text = _EMPHASIS.sub("", text)
    text = _LIST.sub("", text)
    lines = [line.strip() for line in text.splitlines()]
    return _BLANKS.sub("\n\n", "\n".join(lines)).strip()


def wikipedia_documents(path: Path) -> list[dict]:
    docs = []
    with bz2.open(path, "rb") as handle:
        for _, elem in ET.iterparse(handle):
            if elem.tag != f"{_WIKI_NS}page":
                continue
            title = elem.findtext(f"{_WIKI_NS}title")
            ns = elem.findtext(f"{_WIKI_NS}ns")
            redirect = elem.find(f"{_WIKI_NS}redirect") is not None
            raw = elem.findtext(f"{_WIKI_NS}revision/{_WIKI_NS}text") or ""
            elem.clear()
            if ns != "0" or redirect or raw.lstrip().upper().startswith("#REDIRECT"):
                continue
            text = clean_wikitext(raw)
            if len(text) >= MIN_CHARS:
                url = "https://en.wikipedia.org/wiki/" + title.replace(" ", "_")
                docs.append(_row(text, url, "embedded-enwiki-sample", f"gensim-4.4.0/{path.name}"))
    return docs


def python_doc_documents(root: Path) -> list[dict]:
    docs = []
    for path in sorted(root.rglob("*.rst.txt")):
        rel = path.relative_to(root).as_posix()
        text = path.read_text(encoding="utf-8").strip()
        if len(text) >= MIN_CHARS:
            url = "https://docs.python.org/3.11/" + rel[: -len(".rst.txt")] + ".html"
            docs.append(_row(text, url, "embedded-python-3.11-docs", f"python3.11-doc/_sources/{rel}"))
    return docs


def _row(text: str, url: str, dump: str, file_path: str) -> dict:
    return {
        "text": text,
        "id": f"<urn:uuid:{uuid.uuid5(_ID_NAMESPACE, url)}>",
        "dump": dump,
        "url": url,
        "file_path": file_path,
        "language": "en",
        "language_score": None,  # no language-id model was run: the sources are English
        "token_count": None,  # filled by write_corpus when a tokenizer is given
        "score": None,  # no FineWeb-Edu educational classifier was run
        "int_score": None,
    }


def write_corpus(docs: list[dict], out: Path, tokenizer=None) -> Path:
    """Write `docs` as one FineWeb-Edu-schema parquet (zstd, deterministic)."""
    if tokenizer is not None:
        texts = [d["text"] for d in docs]
        encodings = tokenizer.backend_tokenizer.encode_batch(texts, add_special_tokens=False)
        docs = [{**d, "token_count": len(e.ids)} for d, e in zip(docs, encodings)]
    table = pa.Table.from_pylist(docs, schema=FINEWEB_EDU_SCHEMA)
    out.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, out, compression="zstd", compression_level=19, row_group_size=256, write_statistics=False)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wiki", type=Path, required=True, help="gensim's enwiki sample .xml.bz2")
    parser.add_argument("--python-docs", type=Path, required=True, help="python3.11-doc _sources dir")
    parser.add_argument("--out", type=Path, default=EMBEDDED_CORPUS)
    parser.add_argument(
        "--tokenizer",
        default=None,
        help="fill token_count with this tokenizer (default: the embedded one if it exists)",
    )
    args = parser.parse_args(argv)
    docs = wikipedia_documents(args.wiki) + python_doc_documents(args.python_docs)
    tokenizer = None
    if args.tokenizer or (EMBEDDED_TOKENIZER_DIR / "tokenizer.json").exists():
        from pretraining.tokenizer import load_tokenizer

        tokenizer = load_tokenizer(args.tokenizer or "embedded")
    path = write_corpus(docs, args.out, tokenizer)
    chars = sum(len(d["text"]) for d in docs)
    print(f"wrote {path}: {len(docs)} documents, {chars:,} characters, {path.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
