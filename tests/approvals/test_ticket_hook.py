"""The session store's ticket hook (approvals.services.tickets_record_event) runs, inside the append's
transaction, only for events that may concern a ticket: a long-running call opens one; a response to
a long-running call records its initial response; a response to an ordinary tool's call, which the
ADK session in memory shows was not long-running, is stored without looking for a ticket."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connections
from django.db.backends.utils import CursorWrapper
from google.adk.events.event import Event
from google.adk.sessions.base_session_service import GetSessionConfig
from google.genai import types

from agents_app import session_async, session_sqlite_loop
from agents_app.session_service import DjangoSessionService
from approvals.models import PendingCall

pytestmark = pytest.mark.django_db(transaction=True)
APP, USER = "reimbursement_agent", "requester"


def _call(call_id: str, name: str, long_running: bool) -> Event:
    call = types.FunctionCall(id=call_id, name=name, args={"purpose": "meals", "amount": 20})
    return Event(
        author="reimbursement_agent",
        invocation_id="inv",
        long_running_tool_ids={call_id} if long_running else None,
        content=types.Content(role="model", parts=[types.Part(function_call=call)]),
    )


def _response(call_id: str, name: str, response: dict) -> Event:
    answer = types.FunctionResponse(id=call_id, name=name, response=response)
    return Event(
        author="reimbursement_agent",
        invocation_id="inv",
        content=types.Content(role="user", parts=[types.Part(function_response=answer)]),
    )


@contextmanager
def statements(monkeypatch: pytest.MonkeyPatch, service: DjangoSessionService) -> Iterator[list[str]]:
    """The statements the service's appends run meanwhile: those of the thread its `_store_event`
    runs in (sync_to_async's), not another test's leftover worker threads, and those it sends from
    the event loop (agents_app.session_async, PostgreSQL; agents_app.session_sqlite_loop, SQLite)."""
    seen: list[tuple[int, str]] = []
    store_threads: set[int] = set()
    from_loop: list[str] = []
    real_execute, real_store, real_fetchone = CursorWrapper.execute, service._store_event, session_async.fetchone

    def store(*args: Any, **kwargs: Any) -> Any:
        store_threads.add(threading.get_ident())
        return real_store(*args, **kwargs)

    def execute(self: CursorWrapper, sql: str, params: Any = None) -> Any:
        seen.append((threading.get_ident(), sql))
        return real_execute(self, sql, params)

    async def fetchone(sql: str, params: Any, **kwargs: Any) -> Any:
        from_loop.append(sql)
        return await real_fetchone(sql, params, **kwargs)

    monkeypatch.setattr(CursorWrapper, "execute", execute)
    monkeypatch.setattr(service, "_store_event", store)
    monkeypatch.setattr(session_async, "fetchone", fetchone)
    real_qmark = session_sqlite_loop._qmark

    def qmark(sql: str) -> str:  # SQLite's loop path: each statement's text on its way
        from_loop.append(sql)
        return real_qmark(sql)

    monkeypatch.setattr(session_sqlite_loop, "_qmark", qmark)
    mine: list[str] = []
    yield mine
    monkeypatch.undo()
    assert store_threads or from_loop, "no append ran"
    mine.extend(from_loop)
    mine.extend(sql for thread, sql in seen if thread in store_threads)


async def test_an_ordinary_tools_response_is_stored_without_a_ticket_lookup(demo, monkeypatch):
    service = DjangoSessionService()
    session = await service.create_session(app_name=APP, user_id=USER)
    await service.append_event(session, _call("lr-1", "ask_for_approval", long_running=True))
    await service.append_event(session, _response("lr-1", "ask_for_approval", {"status": "pending"}))
    await service.append_event(session, _call("plain-1", "reimburse", long_running=False))
    with statements(monkeypatch, service) as seen:
        await service.append_event(session, _response("plain-1", "reimburse", {"status": "ok"}))
    assert seen and not [sql for sql in seen if "approvals_pendingcall" in sql], seen
    ticket = await PendingCall.objects.aget(call_id="lr-1")
    assert ticket.initial_response == {"status": "pending"}  # the long-running call's response: recorded
    assert not await PendingCall.objects.filter(call_id="plain-1").aexists()
    await sync_to_async(connections.close_all)()


async def test_a_response_whose_call_is_not_in_memory_still_finds_its_ticket(demo):
    """A copy loaded with only its latest events (the call is not among them) looks in the database."""
    service = DjangoSessionService()
    session = await service.create_session(app_name=APP, user_id=USER)
    await service.append_event(session, _call("lr-2", "ask_for_approval", long_running=True))
    await service.append_event(session, _call("plain-2", "reimburse", long_running=False))
    partial = await service.get_session(
        app_name=APP, user_id=USER, session_id=session.id, config=GetSessionConfig(num_recent_events=1)
    )
    assert partial is not None and [e.get_function_calls()[0].id for e in partial.events] == ["plain-2"]
    await service.append_event(partial, _response("lr-2", "ask_for_approval", {"status": "pending"}))
    assert (await PendingCall.objects.aget(call_id="lr-2")).initial_response == {"status": "pending"}
    await sync_to_async(connections.close_all)()


async def test_a_response_to_a_long_running_call_in_memory_records_an_abort(demo):
    """An aborted long-running call: its open ticket is cancelled (the hook ran), even though the call
    is in memory."""
    service = DjangoSessionService()
    session = await service.create_session(app_name=APP, user_id=USER)
    await service.append_event(session, _call("lr-3", "ask_for_approval", long_running=True))
    aborted = _response("lr-3", "ask_for_approval", {"error": "INVOCATION_ABORTED"})
    await service.append_event(session, aborted)
    assert (await PendingCall.objects.aget(call_id="lr-3")).status == PendingCall.Status.CANCELLED
    await sync_to_async(connections.close_all)()
