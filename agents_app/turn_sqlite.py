"""The drain's bookkeeping on SQLite (embedded mode): agents_app.turn_sql's `start` and `done_next`,
with the same arguments and answers, each one write transaction of plain SQL statements.

The ORM path (agents_app.runner's `_drain_orm`) took per turn: the lease's UPDATE, the claim's
transaction, the finish's transaction, the release's UPDATE and a last look for owed work, each a
commit of its own (an fsync of the WAL with synchronous FULL) and each holding the database file's
write lock while the ORM compiled its statements; the turn's database thread waited 11-80 ms a flow
in `BEGIN IMMEDIATE` (bench/README.md, phase 9 embedded). Here:

    start        take the lease (only when the session owes work) and claim its oldest queued turn
    done_next    the running turn done (with the agent configuration version it ran with), the
                 next queued turn claimed (or the lease released when nothing is owed), the
                 session's stored status written (agents_app.session_status)

What PostgreSQL's one statement gets from the session row's lock, SQLite gets from the transaction:
`BEGIN IMMEDIATE` (settings' transaction mode) holds the whole file from its start, so every
statement inside sees every transaction committed before and no other writer runs until the commit.
A turn queued while `done_next` waits for the file is seen and claimed; one queued after it
released the lease is enqueued after that commit and finds the lease free, as on PostgreSQL.
Statements run in order and each sees the ones before it (PostgreSQL's CTEs do not see each other's
changes: there the status is written with the finished turn's new status put in by hand).

A turn's started_at and finished_at are stamped once the file is held (the ORM path stamped them
after its locking reads): the queue and run stages mean the same on both databases. What these do
not handle (a turn still marked running by a worker that died, a turn to fail or to requeue) goes
through the ORM path as on PostgreSQL: `start` and `done_next` say so (`orphan`, `finished`); so do the
owed turns of a deleted (archived) conversation, claimed by neither (`orphan`: turn_close.turn_claim_next
closes them failed, saying why).

Both commit without waiting for the disk (`PRAGMA synchronous = NORMAL` for their own transaction
only, then FULL again), as turn_sql's commit asynchronously on PostgreSQL, and for the same reasons
(its docstring, "Both commit asynchronously"). In WAL mode (settings) a commit appends to one log,
and any later FULL commit (every event, decision and ticket is one) syncs the log with every commit
before it: only the last of these two, with nothing synchronous after it, can be lost, and only to a
power cut or an OS crash (a crash of the process loses nothing: the log is in the OS's cache).
What is left is what a dead worker leaves: a lost `start` had nothing of its turn stored after it
(the turn is queued again, its attempt not counted); a lost `done_next` leaves the turn running with
every event stored, the lease running out and the next turn queued, which the sweeper's drain
closes from what is stored without calling the model or a tool again
(tests/agents_app/test_drain_sqlite_lost_end.py). An fsync of the WAL each (2-18 ms at load here),
twice per `/run`, on its path.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from adkweb.raw_rows import raw

from . import session_sqlite
from .models import AdkSession, Turn
from .run_cache import stamp_row, stamp_select
from .session_sql import Loaded
from .session_status import ACTIVE_TURN_STATUSES, _sql
from .turn_sql import Claim, DoneNext, Started

SESSIONS = AdkSession._meta.db_table
TURNS = Turn._meta.db_table
_ACTIVE = ", ".join(f"'{s}'" for s in ACTIVE_TURN_STATUSES)
_COLUMNS = ", ".join(str(f.column) for f in Turn._meta.concrete_fields)

# The lease, taken when the session owes work and the lease is free (or already ours).
_LEASE = (
    f"UPDATE {SESSIONS} SET lease_owner = %s, lease_expires_at = %s WHERE id = %s "
    "AND (lease_owner = '' OR lease_expires_at < %s OR lease_owner = %s) "
    f"AND EXISTS (SELECT 1 FROM {TURNS} WHERE session_id = %s AND status IN ({_ACTIVE})) "
    "RETURNING app_name, user_id, session_id, archived_at"
)
# The session under our lease, with its revision: read after the turn's last append (nothing else
# writes while this transaction holds the file), `turn.finished` carries it (agents_app.api.watch).
_HELD = (
    f"SELECT app_name, user_id, session_id, revision, archived_at FROM {SESSIONS} WHERE id = %s AND lease_owner = %s"
)
_ORPHAN = f"SELECT EXISTS (SELECT 1 FROM {TURNS} WHERE session_id = %s AND status = 'running' AND id <> %s)"
# The oldest queued turn, marked running (its attempt counted).
_CLAIM = (
    f"UPDATE {TURNS} SET status = 'running', attempts = attempts + 1, started_at = %s "
    f"WHERE id = (SELECT id FROM {TURNS} WHERE session_id = %s AND status = 'queued' ORDER BY id LIMIT 1) "
    f"AND status = 'queued' RETURNING {_COLUMNS}"
)
_DONE = (
    f"UPDATE {TURNS} SET status = 'done', error = '', finished_at = %s, config_version_id = %s "
    "WHERE id = %s AND session_id = %s AND status = 'running' RETURNING id"
)
_STAMP = stamp_select("%s")
_LAX, _SYNCED = "PRAGMA synchronous = NORMAL", "PRAGMA synchronous = FULL"


@contextmanager
def _unsynced() -> Iterator[None]:
    """A transaction whose commit does not wait for the disk (see the module), the connection back to
    FULL after it. Inside an outer transaction (tests) the outer commit decides: SQLite refuses to
    change the setting there, and it is left alone."""
    lax = not connection.in_atomic_block
    if lax:
        with connection.cursor() as cursor:
            cursor.execute(_LAX)
    try:
        with transaction.atomic():
            yield
    finally:
        if lax:
            try:
                with connection.cursor() as cursor:
                    cursor.execute(_SYNCED)
            except Exception:
                connection.close()  # a new connection starts FULL: no later commit goes unsynced
                raise


def _one(sql: str, params: list[Any]) -> tuple | None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()


def _stamp(app_name: str) -> tuple | None:
    found = _one(_STAMP, [app_name])
    return None if found is None else stamp_row(found)


def _claim(session_pk: int, ids: tuple[str, str, str]) -> tuple[Turn | None, Claim | None]:
    """The oldest queued turn claimed (a Turn as the ORM reads it), with what its start needs."""
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    turn = next(iter(raw(Turn, _CLAIM, [now, session_pk])), None)
    if turn is None:
        return None, None
    app_name, user_id, session_id = ids
    return turn, Claim(app_name, user_id, session_id, _stamp(app_name), _session(ids))


def _session(ids: tuple[str, str, str]) -> Loaded | None:
    """The session as the Runner's first get_session reads it (every event), read in the claim's
    transaction and answered from there (session_service.read_ahead): one hop to the database thread
    less a turn, as turn_sql's claim on PostgreSQL. None for an archived session (get finds none)."""
    got = session_sqlite.get(app_name=ids[0], user_id=ids[1], session_id=ids[2], events=True, after=None, limit=None)
    return None if got is None else Loaded(*got)


