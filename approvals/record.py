"""The decision record: every Response is written here, and only here (append-only).

Each row keeps who decided as they were then (username and display name), so the record says who
decided even after the user is renamed or deleted, and is linked into the decision chain
(approvals.chain) in the same transaction, so changing it afterwards shows.
"""

from __future__ import annotations

from typing import Any

from . import chain
from .models import Response


def person_snapshot(person: Any) -> tuple[str, str]:
    """(username, display name) of a person as they are now; ("", "") for no person."""
    if person is None or not getattr(person, "is_authenticated", False):
        return "", ""
    username = person.get_username()
    return username, (person.get_full_name() or "").strip() or username


def response_append(*, actor: Any = None, link: bool = True, **fields: Any) -> Response:
    """Store one decision row (inside the caller's transaction) and chain it; `link=False`: the
    caller chains its rows with `chain.link` last in its transaction (the chain's lock is then
    held the shortest time, and never while waiting for another lock)."""
    username, name = person_snapshot(actor)
    person = actor if username else None
    row = Response.objects.create(actor=person, actor_username=username, actor_name=name, **fields)
    if link:
        chain.link([row])
    return row
