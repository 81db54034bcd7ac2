"""Table rows: the dashboard's pages and their actions."""

from __future__ import annotations

from tests.adkweb.security.sweep import LOGIN, MISSING, PAGE_405, E, Target, World


def page_targets(w: World) -> list[Target]:
    s, t = w.session, w.call
    act = {
        "approve": {},
        "reject": {"reject-reason": "no receipt"},
        "update": {"update-message": "checking", "update-progress": "40"},
        "custom": {"custom-body": '{"status": "approved"}', "custom-final": "on"},
    }
    return [
        Target("inbox", "approvals:inbox", "/", False, {"GET": E(LOGIN, 302, 302, 302, 200), "POST": PAGE_405}),
        Target(
            "ticket page",
            "approvals:ticket",
            f"/tickets/{t.pk}/",
            False,
            {"GET": E(LOGIN, 200, 404, 200, 200), "POST": PAGE_405},
        ),
        Target(
            "missing ticket page",
            "approvals:ticket",
            f"/tickets/{MISSING}/",
            False,
            {"GET": E(LOGIN, 404, 404, 404, 404)},
        ),
        *[
            Target(
                f"ticket {a}",
                "approvals:ticket-act",
                f"/tickets/{t.pk}/{a}/",
                False,
                {"GET": PAGE_405, "POST": E(LOGIN, 403, 404, 403, 302)},
                {"POST": body},
            )
            for a, body in act.items()
        ],
        Target(
            "ticket assign to me",
            "approvals:ticket-assign",
            f"/tickets/{t.pk}/assign/",
            False,
            {"GET": PAGE_405, "POST": E(LOGIN, 403, 404, 403, 302)},
            {"POST": {"assign": "me"}},
        ),
        Target(
            "missing ticket assign",
            "approvals:ticket-assign",
            f"/tickets/{MISSING}/assign/",
            False,
            {"POST": E(LOGIN, 404, 404, 404, 404)},
            {"POST": {"assign": "me"}},
        ),
        Target(
            "ticket unknown action",
            "approvals:ticket-act",
            f"/tickets/{t.pk}/bogus/",
            False,
            {"POST": E(LOGIN, 404, 404, 404, 404)},
        ),
        Target(
            "missing ticket approve",
            "approvals:ticket-act",
            f"/tickets/{MISSING}/approve/",
            False,
            {"POST": E(LOGIN, 404, 404, 404, 404)},
        ),
        Target(
            "conversation list",
            "agents_app:session-list",
            "/sessions/",
            False,
            {"GET": E(LOGIN, 200, 200, 200, 200), "POST": PAGE_405},
        ),
        Target(
            "new conversation",
            "agents_app:session-new",
            "/sessions/new/",
            False,
            {"GET": E(LOGIN, 200, 200, 200, 200), "POST": E(LOGIN, 302, 302, 302, 302)},
            {"POST": {"agent": "stock_agent", "text": "What is GOOG at?"}},
        ),
        Target(
            "conversation",
            "agents_app:session-detail",
            f"/sessions/{s.pk}/",
            False,
            {"GET": E(LOGIN, 200, 404, 200, 200), "POST": PAGE_405},
        ),
        Target(
            "missing conversation",
            "agents_app:session-detail",
            f"/sessions/{MISSING}/",
            False,
            {"GET": E(LOGIN, 404, 404, 404, 404)},
        ),
        Target(
            "conversation's earlier events",
            "agents_app:session-events",
            f"/sessions/{s.pk}/events/?before={2**31}",
            False,
            {"GET": E(LOGIN, 200, 404, 200, 200), "POST": PAGE_405},
        ),
        Target(
            "missing conversation's earlier events",
            "agents_app:session-events",
            f"/sessions/{MISSING}/events/?before=1",
            False,
            {"GET": E(LOGIN, 404, 404, 404, 404)},
        ),
        Target(
            "message post",
            "agents_app:message-post",
            f"/sessions/{s.pk}/messages/",
            False,
            {"GET": PAGE_405, "POST": E(LOGIN, 302, 404, 403, 403)},
            {"POST": {"text": "hello"}},
        ),
        Target(
            "missing conversation message",
            "agents_app:message-post",
            f"/sessions/{MISSING}/messages/",
            False,
            {"POST": E(LOGIN, 404, 404, 404, 404)},
            {"POST": {"text": "hello"}},
        ),
        Target(
            "retry a failed turn",
            "agents_app:turn-retry",
            f"/sessions/{s.pk}/turns/{w.failed_turn.pk}/retry/",
            False,
            {"GET": PAGE_405, "POST": E(LOGIN, 302, 404, 403, 302)},
        ),
        Target(
            "retry a missing turn",
            "agents_app:turn-retry",
            f"/sessions/{s.pk}/turns/{MISSING}/retry/",
            False,
            {"POST": E(LOGIN, 404, 404, 403, 404)},
        ),
        Target(
            "conversation artifact download",
            "agents_app:artifact",
            f"/sessions/{s.pk}/artifacts/chart.png",
            False,
            {"GET": E(LOGIN, 200, 404, 200, 200), "POST": PAGE_405},
        ),
        Target(
            "missing conversation artifact",
            "agents_app:artifact",
            f"/sessions/{s.pk}/artifacts/nope.png?inline=1",
            False,
            {"GET": E(LOGIN, 404, 404, 404, 404)},
        ),
        Target(
            "agents",
            "agents_app:agent-list",
            "/agents/",
            False,
            {"GET": E(LOGIN, 200, 200, 200, 200), "POST": PAGE_405},
        ),
    ]
