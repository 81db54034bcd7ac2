"""The session store's statements sent from the event loop (agents_app.session_async, PostgreSQL):
create, get and the append of an event no hook wants go without a thread hop, and nothing the
contract requires changes: a caller inside a transaction is served on its own connection (it sees
its rows), a stale copy or a lost lease stores nothing, a broken connection stores an event at most
once, and a loop never holds more than its few connections. The shared contract itself runs on this
path too (test_session_service_postgres.py: transactional tests, nobody in a transaction); the events the
ticket hook wants, from the loop: test_session_store_loop_tickets.py."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.db import connection, transaction
from django.db.backends.utils import CursorWrapper
from django.utils import timezone
from google.adk.errors._stale_session_error import StaleSessionError
from google.adk.events.event import Event
from google.genai import types

from agents_app import loop_prepared, session_async
from agents_app.leases import Lease, LeaseLost, current_lease
from agents_app.models import AdkSession, StoredEvent
from agents_app.session_service import DjangoSessionService

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_connections")]
APP = "my_app"


def batches_seen(monkeypatch: pytest.MonkeyPatch, check: Callable[[Any], None]) -> None:
    """`check(pairs)` with every batch this process's channel layer sends, waited for or not
    (adkweb.live), just before it leaves."""
    from channels.layers import get_channel_layer

    layer = get_channel_layer()
    real_many, real_soon = layer.group_send_many, layer.group_send_soon

    async def send_many(pairs: Any, ask: Any = ()) -> Any:
        check(pairs)
        return await real_many(pairs, ask)

    async def send_soon(pairs: Any, replied: Any) -> Any:  # a batch that asks nothing (adkweb.live)
        check(pairs)
        return await real_soon(pairs, replied)

    monkeypatch.setattr(layer, "group_send_many", send_many)
    monkeypatch.setattr(layer, "group_send_soon", send_soon)


def broken_after_commit(monkeypatch: pytest.MonkeyPatch, statement: str) -> None:
    """The loop's statements that begin with `statement` run (and commit), then their connection breaks
    before the answer arrives."""
    real_execute = psycopg.AsyncClientCursor.execute

    async def execute_then_break(self: Any, query: Any, params: Any = None, **kwargs: Any) -> Any:
        result = await real_execute(self, query, params, **kwargs)
        if _text_of(str(query)).startswith(statement):
            self.connection.pgconn.finish()  # the answer never arrives
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return result

    monkeypatch.setattr(psycopg.AsyncClientCursor, "execute", execute_then_break)


def _text_of(query: str) -> str:
    """The SQL a statement sent from the loop stands for (agents_app.loop_prepared sends an EXECUTE)."""
    for sql, statement in loop_prepared._statements.items():
        if statement is not None and query.startswith(f"EXECUTE {statement.name}"):
            return sql
    return query


@pytest.fixture(autouse=True)
def _no_hooks(monkeypatch: pytest.MonkeyPatch) -> None:
    """No event hook (a scenario imported earlier may add one that wants every event)."""
    from agents_app import session_hooks

    monkeypatch.setattr(session_hooks, "_event_hooks", [])


def _text(text: str) -> Event:
    return Event(
        author="agent", invocation_id="inv", content=types.Content(role="model", parts=[types.Part(text=text)])
    )


@contextmanager
def sent(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, list[str]]]:
    """The statements sent meanwhile, from the loop and on Django's connections (any thread)."""
    seen: dict[str, list[str]] = {"loop": [], "django": []}
    real_execute, real_fetchone = CursorWrapper.execute, session_async.fetchone

    def execute(self: CursorWrapper, sql: str, params: Any = None) -> Any:
        seen["django"].append(sql)
        return real_execute(self, sql, params)

    async def fetchone(sql: str, params: Any, **kwargs: Any) -> Any:
        seen["loop"].append(sql)
        return await real_fetchone(sql, params, **kwargs)

    with monkeypatch.context() as patched:
        patched.setattr(CursorWrapper, "execute", execute)
        patched.setattr(session_async, "fetchone", fetchone)
        yield seen


async def _events(session_id: str) -> list[str]:
    rows = StoredEvent.objects.filter(session__session_id=session_id).order_by("id")
    return [row async for row in rows.values_list("event_id", flat=True)]


async def _append_after_a_takeover(service: DjangoSessionService, session: Any, event: Event) -> None:
    """The session leased to another worker meanwhile: our run's append of `event` raises LeaseLost
    and marks our lease lost."""
    soon = timezone.now() + timedelta(minutes=1)
    await AdkSession.objects.filter(session_id=session.id).aupdate(lease_owner="other", lease_expires_at=soon)
    mine = Lease(session_pk=(await AdkSession.objects.aget(session_id=session.id)).pk, owner="me")
    token = current_lease.set(mine)
    try:
        with pytest.raises(LeaseLost):
            await service.append_event(session, event)
    finally:
        current_lease.reset(token)
    assert mine.lost


async def test_create_get_and_an_append_no_hook_wants_are_sent_from_the_loop(service, monkeypatch):
    with sent(monkeypatch) as seen:
        session = await service.create_session(app_name=APP, user_id="u", state={"k": 1, "user:u": 1})
        event = await service.append_event(session, _text("hello"))
        got = await service.get_session(app_name=APP, user_id="u", session_id=session.id)
    assert seen["django"] == [], seen
    assert [sql.split()[0:3] for sql in seen["loop"]] == [
        ["WITH", "s", "AS"],
        ["WITH", "u", "AS"],
        ["SELECT", "s.id,", "s.revision,"],
    ]
    assert got is not None and [e.id for e in got.events] == [event.id] and got.state == {"k": 1, "user:u": 1}
    assert got.events[0].content == event.content
    # The copy that appended is current: it appends again (its marker moved with the statement).
    await service.append_event(session, _text("again"))
    assert len(await _events(session.id)) == 2


