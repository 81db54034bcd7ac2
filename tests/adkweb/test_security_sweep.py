"""Security sweep: every URL × every role × GET/POST, CSRF on every unsafe endpoint, every websocket
route, and escaping of model output / tool arguments everywhere they are shown.

The bar: no 5xx; anonymous → login redirect (pages) or 401 (API); another requester (mallory)
never sees the requester's session or ticket (403/404, and neither the session id nor the
ticket's arguments in the body); only approvers answer tickets; no unsafe request from a
session-authenticated client gets through without a CSRF token.

Tables are the spec: a new URL pattern that is not in `TARGETS` fails `test_every_url_is_in_the_table`.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

import pytest
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser, User
from django.db import transaction
from django.test import Client
from django.urls import URLResolver, get_resolver

from agents_app import services as agent_services
from agents_app.models import AdkSession, StoredEvent, Turn
from approvals.models import PendingCall, Policy, Response, StandingGrant
from tests.approvals_factories import ticket

ROLES = ("anonymous", "requester", "mallory", "observer", "approver")
SESSION_ID = "sess-SECRET-7f3a"  # the requester's ADK session id: must never reach mallory
SECRET_ARG = "secret-purpose-Q9"  # the ticket's argument: must never reach mallory
LOGIN = "login"  # expected "302 to the login page"
MISSING = 999999


@pytest.fixture(autouse=True)
def _quiet_request_logs():
    """Django logs every 4xx ("Not Found: ..."); hundreds of them hide real failures."""
    logger = logging.getLogger("django.request")
    level = logger.level
    logger.setLevel(logging.ERROR)  # 5xx still logged
    yield
    logger.setLevel(level)


@dataclass
class World:
    users: dict[str, Any]
    session: AdkSession
    call: PendingCall
    failed_turn: Turn
    extras: dict[str, Any] = field(default_factory=dict)  # notifications: a link token, a delivery, ...


@pytest.fixture
def world(demo) -> World:
    users = {**demo, "mallory": User.objects.create_user("mallory", password="mallory-pw"), "anonymous": None}
    session = agent_services.session_create(app_name="reimbursement_agent", user_id="requester", session_id=SESSION_ID)
    call = ticket(session=session, args={"purpose": SECRET_ARG, "amount": 200.0})
    failed = Turn.objects.create(
        session=session,
        kind=Turn.Kind.MESSAGE,
        status=Turn.Status.FAILED,
        content={"role": "user", "parts": [{"text": "hi"}]},
        error="the agent was disabled",
    )
    # An artifact of the requester's session (a tool would save it; ADK's API can too).
    from google.genai import types

    from agents_app import artifacts

    scope = {"app_name": "reimbursement_agent", "user_id": "requester", "session_id": SESSION_ID}
    artifacts.save(
        scope={**scope, "filename": "chart.png"},
        part=types.Part(inline_data=types.Blob(mime_type="image/png", data=b"\x89PNG")),
        custom_metadata=None,
    )
    extras = {**notification_objects(users), **policy_objects(users, call)}
    return World(users=users, session=session, call=call, failed_turn=failed, extras=extras)


def policy_objects(users: dict[str, Any], call: PendingCall) -> dict[str, Any]:
    """A policy (the demo's) and a standing grant the approver gave from the requester's ticket."""
    from datetime import timedelta

    from django.utils import timezone

    from approvals.models import Policy, StandingGrant

    grant = StandingGrant.objects.create(
        scope="session",
        app_name=call.app_name,
        tool_name=call.tool_name,
        kind=call.kind,
        requester=call.requester,
        session=call.session,
        ticket=call,
        created_by=users["approver"],
        expires_at=timezone.now() + timedelta(hours=1),
    )
    return {"policy": Policy.objects.get(name="Large reimbursements").pk, "grant": grant.pk}


def notification_objects(users: dict[str, Any]) -> dict[str, Any]:
    """A one-tap link (on another, harmless ticket: its holder is meant to see it), a delivery, a
    saved view of the approver's, and a webhook endpoint."""
    from notifications import links
    from notifications.models import Delivery, NotificationEvent, SavedView, WebhookEndpoint

    other = ticket(session=agent_services.session_create(app_name="reimbursement_agent", user_id="requester"))
    link = links.link_create(ticket=other, user=users["approver"])
    event = NotificationEvent.objects.create(name="ticket.opened", ticket=other)
    endpoint = WebhookEndpoint.objects.create(url="http://127.0.0.1:9/hook", secret="s" * 20, events=["ticket.opened"])
    delivery = Delivery.objects.create(event=event, ticket=other, channel="webhook", endpoint=endpoint, target="x")
    view = SavedView.objects.create(user=users["approver"], name="mine", query="mine=1")
    return {
        "reject_token": links.link_token(link, "reject"),
        "delivery": delivery.pk,
        "view": view.pk,
        "endpoint": endpoint.pk,
    }


def client_for(world: World, role: str, *, csrf: bool = False) -> Client:
    c = Client(enforce_csrf_checks=csrf)
    if world.users[role] is not None:
        c.force_login(world.users[role])
    return c


def state_counts() -> dict[str, Any]:
    """What a refused request must leave alone."""
    return {
        "sessions": AdkSession.objects.count(),
        "turns": Turn.objects.count(),
        "responses": Response.objects.count(),
        "events": StoredEvent.objects.count(),
        "ticket statuses": sorted(PendingCall.objects.values_list("pk", "status")),
        "policies": sorted(Policy.objects.values_list("pk", "version")),
        "grants": sorted(StandingGrant.objects.values_list("pk", "revoked_at")),
    }


# -- the table -----------------------------------------------------------------------------------
def E(anonymous, requester, mallory, observer, approver) -> dict[str, Any]:  # noqa: N802
    """Expected status per role, in ROLES order. LOGIN = 302 to the login page; a tuple = any of."""
    return dict(zip(ROLES, (anonymous, requester, mallory, observer, approver), strict=True))


PAGE_405 = E(LOGIN, 405, 405, 405, 405)  # a GET-only page, POSTed: login first, then 405


@dataclass
class Target:
    """One URL with the objects filled in, what each method sends, and who gets what."""

    label: str
    name: str  # the URL pattern's name (namespace:name)
    path: str
    api: bool
    expect: dict[str, dict[str, Any]]  # method -> role -> status
    bodies: dict[str, Any] = field(default_factory=dict)  # method -> form dict, or ("json", value)


def _send(c: Client, method: str, path: str, body: Any) -> Any:
    if isinstance(body, tuple) and body[0] == "json":
        return getattr(c, method.lower())(path, data=json.dumps(body[1]), content_type="application/json")
    if method == "DELETE":
        return c.delete(path)
    if method == "PATCH":
        return c.patch(path, data=json.dumps(body[1] if body else {}), content_type="application/json")
    return getattr(c, method.lower())(path, data=body or {})


def targets(w: World) -> list[Target]:
    s, t = w.session, w.call
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
    act = {
        "approve": {},
        "reject": {"reject-reason": "no receipt"},
        "update": {"update-message": "checking", "update-progress": "40"},
        "custom": {"custom-body": '{"status": "approved"}', "custom-final": "on"},
    }
    rows = [
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
            {"GET": E(401, 404, 403, 404, 403), "DELETE": E(401, 404, 403, 403, 403)},
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
            "missing pending-call approve",
            "approvals_api:approve",
            f"/api/pending-calls/{MISSING}/approve",
            True,
            {"POST": E(401, 404, 404, 404, 404)},
            {"POST": ("json", {})},
        ),
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
        *notification_targets(w),
    ]
    return rows


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
        *policy_targets(w),
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


