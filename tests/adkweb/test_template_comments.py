"""Django reads `{# ... #}` as a comment on one line only: one that spans lines is text, and the page shows
it. The inbox's bulk confirmation dialog showed its template's note to approvers ("{# In the inbox's
dialog, triage.js sends this form with htmx ... #}"). Longer notes are `{% comment %}` blocks."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_no_template_has_a_comment_that_spans_lines():
    found = []
    for path in sorted((ROOT / "templates").rglob("*.html")):
        text = path.read_text()
        for match in re.finditer(r"\{#(.*?)#\}", text, re.S):
            if "\n" in match.group(1):
                found.append(f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, match.start()) + 1}")
    assert not found, f"multi-line {{# #}} comments (shown as text): {found}"
