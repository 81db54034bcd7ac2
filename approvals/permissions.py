"""Who may see and answer what. Roles are Django groups created by the demo/setup."""

from __future__ import annotations

from typing import Any

APPROVERS = "approvers"
AGENT_ADMINS = "agent admins"
STAFF_OBSERVERS = "staff observers"
ROLE_GROUPS = (APPROVERS, AGENT_ADMINS, STAFF_OBSERVERS)


def in_group(user: Any, name: str) -> bool:
    if not user or not user.is_authenticated:
        return False
    if user.is_superuser:
        return True
    cache = getattr(user, "_adkweb_groups", None)
    if cache is None:
        cache = set(user.groups.values_list("name", flat=True))
        user._adkweb_groups = cache
    return name in cache


def is_approver(user: Any) -> bool:
    return in_group(user, APPROVERS)


def is_agent_admin(user: Any) -> bool:
    return in_group(user, AGENT_ADMINS)


def is_observer(user: Any) -> bool:
    """Staff observers (and Django staff) watch every conversation."""
    return bool(user and user.is_authenticated and (user.is_staff or in_group(user, STAFF_OBSERVERS)))


def can_view_session(user: Any, session: Any) -> bool:
    if not user or not user.is_authenticated:
        return False
    return session.user_id == user.get_username() or is_observer(user) or is_approver(user)


def can_retry_turns(user: Any, session: Any) -> bool:
    """The owner (their messages) and approvers (their answers) may run a failed turn again."""
    return bool(user and user.is_authenticated and (session.user_id == user.get_username() or is_approver(user)))


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
