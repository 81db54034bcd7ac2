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

Connections: a few per event loop (`_MAX`), opened on first use, kept while the loop lives; more
concurrent calls on one loop take the thread path rather than wait. A connection that breaks is
dropped; its statement goes again by the thread path when that is safe (a get; an append, which the
revision check stores at most once: if the lost one committed, the second finds its copy stale and
stores nothing), otherwise the error is raised as Django's, as the thread path would raise it (a
create whose connection died may or may not have committed, exactly as there). Connections of closed
loops are closed on the next connect; `close_all` closes every one (tests, before dropping their
database; the bench).
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import psycopg
from asgiref.sync import AsyncToSync
from django.db import DEFAULT_DB_ALIAS, connections
from django.db import utils as db_errors

from . import loop_prepared, pooler, session_sql

logger = logging.getLogger(__name__)
T = TypeVar("T")

_MAX = 4  # connections per event loop; a call beyond that takes the thread path
enabled = True  # off: every call takes the thread path (tests compare both)


@dataclass
class _Loop:
    free: list[psycopg.AsyncConnection] = field(default_factory=list)
    opened: int = 0  # connections of this loop, free or in use


# By loop (kept until closed: _close_dead_loops, close_all; a loop is not collected with its connections open).
_loops: dict[asyncio.AbstractEventLoop, _Loop] = {}


class Busy(Exception):
    """No connection free on this loop (or none could be opened): take the thread path."""


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


def _params() -> tuple[dict[str, Any], str]:
    """Django's connection parameters (the test database's name in tests), for an AsyncConnection;
    and the time zone Django sets on its connections."""
    wrapper = connections.create_connection(DEFAULT_DB_ALIAS)  # not kept: no connection is opened
    if wrapper.settings_dict["OPTIONS"].get("assume_role"):
        raise Busy("a role to assume: the thread path's connection sets it")
    params = wrapper.get_connection_params()
    params.pop("cursor_factory", None)
    # Django sets the session's time zone when it opens a connection; here at connect time. The plans of
    # the statements prepared here (agents_app.loop_prepared) generic from their first EXECUTE. Not
    # through a pooler said to be there (PgBouncer refuses `options`): `_open` sets them.
    if pooler.startup_options():
        options = f"-c TimeZone={wrapper.timezone_name} -c plan_cache_mode=force_generic_plan"
        params["options"] = f"{params.get('options', '')} {options}".strip()
    params["application_name"] = "adkweb session store (event loop)"
    return params, wrapper.timezone_name


async def _open() -> psycopg.AsyncConnection:
    params, timezone_name = _params()
    conn = await psycopg.AsyncConnection.connect(**params, autocommit=True, cursor_factory=psycopg.AsyncClientCursor)
    try:
        pooler.connected(conn.info.backend_pid)  # a pooler recognised: statements as text from now on
        # What the startup options did not set (not sent, or a pooler dropped them): the time zone, which
        # PgBouncer keeps per client, and in session mode (this client's own server connection) the plan mode.
        sets = [("TimeZone", timezone_name)] if conn.info.parameter_status("TimeZone") != timezone_name else []
        if pooler.mode() == "session":
            sets.append(("plan_cache_mode", "force_generic_plan"))
        if sets:
            calls = ", ".join(["set_config(%s, %s, false)"] * len(sets))
            await conn.execute(f"SELECT {calls}", [value for pair in sets for value in pair])
    except BaseException:
        await _close(conn)
        raise
    return conn


async def _connection(state: _Loop) -> psycopg.AsyncConnection:
    while state.free:
        conn = state.free.pop()
        if not conn.closed and not conn.broken:
            return conn
        state.opened -= 1
    if state.opened >= _MAX:
        raise Busy("every connection of this loop is in use")
    _close_dead_loops()
    state.opened += 1
    try:
        return await _open()
    except Exception as exc:
        state.opened -= 1
        logger.warning("Could not open the session store's loop connection; using the thread path.", exc_info=True)
        raise Busy(str(exc)) from exc


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


def _as_django(exc: psycopg.Error) -> Exception:
    """The error as Django's wrapper raises it (django.db.utils.OperationalError, IntegrityError...)."""
    for kind in (
        db_errors.DataError,
        db_errors.OperationalError,
        db_errors.IntegrityError,
        db_errors.InternalError,
        db_errors.ProgrammingError,
        db_errors.NotSupportedError,
        db_errors.DatabaseError,
        db_errors.InterfaceError,
    ):
        if isinstance(exc, getattr(psycopg, kind.__name__)):
            return kind(*exc.args)
    return db_errors.Error(*exc.args)


async def _close(conn: psycopg.AsyncConnection) -> None:
    try:
        await conn.close()
    except Exception:  # already gone
        pass


def _finish(state: _Loop) -> None:
    """Close a loop's connections without its loop (closed, or not this thread's)."""
    for conn in state.free:
        conn.pgconn.finish()
    state.free.clear()


def _close_dead_loops() -> None:
    for loop, state in list(_loops.items()):
        if loop.is_closed():
            _finish(state)
            _loops.pop(loop, None)


def close_all() -> None:
    """Close every loop's idle connections (tests before their database is dropped; the bench)."""
    for state in list(_loops.values()):
        _finish(state)
    _loops.clear()


atexit.register(close_all)
