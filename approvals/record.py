"""The decision record: every Response is written here, and only here (append-only).

Each row keeps who decided as they were then (username and display name), so the record says who
decided even after the user is renamed or deleted.
"""

from __future__ import annotations

from typing import Any

from .models import Response


def person_snapshot(person: Any) -> tuple[str, str]:
    """(username, display name) of a person as they are now; ("", "") for no person."""
    if person is None or not getattr(person, "is_authenticated", False):
        return "", ""
    username = person.get_username()
    return username, (person.get_full_name() or "").strip() or username


def response_append(*, actor: Any = None, **fields: Any) -> Response:
    """Store one decision row (inside the caller's transaction)."""
    username, name = person_snapshot(actor)
    person = actor if username else None
    return Response.objects.create(actor=person, actor_username=username, actor_name=name, **fields)
