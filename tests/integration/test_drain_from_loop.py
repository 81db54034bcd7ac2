"""The drain's claim and finish sent from the worker's event loop (agents_app.turn_sql.astart and
adone_next, on agents_app.session_async's connections; PostgreSQL): the same statements and the same
decisions as on the database thread (tests/integration/test_drain_sql.py), prepared once per loop
connection, each its own transaction, and a drain of a turn whose runner is cached that gives the
database thread nothing to do; with no loop connection free, the thread path as before."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from django.utils import timezone

from agents_app import run_cache, runner, services, session_async, turn_sql, worker_loop
from agents_app.models import AdkSession, AgentConfigVersion, Turn
from tests.agents_app.test_worker_loop import _turn, drained  # noqa: F401 - the fixture, used below
from tests.integration.test_drain_sql import _consistent, _lease
from tests.integration.test_session_store_loop import _terminate
from tests.integration.test_worker_loop_postgres import _holds_a_connection

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_connections", "demo", "drained")]


def _session() -> AdkSession:
    return services.session_create(app_name="stock_agent", user_id="requester")


def _queued(row: AdkSession, text: str = "hi") -> Turn:
    return Turn.objects.create(session=row, kind="message", content={"parts": [{"text": text}]})


def _astart(row: AdkSession, owner: str = "me") -> turn_sql.Started:
    now = timezone.now()
    return worker_loop.run(turn_sql.astart(session_pk=row.pk, owner=owner, until=now + timedelta(seconds=30), now=now))


def _adone_next(turn: Turn, owner: str = "me", version: int | None = None) -> turn_sql.DoneNext:
    now = timezone.now()
    until = now + timedelta(seconds=30)
    return worker_loop.run(
        turn_sql.adone_next(
            turn_id=turn.pk, session_pk=turn.session_id, owner=owner, until=until, now=now, config_version=version
        )
    )


def _on_the_loops_connection(sql: str) -> tuple[list[tuple], Any]:
    """A statement on the loop connection the last call gave back (the loop opens one here: these
    calls never overlap), its rows and the connection's transaction status after it."""

    async def run(conn: Any) -> tuple[list[tuple], Any]:
        async with conn.cursor() as cursor:
            await cursor.execute(sql)
            rows = await cursor.fetchall() if cursor.description is not None else []
        return rows, conn.info.transaction_status

    async def on_it() -> tuple[list[tuple], Any]:
        assert session_async._loops[asyncio.get_running_loop()].opened == 1
        return await session_async.on_connection(run, again_if_lost=False)

    return worker_loop.run(on_it())


