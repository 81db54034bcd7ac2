"""The append of an event no hook wants, on SQLite, sent from the event loop on the loop's own sqlite3
connection (agents_app.session_sqlite_loop): no hop to a database thread, and what the contract requires
unchanged: the row's checks (a stale copy, a lost lease: nothing stored, the thread path says why), its
own transaction under the process's write lock of the file, a database error rolled back and the
event stored once by the thread path, a sync caller (async_to_sync) served on its own thread. The tests'
database is a file (tests/settings.py), as embedded mode's: every test's drains take this path."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.db import connection
from django.utils import timezone
from google.adk.errors._stale_session_error import StaleSessionError
from google.adk.events.event import Event
from google.genai import types

from adkweb.sqlite3.base import write_lock
from agents_app import session_sqlite, session_sqlite_loop
from agents_app.leases import Lease, LeaseLost, current_lease
from agents_app.models import AdkSession, StoredEvent, Turn
from agents_app.session_service import DjangoSessionService, current_turn_id, current_turn_invocations

pytestmark = pytest.mark.django_db(transaction=True)
APP = "my_app"


@pytest.fixture(autouse=True)
def _loop_path(monkeypatch: pytest.MonkeyPatch) -> Any:
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's loop path (PostgreSQL's: tests/integration/test_session_store_loop.py)")
    from agents_app import session_hooks

    monkeypatch.setattr(session_hooks, "_event_hooks", [])  # no hook (a scenario imported earlier may add one)
    assert session_sqlite_loop._on_file_sqlite()
    yield
    session_sqlite_loop.close_all()


@pytest.fixture
def thread_path(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The event ids the thread path (DjangoSessionService._store_event) was asked to store."""
    asked: list[str] = []
    real = DjangoSessionService._store_event

    def store(self: Any, session: Any, event: Event, *args: Any, **kwargs: Any) -> Any:
        asked.append(event.id)
        return real(self, session, event, *args, **kwargs)

    monkeypatch.setattr(DjangoSessionService, "_store_event", store)
    return asked


def _text(text: str) -> Event:
    return Event(
        author="agent", invocation_id="inv", content=types.Content(role="model", parts=[types.Part(text=text)])
    )


def _append(session: Any, event: Event, lease: Lease | None = None, turn: Turn | None = None) -> Event:
    """append_event from an event loop of this thread (as a drain's loop calls it), with the run's lease and turn."""

    async def go() -> Event:
        tokens = current_lease.set(lease), current_turn_id.set(turn.pk if turn else None)
        invocations = current_turn_invocations.set(set() if turn else None)
        try:
            return await DjangoSessionService().append_event(session, event)
        finally:
            current_lease.reset(tokens[0])
            current_turn_id.reset(tokens[1])
            current_turn_invocations.reset(invocations)

    return asyncio.run(go())


def _session(sid: str = "s") -> Any:
    return DjangoSessionService().create_session_sync(app_name=APP, user_id="u", session_id=sid)


def _stored(sid: str = "s") -> list[tuple[str, int | None]]:
    return list(StoredEvent.objects.filter(session__session_id=sid).order_by("id").values_list("event_id", "turn_id"))


def test_an_append_no_hook_wants_is_stored_from_the_loop(thread_path):
    session = _session()
    row = AdkSession.objects.get(session_id="s")
    turn = Turn.objects.create(session=row, kind="message", content={"parts": [{"text": "hi"}]}, status="running")
    soon = timezone.now() + timedelta(seconds=1)
    AdkSession.objects.filter(pk=row.pk).update(lease_owner="me", lease_expires_at=soon)
    first = _append(session, _text("hello"), Lease(row.pk, "me"), turn)
    _append(session, _text("again"))  # the copy's marker moved with the append: it is current
    assert thread_path == []
    assert _stored() == [(first.id, turn.pk), (session.events[1].id, None)]
    row.refresh_from_db()
    assert row.revision == 2 and session._storage_update_marker == f"{row.pk}:2"
    assert row.lease_expires_at > soon  # the lease renewed by the append
    turn.refresh_from_db()
    assert turn.invocation_id == "inv"  # recorded with the turn's first event
    got = DjangoSessionService().get_session_sync(app_name=APP, user_id="u", session_id="s")
    assert got is not None and [e.content for e in got.events] == [e.content for e in session.events]


def test_a_stale_copy_or_a_lost_lease_stores_nothing_and_the_thread_path_says_why(thread_path):
    session = _session()
    stale = DjangoSessionService().get_session_sync(app_name=APP, user_id="u", session_id="s")
    _append(session, _text("first"))
    with pytest.raises(StaleSessionError):
        _append(stale, _text("from a stale copy"))
    row = AdkSession.objects.get(session_id="s")
    AdkSession.objects.filter(pk=row.pk).update(lease_owner="other", lease_expires_at=timezone.now() + timedelta(1))
    mine = Lease(row.pk, "me")
    with pytest.raises(LeaseLost):
        _append(session, _text("after the takeover"), mine)
    assert mine.lost and len(_stored()) == 1 and len(thread_path) == 2


def test_a_database_error_rolls_back_and_the_thread_path_stores_the_event_once(thread_path, monkeypatch):
    session = _session()
    real = session_sqlite_loop._qmark

    def qmark(sql: str) -> str:
        if sql == session_sqlite.INSERT:
            raise sqlite3.OperationalError("disk I/O error")  # after the loop's UPDATE ran
        return real(sql)

    monkeypatch.setattr(session_sqlite_loop, "_qmark", qmark)
    event = _append(session, _text("once"))
    assert _stored() == [(event.id, None)] and thread_path == [event.id]
    assert AdkSession.objects.get(session_id="s").revision == 1  # the loop's UPDATE rolled back
    assert not write_lock(connection.settings_dict["NAME"]).locked()


def test_the_append_waits_for_the_process_write_lock_of_the_file(thread_path):
    session = _session()
    lock = write_lock(connection.settings_dict["NAME"])
    done = threading.Event()
    lock.acquire()
    try:
        threading.Thread(target=lambda: (_append(session, _text("later")), done.set()), daemon=True).start()
        time.sleep(0.3)
        assert not done.is_set() and _stored() == []  # the loop waits for the writer before it
    finally:
        lock.release()
    assert done.wait(10)
    assert len(_stored()) == 1 and thread_path == []


def test_a_sync_caller_through_async_to_sync_takes_the_thread_path():
    async def usable() -> bool:
        return session_sqlite_loop.usable()

    assert asyncio.run(usable())
    assert not async_to_sync(usable)()
