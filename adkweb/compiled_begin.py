"""A transaction's BEGIN in the query string of its first statement, on PostgreSQL (split out of
adkweb.compiled, whose `rows_after(begin=True)` uses it and which re-exports `begins` and `begun_with`
for agents_app.turn_insert)."""

from __future__ import annotations

from typing import Any

import psycopg
from django.db import connection


def begins() -> bool:
    """Would the next statement be its transaction's first on PostgreSQL (psycopg has not sent the
    BEGIN yet), with psycopg's plain BEGIN (no isolation level, read-only or deferrable of its own)?
    Then the BEGIN may lead that statement's query string (`begun_with`), where psycopg sends it as a
    round trip of its own (in a pipeline too, with a Sync of its own)."""
    if connection.vendor != "postgresql":
        return False
    connection.ensure_connection()
    raw = connection.connection
    return (
        not raw.autocommit
        and raw.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        and raw.isolation_level is None
        and raw.read_only is None
        and raw.deferrable is None
    )


def begun_with(cursor: Any, sql: str, params: Any) -> None:
    """`BEGIN; sql` in one query string (where `begins()`). psycopg is told to send no BEGIN of its own
    for this one execute (its autocommit flag, read at each execute; the BEGIN here is the one it would
    send); the transaction then goes on as psycopg's (it reads libpq's status: open), committed or
    rolled back by Django's atomic block. The cursor is left at the first statement's result."""
    raw = connection.connection
    raw._autocommit = True  # only this execute: it sends no BEGIN before ours
    try:
        cursor.execute("BEGIN; " + sql, params)
    finally:
        raw._autocommit = False
    cursor.nextset()  # past the BEGIN's result
