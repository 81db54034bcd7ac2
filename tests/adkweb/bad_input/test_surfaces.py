"""Policies, standing grants, webhooks, notification settings, bulk decisions, saved views, the audit trail's
filters and exports, and assign, with a hostile value in one field at a time (wrong types, NUL, unpaired
surrogates, bytes that are not UTF-8, numbers past a float, a bigint or int()'s 4,300 digits, text past
every column): never a 5xx; a refusal (4xx) says why (API: a JSON detail) and changes nothing. (Only the
status and that some message came are checked here; test_policy_form_refusals reads the policy form's.)
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import pytest
from django.db import transaction
from django.test import Client

from approvals.models import Policy
from notifications.models import SavedView, WebhookEndpoint
from tests.adkweb.security.sweep import World, state_counts, world_create
from tests.approvals_factories import ticket

MARK = "@@value@@"
# A JSON body's field (the raw JSON text put in its place).
JSON_VALUES = {
    "a list": '["x"]',
    "an object": '{"x": 1}',
    "1e400": "1e400",
    "NaN": "NaN",
    "NUL": '"a\\u0000b"',
    "an unpaired surrogate": '"\\ud800"',
    "5,000 digits": "9" * 5000,
    "5,000 characters": json.dumps("x" * 5000),
}
# A form field's or a query string's value (already percent-encoded).
FORM_VALUES = {
    "NUL": "a%00b",
    "an unpaired surrogate": "%ED%A0%80",
    "bytes that are not UTF-8": "%FF%FE",
    "5,000 characters": "x" * 5000,
    "a number past a bigint": "99999999999999999999",
    "5,000 digits": "9" * 5000,
    "a superscript digit": "%C2%B2",
    "a date that is none": "9999-99-99",
}
FORM = "application/x-www-form-urlencoded"
JSON = "application/json"
Case = tuple[str, str, str, str, str]  # (who, method, path, content type, body)


def with_json(base: dict, field: str, raw: str) -> str:
    return json.dumps({**base, field: MARK}).replace(json.dumps(MARK), raw)


def with_form(base: dict, field: str, encoded: str) -> str:
    return urlencode({**base, field: MARK}, doseq=True).replace(MARK.replace("@", "%40"), encoded)


def json_cases(who: str, method: str, path: str, base: dict, fields: list[str]) -> list[Case]:
    values = JSON_VALUES.values()
    return [(who, method, path, "application/json", with_json(base, f, v)) for f in fields for v in values]


def form_cases(who: str, path: str, base: dict, fields: list[str]) -> list[Case]:
    return [(who, "POST", path, FORM, with_form(base, f, v)) for f in fields for v in FORM_VALUES.values()]


def query_cases(who: str, path: str, fields: list[str]) -> list[Case]:
    return [(who, "GET", f"{path}?{f}={v}", "", "") for f in fields for v in FORM_VALUES.values()]


# -- the surfaces: each gives its cases for a world ---------------------------------------------------------
POLICY_JSON = ["name", "agent", "tool", "kind", "condition", "priority", "approverGroups", "escalationGroups"]
POLICY_JSON += ["requiredApprovals", "fourEyes", "autoDecision", "autoReason", "autoConfirmations", "dueInSeconds"]
POLICY_JSON += ["remindBeforeSeconds", "escalateAfterSeconds", "allowGrants", "enabled"]
POLICY_FORM = ["name", "agent", "tool", "kind", "condition", "priority", "approver_groups", "required_approvals"]
POLICY_FORM += ["auto_decision", "auto_reason", "due_in_seconds", "remind_before_seconds", "escalate_after_seconds"]
POLICY_FORM += ["escalation_groups", "four_eyes", "allow_grants", "enabled"]
AUDIT_QUERY = ["agent", "tool", "person", "outcome", "since", "until", "page"]


def policies(w: World) -> list[Case]:
    pk, policy = w.extras["policy"], {"name": "Hardware", "tool": "ask_for_approval", "condition": "amount > 5"}
    form = {"name": "x", "required_approvals": "1", "priority": "0"}
    return [
        *json_cases("admin", "POST", "/api/policies", policy, POLICY_JSON),
        *json_cases("admin", "PATCH", f"/api/policies/{pk}", {}, POLICY_JSON),
        *form_cases("admin", "/policies/new/", form, POLICY_FORM),
        *query_cases("admin", f"/api/policies/{pk}/dry-run", ["last"]),
        *query_cases("admin", f"/policies/{pk}/dry-run/", ["last"]),
    ]


def grants(w: World) -> list[Case]:
    grant = {"ticket": w.call.pk, "scope": "user", "minutes": 30}
    return [
        *json_cases("approver", "POST", "/api/grants", grant, list(grant)),
        *query_cases("approver", "/api/grants", ["active"]),
        *query_cases("approver", "/grants/", ["active", "page"]),
    ]


def webhooks(w: World) -> list[Case]:
    pk, hook = w.extras["endpoint"], {"url": "http://example.com/h", "events": ["ticket.opened"]}
    fields = ["url", "secret", "events", "format", "name", "enabled"]
    return [
        *json_cases("admin", "POST", "/api/webhooks", hook, fields),
        *json_cases("admin", "PATCH", f"/api/webhooks/{pk}", {}, fields),
        *query_cases("admin", f"/api/webhooks/{pk}/deliveries", ["page_size"]),
    ]


def notification_settings(w: World) -> list[Case]:
    base = {"email": "a@example.com", "email_enabled": "on"}
    return form_cases("approver", "/settings/notifications/", base, ["email", "email_enabled", "only_my_groups"])


def bulk_decisions(w: World) -> list[Case]:
    base = {"action": "reject", "ticket": w.call.pk, "reason": "no"}
    return [
        *form_cases("approver", "/inbox/bulk/", base, ["action", "ticket", "confirm"]),
        *form_cases("approver", "/inbox/bulk/?confirmed", {**base, "confirm": "1"}, ["action", "ticket"]),
    ]


def saved_views(w: World) -> list[Case]:
    queries = ["q=%2500", "q=%25FF", "status=%2500", "page=99999999999999999999", "q=" + "z" * 590]
    return [
        *form_cases("approver", "/inbox/views/", {"name": "v", "query": "q=meals"}, ["name", "query"]),
        *[("approver", "POST", "/inbox/views/", FORM, f"name=v&query={q}") for q in queries],
        *form_cases("approver", f"/inbox/views/{w.extras['view']}/delete/", {}, ["next"]),
    ]


def audit(w: World) -> list[Case]:
    return [
        *query_cases("approver", "/audit/", AUDIT_QUERY),
        *query_cases("approver", "/audit/export.csv", AUDIT_QUERY),
        *query_cases("approver", "/api/audit/decisions.jsonl", AUDIT_QUERY),
    ]


def assign(w: World) -> list[Case]:
    return [
        *json_cases("approver", "POST", f"/api/pending-calls/{w.call.pk}/assign", {}, ["assignee"]),
        *form_cases("approver", f"/tickets/{w.call.pk}/assign/", {}, ["assign"]),
    ]


SURFACES: list[Callable[[World], list[Case]]] = [
    policies,
    grants,
    webhooks,
    notification_settings,
    bulk_decisions,
    saved_views,
    audit,
    assign,
]


def surface_counts() -> dict[str, Any]:
    """What a refusal must leave alone: the security sweep's counts, the endpoints and the saved views."""
    return {
        **state_counts(),
        "endpoints": sorted(WebhookEndpoint.objects.values_list("pk", "url", "enabled", "format", "name")),
        "views": sorted(SavedView.objects.values_list("pk", "name", "query")),
    }


