"""Who may see and answer a ticket (the roles themselves are project-wide: `adkweb.roles`)."""

from __future__ import annotations

from typing import Any

from adkweb.roles import is_approver, is_observer


def can_view_call(user: Any, call: Any) -> bool:
    if not user or not user.is_authenticated:
        return False
    return is_approver(user) or is_observer(user) or call.requester == user.get_username()


def can_answer_call(user: Any, call: Any) -> bool:
    """Approvers answer every ticket. Questions to the requester (request for input, user
    choice) may also be answered by the requester who owns the conversation."""
    if is_approver(user):
        return True
    return bool(
        user and user.is_authenticated and call.kind in ("input", "choice") and call.requester == user.get_username()
    )
