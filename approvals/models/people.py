"""People on a ticket's record: a user foreign key `<field>`, and `<field>_username`, the username kept
beside it when it was written (a deleted account clears the key; the username stays)."""

from __future__ import annotations

from typing import Any


def person_name(row: Any, field: str) -> str | None:
    """Who `row.<field>` is by username: the account's, or the one kept when it was written (the account
    gone, or its row not read with this one); None for nobody. What the API gives."""
    user = getattr(row, field) if getattr(row, f"{field}_id") is not None else None
    return user.get_username() if user is not None else getattr(row, f"{field}_username") or None


def person_label(row: Any, field: str) -> str:
    """`person_name` as pages show it: followed by " (user since deleted)" once the account is gone (the key
    cleared, a username kept); "" for nobody."""
    name = person_name(row, field) or ""
    return f"{name} (user since deleted)" if name and getattr(row, f"{field}_id") is None else name