def problems_of(c: Client, case: Case) -> list[str]:
    who, method, path, ctype, body = case
    with transaction.atomic():
        before = surface_counts()
        r = c.generic(method, path, body.encode(), content_type=ctype)
        after = surface_counts()
        transaction.set_rollback(True)
    where = f"{method} {path[:120]} as {who} with {body[:120]!r}"
    text = b"(streamed)" if getattr(r, "streaming", False) else r.content
    if r.status_code >= 500:
        return [f"{where}: {r.status_code}"]
    if 400 <= r.status_code < 500:
        found = []
        if path.startswith("/api/") and not (json.loads(text or b"{}").get("detail") if text else None):
            found.append(f"{where}: {r.status_code} without a JSON detail: {text[:200]!r}")
        elif len(text) < 30:
            found.append(f"{where}: {r.status_code} without a message: {text!r}")
        if before != after:
            found.append(f"{where}: refused ({r.status_code}) but changed {before} -> {after}")
        return found
    return []


@pytest.fixture
def world(demo) -> World:
    return world_create(demo)


@pytest.mark.parametrize("surface", SURFACES, ids=[s.__name__ for s in SURFACES])
def test_hostile_values_are_refused_with_a_message_and_change_nothing(world, surface):
    clients: dict[str, Client] = {}
    failures: list[str] = []
    for case in surface(world):
        if case[0] not in clients:
            clients[case[0]] = Client()
            clients[case[0]].force_login(world.users[case[0]])
        failures += problems_of(clients[case[0]], case)
    assert not failures, "\n".join(failures[:40])


