"""What the inbox's tests read from a page."""

from __future__ import annotations

import re


def inbox_ids(html: str) -> list[int]:
    """The tickets an inbox page lists, in its order."""
    return [int(pk) for pk in re.findall(r'id="pending-call-(\d+)"', html)]