async def test_a_list_is_sent_from_the_loop_and_lists_what_the_thread_path_lists(service, monkeypatch):
    first = await service.create_session(app_name=APP, user_id="u", state={"k": 1, "app:a": 2, "user:b": 3})
    await service.create_session(app_name=APP, user_id="v")
    await service.append_event(first, _text("newer activity"))
    await service.delete_session(
        app_name=APP, user_id="v", session_id=(await service.create_session(app_name=APP, user_id="v")).id
    )
    with sent(monkeypatch) as seen:
        everyone = await service.list_sessions(app_name=APP)
        mine = await service.list_sessions(app_name=APP, user_id="u")
    assert seen["django"] == [], seen
    assert [(s.user_id, s.state) for s in everyone.sessions] == [
        ("v", {"app:a": 2}),
        ("u", {"k": 1, "app:a": 2, "user:b": 3}),
    ]
    assert [s.id for s in mine.sessions] == [first.id]
    thread_path = await sync_to_async(service.list_sessions_sync)(app_name=APP)
    assert everyone.sessions == thread_path.sessions


def test_a_caller_inside_a_transaction_is_served_on_its_own_connection():
    """The async API called (async_to_sync) inside the caller's transaction sees and writes in that
    transaction: a connection of the loop's would not see the session created in it."""
    service = DjangoSessionService()

    class Rollback(Exception):
        pass

    with pytest.raises(Rollback), transaction.atomic():
        service.create_session_sync(app_name=APP, user_id="u", session_id="inside")
        got = async_to_sync(service.get_session)(app_name=APP, user_id="u", session_id="inside")
        assert got is not None
        async_to_sync(service.append_event)(got, _text("in the transaction"))
        assert StoredEvent.objects.filter(session__session_id="inside").count() == 1
        raise Rollback
    assert not AdkSession.all_objects.filter(session_id="inside").exists()
    assert not StoredEvent.objects.exists()
    connection.close()


async def test_a_stale_copy_or_a_lost_lease_stores_nothing(service):
    session = await service.create_session(app_name=APP, user_id="u", session_id="s")
    stale = await service.get_session(app_name=APP, user_id="u", session_id="s")
    await service.append_event(session, _text("first"))
    with pytest.raises(StaleSessionError):
        await service.append_event(stale, _text("from a stale copy"))
    # Leased to another worker: our run's append stores nothing and learns the lease is lost.
    await _append_after_a_takeover(service, session, _text("after the takeover"))
    assert len(await _events("s")) == 1


def _terminate(pids: list[int]) -> int:
    """End these server processes (as a restart, an idle timeout or an operator would)."""
    db = connection.settings_dict["NAME"]
    with psycopg.connect(f"dbname={db} user=postgres host=127.0.0.1", autocommit=True) as admin:
        rows = admin.execute("SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid", [pids]).fetchall()
    return sum(1 for (ended,) in rows if ended)


async def test_a_connection_the_server_ended_while_idle_costs_nothing(service):
    session = await service.create_session(app_name=APP, user_id="u", session_id="s")
    mine = [conn.info.backend_pid for conn in session_async._loops[asyncio.get_running_loop()].free]
    assert await sync_to_async(_terminate)(mine) == len(mine) == 1
    await asyncio.sleep(0.05)
    await service.append_event(session, _text("after the server ended it"))
    assert await service.get_session(app_name=APP, user_id="u", session_id="s") is not None
    assert len(await _events("s")) == 1


async def test_an_append_whose_connection_broke_after_its_commit_is_not_stored_twice(service, monkeypatch):
    """The statement committed, then the connection broke before its answer: sent again by the thread
    path, the append finds its copy stale and stores nothing (what ADK's own store would raise there is
    the connection's error: either way the caller must reload)."""
    session = await service.create_session(app_name=APP, user_id="u", session_id="s")
    broken_after_commit(monkeypatch, "WITH u AS (UPDATE")
    with pytest.raises(StaleSessionError):
        await service.append_event(session, _text("once"))
    monkeypatch.undo()
    assert len(await _events("s")) == 1
    assert (await AdkSession.objects.aget(session_id="s")).revision == 1


async def test_a_loop_holds_a_few_connections_and_more_callers_take_the_thread_path(service, monkeypatch):
    sessions = [await service.create_session(app_name=APP, user_id="u", session_id=f"s{i}") for i in range(12)]
    threads: set[int] = set()
    real_store = service._store_event

    def store(*args: Any, **kwargs: Any) -> Any:
        threads.add(threading.get_ident())
        return real_store(*args, **kwargs)

    monkeypatch.setattr(service, "_store_event", store)
    await asyncio.gather(*(service.append_event(s, _text(f"to {s.id}")) for s in sessions))
    state = session_async._loops[asyncio.get_running_loop()]
    assert state.opened <= session_async._MAX and len(state.free) == state.opened
    assert threads, "no caller took the thread path"
    for s in sessions:
        assert len(await _events(s.id)) == 1
