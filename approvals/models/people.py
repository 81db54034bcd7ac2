"""People on a ticket's record: a user foreign key, and the username kept beside it when it was written
(cleared by a deleted account, the username stays)."""

from __future__ import annotations

from typing import Any


def person_name(user: Any, username: str) -> str | None:
    """A person on a ticket's record by username: the account's, or the one kept when it was written once
    the account is gone (what the API gives); None for nobody."""
    return user.get_username() if user else username or None


def person_label(user: Any, username: str) -> str:
    """A person on a ticket's record, as pages show them: the account's username, or the one kept when it
    was written followed by " (user since deleted)" once the account is gone; "" for nobody."""
    if user:
        return user.get_username()
    return f"{username} (user since deleted)" if username else ""
