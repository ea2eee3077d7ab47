"""The documents a newcomer reads: README.md stays short, and every relative link in README.md,
CONTRIBUTING.md, DESIGN.md, BENCHMARKS.md and docs/ resolves (the file exists; a ``#anchor`` names
a heading of that file, as GitHub makes anchors)."""
from __future__ import annotations

import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = ["README.md", "CONTRIBUTING.md", "DESIGN.md", "BENCHMARKS.md",
        *sorted(os.path.join("docs", n) for n in os.listdir(os.path.join(ROOT, "docs")) if n.endswith(".md"))]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def anchors(path: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation but '-' and '_' dropped, spaces to '-'."""
    text = FENCE.sub("", open(path, encoding="utf-8").read())
    out = set()
    for heading in re.findall(r"^#{1,6}\s+(.*)$", text, re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        out.add(slug)
    return out


def links(path: str) -> list[str]:
    text = FENCE.sub("", open(os.path.join(ROOT, path), encoding="utf-8").read())
    text = re.sub(r"`[^`\n]*`", "", text)              # code spans are not links
    return [t for t in LINK.findall(text) if not re.match(r"[a-z][a-z0-9+.-]*:", t)]


@pytest.mark.parametrize("doc", DOCS)
def test_every_relative_link_resolves(doc):
    base = os.path.dirname(os.path.join(ROOT, doc))
    broken = []
    for target in links(doc):
        file, _, anchor = target.partition("#")
        path = os.path.normpath(os.path.join(base, file)) if file else os.path.join(ROOT, doc)
        if not os.path.exists(path):
            broken.append(f"{target} (no file {os.path.relpath(path, ROOT)})")
        elif anchor and path.endswith(".md") and anchor not in anchors(path):
            broken.append(f"{target} (no heading #{anchor} in {os.path.relpath(path, ROOT)})")
    assert not broken, f"{doc}: {broken}"


def test_the_readme_links_to_every_page_of_docs():
    linked = {os.path.normpath(t.partition("#")[0]) for t in links("README.md")}
    for doc in DOCS:
        if doc.startswith("docs") and doc not in linked:
            # reached from a page the README links to
            assert any(os.path.basename(doc) in {os.path.basename(t.partition("#")[0]) for t in links(d)}
                       for d in DOCS if d in linked), f"{doc} is reached from nowhere"


def test_the_readme_is_short():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        assert len(f.read().splitlines()) <= 250
