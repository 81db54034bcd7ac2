"""Navigation context: the open-ticket count for approvers; the demo logins hint when logged out."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest

from adkweb.roles import can_audit, is_agent_admin, is_observer, is_policy_admin


def nav(request: HttpRequest) -> dict[str, Any]:
    user = getattr(request, "user", None)
    if not user or not user.is_authenticated:
        return {"demo_logins": settings.ADKWEB_SHOW_DEMO_LOGINS}
    from .permissions import works_inbox

    approver = works_inbox(user)
    return {
        "nav_is_approver": approver,
        "nav_is_agent_admin": is_agent_admin(user),
        "nav_is_policy_admin": is_policy_admin(user),
        "nav_is_observer": is_observer(user),
        "nav_can_audit": approver or can_audit(user),
        "nav_open_tickets": _open_count(request, user) if approver else None,
    }


def _open_count(request: HttpRequest, user: Any) -> int:
    """The badge's count; the inbox view leaves it on the request when its own count is the same."""
    from .selectors import open_ticket_count

    known = getattr(request, "open_ticket_count", None)
    return known if known is not None else open_ticket_count(user=user)