def _cursors(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The texts the loop's psycopg cursors execute from now on."""
    seen: list[str] = []
    execute = psycopg.AsyncClientCursor.execute

    async def recorded(self: psycopg.AsyncClientCursor, query: Any, params: Any = None, **kwargs: Any) -> Any:
        seen.append(str(query))
        return await execute(self, query, params, **kwargs)

    monkeypatch.setattr(psycopg.AsyncClientCursor, "execute", recorded)
    return seen


def _prepared_there() -> set[str]:
    rows, _ = _on_the_loops_connection("SELECT name FROM pg_prepared_statements WHERE name LIKE 'adkweb_turn_%'")
    return {name for (name,) in rows}


def test_the_loop_claims_and_finishes_as_the_thread_does():
    """Claim the oldest, finish it with its version and claim the next under the same lease, release
    at the last; each statement its own transaction (synchronous commits again after it, nothing left
    open), prepared once on the loop's connection; the claim's stamp as the ORM's thread reads it."""
    row = _session()
    first, second = _queued(row), _queued(row, "more")
    started = _astart(row)
    assert started.leased and not started.orphan and started.turn is not None and started.turn.pk == first.pk
    assert (started.turn.status, started.turn.attempts, started.turn.content) == ("running", 1, first.content)
    assert started.turn.state_delta is None and started.turn.started_at is not None
    assert started.claim == turn_sql.Claim(
        "stock_agent", "requester", row.session_id, run_cache.read_stamp_row("stock_agent"), started.claim.session
    )
    assert _lease(row) == "me" and _consistent(row) == "running"
    version = AgentConfigVersion.objects.create(agent_name="stock_agent", version=99, config={})
    done = _adone_next(started.turn, version=version.pk)
    assert done.leased and done.finished and not done.released and done.status == "running"
    assert done.turn is not None and done.turn.pk == second.pk and done.turn.content["parts"][0]["text"] == "more"
    assert Turn.objects.get(pk=first.pk).config_version_id == version.pk
    last = _adone_next(done.turn)
    assert last.released and last.turn is None and last.status == "idle" and last.revision is not None
    assert _lease(row) == "" and _consistent(row) == "idle"
    assert list(Turn.objects.filter(session=row).values_list("status", "attempts")) == [("done", 1), ("done", 1)]
    rows, status = _on_the_loops_connection("SHOW synchronous_commit")
    assert rows == [("on",)] and status == 0  # idle: the asynchronous commit ended with its statement
    names = {turn_sql._prepared(sql).name for sql in (turn_sql._START, turn_sql._DONE_NEXT)} | {turn_sql._LOCK_NAME}
    assert names <= _prepared_there()


def test_the_loop_changes_nothing_once_the_lease_is_lost():
    row = _session()
    turn = _queued(row)
    _astart(row)
    AdkSession.objects.filter(pk=row.pk).update(lease_owner="other")
    done = _adone_next(turn)
    assert not done.leased and not done.finished and done.turn is None and not done.released
    assert Turn.objects.get(pk=turn.pk).status == "running" and _lease(row) == "other"
    again = _astart(row, owner="third")  # another worker's lease, unexpired
    assert not again.leased and again.turn is None and _lease(row) == "other"


def test_a_statement_that_fails_on_the_loop_leaves_nothing_half_done(monkeypatch):
    """Raised as Django's error; the lock and the failing statement rolled back together; the loop's
    connection idle and used again."""
    from django.db import DataError

    row = _session()
    turn = _queued(row)
    _astart(row)
    failing = turn_sql._DONE_NEXT.replace("SELECT (SELECT count(*) FROM s)", "SELECT 1/0, (SELECT count(*) FROM s)")
    monkeypatch.setattr(turn_sql, "_DONE_NEXT", failing)
    with pytest.raises(DataError, match="division by zero"):
        _adone_next(turn)  # prepared, then its EXECUTE fails: by a cursor
    cursors = _cursors(monkeypatch)
    with pytest.raises(DataError, match="division by zero") as raised:
        _adone_next(turn)  # prepared there now: without a cursor (agents_app.loop_raw), the same error
    assert cursors == [] and getattr(raised.value.__cause__, "sqlstate", None) == "22012"
    assert Turn.objects.get(pk=turn.pk).status == "running" and _lease(row) == "me"
    monkeypatch.undo()
    assert _on_the_loops_connection("SELECT 1")[1] == 0
    assert _adone_next(turn).released and Turn.objects.get(pk=turn.pk).status == "done"


def test_a_loop_connection_that_lost_its_prepared_statements_still_claims_once():
    row = _session()
    first, second, third = _queued(row), _queued(row), _queued(row)
    started = _astart(row)
    assert started.turn is not None and started.turn.pk == first.pk
    done = _adone_next(started.turn)  # both prepared on the loop's connection now
    assert done.turn is not None and done.turn.pk == second.pk and len(_prepared_there()) >= 2
    _on_the_loops_connection("DEALLOCATE ALL")
    done = _adone_next(done.turn)
    assert done.finished and done.turn is not None and done.turn.pk == third.pk
    assert [t.status for t in Turn.objects.order_by("id")] == ["done", "done", "running"]
    assert Turn.objects.get(pk=third.pk).attempts == 1
    assert _adone_next(done.turn).released and _lease(row) == "" and _consistent(row) == "idle"
    # prepared again on this connection (one DEALLOCATE ALL made the process send plain SQL for good)
    assert _prepared_there() == {turn_sql._prepared(turn_sql._DONE_NEXT).name, turn_sql._LOCK_NAME}


def test_a_drain_of_a_cached_runner_gives_the_database_thread_nothing():
    """Its claim, its events and its finish all go from the loop: no hop, no connection checked out
    and given back (the thread's count of calls does not move); the turn ran once, its end written."""
    session = _session()
    _turn(session)  # the runner built (on the database thread) and cached
    assert not _holds_a_connection()
    turn = services.message_send(session=session, text="And MSFT?", streaming=False)
    calls = worker_loop.db_calls()
    assert runner.session_turns_run(session.pk) == 1
    assert worker_loop.db_calls() == calls
    turn.refresh_from_db()
    assert (turn.status, turn.attempts, turn.error) == ("done", 1, "")
    assert _lease(session) == "" and _consistent(session) == "idle"
    assert not _holds_a_connection()


def test_with_no_loop_connection_free_the_drain_takes_the_thread(monkeypatch):
    """Every loop connection in use: the claim and the finish go by the database
    thread, each turn once, and its connection goes back to the pool at the drain's end."""
    session = _session()
    _turn(session)

    async def busy(state: Any) -> Any:
        raise session_async.Busy("every connection of this loop is in use")

    monkeypatch.setattr(session_async, "_connection", busy)
    turns = [services.message_send(session=session, text=t, streaming=False) for t in ("And MSFT?", "And AAPL?")]
    calls = worker_loop.db_calls()
    assert runner.session_turns_run(session.pk) == 2
    assert worker_loop.db_calls() > calls
    assert [(t.status, t.attempts) for t in Turn.objects.filter(pk__in=[t.pk for t in turns])] == [("done", 1)] * 2
    assert _lease(session) == "" and _consistent(session) == "idle"
    assert not _holds_a_connection()


def _ended_by_the_server() -> None:
    """The loop's connection ended by its server while idle (as a restart or idle_session_timeout would)."""
    ((pid,),), _ = _on_the_loops_connection("SELECT pg_backend_pid()")
    assert _terminate([pid]) == 1
    time.sleep(0.1)  # its FATAL message and its end reach this side


def test_a_claim_and_a_finish_on_loop_connections_the_server_ended_while_idle_go_through():
    """A loop connection the server ended while it was idle is found so before the drain's statement is
    sent on it, and the statement goes on a new one: the claim and the finish do not fail for it (they
    are not sent again once sent, so one sent on a dead connection ended the drain, its turn left to the
    sweeper, after every restart of PostgreSQL, once for each connection the worker's loops kept)."""
    row = _session()
    first, second = _queued(row), _queued(row)
    started = _astart(row)
    assert started.turn is not None and started.turn.pk == first.pk
    _ended_by_the_server()
    done = _adone_next(started.turn)
    assert done.finished and done.turn is not None and done.turn.pk == second.pk
    _ended_by_the_server()
    assert _adone_next(done.turn).released and _lease(row) == ""
    third = _queued(row)
    _ended_by_the_server()
    again = _astart(row)
    assert again.leased and again.turn is not None and again.turn.pk == third.pk