def policy_targets(w: World) -> list[Target]:
    """Approval policies (agent admins only: none of these roles) and standing grants."""
    x, t = w.extras, w.call
    admins_only = E(LOGIN, 403, 403, 403, 403)
    api_admins_only = E(401, 403, 403, 403, 403)
    policy = {"name": "Hardware", "tool": "ask_for_approval", "condition": "amount > 5"}
    return [
        Target("policies page", "approvals:policies", "/policies/", False, {"GET": admins_only, "POST": PAGE_405}),
        Target(
            "new policy",
            "approvals:policy-new",
            "/policies/new/",
            False,
            {"GET": admins_only, "POST": admins_only},
            {"POST": {"name": "x", "required_approvals": "1", "priority": "0"}},
        ),
        Target(
            "policy page",
            "approvals:policy",
            f"/policies/{x.get('policy', 0)}/",
            False,
            {"GET": admins_only, "POST": admins_only},
            {"POST": {"name": "x", "required_approvals": "1", "priority": "0"}},
        ),
        Target("missing policy page", "approvals:policy", f"/policies/{MISSING}/", False, {"GET": admins_only}),
        Target(
            "policy delete",
            "approvals:policy-delete",
            f"/policies/{x.get('policy', 0)}/delete/",
            False,
            {"GET": PAGE_405, "POST": admins_only},
        ),
        Target(
            "policy dry run",
            "approvals:policy-dry-run",
            f"/policies/{x.get('policy', 0)}/dry-run/?last=5",
            False,
            {"GET": admins_only, "POST": PAGE_405},
        ),
        Target("grants page", "approvals:grants", "/grants/", False, {"GET": E(LOGIN, 200, 200, 200, 200)}),
        Target(
            "grant revoke (the approver's grant on the requester's ticket)",
            "approvals:grant-revoke",
            f"/grants/{x.get('grant', 0)}/revoke/",
            False,
            {"GET": PAGE_405, "POST": E(LOGIN, 403, 404, 403, 302)},
        ),
        Target(
            "missing grant revoke",
            "approvals:grant-revoke",
            f"/grants/{MISSING}/revoke/",
            False,
            {"POST": E(LOGIN, 404, 404, 404, 404)},
        ),
        Target(
            "policies API",
            "approvals_api:policies",
            "/api/policies",
            True,
            {"GET": api_admins_only, "POST": api_admins_only, "DELETE": E(405, 405, 405, 405, 405)},
            {"POST": ("json", policy)},
        ),
        Target(
            "policy API",
            "approvals_api:policy",
            f"/api/policies/{x.get('policy', 0)}",
            True,
            {"GET": api_admins_only, "PATCH": api_admins_only, "PUT": api_admins_only, "DELETE": api_admins_only},
            {"PATCH": ("json", {"priority": 3}), "PUT": ("json", policy)},
        ),
        Target(
            "policy dry-run API",
            "approvals_api:policy-dry-run",
            f"/api/policies/{x.get('policy', 0)}/dry-run",
            True,
            {"GET": api_admins_only, "POST": E(405, 405, 405, 405, 405)},
        ),
        Target(
            "grants API",
            "approvals_api:grants",
            "/api/grants",
            True,
            {"GET": E(401, 200, 200, 200, 200), "POST": E(401, 403, 404, 403, 201)},
            {"POST": ("json", {"ticket": t.pk, "scope": "user", "minutes": 30})},
        ),
        Target(
            "grant API",
            "approvals_api:grant",
            f"/api/grants/{x.get('grant', 0)}",
            True,
            {"GET": E(401, 200, 404, 200, 200), "DELETE": E(401, 403, 404, 403, 200)},
        ),
        Target(
            "missing grant API",
            "approvals_api:grant",
            f"/api/grants/{MISSING}",
            True,
            {"GET": E(401, 404, 404, 404, 404), "DELETE": E(401, 404, 404, 404, 404)},
        ),
    ]