def start(*, session_pk: int, owner: str, until: datetime, now: datetime) -> Started:
    """turn_sql.start on SQLite: the lease if the session owes work and it is free (or ours), and its
    oldest queued turn claimed unless one is still marked running."""
    adapt = connection.ops.adapt_datetimefield_value
    with _unsynced():
        leased = _one(_LEASE, [owner, adapt(until), session_pk, adapt(now), owner, session_pk])
        if leased is None:
            return Started(leased=False, orphan=False, turn=None)
        ids, gone = (leased[0], leased[1], leased[2]), leased[3] is not None
        orphan = gone or bool(_one(_ORPHAN, [session_pk, 0])[0])  # type: ignore[index]
        turn, claim = (None, None) if orphan else _claim(session_pk, ids)
        return Started(leased=True, orphan=orphan, turn=turn, claim=claim)


def done_next(
    *, turn_id: int, session_pk: int, owner: str, until: datetime, now: datetime, config_version: int | None = None
) -> DoneNext:
    """turn_sql.done_next on SQLite: turn `turn_id` (running, under our lease) done, the next queued
    turn claimed or the lease released, the session's status written. All or nothing."""
    adapt = connection.ops.adapt_datetimefield_value
    with _unsynced():
        held = _one(_HELD, [session_pk, owner])
        ids = None if held is None else (held[0], held[1], held[2])
        finished = False
        if ids is not None:
            finished = _one(_DONE, [adapt(timezone.now()), config_version, turn_id, session_pk]) is not None
        gone = held is not None and held[4] is not None
        orphan = gone or bool(_one(_ORPHAN, [session_pk, turn_id])[0])  # type: ignore[index]
        turn, claim = (None, None)
        if finished and not orphan:
            assert ids is not None
            turn, claim = _claim(session_pk, ids)
        found = _one(_sql("read"), [session_pk] * 4)
        status = found[1] if found is not None else "idle"
        if finished:
            keep = turn is not None or orphan
            with connection.cursor() as cursor:
                cursor.execute(
                    f"UPDATE {SESSIONS} SET status = %s, lease_owner = %s, lease_expires_at = %s WHERE id = %s",
                    [status, owner if keep else "", adapt(until) if keep else None, session_pk],
                )
        released = finished and turn is None and not orphan
        revision = held[3] if held is not None and finished else None
        return DoneNext(ids is not None, finished, orphan, status, released, turn, claim, revision=revision)
