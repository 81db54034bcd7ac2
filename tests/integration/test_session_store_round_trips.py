"""The session store's round trips on PostgreSQL, pinned: one statement per operation (each atomic
on its own: no BEGIN/COMMIT either), and an event a hook wants (approvals: a long-running call)
in one statement plus the hook's own queries, in one transaction, unless the hook's work rides in
that statement (tests/integration/test_ticket_rider.py). Counted on the connection: what
is sent to PostgreSQL, transaction statements included."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions.base_session_service import GetSessionConfig
from google.genai import types

from agents_app.models import StoredEvent
from agents_app.session_service import DjangoSessionService
from approvals.models import PendingCall

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_connections")]
APP = "my_app"


@pytest.fixture(autouse=True)
def _only_the_approvals_hook(monkeypatch: pytest.MonkeyPatch) -> None:
    """The app's own event hook only (a test scenario imported earlier may add one that wants every
    event: tests/engine_scenarios/crashy.py)."""
    from agents_app import session_hooks
    from approvals.services import tickets_record_event

    monkeypatch.setattr(session_hooks, "_event_hooks", [tickets_record_event])


@contextmanager
def round_trips() -> Iterator[list[str]]:
    """The statements sent meanwhile (Django logs BEGIN and COMMIT too)."""
    sent: list[str] = []
    with CaptureQueriesContext(connection) as ctx:
        yield sent
    sent.extend(q["sql"] for q in ctx.captured_queries)


def _text(delta: dict | None = None) -> Event:
    content = types.Content(role="model", parts=[types.Part(text="hello")])
    return Event(author="agent", invocation_id="inv", content=content, actions=EventActions(state_delta=delta or {}))


def test_each_operation_is_one_statement():
    service = DjangoSessionService()
    with round_trips() as sent:
        session = service.create_session_sync(app_name=APP, user_id="u", state={"k": 1, "user:u": 1, "app:a": 1})
    assert len(sent) == 1, sent
    for delta in (None, {"k": 2, "user:u": 2, "app:a": 2}):
        with round_trips() as sent:
            service._store_event(session, _text(delta), None)
        assert len(sent) == 1, sent
    for config in (None, GetSessionConfig(num_recent_events=1)):
        with round_trips() as sent:
            got = service.get_session_sync(app_name=APP, user_id="u", session_id=session.id, config=config)
        assert len(sent) == 1 and got is not None and got.state == {"k": 2, "user:u": 2, "app:a": 2}
    assert len(got.events) == 1
    with round_trips() as sent:
        listed = service.list_sessions_sync(app_name=APP)
    assert len(sent) == 1 and listed.sessions[0].state == got.state
    with round_trips() as sent:
        service.delete_session_sync(app_name=APP, user_id="u", session_id=session.id)
    assert len(sent) == 1 and service.list_sessions_sync(app_name=APP).sessions == []
    connection.close()


def test_a_session_with_an_open_ticket_or_a_turn_is_archived_the_checked_way():
    """Deleting a waiting session cancels its tickets (the one statement leaves it alone); a
    running one is refused (409). The ticket table's name is the one the statement uses."""
    from agents_app import session_sql
    from agents_app.models import AdkSession, Turn
    from agents_app.session_service import SessionBusy

    assert session_sql.TICKETS == PendingCall._meta.db_table
    service = DjangoSessionService()
    for sid in ("waiting", "running"):
        session = service.create_session_sync(app_name=APP, user_id="u", session_id=sid)
        service._store_event(session, _call(f"c-{sid}"), None)
    Turn.objects.create(session=AdkSession.objects.get(session_id="running"), kind="message", content={})
    with pytest.raises(SessionBusy):
        service.delete_session_sync(app_name=APP, user_id="u", session_id="running")
    service.delete_session_sync(app_name=APP, user_id="u", session_id="waiting")
    assert [s.id for s in service.list_sessions_sync(app_name=APP).sessions] == ["running"]
    assert PendingCall.objects.get(call_id="c-waiting").status == PendingCall.Status.CANCELLED
    assert AdkSession.all_objects.get(session_id="waiting").status == "idle"
    connection.close()


def _call(call_id: str) -> Event:
    call = types.Part(function_call=types.FunctionCall(id=call_id, name="ask_for_approval", args={"amount": 2}))
    return Event(
        author="agent", invocation_id="inv", long_running_tool_ids={call_id}, content=types.Content(parts=[call])
    )


def test_an_event_opening_a_ticket_opens_it_in_its_own_transaction(monkeypatch):
    """When the hook runs (here: no policies read yet in this process; tests/integration/
    test_ticket_rider.py has the common case, in the append's one statement)."""
    from approvals import policy_cache

    monkeypatch.setattr(policy_cache, "_cached", None)
    service = DjangoSessionService()
    session = service.create_session_sync(app_name=APP, user_id="u")
    event = _call("c1")
    with round_trips() as sent:
        service._store_event(session, event, None)
    assert sent[0] == "BEGIN" and sent[1].startswith("WITH u AS (UPDATE") and "COMMIT" in sent
    assert sent.index("COMMIT") > max(i for i, sql in enumerate(sent) if "INSERT INTO" in sql and "pendingcall" in sql)
    # The append's UPDATE holds the row: the status is synced in one statement, no lock, no savepoint
    # (the one savepoint is the notification outbox row's own: notifications.services.notify).
    assert not [sql for sql in sent if "FOR NO KEY UPDATE" in sql]
    assert len([sql for sql in sent if sql.startswith("SAVEPOINT")]) == 1
    ticket = PendingCall.objects.get(call_id="c1")
    assert ticket.event == StoredEvent.objects.get(event_id=event.id) and ticket.session.status == "waiting"
    connection.close()
