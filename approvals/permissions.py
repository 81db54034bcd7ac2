"""Who may see and answer a ticket (the roles themselves are project-wide: `adkweb.roles`)."""

from __future__ import annotations

from typing import Any

from adkweb.roles import is_approver, is_observer


def can_view_ticket(user: Any, ticket: Any) -> bool:
    if not user or not user.is_authenticated:
        return False
    return is_approver(user) or is_observer(user) or ticket.requester == user.get_username()


def can_decide_ticket(user: Any, ticket: Any) -> bool:
    """Approvers answer every ticket. Questions to the requester (request for input, user
    choice) may also be answered by the requester who owns the conversation."""
    if is_approver(user):
        return True
    return bool(
        user
        and user.is_authenticated
        and ticket.kind in ("input", "choice")
        and ticket.requester == user.get_username()
    )
