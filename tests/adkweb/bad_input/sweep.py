"""The bad-input sweep's shared parts: the objects it aims at, what a refusal must leave alone, and what
a refusal must look like. Each case must get a 4xx with a message (API: JSON `detail`; pages: the form's
error), never a 5xx, and must change nothing: counts of sessions, turns, responses, stored events and every
ticket's status are compared before and after."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.test import Client

from agents_app import services as agent_services
from agents_app.models import AdkSession, StoredEvent, Turn
from approvals.models import PendingCall, Response
from tests.approvals_factories import ticket

MB = "x" * (1 << 20)
DEEP = "[" * 100_000 + "]" * 100_000  # nesting deeper than any parser's recursion limit
TOO_BIG = "y" * (3 << 20)  # over DATA_UPLOAD_MAX_MEMORY_SIZE (2.5 MB)


@dataclass
class Objs:
    session: AdkSession
    call: PendingCall  # long-running, answered by approvers
    input_call: PendingCall  # request for input with a schema, answerable by the requester
    approver: Any
    requester: Any


def objs_create(demo) -> Objs:
    session = agent_services.session_create(app_name="reimbursement_agent", user_id="requester", session_id="s-bad")
    call = ticket(session=session, invocation_id="inv-1")
    input_call = ticket(session=session, kind="input", invocation_id="inv-2")  # schema: model (required), budget
    return Objs(session, call, input_call, demo["approver"], demo["requester"])


def counts() -> dict[str, Any]:
    return {
        "sessions": AdkSession.objects.count(),
        "turns": Turn.objects.count(),
        "responses": Response.objects.count(),
        "events": StoredEvent.objects.count(),
        "ticket statuses": sorted(PendingCall.objects.values_list("pk", "status", "assigned_to")),
    }


def _client(o: Objs, who: str) -> Client:
    c = Client()
    c.force_login(o.approver if who == "approver" else o.requester)
    return c


def attempt(c: Client, method: str, path: str, body: str) -> tuple[Any, dict, dict]:
    """The response to a JSON request, with counts() before and after it; rolled back (a 500's failed
    statement is rolled back to a savepoint first, so that the counts can still be read)."""
    with transaction.atomic():
        before = counts()
        saved = transaction.savepoint()
        response = c.generic(method, path, body, content_type="application/json")
        if response.status_code >= 500:
            transaction.savepoint_rollback(saved)
        after = counts()
        transaction.set_rollback(True)
    return response, before, after


def _schema_detail(detail: Any) -> bool:
    return (
        isinstance(detail, list)
        and bool(detail)
        and all(isinstance(i, dict) and i.get("msg") and (i.get("loc") or [""])[0] == "body" for i in detail)
    )


def _refusal(where: str, response: Any, before: dict, after: dict, *, api: bool) -> list[str]:
    body = response.content.decode(errors="replace") if not getattr(response, "streaming", False) else "(stream)"
    problems = []
    if not 400 <= response.status_code < 500:
        problems.append(f"{where}: got {response.status_code}, expected a 4xx: {body[:200]!r}")
    elif api:
        try:
            detail = json.loads(body).get("detail")
        except (ValueError, AttributeError):
            detail = None
        if response.status_code == 422 and " /api/adk/" in where:
            # ADK's schema failures (FastAPI's shape): a list of items, each with where and what.
            if not _schema_detail(detail):
                problems.append(f"{where}: 422 without ADK's detail list: {body[:200]!r}")
        elif not isinstance(detail, str) or not detail:
            problems.append(f"{where}: {response.status_code} without a JSON detail message: {body[:200]!r}")
    if before != after:
        problems.append(f"{where}: changed state {before} -> {after}")
    return problems