def url_pattern_names() -> set[str]:
    """Every named URL pattern of the project except the Django admin and static files."""
    names: set[str] = set()

    def walk(patterns: list, prefix: str, namespace: str | None) -> None:
        for p in patterns:
            route = prefix + str(p.pattern)
            if route.startswith(("admin/", "^static/")):
                continue
            if isinstance(p, URLResolver):
                walk(p.url_patterns, route, p.namespace or namespace)
            else:
                names.add(f"{namespace}:{p.name}" if namespace else str(p.name))

    walk(get_resolver().url_patterns, "", None)
    return names


def test_every_url_is_in_the_table(world):
    covered = {t.name for t in targets(world)}
    missing = url_pattern_names() - covered
    assert not missing, f"URL patterns with no row in the security sweep table: {sorted(missing)}"


def _status_matches(response: Any, expected: Any) -> bool:
    if expected == LOGIN:
        return response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    if isinstance(expected, tuple):
        return response.status_code in expected
    return response.status_code == expected


def _content(response: Any) -> str:
    if getattr(response, "streaming", False):
        return b"".join(response.streaming_content).decode(errors="replace")
    return response.content.decode(errors="replace")


def _check(world: World, target: Target, role: str, method: str, failures: list[str]) -> None:
    """One cell of the sweep, rolled back so that every cell starts from the same state."""
    c = client_for(world, role)
    where = f"{method} {target.path} ({target.label}) as {role}"
    with transaction.atomic():
        before = state_counts()
        response = _send(c, method, target.path, target.bodies.get(method))
        body = _content(response)
        after = state_counts()
        transaction.set_rollback(True)
    status = response.status_code
    expected = target.expect[method][role]
    if status >= 500:
        failures.append(f"{where}: {status} server error: {body[:200]}")
        return
    if not _status_matches(response, expected):
        failures.append(f"{where}: got {status} {response.get('Location', '')} {body[:160]!r}, expected {expected}")
    if role in ("anonymous", "mallory") and (SESSION_ID in body or SECRET_ARG in body):
        failures.append(f"{where}: the body shows the requester's session id or ticket arguments")
    if status >= 400:
        if target.api and "detail" not in body:
            failures.append(f"{where}: refusal {status} without a JSON detail message: {body[:160]!r}")
        if before != after:
            failures.append(f"{where}: refused with {status} but changed state {before} -> {after}")
    if role not in ("approver",) and after["responses"] != before["responses"]:
        failures.append(f"{where}: a non-approver's request recorded a ticket response")


