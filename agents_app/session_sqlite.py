"""The session store on SQLite (embedded mode) in plain SQL: reading a session (`get`), and the
append of an event that changes no state (`append`; with the row as saved for the hooks that want
it). The session
row's checks (this copy's pk and revision, not archived, the lease still this run's) are the
`UPDATE`'s `WHERE`; when it matches nothing, nothing is stored and the caller falls back to the
checked path (agents_app.session_orm.store_locked), which says which check failed. What it writes
is what that path writes, without the ORM's row read, model instances and queries compiled per
call (the turn's appends were ~25% of its database thread).

PostgreSQL has its own one statement per operation (agents_app.session_sql)."""

from __future__ import annotations

import json
from typing import Any

from django.db import connection

from adkweb.raw_rows import raw

from .models import AdkSession, AppState, StoredEvent, Turn, UserState
from .session_sql import Appended

SESSIONS = AdkSession._meta.db_table
EVENTS = StoredEvent._meta.db_table
TURNS = Turn._meta.db_table
APPS = AppState._meta.db_table
USERS = UserState._meta.db_table


def append(
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
    lease: tuple[str, Any] | None,
    whole_row: bool = False,
) -> Appended | None:
    """Store one event that changes no state, in the caller's transaction: what PostgreSQL's
    session_sql.append answers (the session pk, its new revision and update time, the event row's pk,
    and with `whole_row` the session row as saved, for event hooks), or None when the row was not
    this copy's, is archived or gone, or is leased to another owner (nothing stored)."""
    sql, params = update_statement(
        app_name=app_name,
        user_id=user_id,
        session_id=session_id,
        session_pk=session_pk,
        revision=revision,
        ts=ts,
        lease=None if lease is None else (lease[0], connection.ops.adapt_datetimefield_value(lease[1])),
    )
    row: AdkSession | None = None
    if whole_row:
        row = next(iter(raw(AdkSession, sql + "*", params)), None)
        if row is None:
            return None
        found = (row.pk, row.revision, row.update_time)
    with connection.cursor() as cursor:
        if row is None:
            cursor.execute(sql + "id, revision, update_time", params)
            found = cursor.fetchone()
            if found is None:
                return None
        cursor.execute(
            INSERT,
            event_params(found[0], event_id, invocation_id, author, ts, data, interrupt_ids, response_ids, turn_id),
        )
        event_pk = cursor.fetchone()[0]
        if record_invocation:  # the turn's invocation, with its first event: a crashed run is resumed, not re-run
            cursor.execute(RECORD_INVOCATION, [invocation_id, turn_id or 0])
    return Appended(found[0], found[1], found[2], event_pk, row)


# The append's second and third statements (also sent by agents_app.session_sqlite_loop).
INSERT = (
    f"INSERT INTO {EVENTS} (session_id, event_id, invocation_id, author, timestamp, data, interrupt_ids, "
    "response_ids, turn_id) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id"
)
RECORD_INVOCATION = f"UPDATE {TURNS} SET invocation_id = %s WHERE id = %s AND invocation_id = ''"


def update_statement(
    *,
    app_name: str,
    user_id: str,
    session_id: str,
    session_pk: int,
    revision: int,
    ts: float,
    lease: tuple[str, Any] | None,
) -> tuple[str, list[Any]]:
    """The append's UPDATE of the session row (its checks in the WHERE), without its RETURNING list:
    the revision counted, the update time, and with `lease` (owner, expiry as the database stores it)
    the lease renewed and only its owner storing."""
    sets = "revision = revision + 1, update_time = MAX(update_time, %s)"
    params: list[Any] = [ts]
    where = "id = %s AND app_name = %s AND user_id = %s AND session_id = %s AND revision = %s AND archived_at IS NULL"
    if lease is not None:
        sets += ", lease_expires_at = %s"
        params.append(lease[1])
        where += " AND lease_owner = %s"
    params += [session_pk, app_name, user_id, session_id, revision]
    if lease is not None:
        params.append(lease[0])
    return f"UPDATE {SESSIONS} SET {sets} WHERE {where} RETURNING ", params


def event_params(
    session_pk: int,
    event_id: str,
    invocation_id: str,
    author: str,
    ts: float,
    data: str,
    interrupt_ids: list[str],
    response_ids: list[str],
    turn_id: int | None,
) -> list[Any]:
    """INSERT's parameters."""
    return [
        session_pk,
        event_id,
        invocation_id,
        author,
        ts,
        data,
        json.dumps(interrupt_ids),
        json.dumps(response_ids),
        turn_id,
    ]


def get(
    *, app_name: str, user_id: str, session_id: str, events: bool, after: float | None, limit: int | None
) -> tuple[int, int, float, dict[str, Any], dict[str, Any], dict[str, Any], list[str]] | None:
    """A live session: (pk, revision, update time, its state, the app's state, the user's state, the
    JSON texts of its events (unless `events` is False): the last `limit` (all if None) of those at
    or after `after`, in append (row id) order); None when there is none. Two statements (the ORM
    took four)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT s.id, s.revision, s.update_time, s.state, "
            f"(SELECT a.state FROM {APPS} a WHERE a.app_name = s.app_name), "
            f"(SELECT us.state FROM {USERS} us WHERE us.app_name = s.app_name AND us.user_id = s.user_id) "
            f"FROM {SESSIONS} s WHERE s.app_name = %s AND s.user_id = %s AND s.session_id = %s "
            "AND s.archived_at IS NULL",
            [app_name, user_id, session_id],
        )
        found = cursor.fetchone()
        if found is None:
            return None
        texts: list[str] = []
        if events:
            sql, params = f"SELECT data FROM {EVENTS} WHERE session_id = %s", [found[0]]
            if after is not None:
                sql += " AND timestamp >= %s"
                params.append(after)
            sql += " ORDER BY id DESC"
            if limit is not None:
                sql += " LIMIT %s"
                params.append(limit)
            cursor.execute(sql, params)
            texts = [row[0] for row in reversed(cursor.fetchall())]
    pk, revision, update_time, state, app_state, user_state = found
    return pk, revision, update_time, _loads(state), _loads(app_state), _loads(user_state), texts


def _loads(value: str | None) -> dict[str, Any]:
    return json.loads(value) if value else {}
