"""How to cite: BibTeX entries for the paper and this software, read from CITATION.cff.

Model cards of exported checkpoints (pretraining.export, benchmarks.export_st) print them, so the
citation has one source: the CITATION.cff at the repository root.
"""

from __future__ import annotations

import re
from pathlib import Path

CITATION_FILE = Path(__file__).resolve().parent.parent / "CITATION.cff"


def _authors(entry: dict) -> str:
    names = []
    for author in entry.get("authors", []):
        if "family-names" in author:
            names.append(f"{author['family-names']}, {author.get('given-names', '')}".strip(", "))
        else:
            names.append("{" + author["name"] + "}")  # a group name stays one unit
    return " and ".join(names)


def _key(entry: dict, year) -> str:
    """family2026word for a paper, title-word2026 for software by a group."""
    family = entry.get("authors", [{}])[0].get("family-names")
    words = entry["title"].split()
    key = f"{family}{year}{next(w for w in words if len(w) > 3)}" if family else f"{words[0]}{year}"
    return re.sub(r"\W", "", key.lower())


def _bibtex(kind: str, entry: dict, fields: dict) -> str:
    body = ",\n".join(f"  {name} = {{{value}}}" for name, value in fields.items() if value)
    return f"@{kind}{{{_key(entry, fields.get('year'))},\n{body}\n}}"


def bibtex(path: Path = CITATION_FILE) -> str:
    """The paper (CITATION.cff preferred-citation) and the software, as two BibTeX entries."""
    import yaml

    cff = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    paper = cff["preferred-citation"]
    url = paper.get("url", "")
    arxiv_id = url.rsplit("/", 1)[-1] if "arxiv.org/abs/" in url else None
    software_year = str(cff.get("date-released", ""))[:4]
    return "\n\n".join(
        [
            _bibtex(
                "inproceedings",
                paper,
                {
                    "title": paper["title"],
                    "author": _authors(paper),
                    "booktitle": paper.get("collection-title"),
                    "year": paper.get("year"),
                    "eprint": arxiv_id,
                    "archivePrefix": arxiv_id and "arXiv",
                    "url": url,
                },
            ),
            _bibtex(
                "software",
                cff,
                {
                    "title": cff["title"],
                    "author": _authors(cff),
                    "version": cff.get("version"),
                    "year": software_year,
                    "url": cff.get("repository-code") or cff.get("url"),
                },
            ),
        ]
    )
