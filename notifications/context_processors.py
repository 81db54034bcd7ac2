"""Navigation context: an approver's saved inbox views."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest


def nav(request: HttpRequest) -> dict[str, Any]:
    user = getattr(request, "user", None)
    if not user or not user.is_authenticated:
        return {}
    from approvals.selectors import works_inbox

    from .selectors import saved_views_for

    return {"nav_saved_views": saved_views_for(user) if works_inbox(user) else []}
