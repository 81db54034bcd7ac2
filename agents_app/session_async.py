"""DjangoSessionService's one-statement operations sent from the event loop (PostgreSQL): no thread hop.

Every async call of the store used to be a `sync_to_async` hop to a database thread and back: two
thread wake-ups around the statement's own round trip, 1-2 ms each on a loaded machine (measured in
the seed flow: bench/README.md, phase 11). ADK's DatabaseSessionService (asyncpg) pays none. Here the
statements that need nothing but the statement itself (session_sql's append of an event no hook
wants, or whose hooks' work all rides in it, get, create, the delete of a session that owes nothing)
are sent by psycopg's AsyncConnection from the loop: the same SQL text, bound on the client as
Django's cursors bind it, in autocommit (each statement atomic on its own, as on the thread path).
What they store, lock and check is unchanged; the store falls back to the thread path for everything
else (an event a hook must handle in a transaction, a statement that stored nothing and must say why,
list, a delete with something owed).

Used only where it sees what Django's own connection would: not when sync code calls the async store
through `async_to_sync` (it may be inside a transaction, e.g. a test's or a view's: a separate
connection would not see its rows; `usable`).

The connections themselves, a few per event loop, are agents_app.loop_connections' (imported from here,
where tests patch `_connection` and read `_loops`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import psycopg
from asgiref.sync import AsyncToSync
from django.db import DEFAULT_DB_ALIAS, connections

from . import loop_prepared, session_sql
from .loop_connections import _MAX, Busy, _as_django, _close, _connection, _Loop, _loops, close_all

# agents_app.loop_connections', used from here (tests also read _loops and _MAX, and patch _connection).
__all__ = ["_MAX", "Busy", "close_all"]

logger = logging.getLogger(__name__)
T = TypeVar("T")

enabled = True  # off: every call takes the thread path (tests compare both)


def usable() -> bool:
    """May this call go through the loop's connection? On PostgreSQL, unless sync code called the
    async store through `async_to_sync`: its thread (where the store's thread path would run, on that
    thread's Django connection) may be inside a transaction, whose rows a connection of the loop's
    would not see. Async code itself cannot hold a transaction open (Django's atomic blocks are sync),
    so otherwise there is none to see."""
    if not enabled or not _postgresql():
        return False
    if getattr(AsyncToSync.executors, "current", None) is not None:  # a sync caller's thread above
        return False
    return asyncio.get_running_loop() not in AsyncToSync.loop_thread_executors  # a loop async_to_sync made


@functools.cache
def _postgresql() -> bool:
    return "postgresql" in connections.settings[DEFAULT_DB_ALIAS]["ENGINE"]


async def fetchone(sql: str, params: list[Any], *, again_if_lost: bool) -> tuple | None:
    """One statement, its first row. Busy: nothing was sent (take the thread path), or the
    connection broke and `again_if_lost` says the statement may be sent again on the thread path
    (a read; an append, whose revision check stores it at most once: sent again after it did commit,
    it finds its copy stale). Any other database error is raised as Django's (django.db.utils), as
    the thread path raises it."""

    async def one(conn: psycopg.AsyncConnection) -> tuple | None:
        async with conn.cursor() as cursor:
            await loop_prepared.execute(cursor, sql, params)  # prepared once per connection
            return await cursor.fetchone()

    return await on_connection(one, again_if_lost=again_if_lost)


async def on_connection(work: Callable[[psycopg.AsyncConnection], Awaitable[T]], *, again_if_lost: bool) -> T:
    """`await work(conn)` on one of this loop's connections (autocommit; given back after), with
    `fetchone`'s errors: Busy when no connection is free (nothing sent) or when it broke and
    `again_if_lost`; any other psycopg error raised as Django's. Also for other modules' statements
    that need nothing but themselves (agents_app.turn_sql's claim and finish)."""
    loop = asyncio.get_running_loop()
    state = _loops.get(loop)
    if state is None:
        state = _loops[loop] = _Loop()
    conn = await _connection(state)
    try:
        found = await work(conn)
    except psycopg.Error as exc:
        if not (conn.closed or conn.broken):
            state.free.append(conn)
            raise _as_django(exc) from exc
        state.opened -= 1  # e.g. the server ended it while idle (a restart, idle_session_timeout)
        if again_if_lost:
            logger.warning("The session store's loop connection broke; this statement goes the thread path.")
            raise Busy(str(exc)) from exc
        raise _as_django(exc) from exc
    except BaseException:  # cancelled mid-statement: the connection's state is unknown
        state.opened -= 1
        await _close(conn)
        raise
    state.free.append(conn)
    return found


async def create(
    *, app_name: str, user_id: str, session_id: str, deltas: dict[str, dict[str, Any]], now: float
) -> tuple[int, int, dict[str, Any], dict[str, Any]] | None:
    """session_sql.create from the loop. Not sent again if its connection breaks: it may have
    created the session (a second try would say it exists)."""
    sql, params = session_sql.create_statement(
        app_name=app_name, user_id=user_id, session_id=session_id, deltas=deltas, now=now
    )
    return session_sql.created(await fetchone(sql, params, again_if_lost=False))


async def get(params: list[Any]) -> session_sql.Loaded | None:
    """session_sql.get from the loop (its parameters: session_sql.get_params)."""
    return session_sql.loaded(await fetchone(session_sql.GET, params, again_if_lost=True))


async def append(
    *,
    app_name: str,
    user_id: str,
    session_id: str,
    copy_of: tuple[int, int],
    lease: Any,
    columns: dict[str, Any],
    riders: list[session_sql.Rider] | None = None,
) -> session_sql.Appended | None:
    """session_sql.append from the loop, for an event no hook wants or whose hooks all ride in the
    statement (`riders`: their values come back in `ridden`, for the caller to announce once the
    event is published; no row for hooks): None when it stored nothing (the thread path's checked
    path says why)."""
    riders = riders or []
    sql, params = session_sql.append_statement(
        app_name=app_name,
        user_id=user_id,
        session_id=session_id,
        session_pk=copy_of[0],
        revision=copy_of[1],
        lease=(lease.owner, lease.expiry()) if lease is not None else None,
        whole_row=False,
        riders=riders,
        **columns,
    )
    return session_sql.appended(await fetchone(sql, params, again_if_lost=True), riders, tell=False)


async def archive_quiet(*, app_name: str, user_id: str, session_id: str, at: Any, by: str) -> tuple[int, str] | None:
    """session_sql.archive_quiet from the loop: (pk, stored status) of the session it archived, or None
    (nothing changed: not there, or something owed in it; the thread path's checked path takes it).
    Sent again by the thread path if its connection breaks: archived already, it changes nothing there."""
    sql, params = session_sql.archive_quiet_statement(
        app_name=app_name, user_id=user_id, session_id=session_id, at=at, by=by
    )
    found = await fetchone(sql, params, again_if_lost=True)
    return (found[0], found[1]) if found else None


async def listed(*, app_name: str, user_id: str | None) -> list[session_sql.Listed]:
    """session_sql.listed from the loop (a read: sent again by the thread path if its connection breaks)."""
    sql, params = session_sql.listed_statement(app_name=app_name, user_id=user_id)

    async def every_row(conn: psycopg.AsyncConnection) -> list[tuple]:
        async with conn.cursor() as cursor:
            await loop_prepared.execute(cursor, sql, params)
            return await cursor.fetchall()

    return session_sql.listed_rows(await on_connection(every_row, again_if_lost=True))


def committed(riders: list[session_sql.Rider], done: session_sql.Appended) -> None:
    """Each rider's `committed` for an append sent from here, at once after its commit (before its
    event is published). A failure is logged, never raised into the append."""
    for rider, value in zip(riders, done.ridden, strict=True):
        if rider.committed is None:
            continue
        try:
            rider.committed(value, done.session_pk)
        except Exception:
            logger.warning("Could not start what the hooks of event %s owe after commit.", done.event_pk, exc_info=True)


async def announce(riders: list[session_sql.Rider], done: session_sql.Appended) -> None:
    """Each rider's `announce` for an append sent from here, committed (its event published first by
    the caller), in order. It runs after commit: a failure is logged, never raised into the append."""
    for rider, value in zip(riders, done.ridden, strict=True):
        if rider.announce is None:
            continue
        try:
            await rider.announce(value, done.session_pk)
        except Exception:
            logger.warning("Could not announce what the hooks of event %s wrote.", done.event_pk, exc_info=True)