@pytest.mark.parametrize(
    "field, value, error",
    [
        ("due_in_seconds", "9" * 5000, "A duration goes from 1 second to 366 days."),
        ("remind_before_seconds", "9" * 30 + "d", "A duration goes from 1 second to 366 days."),
        ("escalate_after_seconds", "\u0661h", 'Write a duration like "1d"'),  # an Arabic-Indic one: no ASCII digit
        ("approver_groups", "99999999999999999999", "is not a valid value"),
        ("escalation_groups", "-99999999999999999999", "is not a valid value"),
    ],
    ids=["5,000 digits", "30-digit days", "non-ASCII digit", "group past a bigint", "group below a bigint"],
)
def test_policy_form_refusals(world, field, value, error):
    """The policy page's form (also the Django admin's): a duration of 5,000 digits reached int(), which
    refuses more than 4,300 (ValueError: 500 on both databases); a group id past a bigint reached SQLite's
    pk__in (OverflowError: 500 there). Now the form again with the field's error, nothing saved."""
    c = Client()
    c.force_login(world.users["admin"])
    before = surface_counts()
    for path in ["/policies/new/", f"/policies/{world.extras['policy']}/"]:
        r = c.post(path, {"name": "x", "required_approvals": "1", "priority": "0", field: value})
        assert r.status_code == 400, (path, r.status_code)
        assert error in r.content.decode().replace("&quot;", '"'), path
    assert surface_counts() == before
    assert not Policy.objects.filter(name="x").exists()


@pytest.mark.parametrize("allow_private", [False, True], ids=["public only", "private allowed"])
@pytest.mark.parametrize("port", ["99999", "65536", "0"])
def test_webhook_urls_with_a_port_no_connection_has_are_refused(world, settings, allow_private, port):
    """Django's URL validator takes any 1 to 5 digits as a port; urlsplit's .port refuses past 65535
    (ValueError), so registering http://example.com:99999/ answered 500 (API and the Django admin)."""
    settings.ADKWEB_WEBHOOK_ALLOW_PRIVATE = allow_private
    c = Client()
    c.force_login(world.users["admin"])
    url, pk = f"http://example.com:{port}/h", world.extras["endpoint"]
    before = surface_counts()
    for method, path in [("POST", "/api/webhooks"), ("PATCH", f"/api/webhooks/{pk}")]:
        r = c.generic(method, path, json.dumps({"url": url, "events": ["ticket.opened"]}), "application/json")
        assert r.status_code == 400 and "url: " in r.json()["detail"], (method, r.status_code, r.content[:200])
    form = {"name": "x", "url": url, "events": ["ticket.opened"], "format": "json", "enabled": "on"}
    r = c.post("/admin/notifications/webhookendpoint/add/", form)
    assert r.status_code == 200 and "errorlist" in r.content.decode(), r.status_code
    assert surface_counts() == before


def duplicates(w: World, other_endpoint: int) -> list[tuple[Case, int, str]]:
    """Each request that would make a second of something there is to be one of (per what it does): its
    status, and the one there that its refusal names."""
    grant, call, endpoint = w.extras["grant"], w.call, w.extras["endpoint"]
    approved = ticket(session=w.session, status="approved")  # a grant comes only from an approved ticket
    approve = {"approve-comment": "ok", "approve-grant_scope": "session", "approve-grant_for": "1"}
    approve |= {"approve-grant_unit": "hours", "approve-args_hash": call.args_hash}
    hook = WebhookEndpoint.objects.get(pk=endpoint).url
    form = {"name": "x", "url": hook, "events": ["ticket.decided"], "format": "json", "enabled": "on"}
    granted, registered = f"Standing grant #{grant} already allows", f"Webhook endpoint #{endpoint} already has"
    as_json = json.dumps
    return [
        (
            (
                "approver",
                "POST",
                "/api/grants",
                JSON,
                as_json({"ticket": approved.pk, "scope": "session", "minutes": 30}),
            ),
            409,
            granted,
        ),
        (("approver", "POST", f"/tickets/{call.pk}/approve/", FORM, urlencode(approve)), 409, granted),
        (
            ("admin", "POST", "/api/webhooks", JSON, as_json({"url": hook, "events": ["ticket.decided"]})),
            409,
            registered,
        ),
        (("admin", "PATCH", f"/api/webhooks/{other_endpoint}", JSON, as_json({"url": hook})), 409, registered),
        (
            ("admin", "POST", "/admin/notifications/webhookendpoint/add/", FORM, urlencode(form, doseq=True)),
            200,
            registered,
        ),
    ]


