"""The session store's connections on the event loop (split out of agents_app.session_async, which sends
its statements on them with `on_connection` and imports what is here back for its callers and tests).

Connections: a few per event loop (`_MAX`), opened on first use, kept while the loop lives; more
concurrent calls on one loop take the thread path rather than wait. A connection its server ended
while it was idle is found so before a statement is sent on it (adkweb.postgresql.base.idle_ended: the
drain's claim and finish, never sent twice, would otherwise end their drain), and another is used. A
connection that breaks under a statement is dropped; its statement goes again by the thread path
when that is safe (a get; an append, which the revision check stores at most once: if the lost one
committed, the second finds its copy stale and stores nothing), otherwise the error is raised as
Django's, as the thread path would raise it (a create whose connection died may or may not have
committed, exactly as there). Connections of closed loops are closed on the next connect; `close_all`
closes every one (tests, before dropping their database; the bench).
"""

from __future__ import annotations

import asyncio
import atexit
import logging
from dataclasses import dataclass, field
from typing import Any

import psycopg
from django.db import DEFAULT_DB_ALIAS, connections
from django.db import utils as db_errors

from adkweb.postgresql.base import idle_ended

from . import pooler

logger = logging.getLogger("agents_app.session_async")  # its log name, as before the split

_MAX = 4  # connections per event loop; a call beyond that takes the thread path


@dataclass
class _Loop:
    free: list[psycopg.AsyncConnection] = field(default_factory=list)
    opened: int = 0  # connections of this loop, free or in use


# By loop (kept until closed: _close_dead_loops, close_all; a loop is not collected with its connections open).
_loops: dict[asyncio.AbstractEventLoop, _Loop] = {}


class Busy(Exception):
    """No connection free on this loop (or none could be opened): take the thread path."""


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
        if not idle_ended(conn):  # its server's end found before a statement is sent on it
            return conn
        state.opened -= 1
        if not conn.closed:
            await _close(conn)
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