def _labels() -> list[str]:
    """Row labels for test ids (computed with placeholder objects: labels do not depend on them)."""
    from types import SimpleNamespace

    fake = SimpleNamespace(pk=0, call_id="", call_name="")
    return [t.label for t in targets(World(users={}, session=fake, call=fake, failed_turn=fake))]  # type: ignore[arg-type]


@pytest.mark.parametrize("label", _labels())
def test_url_role_sweep(world, label):
    """One row: every method of the row × every role, each cell checked and rolled back."""
    target = next(t for t in targets(world) if t.label == label)
    failures: list[str] = []
    for method in target.expect:
        for role in ROLES:
            _check(world, target, role, method, failures)
    assert not failures, "\n".join(failures)


# -- CSRF ----------------------------------------------------------------------------------------
def _first_allowed_role(expect: dict[str, Any]) -> str | None:
    """A role that the request would otherwise succeed for (so a 403 is CSRF, not permissions)."""
    for role in ("requester", "approver", "observer", "mallory"):
        status = expect[role]
        if isinstance(status, int) and status < 400:
            return role
    return None


@pytest.mark.parametrize("cookie", [False, True], ids=["no-csrf-cookie", "cookie-but-no-token"])
def test_unsafe_requests_without_csrf_token_are_refused_everywhere(world, cookie):
    """The second variant is the real cross-site case: the browser sends the csrftoken cookie,
    the attacker's form cannot send the matching token."""
    failures: list[str] = []
    checked = 0
    for target in targets(world):
        for method, expect in target.expect.items():
            if method == "GET" or expect["requester"] == 405:
                continue  # safe, or not an endpoint for this method
            role = "anonymous" if target.name == "login" else _first_allowed_role(expect)
            if role is None and target.api:
                role = "requester"  # refused anyway: the message must say CSRF came first
            if role is None:
                continue
            checked += 1
            c = client_for(world, role, csrf=True)
            if cookie:
                c.get("/accounts/login/")  # sets the csrftoken cookie
                assert "csrftoken" in c.cookies
            with transaction.atomic():
                before = state_counts()
                response = _send(c, method, target.path, target.bodies.get(method))
                after = state_counts()
                transaction.set_rollback(True)
            where = f"{method} {target.path} ({target.label}) as {role} without a CSRF token"
            if response.status_code != 403:
                failures.append(f"{where}: got {response.status_code}, expected 403")
            elif target.api and "CSRF" not in response.content.decode():
                failures.append(f"{where}: 403 does not say it is CSRF: {response.content[:160]!r}")
            if before != after:
                failures.append(f"{where}: changed state {before} -> {after}")
    assert checked >= 15, f"only {checked} unsafe endpoints were checked"
    assert not failures, "\n".join(failures)


def test_token_in_header_passes_csrf_page_and_api(world):
    """Positive control: the same requests with the X-CSRFToken header (as htmx sends it) go through."""
    c = client_for(world, "approver", csrf=True)
    c.get(f"/tickets/{world.call.pk}/")
    token = c.cookies["csrftoken"].value
    r = c.post(
        f"/api/pending-calls/{world.call.pk}/responses",
        data=json.dumps({"response": {"status": "in_progress"}, "final": False}),
        content_type="application/json",
        HTTP_X_CSRFTOKEN=token,
    )
    assert r.status_code == 201, r.content
    r = c.post(f"/tickets/{world.call.pk}/approve/", {}, HTTP_X_CSRFTOKEN=token, HTTP_HX_REQUEST="true")
    assert r.status_code == 200 and world.call.__class__.objects.get(pk=world.call.pk).status == "approved"


