"""The README's and docs' links and images lead somewhere: every relative link names a file of the repository
and every #anchor a heading of its page (as GitHub makes its anchors). The README showed a broken image where
its bulk-approve screenshot was never committed."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ("README.md", "docs/API.md")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _anchors(page: Path) -> set[str]:
    """GitHub's: a heading lower-cased, its punctuation dropped (hyphens and underscores kept), spaces as hyphens."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    headings = re.findall(r"^#+\s+(.+)$", text, re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def test_every_relative_link_and_anchor_of_the_docs_exists():
    broken = []
    for doc in DOCS:
        page = ROOT / doc
        for target in LINK.findall(page.read_text()):
            if re.match(r"[a-z]+:", target):
                continue  # another site's
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.is_file():
                broken.append(f"{doc}: {target} (no such file)")
            elif anchor and anchor not in _anchors(file):
                broken.append(f"{doc}: {target} (no such heading)")
    assert not broken, broken
