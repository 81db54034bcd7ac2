"""DjangoSessionService's hot path on PostgreSQL: each operation in one statement (one round trip,
atomic on its own, no BEGIN/COMMIT), written in SQL because the ORM has no data-modifying CTEs.

    append   UPDATE the session row (revision bump = row lock, stale-copy, archive and lease checks,
             lease renewal, session-state merge) + INSERT the event + the app/user state upserts +
             the turn's invocation id, each depending on the UPDATE having matched
    get      the session row, app and user state and the events (in row id order) in one SELECT
             (agents_app.session_sql_read, with list)
    create   INSERT the session (ON CONFLICT on the live-identity index: AlreadyExists) + the
             app/user state upserts, which happen only when the session was inserted
    list     the sessions with their app and user state (LEFT JOINs; portable: SQLite too)

When an append's UPDATE matches nothing the caller falls back to the locked, checked path
(agents_app.session_service), which says why (stale copy, lease lost, session not found). Columns
are jsonb: values go in as JSON text (`%s::jsonb`) and come back as text (Django's psycopg loader
leaves jsonb undecoded).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import connection

from adkweb.raw_rows import raw

from .models import AdkSession, Turn
from .session_sql_read import (  # noqa: F401 - the reads, re-exported (session_service, session_async, turn_sql use them here)
    APPS,
    EVENTS,
    GET,
    LOADED_WIDTH,
    SESSIONS,
    USERS,
    Listed,
    Loaded,
    _loads,
    get,
    get_params,
    listed,
    listed_rows,
    listed_statement,
    loaded,
    loaded_columns,
)
from .session_status import OPEN_TICKET_STATUSES

TURNS = Turn._meta.db_table
TICKETS = "approvals_pendingcall"  # approvals.models.PendingCall (agents_app does not import approvals)
OPEN_TICKETS = ", ".join(f"'{status}'" for status in OPEN_TICKET_STATUSES)
SESSION_COLUMNS = ", ".join(f"s.{f.column}" for f in AdkSession._meta.concrete_fields)


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _app_upsert(source: str) -> str:
    return (
        f"INSERT INTO {APPS} (app_name, state, update_time) SELECT %s, %s::jsonb, %s FROM {source} "
        f"ON CONFLICT (app_name) DO UPDATE SET state = {APPS}.state || EXCLUDED.state, "
        "update_time = EXCLUDED.update_time RETURNING state"
    )


def _user_upsert(source: str) -> str:
    return (
        f"INSERT INTO {USERS} (app_name, user_id, state, update_time) SELECT %s, %s, %s::jsonb, %s FROM {source} "
        f"ON CONFLICT (app_name, user_id) DO UPDATE SET state = {USERS}.state || EXCLUDED.state, "
        "update_time = EXCLUDED.update_time RETURNING state"
    )


@dataclass
class Rider:
    """An event hook's writes made inside the append's one statement (instead of in a transaction
    around it): `ctes` (", name AS (...)" each) come after the event's and may read `u` (the session
    row as updated: u.id) and `e` (the event row: e.id). `guard` is a further condition on the session
    row `s` (subqueries allowed): when it is false nothing at all is stored and the caller takes the
    checked path, where the hooks run in a transaction as usual. `status`, an expression for the
    session's new stored status (`s.status` is the current one, read after the row lock).
    `returning`, one value the statement selects, given to `done(value, session_pk)` once stored
    (in autocommit: committed). `announce`, done's twin for a statement sent from the event loop
    (agents_app.session_async): awaited with the same arguments once the statement committed and its
    event was published, never raising; a rider without one sends its event by the thread path.
    `asks`, the channel layer's groups `announce` will ask about ("is anyone watching?"): asked with
    the event's own question, in its round trip (adkweb.live.ask_also). `committed`, for a statement
    sent from the loop: called with the same arguments as soon as it committed, before its event is
    published (work that needs the commit and no order with the live messages: it may start a
    thread's, which then runs while the loop waits on the publish's round trip), never raising."""

    ctes: str = ""
    params: list[Any] = field(default_factory=list)
    guard: str = ""
    guard_params: list[Any] = field(default_factory=list)
    status: str = ""
    returning: str = "NULL"
    returning_params: list[Any] = field(default_factory=list)
    done: Callable[[Any, int], None] | None = None
    announce: Callable[[Any, int], Awaitable[None]] | None = None
    asks: list[str] = field(default_factory=list)
    committed: Callable[[Any, int], None] | None = None


@dataclass
class Appended:
    session_pk: int
    revision: int
    update_time: float
    event_pk: int
    row: AdkSession | None = None  # the whole session row, when asked for (event hooks get it)
    ridden: tuple = ()  # each rider's returned value, in the riders' order


def append(*, riders: list[Rider] | None = None, whole_row: bool, **columns: Any) -> Appended | None:
    """Store one event with everything it changes, and the hooks' `riders`, in one statement; None
    when the session row was not this copy's (its pk and revision), is archived, is gone, is leased
    to another owner or a rider's guard is false (nothing stored)."""
    riders = riders or []
    sql, params = append_statement(riders=riders, whole_row=whole_row, **columns)
    if whole_row:
        rows = raw(AdkSession, sql, params)
        if not rows:
            return None
        row = rows[0]
        return Appended(row.pk, row.revision, row.update_time, getattr(row, "stored_event_pk"), row)  # noqa: B009
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        found = cursor.fetchone()
    return appended(found, riders)


