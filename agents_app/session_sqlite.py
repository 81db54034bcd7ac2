"""The session store's append on SQLite (embedded mode) in plain SQL, for the common event: no hook
wants it and it changes no state. The session row's checks (this copy's pk and revision, not
archived, the lease still this run's) are the `UPDATE`'s `WHERE`; when it matches nothing, nothing
is stored and the caller falls back to the checked path (agents_app.session_orm.store_locked), which
says which check failed. What it writes is what that path writes, without the ORM's row read, model
instances and queries compiled per call (the turn's appends were ~25% of its database thread).

PostgreSQL has its own one statement (agents_app.session_sql.append)."""

from __future__ import annotations

import json
from typing import Any

from django.db import connection

from .models import AdkSession, StoredEvent, Turn

SESSIONS = AdkSession._meta.db_table
EVENTS = StoredEvent._meta.db_table
TURNS = Turn._meta.db_table


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
) -> tuple[int, int, float, int] | None:
    """Store one event that changes no state, in the caller's transaction: (session pk, its new
    revision, its update time, the event row's pk), or None when the row was not this copy's, is
    archived or gone, or is leased to another owner (nothing stored)."""
    sets = "revision = revision + 1, update_time = MAX(update_time, %s)"
    params: list[Any] = [ts]
    where = "id = %s AND app_name = %s AND user_id = %s AND session_id = %s AND revision = %s AND archived_at IS NULL"
    if lease is not None:  # storing renews the run's lease, and only its owner stores
        sets += ", lease_expires_at = %s"
        params.append(connection.ops.adapt_datetimefield_value(lease[1]))
        where += " AND lease_owner = %s"
    params += [session_pk, app_name, user_id, session_id, revision]
    if lease is not None:
        params.append(lease[0])
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {SESSIONS} SET {sets} WHERE {where} RETURNING id, revision, update_time", params)
        found = cursor.fetchone()
        if found is None:
            return None
        cursor.execute(
            f"INSERT INTO {EVENTS} (session_id, event_id, invocation_id, author, timestamp, data, interrupt_ids, "
            "response_ids, turn_id) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
            [
                found[0],
                event_id,
                invocation_id,
                author,
                ts,
                data,
                json.dumps(interrupt_ids),
                json.dumps(response_ids),
                turn_id,
            ],
        )
        event_pk = cursor.fetchone()[0]
        if record_invocation:
            # The turn's invocation, recorded with its first event: a crashed run is resumed, not re-run.
            cursor.execute(
                f"UPDATE {TURNS} SET invocation_id = %s WHERE id = %s AND invocation_id = ''",
                [invocation_id, turn_id or 0],
            )
    return found[0], found[1], found[2], event_pk
