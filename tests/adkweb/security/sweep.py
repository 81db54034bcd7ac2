"""The security sweep's shared parts: the world (users, a requester's session and ticket), the
table's row type and the check of one cell. The tests are the test_*.py modules of this package; the
tables (tables*.py) are the spec: a new URL pattern with no row fails `test_every_url_is_in_the_table`.

The bar: no 5xx; anonymous → login redirect (pages) or 401 (API); another requester (mallory)
never sees the requester's session or ticket (403/404, and neither the session id nor the
ticket's arguments in the body); only approvers answer tickets; no unsafe request from a
session-authenticated client gets through without a CSRF token.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
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


@dataclass
class World:
    users: dict[str, Any]
    session: AdkSession
    call: PendingCall
    failed_turn: Turn
    extras: dict[str, Any] = field(default_factory=dict)  # notifications: a link token, a delivery, ...


def world_create(demo) -> World:
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


def _status_matches(response: Any, expected: Any) -> bool:
    if expected == LOGIN:
        return response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    if isinstance(expected, tuple):
        return response.status_code in expected
    return response.status_code == expected


def _content(response: Any) -> str:
    if getattr(response, "is_async", False):  # an async stream (the audit exports), read as a server reads it
        return async_to_sync(_joined)(response.streaming_content).decode(errors="replace")
    if getattr(response, "streaming", False):
        return b"".join(response).decode(errors="replace")
    return response.content.decode(errors="replace")


async def _joined(chunks: Any) -> bytes:
    return b"".join([chunk async for chunk in chunks])


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
