"""The ticket hook's common cases inside the append's one statement (PostgreSQL; agents_app.session_sql.
Rider): an event that opens tickets no policy and no standing grant concerns, or that records a tool's
initial responses. The event, its tickets, the session's stored status and the notification outbox
rows are then written by one statement, atomic on its own: no transaction around the append, no round
trip per write (before: BEGIN, the append, a duplicate check, the ticket, the status, the policies'
version, a savepoint around the outbox row, COMMIT).

What the hook (approvals.services.tickets_record_event) would do otherwise is checked in the statement
itself, as its guard, after the session row's lock: the policy tables are at the version whose
policies (approvals.policy_cache) the tickets were matched against here, no live standing grant may
approve them, none of their calls has a ticket yet. When the guard fails nothing is stored and the
store takes its checked path, where the hook runs in a transaction as before. Declined here (the hook
runs): SQLite, no policies read yet in this process, a policy that applies or a condition not decided
on the arguments (approvals.policy_match), an aborted call, a notifications handler without an outbox
(adkweb.notify.Outbox).

The session's stored status with a new open ticket: running if it was running (a queued or running
turn, which whoever queues or finishes a turn keeps stored under this row's lock), otherwise waiting;
read from the row as locked, so a turn queued or finished while the append waited counts.
"""

from __future__ import annotations

import json
from functools import partial
from typing import Any

from django.db import transaction
from django.utils import timezone

from adkweb import notify
from agents_app.session_service import Rider, parse_marker

from . import events, policy_cache, policy_match
from .fanout import APPROVALS_GROUP
from .models import PendingCall

TICKETS = PendingCall._meta.db_table


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def ticket_rider(event: Any, session: Any) -> Rider | None:
    """The Rider for this event, or None: the hook runs in a transaction as usual."""
    from .services import aborted_response, interrupts_of

    marker = parse_marker(session._storage_update_marker)
    cached = policy_cache.cached()
    if marker is None or cached is None:
        return None
    version, policies = cached
    opened = []
    for fc, args, kind, tool_name in interrupts_of(event):
        ticket = PendingCall(app_name=session.app_name, tool_name=tool_name or "", kind=kind, args=args)
        fitting = [
            p for p in policies if policy_cache.fits(p, app_name=session.app_name, tool_name=tool_name or "", kind=kind)
        ]
        choice = policy_match.choose(fitting, ticket.tool_args, kind)
        if choice.policy is not None or choice.undecided:
            return None  # a policy applies (or a condition was not decided): the hook applies it, saying why
        opened.append(
            {"call_id": fc.id, "call_name": fc.name, "kind": kind, "tool_name": ticket.tool_name, "args": args}
        )
    answered = []
    if event.author != "user":
        for fr in event.get_function_responses():
            response = dict(fr.response or {})
            if aborted_response(event, response):
                return None  # an abort cancels an open ticket: the hook does it
            answered.append({"call_id": fr.id or "", "response": response})
    outbox = notify.outbox()
    if opened and outbox is None:
        return None  # no outbox to write in SQL (notify is called by the hook)
    now = timezone.now()
    rider = Rider()
    returning = []
    if opened:
        assert outbox is not None
        rider.ctes += (
            f", pc AS (INSERT INTO {TICKETS} (session_id, event_id, app_name, requester, invocation_id, kind, "
            "call_id, call_name, args, tool_name, status, policy_name, routed, required_approvals, four_eyes, "
            "allow_grants, created_at, updated_at) SELECT u.id, e.id, %s, %s, %s, t.kind, t.call_id, t.call_name, "
            "t.args, t.tool_name, 'pending', '', false, 1, false, true, %s, %s FROM u, e, "
            "jsonb_to_recordset(%s::jsonb) AS t(call_id text, call_name text, kind text, tool_name text, args jsonb) "
            "ON CONFLICT (session_id, call_id) DO NOTHING RETURNING id, call_id)"
            f", ne AS (INSERT INTO {outbox.table} (name, ticket_id, data, created_at) "
            "SELECT %s, pc.id, '{}'::jsonb, %s FROM pc RETURNING id)"
        )
        rider.params += [session.app_name, session.user_id, event.invocation_id or "", now, now, _dumps(opened)]
        rider.params += [notify.TICKET_OPENED, now]
        returning.append("(SELECT json_agg(json_build_array(id, call_id) ORDER BY id) FROM pc)")
        returning.append("(SELECT array_agg(id ORDER BY id) FROM ne)")
        # The policy tables as matched here, no grant that may apply, no ticket of these calls yet.
        rider.guard = f"ROW({policy_cache.VERSION}) = ROW({', '.join(['%s'] * len(version))})"
        rider.guard += f" AND NOT EXISTS (SELECT 1 FROM {TICKETS} p WHERE p.session_id = s.id AND p.call_id = ANY(%s))"
        rider.guard_params += [*version, [t["call_id"] for t in opened]]
        for t in opened:
            rider.guard += f" AND NOT {policy_cache.GRANT_POSSIBLE}"
            rider.guard_params += [session.app_name, t["tool_name"], t["kind"], now, marker[0], session.user_id]
        rider.status = "CASE WHEN s.status = 'running' THEN 'running' ELSE 'waiting' END"
        rider.asks = [APPROVALS_GROUP]  # the inbox's question (events.anotify_ticket_changed), with the event's
    else:
        returning += ["NULL", "NULL"]
    if answered:
        # A tool's initial response, on its ticket (also one a policy decided as it opened).
        rider.ctes += (
            f", ir AS (UPDATE {TICKETS} p SET initial_response = r.response, updated_at = %s "
            "FROM u, jsonb_to_recordset(%s::jsonb) AS r(call_id text, response jsonb) "
            "WHERE p.session_id = u.id AND p.call_id = r.call_id AND p.initial_response IS NULL RETURNING p.id)"
        )
        rider.params += [now, _dumps(answered)]
        returning.append("(SELECT array_agg(id ORDER BY id) FROM ir)")
    else:
        returning.append("NULL")
    rider.returning = f"json_build_array({', '.join(returning)})::text"
    written = {"app_name": session.app_name, "requester": session.user_id, "created_at": now}
    rider.done = partial(_done, outbox, {t["call_id"]: {**t, **written} for t in opened})
    rider.announce = partial(_announce, {t["call_id"]: {**t, **written} for t in opened})
    rider.committed = partial(_committed, outbox)
    return rider


