"""Table rows: notifications (one-tap links, deliveries, preferences, saved views, webhooks)."""

from __future__ import annotations

from tests.adkweb.security.sweep import LOGIN, MISSING, PAGE_405, E, Target, World


def notification_targets(w: World) -> list[Target]:
    x, t = w.extras, w.call
    api_refused = E(401, 403, 403, 403, 403)  # webhooks: admins only (none of these roles)
    hook = {"url": "http://127.0.0.1:9/h", "events": ["ticket.opened"]}
    return [
        Target(
            # Logged out works with a valid link (its holder is the approver); anyone else logged in is
            # the wrong person. A reject without a reason decides nothing (400): the form asks for one.
            "one-tap approval link",
            "notifications:approval-link",
            f"/a/{x.get('reject_token', 'x')}/",
            False,
            {"GET": E(200, 403, 403, 403, 200), "POST": E(400, 403, 403, 403, 400)},
        ),
        Target(
            "one-tap link, tampered",
            "notifications:approval-link",
            f"/a/{x.get('reject_token', 'x')}x/",
            False,
            {"GET": E(400, 400, 400, 400, 400), "POST": E(400, 400, 400, 400, 400)},
        ),
        Target(
            "notification settings",
            "notifications:preferences",
            "/settings/notifications/",
            False,
            {"GET": E(LOGIN, 200, 200, 200, 200), "POST": E(LOGIN, 302, 302, 302, 302)},
            {"POST": {"email": "someone@example.com", "email_enabled": "on"}},
        ),
        Target(
            "copy approval link",
            "notifications:ticket-link",
            f"/notifications/tickets/{t.pk}/link/",
            False,
            {"GET": PAGE_405, "POST": E(LOGIN, 403, 404, 403, 200)},
        ),
        Target(
            "copy approval link, missing ticket",
            "notifications:ticket-link",
            f"/notifications/tickets/{MISSING}/link/",
            False,
            {"POST": E(LOGIN, 404, 404, 404, 404)},
        ),
        Target(
            "resend a delivery",
            "notifications:delivery-resend",
            f"/notifications/deliveries/{x.get('delivery', 0)}/resend/",
            False,
            {"GET": PAGE_405, "POST": E(LOGIN, 403, 403, 403, 403)},
        ),
        Target(
            "bulk approve (confirmation step)",
            "notifications:bulk",
            "/inbox/bulk/",
            False,
            {"GET": PAGE_405, "POST": E(LOGIN, 403, 403, 403, 200)},
            {"POST": {"action": "approve", "ticket": [t.pk]}},
        ),
        Target(
            "bulk approve (confirmed)",
            "notifications:bulk",
            "/inbox/bulk/?confirmed",
            False,
            {"POST": E(LOGIN, 403, 403, 403, 200)},
            {"POST": {"action": "approve", "ticket": [t.pk], "confirm": "1"}},
        ),
        Target(
            "save an inbox view",
            "notifications:view-save",
            "/inbox/views/",
            False,
            {"GET": PAGE_405, "POST": E(LOGIN, 403, 403, 403, 302)},
            {"POST": {"name": "big ones", "query": "q=meals"}},
        ),
        Target(
            "delete a saved view (the approver's)",
            "notifications:view-delete",
            f"/inbox/views/{x.get('view', 0)}/delete/",
            False,
            {"GET": PAGE_405, "POST": E(LOGIN, 404, 404, 404, 302)},
        ),
        Target(
            "webhooks",
            "notifications_api:webhooks",
            "/api/webhooks",
            True,
            {"GET": api_refused, "POST": api_refused, "DELETE": E(405, 405, 405, 405, 405)},
            {"POST": ("json", hook)},
        ),
        Target(
            "webhook",
            "notifications_api:webhook",
            f"/api/webhooks/{x.get('endpoint', 0)}",
            True,
            {"GET": api_refused, "PATCH": api_refused, "DELETE": api_refused},
            {"PATCH": ("json", {"enabled": False})},
        ),
        Target(
            "webhook deliveries",
            "notifications_api:webhook-deliveries",
            f"/api/webhooks/{x.get('endpoint', 0)}/deliveries",
            True,
            {"GET": api_refused, "POST": E(405, 405, 405, 405, 405)},
        ),
    ]
