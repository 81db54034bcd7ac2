"""A message's turn commits without waiting for its WAL flush (adkweb.postgresql.pipelined: the worker's
claim runs during the flush), yet message_send returns, and the web answers, only once the turn's
COMMIT is on disk. Read off the WAL itself (pg_walinspect): the turn's COMMIT record ends at or before
the flush position read the moment message_send returned. Where the role may not call
pg_logical_emit_message, the COMMIT waits for its flush as before, and the turn is on disk all the same.

Without the flush a turn's asynchronous COMMIT reaches the disk only with the WAL writer's next round
(every 200 ms by default) or someone else's synchronous commit: read ~1 ms after the return, most of
ten turns would be found not on disk (seen: the test fails with FLUSH left out of the pipeline)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from django.db import connection

from adkweb.postgresql import pipelined
from agents_app import services

pytestmark = pytest.mark.django_db(transaction=True)

ROUNDS = 10


@pytest.fixture
def other() -> Iterator[psycopg.Connection[Any]]:
    """A connection of the test's own to the same database (autocommit), with pg_walinspect."""
    s = connection.settings_dict
    with psycopg.connect(
        dbname=s["NAME"], user=s["USER"], host=s["HOST"], port=s["PORT"] or 5432, autocommit=True
    ) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
        yield conn


@pytest.fixture
def no_wake(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("agents_app.enqueue.session_enqueue", lambda *, session_pk: True)


def _lsn(conn: psycopg.Connection[Any], sql: str) -> str:
    row = conn.execute(sql).fetchone()
    assert row is not None
    return str(row[0])


def _turns_on_disk_at_return(other: psycopg.Connection[Any]) -> list[bool]:
    """For each of ROUNDS messages: whether its turn's COMMIT record was on disk when message_send returned."""
    session = services.session_create(app_name="stock_agent", user_id="requester")
    start = _lsn(other, "SELECT pg_current_wal_insert_lsn()")
    seen: list[tuple[str, str]] = []
    for i in range(ROUNDS):
        turn = services.message_send(session=session, text=f"hi {i}", streaming=False)
        row = other.execute(  # at once
            "SELECT pg_current_wal_flush_lsn()::text, xmin::text FROM agents_app_turn WHERE id = %s", (turn.pk,)
        ).fetchone()
        assert row is not None
        seen.append((row[1], row[0]))
    other.execute("SELECT pg_logical_emit_message(true, 'test', '')")  # all of it on disk: readable
    on_disk = []
    for xid, flushed in seen:
        row = other.execute(
            "SELECT r.end_lsn <= %s::pg_lsn FROM pg_get_wal_records_info(%s::pg_lsn, pg_current_wal_flush_lsn()) r "
            "WHERE r.resource_manager = 'Transaction' AND r.record_type = 'COMMIT' "
            "AND r.xid = %s::xid",
            (flushed, start, xid),
        ).fetchall()
        assert len(row) == 1, f"transaction {xid}: {len(row)} COMMIT records"
        on_disk.append(row[0][0])
    return on_disk


def test_a_messages_turn_is_on_disk_when_message_send_returns(demo, other, no_wake):
    assert pipelined._flush_allowed(connection.connection) is True
    assert _turns_on_disk_at_return(other) == [True] * ROUNDS


def test_without_the_flush_function_the_commit_waits_for_its_flush_as_before(demo, other, no_wake, monkeypatch):
    monkeypatch.setattr(pipelined, "_flushing", [False])
    assert _turns_on_disk_at_return(other) == [True] * ROUNDS


def test_a_role_that_may_not_call_the_flush_function_is_found_so(other, monkeypatch):
    """pg_logical_emit_message's EXECUTE revoked from PUBLIC in this (throwaway) database, read as a role
    that is not a superuser: not allowed; as the superuser: allowed."""
    connection.ensure_connection()
    s = connection.settings_dict
    role = f"adkweb_noflush_{s['NAME']}"[:63]
    other.execute(f'DROP ROLE IF EXISTS "{role}"')
    other.execute(f'CREATE ROLE "{role}" LOGIN')
    try:
        other.execute("REVOKE EXECUTE ON FUNCTION pg_logical_emit_message(boolean, text, text) FROM PUBLIC")
        other.execute("REVOKE EXECUTE ON FUNCTION pg_logical_emit_message(boolean, text, bytea) FROM PUBLIC")
        with psycopg.connect(dbname=s["NAME"], user=role, host=s["HOST"], port=s["PORT"] or 5432) as limited:
            monkeypatch.setattr(pipelined, "_flushing", [])
            assert pipelined._flush_allowed(limited) is False
        monkeypatch.setattr(pipelined, "_flushing", [])
        assert pipelined._flush_allowed(connection.connection) is True
    finally:
        other.execute("GRANT EXECUTE ON FUNCTION pg_logical_emit_message(boolean, text, text) TO PUBLIC")
        other.execute("GRANT EXECUTE ON FUNCTION pg_logical_emit_message(boolean, text, bytea) TO PUBLIC")
        other.execute(f'DROP ROLE "{role}"')
