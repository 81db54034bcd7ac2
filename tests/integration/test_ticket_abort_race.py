"""An agent's abort (a function response with INVOCATION_ABORTED) cancels its open ticket in the session
store's append (approvals.services.tickets_record_event) while a person writes the same ticket from
another connection, on PostgreSQL's real row locks. The append is held right after it read the ticket,
until the other write has committed (or, blocked on a lock, has had its chance): what the person did is
never undone by the cancel, and a decision is never turned into "cancelled"."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.db.backends.utils import CursorWrapper
from django.utils import timezone
from google.adk.events.event import Event
from google.genai import types

from agents_app.session_service import DjangoSessionService
from approvals import deadlines, services
from approvals.models import PendingCall, Response, TicketActivity

pytestmark = pytest.mark.django_db(transaction=True)
APP = "my_app"  # no demo policy concerns it


def _call(call_id: str) -> Event:
    call = types.Part(function_call=types.FunctionCall(id=call_id, name="ask_for_approval", args={"amount": 2}))
    return Event(
        author="agent", invocation_id="inv", long_running_tool_ids={call_id}, content=types.Content(parts=[call])
    )


def _aborted(call_id: str) -> Event:
    answer = types.FunctionResponse(id=call_id, name="ask_for_approval", response={"error": "INVOCATION_ABORTED"})
    return Event(
        author="agent", invocation_id="inv", content=types.Content(parts=[types.Part(function_response=answer)])
    )


def _abort_racing(write: Callable[[PendingCall], Any]) -> tuple[PendingCall, Any]:
    """Open a ticket, then store the abort of its call in one thread while `write` runs in another,
    once the append has read the ticket; the append goes on when `write` returned (or after a second:
    it is blocked by the append). The ticket as it ends, and what `write` returned (or raised)."""
    service = DjangoSessionService()
    session = service.create_session_sync(app_name=APP, user_id="requester", session_id="s")
    service._store_event(session, _call("c1"), None)
    ticket = PendingCall.objects.get(call_id="c1")
    read, written, outcome, errors = threading.Event(), threading.Event(), [], []
    real_execute = CursorWrapper.execute
    appender: list[int] = []

    def execute(self: CursorWrapper, sql: str, params: Any = None) -> Any:
        result = real_execute(self, sql, params)
        is_read = sql.lstrip().startswith("SELECT") and '"approvals_pendingcall"' in sql
        if appender == [threading.get_ident()] and is_read and not read.is_set():
            read.set()
            written.wait(1)
        return result

    def append() -> None:
        appender.append(threading.get_ident())
        try:
            service._store_event(session, _aborted("c1"), None)
        except BaseException as exc:  # reported by the test
            errors.append(exc)
        finally:
            connection.close()

    def other() -> None:
        try:
            outcome.append(write(PendingCall.objects.get(pk=ticket.pk)))
        except Exception as exc:  # a refusal (409) is an answer the person sees
            outcome.append(exc)
        finally:
            written.set()
            connection.close()

    CursorWrapper.execute = execute  # type: ignore[method-assign]
    try:
        a = threading.Thread(target=append)
        a.start()
        assert read.wait(10), "the append never read the ticket"
        b = threading.Thread(target=other)
        b.start()
        a.join(20), b.join(20)
    finally:
        CursorWrapper.execute = real_execute  # type: ignore[method-assign]
    assert not errors, errors
    return PendingCall.objects.get(pk=ticket.pk), outcome[0]


def test_an_assignment_made_while_the_abort_is_stored_is_kept_or_refused(demo):
    """The approver takes the ticket as the agent's abort is stored: the ticket ends cancelled, and
    either still assigned to them or their take refused (409); never "taken" and then lost."""
    approver = demo["approver"]
    ticket, taken = _abort_racing(lambda t: services.ticket_assign(ticket=t, actor=approver, assignee=approver))
    assert ticket.status == PendingCall.Status.CANCELLED
    if isinstance(taken, Exception):
        assert isinstance(taken, services.TicketClosed), taken
    else:
        assert ticket.assigned_to_id == approver.pk
    connection.close()


def test_an_escalation_recorded_while_the_abort_is_stored_is_kept(demo):
    """The sweep escalates the ticket as the agent's abort is stored: if its history says escalated,
    the ticket is (its escalation groups still see it)."""
    group = Group.objects.get(name="finance")

    def escalate(t: PendingCall) -> bool:
        t.escalation_groups.set([group])  # as a policy gives them, due a minute ago
        PendingCall.objects.filter(pk=t.pk).update(escalate_at=timezone.now() - timedelta(minutes=1))
        return deadlines.ticket_escalate(ticket_id=t.pk)

    ticket, escalated = _abort_racing(escalate)
    assert ticket.status == PendingCall.Status.CANCELLED
    said = TicketActivity.objects.filter(ticket=ticket, kind=TicketActivity.Kind.ESCALATED).exists()
    assert said == escalated
    assert (ticket.escalated_at is not None) == escalated
    connection.close()


def test_a_decision_made_while_the_abort_is_stored_is_never_turned_into_cancelled(demo, monkeypatch):
    """The approver approves as the agent's abort is stored: either the approval stands (and the
    ticket stays approved) or it is refused (409) and the ticket is cancelled."""
    monkeypatch.setattr("agents_app.enqueue.session_enqueue", lambda *, session_pk: True)  # no worker here
    monkeypatch.setattr("agents_app.enqueue.session_enqueue_before_commit", lambda *, session_pk: None)
    approver = demo["approver"]
    ticket, decided = _abort_racing(lambda t: services.ticket_approve(ticket=t, actor=approver))
    if isinstance(decided, Exception):
        assert isinstance(decided, services.TicketClosed), decided
        assert ticket.status == PendingCall.Status.CANCELLED
        assert not Response.objects.filter(pending_call=ticket).exists()
    else:
        assert ticket.status == PendingCall.Status.APPROVED and ticket.closed_by_id == approver.pk
    connection.close()