def _done(outbox: notify.Outbox | None, opened: dict[str, dict], value: Any, session_pk: int) -> None:
    """After the statement: what the hook announces after commit, the outbox rows' after-commit work."""
    tickets, recorded, answered = (ids or [] for ids in json.loads(value))
    for ticket_id, call_id in tickets:
        # As written (pending, routed nowhere, no groups, no answers): its inbox facts need no query.
        as_written = PendingCall(pk=ticket_id, session_id=session_pk, **opened[call_id])
        _after_commit(ticket_id, session_pk, opened=True, opened_as=as_written)
    for row_id in recorded:
        assert outbox is not None
        transaction.on_commit(partial(outbox.committed, row_id))
    for ticket_id in answered:
        _after_commit(ticket_id, session_pk, inbox=False)  # its page shows it; its inbox row does not change


def _committed(outbox: notify.Outbox | None, value: Any, session_pk: int) -> None:
    """For the statement sent from the event loop, as soon as it committed (before its event is
    published): the outbox rows' tasks sent from a thread, not waited for (a row stays owed until its
    task runs: the sweeper sends what this does not). Started first, the thread's Celery publish runs
    while the loop waits on the event's round trip to Redis rather than beside its next steps."""
    _, recorded, _ = (ids or [] for ids in json.loads(value))
    for row_id in recorded:
        assert outbox is not None
        notify.committed_soon(outbox, row_id)


async def _announce(opened: dict[str, dict], value: Any, session_pk: int) -> None:
    """`_done` for the statement sent from the event loop, committed, its event published (the outbox
    rows' tasks were sent by `_committed`): the announcements, in order, from the loop."""
    tickets, _, answered = (ids or [] for ids in json.loads(value))
    for ticket_id, call_id in tickets:
        as_written = PendingCall(pk=ticket_id, session_id=session_pk, **opened[call_id])
        await events.anotify_ticket_changed(
            ticket_id=ticket_id, session_pk=session_pk, opened=True, opened_as=as_written
        )
    for ticket_id in answered:
        await events.anotify_ticket_changed(ticket_id=ticket_id, session_pk=session_pk, inbox=False)


def _after_commit(
    ticket_id: int, session_pk: int, *, opened: bool = False, inbox: bool = True, opened_as: Any = None
) -> None:
    changed = partial(
        events.notify_ticket_changed,
        ticket_id=ticket_id,
        session_pk=session_pk,
        opened=opened,
        inbox=inbox,
        opened_as=opened_as,
    )
    transaction.on_commit(changed, robust=True)
