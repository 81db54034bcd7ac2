"""The append of an event on SQLite (embedded mode) sent from the event loop: no thread hop.

Every append of a drained turn used to be a `sync_to_async` hop from the drain's loop to its database
thread and back: ~120-180 us of CPU a hop on the embedded bench's VM whatever the statements cost,
9 a seed flow (bench/README.md, phase 22 (embedded) and phase 23 (embedded)). PostgreSQL's loop path
(agents_app.session_async) sends them from the loop on connections of the loop's own; here, SQLite
being a file of this process's, the loop keeps one sqlite3 connection (opened as Django opens its
own: the same parameters, pragmas and functions) and runs the append's statements on it, in the
loop's thread. Only the append session_sqlite.append already makes (an event that changes no state,
from a copy with a revision marker) and only when no event hook wants the event (the hooks run on
Django's connection, in the thread path's transaction).

Unchanged: the statements (session_sqlite's, the row's checks in the UPDATE's WHERE: this copy's
revision, not archived, the lease still this run's), their transaction (`BEGIN IMMEDIATE` ... `COMMIT`,
synchronous FULL: the event is on disk when it is published), and the process's single writer
(adkweb.sqlite3's lock of the file, taken before `BEGIN IMMEDIATE` and given back after the commit or
rollback, as Django's connections take it). When the UPDATE matches nothing, nothing is stored and
the caller takes the thread path, which says which check failed. A database error before the commit
rolls back (nothing stored) and the thread path runs the append again; one at the commit leaves it
unknown whether it committed: the thread path runs it again too, and the revision check stores it at
most once (a committed first try makes the copy stale: the second stores nothing and says so). The
connection is dropped after any error.

Only where the thread path would see the same rows: not when sync code called the async store
through `async_to_sync` (its thread may hold a transaction, and the file's lock: waiting for that
lock on the loop would wait for ourselves; agents_app.session_async.usable says the same for
PostgreSQL), not on an in-memory database (its shared cache locks by table, not by file).
The loop's thread blocks while it waits for the file's lock (another thread's transaction: a
request's, the fan-out's; held for a few statements) and for the commit's fsync, as a sync tool
would block it.
"""

from __future__ import annotations

import asyncio
import functools
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from asgiref.sync import AsyncToSync
from django.db import DEFAULT_DB_ALIAS, connections

from adkweb.sqlite3.base import _qmark, write_lock

from . import session_sqlite
from .session_hooks import hooks_for
from .session_orm import NewEvent, parse_marker, update_marker
from .session_sql import Appended

if TYPE_CHECKING:
    from google.adk.events.event import Event
    from google.adk.sessions.session import Session

    from .leases import Lease

T = TypeVar("T")
enabled = True  # off: every append takes the thread path (tests compare both)


@dataclass
class _Conn:
    conn: sqlite3.Connection
    thread: int
    ops: Any  # Django's operations for SQLite (its datetime adaptation), of a wrapper never connected
    lock: threading.Lock
    timeout: float


# One connection per event loop, used only from the loop's thread; dropped with its loop (_close_dead_loops).
_loops: dict[asyncio.AbstractEventLoop, _Conn] = {}


@functools.cache
def _on_file_sqlite() -> bool:
    wrapper: Any = connections.create_connection(DEFAULT_DB_ALIAS)
    return wrapper.vendor == "sqlite" and not wrapper.is_in_memory_db()


def usable() -> bool:
    """May this append go through the loop's connection? On a SQLite file, unless sync code called the
    async store through `async_to_sync` (see the module)."""
    if not enabled or not _on_file_sqlite():
        return False
    if getattr(AsyncToSync.executors, "current", None) is not None:  # a sync caller's thread above
        return False
    return asyncio.get_running_loop() not in AsyncToSync.loop_thread_executors  # a loop async_to_sync made


def _connection() -> _Conn:
    loop = asyncio.get_running_loop()
    found = _loops.get(loop)
    if found is not None and found.thread == threading.get_ident():
        return found
    if found is not None:  # the loop runs on another thread now: sqlite3 wants its connection's
        _drop(loop)
    _close_dead_loops()
    wrapper: Any = connections.create_connection(DEFAULT_DB_ALIAS)  # never connected itself
    # Django's parameters, pragmas and functions; its async guard (this is a loop's thread) stepped over:
    # the connection is this loop's own, used from its thread only, never Django's.
    conn = type(wrapper).get_new_connection.__wrapped__(wrapper, wrapper.get_connection_params())
    conn.isolation_level = None  # autocommit: the transaction is ours (BEGIN IMMEDIATE ... COMMIT)
    name = str(wrapper.settings_dict["NAME"])
    timeout = float(wrapper.settings_dict.get("OPTIONS", {}).get("timeout", 5))
    found = _loops[loop] = _Conn(conn, threading.get_ident(), wrapper.ops, write_lock(name), timeout)
    return found