def test_api_token_requests_need_no_csrf_but_a_session_cookie_does(world):
    from agents_app.tokens import token_create

    _, key = token_create(user=world.users["approver"])
    c = Client(enforce_csrf_checks=True)
    r = c.post(
        f"/api/pending-calls/{world.call.pk}/approve",
        data="{}",
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Token {key}",
    )
    assert r.status_code == 201, r.content


# -- websockets ----------------------------------------------------------------------------------
def ws_routes(world: World) -> list[tuple[str, str, dict[str, bool]]]:
    """(label, path, role -> may connect). Every route of adkweb/routing.py is here."""
    s, t = world.session, world.call
    return [
        (
            "conversation list",
            "/ws/sessions/",
            dict(anonymous=False, requester=True, mallory=True, observer=True, approver=True),
        ),
        (
            "conversation",
            f"/ws/sessions/{s.pk}/",
            dict(anonymous=False, requester=True, mallory=False, observer=True, approver=True),
        ),
        (
            "missing conversation",
            f"/ws/sessions/{MISSING}/",
            dict(anonymous=False, requester=False, mallory=False, observer=False, approver=False),
        ),
        (
            "approvals inbox",
            "/ws/approvals/",
            dict(anonymous=False, requester=False, mallory=False, observer=False, approver=True),
        ),
        (
            "approvals nav count",
            "/ws/approvals/?nav=1",
            dict(anonymous=False, requester=False, mallory=False, observer=False, approver=True),
        ),
        (
            "ticket",
            f"/ws/tickets/{t.pk}/",
            dict(anonymous=False, requester=True, mallory=False, observer=True, approver=True),
        ),
        (
            "missing ticket",
            f"/ws/tickets/{MISSING}/",
            dict(anonymous=False, requester=False, mallory=False, observer=False, approver=False),
        ),
    ]


def test_every_websocket_route_is_in_the_table(world):
    from adkweb.routing import websocket_urlpatterns

    routes = {str(p.pattern) for p in websocket_urlpatterns}
    covered = {"ws/sessions/", "ws/sessions/<int:pk>/", "ws/approvals/", "ws/tickets/<int:ticket_id>/"}
    assert routes <= covered, f"websocket routes not in the sweep: {sorted(routes - covered)}"


@pytest.mark.django_db(transaction=True)
async def test_websocket_routes_refuse_anonymous_and_unauthorised_users(world):
    from adkweb.asgi import application

    failures = []
    for label, path, allowed in ws_routes(world):
        for role in ROLES:
            comm = WebsocketCommunicator(application, path, headers=[(b"origin", b"http://testserver")])
            comm.scope["user"] = world.users[role] or AnonymousUser()
            connected, _ = await comm.connect()
            if connected:
                frames = []
                while not await comm.receive_nothing(timeout=0.05):
                    frames.append(await comm.receive_from())
                text = "".join(frames)
                if role in ("anonymous", "mallory") and (SESSION_ID in text or SECRET_ARG in text):
                    failures.append(f"{path} ({label}) as {role}: the socket pushed requester's content")
                await comm.disconnect()
            if connected != allowed[role]:
                failures.append(f"{path} ({label}) as {role}: connected={connected}, expected {allowed[role]}")
    assert not failures, "\n".join(failures)


@pytest.mark.django_db(transaction=True)
async def test_anonymous_sockets_are_refused_through_the_real_stack_without_scope_user(world):
    """No scope["user"] injected: the cookie-less real stack (AuthMiddlewareStack) must refuse."""
    from adkweb.asgi import application

    for _, path, _ in ws_routes(world):
        comm = WebsocketCommunicator(application, path, headers=[(b"origin", b"http://testserver")])
        connected, _ = await comm.connect()
        assert not connected, f"{path}: an anonymous socket connected"


@pytest.mark.django_db(transaction=True)
async def test_mallory_on_the_list_socket_gets_no_row_for_the_requesters_session(world):
    from channels.layers import get_channel_layer

    from adkweb.asgi import application
    from agents_app.events import SESSIONS_GROUP

    comm = WebsocketCommunicator(application, "/ws/sessions/", headers=[(b"origin", b"http://testserver")])
    comm.scope["user"] = world.users["mallory"]
    assert (await comm.connect())[0]
    await get_channel_layer().group_send(SESSIONS_GROUP, {"type": "session.status", "session_pk": world.session.pk})
    assert await comm.receive_nothing(timeout=0.3), "mallory's list socket got a row of the requester's session"
    await comm.disconnect()