def appended(found: tuple | None, riders: list[Rider], *, tell: bool = True) -> Appended | None:
    """The append statement's row (None: nothing stored), the riders told what they wrote (`done`;
    `tell=False`: not here, the caller announces `ridden` from the loop)."""
    if not found:
        return None
    ridden = tuple(found[4:])
    for rider, value in zip(riders, ridden, strict=True):
        if tell and rider.done is not None:
            rider.done(value, found[0])
    session_pk, revision, update_time, event_pk = found[:4]
    return Appended(session_pk, revision, update_time, event_pk, ridden=ridden)


def append_statement(
    *,
    app_name: str,
    user_id: str,
    session_id: str,
    session_pk: int,
    revision: int,
    ts: float,
    event_id: str,
    invocation_id: str,
    author: str,
    data: str,
    interrupt_ids: list[str],
    response_ids: list[str],
    turn_id: int | None,
    record_invocation: bool,
    deltas: dict[str, dict[str, Any]] | None,
    lease: tuple[str, Any] | None,
    whole_row: bool,
    riders: list[Rider],
) -> tuple[str, list[Any]]:
    """append's statement and its parameters."""
    sets = ["revision = s.revision + 1", "update_time = GREATEST(s.update_time, %s)"]
    params: list[Any] = [ts]
    where = ["s.id = %s", "s.app_name = %s", "s.user_id = %s", "s.session_id = %s", "s.revision = %s"]
    where.append("s.archived_at IS NULL")
    where_params: list[Any] = [session_pk, app_name, user_id, session_id, revision]
    if deltas and deltas["session"]:
        sets.append("state = s.state || %s::jsonb")
        params.append(dumps(deltas["session"]))
    if lease is not None:
        sets.append("lease_expires_at = %s")
        params.append(lease[1])
        where.append("s.lease_owner = %s")
        where_params.append(lease[0])
    statuses = [rider.status for rider in riders if rider.status]
    assert len(statuses) <= 1, "one rider at most sets the session's status"
    sets += [f"status = {status}" for status in statuses]
    for rider in riders:
        if rider.guard:
            where.append(f"({rider.guard})")
            where_params += rider.guard_params
    returning = SESSION_COLUMNS if whole_row else "s.id, s.revision, s.update_time"
    sql = [f"WITH u AS (UPDATE {SESSIONS} s SET {', '.join(sets)} WHERE {' AND '.join(where)} RETURNING {returning})"]
    params += where_params
    sql.append(
        f', e AS (INSERT INTO {EVENTS} (session_id, event_id, invocation_id, author, "timestamp", data, '
        "interrupt_ids, response_ids, turn_id) SELECT u.id, %s, %s, %s, %s, %s::jsonb, %s::jsonb, %s::jsonb, %s "
        "FROM u RETURNING id)"
    )
    params += [event_id, invocation_id, author, ts, data, dumps(interrupt_ids), dumps(response_ids), turn_id]
    if deltas and deltas["app"]:
        sql.append(f", a AS ({_app_upsert('u')})")
        params += [app_name, dumps(deltas["app"]), ts]
    if deltas and deltas["user"]:
        sql.append(f", us AS ({_user_upsert('u')})")
        params += [app_name, user_id, dumps(deltas["user"]), ts]
    if record_invocation:
        sql.append(
            f", t AS (UPDATE {TURNS} SET invocation_id = %s WHERE id = %s AND invocation_id = '' "
            "AND EXISTS (SELECT 1 FROM u))"
        )
        params += [invocation_id, turn_id]
    for rider in riders:
        sql.append(rider.ctes)
        params += rider.params
    if whole_row:
        assert not riders, "hooks get the whole row in a transaction, riders none"
        sql.append(" SELECT u.*, e.id AS stored_event_pk FROM u, e")
        return "".join(sql), params
    sql.append(" SELECT u.id, u.revision, u.update_time, e.id")
    for rider in riders:
        sql.append(f", {rider.returning}")
        params += rider.returning_params
    sql.append(" FROM u, e")
    return "".join(sql), params