def test_duplicates_are_409_naming_the_one_there_and_change_nothing(world, settings):
    """The same standing grant given twice made two (revoking one left the other approving); the same webhook
    URL registered twice got each event twice. (The admin's form answers 200 with the form's error.)"""
    settings.ADKWEB_WEBHOOK_ALLOW_PRIVATE = True  # the world's endpoint is on 127.0.0.1
    other = WebhookEndpoint.objects.create(url="http://127.0.0.1:9/other", secret="s" * 20, events=["turn.failed"])
    failures = []
    for case, status, named in duplicates(world, other.pk):
        who, method, path, ctype, body = case
        c = Client()
        c.force_login(world.users[who])
        with transaction.atomic():
            before = surface_counts()
            r = c.generic(method, path, body.encode(), content_type=ctype)
            after = surface_counts()
            transaction.set_rollback(True)
        text = r.content.decode()
        if r.status_code != status or named not in text or before != after:
            failures.append(f"{method} {path} {body[:80]!r}: {r.status_code} {text[:200]!r} changed={before != after}")
        if path.startswith("/api/") and named not in r.json().get("detail", ""):
            failures.append(f"{method} {path}: no JSON detail naming it")
    assert not failures, "\n".join(failures)


BAD_BASE_URLS = ["http://[::1", "http://agents.internal:99999", "http://agents.internal:0", "http://", "https://:8080"]


@pytest.mark.parametrize("url", BAD_BASE_URLS, ids=["bracket", "port past 65535", "port 0", "no host", "port only"])
def test_remote_app_base_urls_no_client_can_use_are_refused(world, url):
    """The remote app's base URL was only checked for its scheme: the admin stored "http://[::1", with which
    the HTTP client cannot even be made (httpx.InvalidURL), so its /app-info answered 500; the others reach
    nothing. Now the admin form's error; a row stored before answers 502 with why, as an unreachable one."""
    from agents_app.models import RemoteApp

    c = Client()
    c.force_login(world.users["admin"])
    form = {"name": "far_agent", "base_url": url, "remote_app_name": "far", "enabled": "on"}
    r = c.post("/admin/agents_app/remoteapp/add/", form)
    assert r.status_code == 200 and "The base URL must " in r.content.decode(), r.status_code
    assert not RemoteApp.objects.filter(name="far_agent").exists()
    RemoteApp.objects.create(name="far_agent", base_url=url, remote_app_name="far")  # as stored before
    r = c.get("/api/adk/apps/far_agent/app-info")
    assert r.status_code == 502 and "Remote ADK server" in r.json()["detail"], (r.status_code, r.content[:200])


@pytest.mark.parametrize(
    "path, field",
    [
        ("/admin/auth/user/{requester}/change/", "groups"),
        ("/admin/auth/user/{requester}/change/", "user_permissions"),
        ("/admin/auth/group/add/", "permissions"),
    ],
    ids=["user's groups", "user's permissions", "group's permissions"],
)
def test_admin_choices_of_rows_past_a_bigint_are_refused(world, path, field):
    """Django's own user and group admins read a many-to-many choice's ids with pk__in, as the policy form
    did: an id past a bigint answered 500 on SQLite (OverflowError). Now the field's error (adkweb.admin)."""
    from django.contrib.auth.models import Group, User

    c = Client()
    c.force_login(world.users["admin"])
    form = {"username": "requester", "name": "g", "date_joined_0": "2026-01-01", "date_joined_1": "00:00:00"}
    before = sorted(User.objects.values_list("pk", "username")), Group.objects.count(), surface_counts()
    r = c.post(path.format(requester=world.users["requester"].pk), {**form, field: "99999999999999999999"})
    assert r.status_code == 200 and "is not a valid value" in r.content.decode(), r.status_code
    assert (sorted(User.objects.values_list("pk", "username")), Group.objects.count(), surface_counts()) == before


async def _streamed(response: Any) -> bytes:
    return b"".join([chunk async for chunk in response.streaming_content])


@pytest.mark.parametrize("zone", ["UTC", "Pacific/Kiritimati", "Pacific/Pago_Pago"])  # UTC, +14 and -11
@pytest.mark.parametrize("query", ["until=9999-12-31", "since=0001-01-01", "since=0001-01-01&until=9999-12-31"])
def test_audit_periods_at_the_ends_of_the_calendar(world, settings, zone, query):
    """The audit's "To" is the whole day: its next day's start, which 9999-12-31 has none of (OverflowError:
    500 on the page and the exports), and "From 0001-01-01" east of UTC starts in year 0. A period reaching
    past the datetimes a database holds has no bound on that side: every decision, as with no date."""
    from asgiref.sync import async_to_sync

    from approvals.models import Response

    settings.TIME_ZONE = zone
    approver = world.users["approver"]
    Response.objects.create(
        pending_call=world.call, action="reject", payload={}, final=True, actor=approver, actor_username="approver"
    )
    c = Client()
    c.force_login(approver)
    for path in ["/audit/", "/audit/export.csv", "/audit/export.jsonl", "/api/audit/decisions.jsonl"]:
        r = c.get(f"{path}?{query}")
        body = async_to_sync(_streamed)(r) if getattr(r, "streaming", False) else r.content
        assert r.status_code == 200, (path, r.status_code)
        assert b"reject" in body, path