# -- escaping -------------------------------------------------------------------------------------
SCRIPT = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(1)>"
RAW_TAGS = ("<script>alert(1)", "<img src=x onerror")
ESCAPED = ("&lt;script&gt;alert(1)&lt;/script&gt;", "&lt;img src=x onerror=alert(1)&gt;")


def _assert_escaped(html: str, where: str) -> None:
    for raw in RAW_TAGS:
        assert raw not in html, f"{where}: raw {raw!r} in the HTML"
    assert any(e in html for e in ESCAPED), f"{where}: the escaped argument is not shown at all"


def test_tool_arguments_and_model_output_are_escaped_everywhere(world, worker, wait):
    """The demo model's tool playground puts hostile text in a ticket's arguments and in the
    conversation; every page and every pushed fragment shows it escaped."""
    import asyncio

    from channels.layers import get_channel_layer

    from adkweb.asgi import application

    session = agent_services.session_create(app_name="reimbursement_agent", user_id="requester")
    # Sockets first, so the fragments pushed by the run are captured.
    loop = asyncio.new_event_loop()

    async def open_socket(path: str, user: Any) -> WebsocketCommunicator:
        comm = WebsocketCommunicator(application, path, headers=[(b"origin", b"http://testserver")])
        comm.scope["user"] = user
        assert (await comm.connect())[0], path
        return comm

    conv_socket = loop.run_until_complete(open_socket(f"/ws/sessions/{session.pk}/", world.users["requester"]))
    inbox_socket = loop.run_until_complete(open_socket("/ws/approvals/", world.users["approver"]))
    try:
        args = json.dumps({"purpose": SCRIPT + " " + IMG, "amount": 500})
        agent_services.message_send(session=session, text=f"/call ask_for_approval {args}", streaming=False)
        call = wait(lambda: PendingCall.objects.filter(session=session).first(), what="the ticket")
        wait(
            lambda: not Turn.objects.filter(session=session, status__in=["queued", "running"]).exists(), what="the turn"
        )
        assert SCRIPT in call.args["purpose"], call.args  # the hostile text really is in the data

        async def drain(comm: WebsocketCommunicator) -> str:
            frames = []
            while not await comm.receive_nothing(timeout=0.5):
                frames.append(await comm.receive_from())
            return "".join(frames)

        pushed_conv = loop.run_until_complete(drain(conv_socket))
        pushed_inbox = loop.run_until_complete(drain(inbox_socket))
        _assert_escaped(pushed_conv, "conversation socket fragments")
        _assert_escaped(pushed_inbox, "inbox socket fragments")

        # The ticket socket renders the ticket panel when the ticket changes (an update is sent).
        ticket_socket = loop.run_until_complete(open_socket(f"/ws/tickets/{call.pk}/", world.users["approver"]))
        loop.run_until_complete(
            get_channel_layer().group_send(
                f"session-{session.pk}", {"type": "ticket.changed", "ticket_id": call.pk, "session_pk": session.pk}
            )
        )
        changed = loop.run_until_complete(drain(ticket_socket))  # card, status, history: no arguments
        assert changed and not any(raw in changed for raw in RAW_TAGS), changed
        loop.run_until_complete(ticket_socket.disconnect())
        ticket_catch_up = loop.run_until_complete(
            open_socket(f"/ws/tickets/{call.pk}/?after=0", world.users["approver"])
        )
        _assert_escaped(loop.run_until_complete(drain(ticket_catch_up)), "ticket socket catch-up")
        loop.run_until_complete(ticket_catch_up.disconnect())
    finally:
        loop.run_until_complete(conv_socket.disconnect())
        loop.run_until_complete(inbox_socket.disconnect())
        loop.close()

    pages = [
        ("requester", f"/sessions/{session.pk}/", "conversation page"),
        ("observer", f"/sessions/{session.pk}/", "conversation page (observer)"),
        ("approver", f"/tickets/{call.pk}/", "ticket page"),
        ("approver", "/", "inbox"),
        ("approver", f"/?q={SCRIPT}", "inbox searched with the hostile text"),
        ("requester", "/sessions/", "conversation list"),
    ]
    for role, url, label in pages:
        r = client_for(world, role).get(url)
        assert r.status_code == 200, f"{label}: {r.status_code}"
        html = r.content.decode()
        for raw in RAW_TAGS:
            assert raw not in html, f"{label} ({url}): raw {raw!r} in the HTML"
        if label != "conversation list":
            assert any(e in html for e in ESCAPED), f"{label} ({url}): the escaped argument is not shown"
