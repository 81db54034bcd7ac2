"""Navigation context: the open-ticket count for approvers; the demo logins hint when logged out."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest

from adkweb.roles import is_agent_admin, is_observer, is_policy_admin


def nav(request: HttpRequest) -> dict[str, Any]:
    user = getattr(request, "user", None)
    if not user or not user.is_authenticated:
        return {"demo_logins": settings.ADKWEB_SHOW_DEMO_LOGINS}
    from .permissions import works_inbox
    from .selectors import open_ticket_count

    approver = works_inbox(user)
    return {
        "nav_is_approver": approver,
        "nav_is_agent_admin": is_agent_admin(user),
        "nav_is_policy_admin": is_policy_admin(user),
        "nav_is_observer": is_observer(user),
        "nav_open_tickets": open_ticket_count(user=user) if approver else None,
    }