def _drop(loop: asyncio.AbstractEventLoop) -> None:
    found = _loops.pop(loop, None)
    if found is not None:
        try:
            found.conn.close()
        except sqlite3.Error:
            pass


def _close_dead_loops() -> None:
    for loop in [loop for loop in _loops if loop.is_closed()]:
        _drop(loop)


def close_all() -> None:
    """Close every loop's connection (tests; a loop's own are closed with it otherwise)."""
    for loop in list(_loops):
        _drop(loop)


def inline(fn: Callable[..., T], /, *args: Any) -> T:
    """`fn(*args)`, sync code of the drain's bookkeeping on Django's connection of this thread (agents_app.
    turn_sqlite's `start` and `done_next`: one write transaction each, nothing awaited, published or
    asked of the loop), run here on the loop's thread instead of its database thread: no hop. Django
    refuses its connections to a thread where a loop runs (they must not block it, nor be shared by two
    coroutines mid-transaction); here the loop is blocked by design while `fn` runs, as `append` blocks
    it, and `fn` holds its transaction only until it returns. Only where `usable` says so."""
    loop = asyncio.events._get_running_loop()
    asyncio.events._set_running_loop(None)  # Django's async guard looks for it
    try:
        return fn(*args)
    finally:
        asyncio.events._set_running_loop(loop)


class Again(Exception):
    """Nothing is known to be stored: take the thread path (which runs the append again if need be)."""


def append(
    *,
    app_name: str,
    user_id: str,
    session_id: str,
    copy_of: tuple[int, int],
    lease: tuple[str, Any] | None,
    columns: dict[str, Any],
) -> Appended | None:
    """session_sqlite.append in its own transaction on the loop's connection (called from the loop's
    thread): what it answers, None when the row's checks stored nothing, Again on a database error."""
    held = _connection()
    sql, params = session_sqlite.update_statement(
        app_name=app_name,
        user_id=user_id,
        session_id=session_id,
        session_pk=copy_of[0],
        revision=copy_of[1],
        ts=columns["ts"],
        lease=None if lease is None else (lease[0], held.ops.adapt_datetimefield_value(lease[1])),
    )
    conn = held.conn
    locked = held.lock.acquire(timeout=held.timeout)  # not obtained in time: SQLite's own wait applies
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            found = conn.execute(_qmark(sql + "id, revision, update_time"), params).fetchone()
            if found is None:
                conn.execute("ROLLBACK")
                return None
            c = columns
            event = session_sqlite.event_params(
                found[0],
                c["event_id"],
                c["invocation_id"],
                c["author"],
                c["ts"],
                c["data"],
                c["interrupt_ids"],
                c["response_ids"],
                c["turn_id"],
            )
            event_pk = conn.execute(_qmark(session_sqlite.INSERT), event).fetchone()[0]
            if columns["record_invocation"]:
                conn.execute(
                    _qmark(session_sqlite.RECORD_INVOCATION), [columns["invocation_id"], columns["turn_id"] or 0]
                )
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
    except sqlite3.Error as exc:
        _drop(asyncio.get_running_loop())
        raise Again(str(exc)) from exc
    except BaseException:
        _drop(asyncio.get_running_loop())
        raise
    finally:
        if locked:
            held.lock.release()
    return Appended(found[0], found[1], found[2], event_pk, None)


def store(
    session: Session, event: Event, turn_id: int | None, lease: Lease | None, recorded: set[str] | None
) -> dict[str, Any] | None:
    """The event stored from the loop (`usable` said so) if it may be (a copy with a revision marker, no
    state change, no hook wanting it), committed, the copy brought up to date: the message to publish
    (as DjangoSessionService._store_event answers it). None when nothing was stored here: the caller
    takes the thread path. `recorded`: the turn's invocation ids already written (one added once this
    event wrote its own)."""
    copy_of = parse_marker(session._storage_update_marker)
    if copy_of is None or hooks_for(event, session):
        return None
    new = NewEvent.of(event, turn_id, recorded)
    if new.deltas and any(new.deltas.values()):
        return None
    try:
        done = append(
            app_name=session.app_name,
            user_id=session.user_id,
            session_id=session.id,
            copy_of=copy_of,
            lease=(lease.owner, lease.expiry()) if lease is not None else None,
            columns=new.columns(),
        )
    except Again:
        return None
    if done is None:
        return None
    if new.record_invocation and recorded is not None:  # committed
        recorded.add(new.invocation_id)
    session.last_update_time = done.update_time
    session._storage_update_marker = update_marker(done.session_pk, done.revision)
    return new.message(done.session_pk, done.event_pk, done.revision)