def create(
    *, app_name: str, user_id: str, session_id: str, deltas: dict[str, dict[str, Any]], now: float
) -> tuple[int, int, dict[str, Any], dict[str, Any]] | None:
    """Insert a live session with its state (app and user state merged in its store), in one
    statement: (pk, revision, app state, user state) as they are now, or None if a live session
    with that identity exists (nothing changed)."""
    sql, params = create_statement(app_name=app_name, user_id=user_id, session_id=session_id, deltas=deltas, now=now)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return created(cursor.fetchone())


def created(found: tuple | None) -> tuple[int, int, dict[str, Any], dict[str, Any]] | None:
    """create's row, read."""
    if found is None:
        return None
    return found[0], found[1], _loads(found[2]), _loads(found[3])


def create_statement(
    *, app_name: str, user_id: str, session_id: str, deltas: dict[str, dict[str, Any]], now: float
) -> tuple[str, list[Any]]:
    """create's statement and its parameters."""
    sql = [
        f"WITH s AS (INSERT INTO {SESSIONS} (app_name, user_id, session_id, state, create_time, update_time, "
        "revision, lease_owner, status, archived_by) VALUES (%s, %s, %s, %s::jsonb, %s, %s, 0, '', 'idle', '') "
        "ON CONFLICT (app_name, user_id, session_id) WHERE archived_at IS NULL DO NOTHING RETURNING id, revision)"
    ]
    params: list[Any] = [app_name, user_id, session_id, dumps(deltas["session"]), now, now]
    app_state, user_state = f"(SELECT state FROM {APPS} WHERE app_name = %s)", ""
    state_params: list[Any] = [app_name]
    if deltas["app"]:
        sql.append(f", a AS ({_app_upsert('s')})")
        params += [app_name, dumps(deltas["app"]), now]
        app_state = f"COALESCE((SELECT state FROM a), {app_state})"
    user_state = f"(SELECT state FROM {USERS} WHERE app_name = %s AND user_id = %s)"
    state_params += [app_name, user_id]
    if deltas["user"]:
        sql.append(f", us AS ({_user_upsert('s')})")
        params += [app_name, user_id, dumps(deltas["user"]), now]
        user_state = f"COALESCE((SELECT state FROM us), {user_state})"
    sql.append(f" SELECT s.id, s.revision, {app_state}, {user_state} FROM s")
    return "".join(sql), params + state_params


def archive_quiet_statement(*, app_name: str, user_id: str, session_id: str, at: Any, by: str) -> tuple[str, list[Any]]:
    """The statement that archives a live session when nothing is owed in it: no queued or running
    turn, no open ticket (its stored status idle or failed, which archiving leaves as it is). Its row,
    (pk, stored status), or none (nothing changed) when it is not there or is busy or waiting: the
    caller takes the checked path. The stored status covers what commits while this waits for the row
    lock (whoever adds a turn or opens a ticket writes it in the same transaction, and the re-check of
    a locked row reads the newest version); the NOT EXISTS what committed before. Sent by
    `archive_quiet` (a thread) and agents_app.session_async (the event loop)."""
    sql = (
        f"UPDATE {SESSIONS} s SET archived_at = %s, archived_by = %s WHERE s.app_name = %s AND s.user_id = %s "
        "AND s.session_id = %s AND s.archived_at IS NULL AND s.status IN ('idle', 'failed') "
        f"AND NOT EXISTS (SELECT 1 FROM {TURNS} t WHERE t.session_id = s.id AND t.status IN ('queued', 'running')) "
        f"AND NOT EXISTS (SELECT 1 FROM {TICKETS} p WHERE p.session_id = s.id AND p.status IN ({OPEN_TICKETS})) "
        "RETURNING s.id, s.status"
    )
    return sql, [at, by, app_name, user_id, session_id]


def archive_quiet(*, app_name: str, user_id: str, session_id: str, at: Any, by: str) -> int | None:
    """`archive_quiet_statement` on Django's connection: the session's pk, or None (nothing changed)."""
    sql, params = archive_quiet_statement(app_name=app_name, user_id=user_id, session_id=session_id, at=at, by=by)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        found = cursor.fetchone()
    return found[0] if found else None
