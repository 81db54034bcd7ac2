"""The session store's reads on PostgreSQL (agents_app.session_sql's, re-exported there): a live
session with its app and user state and its events in one SELECT (`get`; `loaded_columns` for another
statement that reads it with its own work: agents_app.turn_sql's claim), and the sessions of an app
(`listed`; plain SQL, SQLite too), each also sent from the event loop (agents_app.session_async)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.db import connection

from .models import AdkSession, AppState, StoredEvent, UserState

SESSIONS = AdkSession._meta.db_table
APPS = AppState._meta.db_table
USERS = UserState._meta.db_table
EVENTS = StoredEvent._meta.db_table


@dataclass
class Loaded:
    pk: int
    revision: int
    update_time: float
    state: dict[str, Any]
    app_state: dict[str, Any]
    user_state: dict[str, Any]
    events: list[str]  # each event's JSON text, in append order


def _loaded_head(s: str, pk: str = "") -> str:
    """get's first columns, of the session row `s`: id (`pk`: its expression), revision, update time,
    state, app and user state."""
    return (
        f"{pk or s + '.id'}, {s}.revision, {s}.update_time, {s}.state, "
        f"(SELECT a.state FROM {APPS} a WHERE a.app_name = {s}.app_name), "
        f"(SELECT us.state FROM {USERS} us WHERE us.app_name = {s}.app_name AND us.user_id = {s}.user_id), "
    )


# get's statement (its parameters: get_params).
GET = (
    "SELECT "
    + _loaded_head("s")
    + f"CASE WHEN %s THEN (SELECT array_agg(e.data::text ORDER BY e.id) FROM (SELECT id, data FROM {EVENTS} "
    'WHERE session_id = s.id AND (%s::float8 IS NULL OR "timestamp" >= %s::float8) '
    "ORDER BY id DESC LIMIT %s) e) END "
    f"FROM {SESSIONS} s WHERE s.app_name = %s AND s.user_id = %s AND s.session_id = %s AND s.archived_at IS NULL"
)


def loaded_columns(row: str, pk: str) -> str:
    """get's columns (every event) of the session row `row` (its id, revision, update_time, state,
    app_name and user_id; `pk`, the first column's expression: NULL for no session), for another
    statement that has the row to read it with its own work (agents_app.turn_sql's claim): `loaded`
    reads them."""
    events = f"(SELECT array_agg(e.data::text ORDER BY e.id) FROM {EVENTS} e WHERE e.session_id = {row}.id)"
    return _loaded_head(row, pk) + events


LOADED_WIDTH = 7  # the columns of get's row


def get(
    *, app_name: str, user_id: str, session_id: str, events: bool, after: float | None, limit: int | None
) -> Loaded | None:
    """A live session with its app and user state and (unless `events` is False) its events: the
    last `limit` (all if None) of those at or after `after`, in append (row id) order."""
    with connection.cursor() as cursor:
        cursor.execute(GET, get_params(app_name, user_id, session_id, events, after, limit))
        return loaded(cursor.fetchone())


def get_params(
    app_name: str, user_id: str, session_id: str, events: bool, after: float | None, limit: int | None
) -> list[Any]:
    """GET's parameters."""
    return [events, after, after, limit, app_name, user_id, session_id]


def loaded(found: tuple | None) -> Loaded | None:
    """get's row, read."""
    if found is None:
        return None
    pk, revision, update_time, state, app_state, user_state, texts = found
    return Loaded(pk, revision, update_time, _loads(state), _loads(app_state), _loads(user_state), texts or [])


def listed_statement(*, app_name: str, user_id: str | None) -> tuple[str, list[Any]]:
    """The statement that lists each live session of the app (of one user), oldest activity first:
    `listed` (a thread) and agents_app.session_async (the event loop). Plain SQL: PostgreSQL and SQLite."""
    sql = (
        "SELECT s.user_id, s.session_id, s.update_time, s.id, s.revision, s.state, a.state, us.state "
        f"FROM {SESSIONS} s "
        f"LEFT JOIN {APPS} a ON a.app_name = s.app_name "
        f"LEFT JOIN {USERS} us ON us.app_name = s.app_name AND us.user_id = s.user_id "
        "WHERE s.app_name = %s AND s.archived_at IS NULL"
    )
    params: list[Any] = [app_name]
    if user_id is not None:
        sql += " AND s.user_id = %s"
        params.append(user_id)
    return sql + " ORDER BY s.update_time, s.user_id, s.session_id", params


Listed = tuple[str, str, float, int, int, dict, dict, dict]


def listed_rows(rows: list[tuple]) -> list[Listed]:
    """(user id, session id, update time, pk, revision, state, app state, user state) of each row listed."""
    return [(u, sid, t, pk, rev, _loads(st), _loads(a), _loads(us)) for u, sid, t, pk, rev, st, a, us in rows]


def listed(*, app_name: str, user_id: str | None) -> list[Listed]:
    """`listed_statement`'s sessions, on Django's connection."""
    sql, params = listed_statement(app_name=app_name, user_id=user_id)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return listed_rows(cursor.fetchall())


def _loads(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    return json.loads(value) if isinstance(value, str | bytes) else value
