"""Notification bits on other apps' pages: the ticket's delivery status and "copy approval link"."""

from __future__ import annotations

from typing import Any

from django import template

from adkweb.roles import is_approver, is_observer

register = template.Library()


@register.inclusion_tag("notifications/partials/ticket_notifications.html")
def ticket_notifications(ticket: Any, viewer: Any) -> dict[str, Any]:
    """ "emailed 3 approvers · webhook delivered", and for approvers and staff the rows behind it."""
    from ..selectors import delivery_summary, delivery_target_label, ticket_deliveries, ticket_has_pending_fan_out

    deliveries = ticket_deliveries(ticket_id=ticket.pk)
    return {
        "ticket": ticket,
        "deliveries": [(d, delivery_target_label(d)) for d in deliveries],
        "summary": delivery_summary(deliveries),
        "preparing": ticket_has_pending_fan_out(ticket_id=ticket.pk),
        "show_rows": bool(viewer and (is_approver(viewer) or is_observer(viewer))),
        "can_resend": bool(viewer and viewer.is_authenticated and viewer.has_perm("notifications.change_delivery")),
    }


@register.inclusion_tag("notifications/partials/approval_link_button.html")
def approval_link_button(ticket: Any, viewer: Any) -> dict[str, Any]:
    from approvals.selectors import can_decide

    return {"ticket": ticket, "show": ticket.is_open and can_decide(viewer, ticket)}
