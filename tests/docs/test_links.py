"""Every docs page named in the code, the README or the docs exists, and so does every relative
Markdown link of the README and the docs (file part; anchors are not checked)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [
    p
    for p in ROOT.rglob("*")
    if p.suffix in {".py", ".md", ".yaml", ".def"}
    and p.is_file()
    and not ({".venv", ".git", "outputs", "runs", ".venv-container"} & set(p.relative_to(ROOT).parts))
]
DOCS_NAME = re.compile(r"\bdocs/([A-Za-z0-9_\-]+\.md)")
MD_LINK = re.compile(r"\]\(([^)#\s]+\.md)(?:#[^)]*)?\)")


def test_every_docs_page_named_exists():
    missing = sorted(
        {
            f"{p.relative_to(ROOT)}: docs/{name}"
            for p in SOURCES
            for name in DOCS_NAME.findall(p.read_text(errors="replace"))
            if not (ROOT / "docs" / name).is_file()
        }
    )
    assert missing == []


def test_every_relative_markdown_link_resolves():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken = sorted(
        f"{page.relative_to(ROOT)}: {target}"
        for page in pages
        for target in MD_LINK.findall(page.read_text())
        if not target.startswith("http") and not (page.parent / target).is_file()
    )
    assert broken == []


def test_the_readme_stays_a_front_door():
    """README is the front door (two commands, the pipeline, one example per stage): at most 300
    lines, the rest in docs/ (issue 90 found it at 301)."""
    lines = (Path(__file__).resolve().parents[2] / "README.md").read_text().splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines; move detail to docs/"
