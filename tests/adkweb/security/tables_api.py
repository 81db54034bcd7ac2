"""Table rows: login, ADK's API and the approvals API."""

from __future__ import annotations

from tests.adkweb.security.sweep import LOGIN, MISSING, PAGE_405, SESSION_ID, E, Target, World


def api_targets(w: World) -> list[Target]:
    t = w.call
    adk_sessions = "/api/adk/apps/reimbursement_agent/users/requester/sessions"
    answer_by_run = (
        "json",
        {  # the requester's own session, answering the approver's ticket
            "appName": "reimbursement_agent",
            "userId": "requester",
            "sessionId": SESSION_ID,
            "newMessage": {
                "role": "user",
                "parts": [
                    {"functionResponse": {"id": t.call_id, "name": t.call_name, "response": {"status": "approved"}}}
                ],
            },
        },
    )
    return [
        Target(
            "login page",
            "login",
            "/accounts/login/",
            False,
            {"GET": E(200, 200, 200, 200, 200), "POST": E(200, 200, 200, 200, 200)},
        ),
        Target(
            "logout",
            "logout",
            "/accounts/logout/",
            False,
            {"GET": E(405, 405, 405, 405, 405), "POST": E(302, 302, 302, 302, 302)},
        ),
        Target(
            "list-apps",
            "adk_api:list-apps",
            "/api/adk/list-apps",
            True,
            {"GET": E(401, 200, 200, 200, 200), "POST": E(405, 405, 405, 405, 405)},
        ),
        Target(
            "requester's ADK sessions",
            "adk_api:sessions",
            adk_sessions,
            True,
            {"GET": E(401, 200, 403, 200, 403), "POST": E(401, 200, 403, 403, 403)},
            {"POST": ("json", {})},
        ),
        Target(
            "ADK sessions of a missing app",
            "adk_api:sessions",
            "/api/adk/apps/no_such_app/users/requester/sessions",
            True,
            {"GET": E(401, 404, 403, 404, 403), "POST": E(401, 404, 403, 403, 403)},
            {"POST": ("json", {})},
        ),
        Target(
            "requester's ADK session",
            "adk_api:session",
            f"{adk_sessions}/{SESSION_ID}",
            True,
            {
                "GET": E(401, 200, 403, 200, 403),
                "POST": E(401, 409, 403, 403, 403),
                "PATCH": E(401, 200, 403, 403, 403),
                "DELETE": E(401, 200, 403, 403, 403),
            },
            {"POST": ("json", {}), "PATCH": ("json", {"stateDelta": {"topic": "travel"}})},
        ),
        Target(
            "missing ADK session",
            "adk_api:session",
            f"{adk_sessions}/no-such-session",
            True,
            # DELETE of a missing session is done (null), as in ADK; still 403 for another user's
            {"GET": E(401, 404, 403, 404, 403), "DELETE": E(401, 200, 403, 403, 403)},
        ),
        Target(
            "health (public)",
            "adk_api:health",
            "/api/adk/health",
            True,
            {"GET": E(200, 200, 200, 200, 200), "POST": E(405, 405, 405, 405, 405)},
        ),
        Target(
            "version (public)",
            "adk_api:version",
            "/api/adk/version",
            True,
            {"GET": E(200, 200, 200, 200, 200), "POST": E(405, 405, 405, 405, 405)},
        ),
        Target(
            "OpenAPI document (public)",
            "openapi",
            "/api/openapi.json",
            True,
            {"GET": E(200, 200, 200, 200, 200), "POST": E(405, 405, 405, 405, 405)},
        ),
        Target(
            "API docs page", "api-docs", "/api/docs/", False, {"GET": E(LOGIN, 200, 200, 200, 200), "POST": PAGE_405}
        ),
        Target(
            "Prometheus metrics (staff or the scrape token; tests/adkweb/test_metrics.py)",
            "metrics",
            "/metrics",
            False,
            {"GET": E(401, 403, 403, 403, 403), "POST": E(405, 405, 405, 405, 405)},
        ),
        Target(
            "app-info",
            "adk_api:app-info",
            "/api/adk/apps/reimbursement_agent/app-info",
            True,
            {"GET": E(401, 200, 200, 200, 200), "POST": E(405, 405, 405, 405, 405)},
        ),
        Target(
            "app-info of a missing app",
            "adk_api:app-info",
            "/api/adk/apps/no_such_app/app-info",
            True,
            {"GET": E(401, 404, 404, 404, 404)},
        ),
        Target(
            "requester's memory",
            "adk_api:memory",
            "/api/adk/apps/reimbursement_agent/users/requester/memory",
            True,
            {"PATCH": E(401, 200, 403, 403, 403), "GET": E(405, 405, 405, 405, 405)},
            {"PATCH": ("json", {"sessionId": SESSION_ID})},
        ),
        Target(
            "requester's artifacts",
            "adk_api:artifacts",
            f"{adk_sessions}/{SESSION_ID}/artifacts",
            True,
            {"GET": E(401, 200, 403, 200, 403), "POST": E(401, 200, 403, 403, 403)},
            {"POST": ("json", {"filename": "note.txt", "artifact": {"text": "hello"}})},
        ),
        Target(
            "requester's artifact",
            "adk_api:artifact",
            f"{adk_sessions}/{SESSION_ID}/artifacts/chart.png",
            True,
            {"GET": E(401, 200, 403, 200, 403), "DELETE": E(401, 200, 403, 403, 403)},
        ),
        Target(
            "missing artifact",
            "adk_api:artifact",
            f"{adk_sessions}/{SESSION_ID}/artifacts/nope.png",
            True,
            {"GET": E(401, 404, 403, 404, 403)},
        ),
        Target(
            "artifact versions",
            "adk_api:artifact-versions",
            f"{adk_sessions}/{SESSION_ID}/artifacts/chart.png/versions",
            True,
            {"GET": E(401, 200, 403, 200, 403), "POST": E(405, 405, 405, 405, 405)},
        ),
        Target(
            "artifact versions' metadata",
            "adk_api:artifact-versions-metadata",
            f"{adk_sessions}/{SESSION_ID}/artifacts/chart.png/versions/metadata",
            True,
            {"GET": E(401, 200, 403, 200, 403)},
        ),
        Target(
            "artifact version",
            "adk_api:artifact-version",
            f"{adk_sessions}/{SESSION_ID}/artifacts/chart.png/versions/0",
            True,
            {"GET": E(401, 200, 403, 200, 403), "DELETE": E(405, 405, 405, 405, 405)},
        ),
        Target(
            "artifact version's metadata",
            "adk_api:artifact-version-metadata",
            f"{adk_sessions}/{SESSION_ID}/artifacts/chart.png/versions/latest/metadata",
            True,
            {"GET": E(401, 200, 403, 200, 403)},
        ),
        Target(
            "run (answering a ticket)",
            "adk_api:run",
            "/api/adk/run",
            True,
            {"GET": E(405, 405, 405, 405, 405), "POST": E(401, 403, 403, 403, 403)},
            {"POST": answer_by_run},
        ),
        Target(
            "run_sse (answering a ticket)",
            "adk_api:run-sse",
            "/api/adk/run_sse",
            True,
            {"GET": E(405, 405, 405, 405, 405), "POST": E(401, 403, 403, 403, 403)},
            {"POST": answer_by_run},
        ),
        Target(
            "pending-calls list",
            "approvals_api:pending-calls",
            "/api/pending-calls?status=all",
            True,
            {"GET": E(401, 200, 200, 200, 200), "POST": E(405, 405, 405, 405, 405)},
        ),
        Target(
            "pending-call",
            "approvals_api:pending-call",
            f"/api/pending-calls/{t.pk}",
            True,
            {"GET": E(401, 200, 404, 200, 200), "POST": E(405, 405, 405, 405, 405)},
        ),
        Target(
            "missing pending-call",
            "approvals_api:pending-call",
            f"/api/pending-calls/{MISSING}",
            True,
            {"GET": E(401, 404, 404, 404, 404)},
        ),
        Target(
            "pending-call responses",
            "approvals_api:responses",
            f"/api/pending-calls/{t.pk}/responses",
            True,
            {"GET": E(401, 200, 404, 200, 200), "POST": E(401, 403, 404, 403, 201)},
            {"POST": ("json", {"response": {"status": "approved"}, "final": True})},
        ),
        Target(
            "pending-call approve",
            "approvals_api:approve",
            f"/api/pending-calls/{t.pk}/approve",
            True,
            {"GET": E(405, 405, 405, 405, 405), "POST": E(401, 403, 404, 403, 201)},
            {"POST": ("json", {})},
        ),
        Target(
            "pending-call reject",
            "approvals_api:reject",
            f"/api/pending-calls/{t.pk}/reject",
            True,
            {"GET": E(405, 405, 405, 405, 405), "POST": E(401, 403, 404, 403, 201)},
            {"POST": ("json", {"reason": "no"})},
        ),
        Target(
            "pending-call assign",
            "approvals_api:assign",
            f"/api/pending-calls/{t.pk}/assign",
            True,
            {"GET": E(405, 405, 405, 405, 405), "POST": E(401, 403, 404, 403, 200)},
            {"POST": ("json", {"assignee": "me"})},
        ),
        Target(
            "audit CSV (API)",
            "approvals_api:audit-csv",
            "/api/audit/decisions.csv",
            True,
            {"GET": E(401, 403, 403, 200, 200), "POST": E(405, 405, 405, 405, 405)},
        ),
        Target(
            "audit JSON Lines (API)",
            "approvals_api:audit-jsonl",
            "/api/audit/decisions.jsonl",
            True,
            {"GET": E(401, 403, 403, 200, 200), "POST": E(405, 405, 405, 405, 405)},
        ),
        Target(
            "missing pending-call approve",
            "approvals_api:approve",
            f"/api/pending-calls/{MISSING}/approve",
            True,
            {"POST": E(401, 404, 404, 404, 404)},
            {"POST": ("json", {})},
        ),
    ]
