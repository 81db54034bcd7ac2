"""The ticket hook's common cases on SQLite (embedded mode) in plain SQL: what PostgreSQL's rider
(approvals.ticket_rider) writes in the append's one statement, written here as a few statements in the
append's transaction (SQLite has no writes in a `WITH`; its transaction holds the whole file from its
BEGIN, so the checks before the writes still hold when they are made). An event that opens tickets
no policy and no live standing grant concerns, or that records a tool's initial responses: the
tickets (`INSERT … ON CONFLICT DO NOTHING`: a call that has its ticket already keeps it), the
session's stored status, the notification outbox rows, and after commit the same announcements and
outbox work as the rider's. The ORM path (approvals.services.tickets_record_event) compiled every
one of these statements per call (bench/README.md, phase 13 (embedded)).

Declined (False: nothing written, the ORM path runs): a policy whose agent, tool, kind and condition
fit, a live standing grant that may approve it, an aborted call, a notifications handler without an
outbox (adkweb.notify.Outbox).
"""

from __future__ import annotations

import json
from typing import Any

from django.db import connection
from django.utils import timezone

from adkweb import notify
from agents_app.models import AdkSession

from . import policy_cache, policy_match
from .models import PendingCall, Policy

TICKETS = PendingCall._meta.db_table
SESSIONS = AdkSession._meta.db_table
_COLUMNS = (
    "session_id, event_id, app_name, requester, invocation_id, kind, call_id, call_name, args, tool_name, status, "
    "policy_name, routed, required_approvals, four_eyes, allow_grants, created_at, updated_at"
)
# What PendingCall.objects.create and a rule-less ticket_open_rules leave: pending, routed nowhere,
# one approval, no four-eyes, grants allowed (as the rider's INSERT).
_OPEN = (
    f"INSERT INTO {TICKETS} ({_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, 'pending', '', 0, 1, 0, 1, "
    "%s, %s) ON CONFLICT (session_id, call_id) DO NOTHING RETURNING id"
)
# A new open ticket: running if a turn is queued or running (its stored status is kept under this
# file's lock by whoever queues or finishes a turn), otherwise waiting (the rider's CASE).
_STATUS = f"UPDATE {SESSIONS} SET status = CASE WHEN status = 'running' THEN 'running' ELSE 'waiting' END WHERE id = %s"
_ANSWERED = (
    f"UPDATE {TICKETS} SET initial_response = %s, updated_at = %s "
    "WHERE session_id = %s AND call_id = %s AND initial_response IS NULL RETURNING id"
)


def _json(value: Any) -> str:
    return json.dumps(value)  # as JSONField stores it on SQLite (its default encoder and separators)


def record(session: Any, stored: Any, event: Any) -> bool:
    """The hook's work for this event in plain SQL, in the caller's (the append's) transaction, its
    after-commit work registered as the ORM path registers it; False when declined (nothing written)."""
    from .services import aborted_response, interrupts_of
    from .ticket_rider import _done

    opened = []
    for fc, args, kind, tool_name in interrupts_of(event):
        opened.append(
            {"call_id": fc.id, "call_name": fc.name, "kind": kind, "tool_name": tool_name or "", "args": args}
        )
    answered = []
    if event.author != "user":  # user-authored answers are recorded by answers_submit
        for fr in event.get_function_responses():
            response = dict(fr.response or {})
            if aborted_response(event, response):
                return False  # an abort cancels an open ticket: the ORM path does it
            answered.append((fr.id or "", response))
    outbox = notify.outbox()
    if opened and (outbox is None or not _rule_free(session, opened)):
        return False
    now = timezone.now()
    at = connection.ops.adapt_datetimefield_value(now)
    tickets, recorded, initial = [], [], []
    head = [session.pk, stored.pk, session.app_name, session.user_id, event.invocation_id or ""]
    with connection.cursor() as cursor:
        for t in opened:
            cursor.execute(
                _OPEN, [*head, t["kind"], t["call_id"], t["call_name"], _json(t["args"]), t["tool_name"], at, at]
            )
            row = cursor.fetchone()
            if row is not None:  # None: the call has its ticket already (the ORM path skips it too)
                tickets.append([row[0], t["call_id"]])
        if tickets:
            assert outbox is not None
            cursor.execute(_STATUS, [session.pk])
            for ticket_id, _ in tickets:
                cursor.execute(
                    f"INSERT INTO {outbox.table} (name, ticket_id, data, created_at) VALUES (%s, %s, '{{}}', %s) "
                    "RETURNING id",
                    [notify.TICKET_OPENED, ticket_id, at],
                )
                recorded.append(cursor.fetchone()[0])
        for call_id, response in answered:  # a tool's initial response, on its ticket (also a decided one)
            cursor.execute(_ANSWERED, [_json(response), at, session.pk, call_id])
            initial += [row[0] for row in cursor.fetchall()]
    written = {"app_name": session.app_name, "requester": session.user_id, "created_at": now}
    as_written = {t["call_id"]: {**t, **written} for t in opened}
    _done(outbox, as_written, json.dumps([tickets, recorded, initial]), session.pk)
    return True


def _rule_free(session: Any, opened: list[dict[str, Any]]) -> bool:
    """No enabled policy fits these new tickets (agent, tool, kind: policy_cache.candidates' filter) and
    applies to their arguments or leaves its condition undecided on them (policy_match.choose), and no
    live standing grant may approve them: what ticket_open_rules would find, read in this transaction,
    in plain statements."""
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    with connection.cursor() as cursor:
        for t in opened:
            ticket = PendingCall(app_name=session.app_name, tool_name=t["tool_name"], kind=t["kind"], args=t["args"])
            cursor.execute(_CONDITIONS, [session.app_name, t["tool_name"], t["kind"]])
            fitting = [Policy(**dict(zip(_FIELDS, row, strict=True))) for row in cursor.fetchall()]
            choice = policy_match.choose(fitting, ticket.tool_args, t["kind"])
            if choice.policy is not None or choice.undecided:  # the hook applies it, saying why
                return False
            cursor.execute(_GRANT, [session.app_name, t["tool_name"], t["kind"], now, session.pk, session.user_id])
            if cursor.fetchone()[0]:
                return False
    return True


_FIELDS = ("id", "name", "tool", "condition", "auto_decision", "auto_confirmations")
_CONDITIONS = (
    f"SELECT {', '.join(_FIELDS)} FROM {Policy._meta.db_table} WHERE enabled AND (agent = '' OR agent = %s) "
    "AND (tool = '' OR tool = %s) AND (kind = '' OR kind = %s)"
)
_GRANT = f"SELECT {policy_cache.GRANT_POSSIBLE}"
