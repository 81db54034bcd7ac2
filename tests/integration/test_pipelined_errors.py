"""A transaction sent whole (adkweb.postgresql.pipelined.committed_with) that fails on the server: the caller
sees the first error, as Django's error with psycopg's own as its cause (its SQLSTATE), whatever happens to the
connection after it; and the connection is left usable (out of pipeline mode, no transaction) or, where it
cannot be, not used again (the next statement runs on another)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from django.db import IntegrityError, OperationalError, connection, transaction
from psycopg import pq

from adkweb.postgresql.pipelined import committed_with

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def table() -> Iterator[str]:
    """A real table (other connections see it), a row 1, and a deferred trigger that sleeps at COMMIT for an
    inserted row 99 (a COMMIT that takes a second)."""
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE pipelined_probe (id int PRIMARY KEY, n int NOT NULL DEFAULT 0)")
        cursor.execute("INSERT INTO pipelined_probe (id) VALUES (1)")
        cursor.execute(
            "CREATE FUNCTION pipelined_probe_slow() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN IF NEW.id = 99 THEN PERFORM pg_sleep(1); END IF; RETURN NULL; END $$"
        )
        cursor.execute(
            "CREATE CONSTRAINT TRIGGER pipelined_probe_slow AFTER INSERT ON pipelined_probe "
            "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION pipelined_probe_slow()"
        )
    yield "pipelined_probe"
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE pipelined_probe; DROP FUNCTION pipelined_probe_slow()")


def _send(sql: str, written: Callable[[list[Any]], object] = lambda results: None) -> None:
    with transaction.atomic(), connection.cursor() as cursor:
        committed_with(cursor, sql, {}, written)


def _other(after: float, *statements: str) -> threading.Thread:
    """`statements` on a connection of its own, `after` seconds from now."""
    dsn = connection.connection.info.dsn

    def run() -> None:
        time.sleep(after)
        with psycopg.connect(dsn, autocommit=True) as other:
            for statement in statements:
                other.execute(statement)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def _usable_after() -> None:
    """The next statement runs: on this connection out of pipeline mode and idle, or on another."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        assert cursor.fetchone() == (1,)
    pgconn = connection.connection.pgconn
    assert (pgconn.pipeline_status, pgconn.transaction_status) == (pq.PipelineStatus.OFF, pq.TransactionStatus.IDLE)


def _sqlstate(caught: pytest.ExceptionInfo[BaseException]) -> str | None:
    assert not isinstance(caught.value, psycopg.Error)  # Django's
    return getattr(caught.value.__cause__, "sqlstate", None)


def test_a_unique_violation_is_the_error_seen(table):
    with pytest.raises(IntegrityError) as caught:
        _send(f"INSERT INTO {table} (id) VALUES (1)")
    assert _sqlstate(caught) == "23505"
    _usable_after()


def test_a_server_side_statement_timeout_is_the_error_seen(table):
    with pytest.raises(OperationalError) as caught:
        _send("SET LOCAL statement_timeout = 50; SELECT pg_sleep(2)")
    assert _sqlstate(caught) == "57014"  # query_canceled
    _usable_after()


def test_a_serialization_failure_is_the_error_seen(table):
    connection.ensure_connection()
    dsn = connection.connection.info.dsn
    with psycopg.connect(dsn) as holder:  # a row lock held, released by a commit once the pipeline waits on it
        holder.execute(f"UPDATE {table} SET n = n + 1 WHERE id = 1")
        committer = threading.Thread(target=lambda: (time.sleep(0.3), holder.commit()))
        committer.start()
        with pytest.raises(OperationalError) as caught:
            _send(
                "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ; "
                f"SELECT count(*) FROM {table}; UPDATE {table} SET n = n + 10 WHERE id = 1"
            )
        committer.join()
    assert _sqlstate(caught) == "40001"
    _usable_after()


def test_a_backend_ended_in_a_statement_is_the_error_seen(table):
    """Its server's FATAL error, then the closed socket: the first is what happened (AdminShutdown), not
    'consuming input failed: server closed the connection unexpectedly'."""
    connection.ensure_connection()
    killer = _other(0.3, f"SELECT pg_terminate_backend({connection.connection.info.backend_pid})")
    with pytest.raises(OperationalError) as caught:
        _send("SELECT pg_sleep(3)")
    killer.join()
    assert _sqlstate(caught) == "57P01", repr(caught.value.__cause__)  # admin_shutdown
    _usable_after()


def test_a_backend_ended_in_the_commit_is_the_error_seen(table):
    connection.ensure_connection()
    killer = _other(0.3, f"SELECT pg_terminate_backend({connection.connection.info.backend_pid})")
    with pytest.raises(OperationalError) as caught:
        _send(f"INSERT INTO {table} (id) VALUES (99)")  # its COMMIT sleeps a second
    killer.join()
    assert _sqlstate(caught) == "57P01", repr(caught.value.__cause__)
    _usable_after()


def test_a_written_that_raises_is_the_error_seen_when_the_backend_ends_after_it(table):
    """`written` raised, then the pipeline could not be read to its end (nor left): `written`'s error, not the
    exit's 'server closed the connection unexpectedly'."""
    connection.ensure_connection()
    killer = _other(0.3, f"SELECT pg_terminate_backend({connection.connection.info.backend_pid})")

    def written(results: list[Any]) -> None:
        raise RuntimeError("the wake-up failed")

    with pytest.raises(RuntimeError, match="the wake-up failed"):
        _send(f"INSERT INTO {table} (id) VALUES (99)", written)
    killer.join()
    _usable_after()
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT id FROM {table} ORDER BY id")
        assert cursor.fetchall() == [(1,)]  # the killed transaction left nothing


def test_the_next_connection_the_pool_gives_is_usable_after_each(table):
    """Every failure above, then each of the pool's connections in turn: none is in pipeline mode or broken."""
    for run in (
        test_a_unique_violation_is_the_error_seen,
        test_a_backend_ended_in_a_statement_is_the_error_seen,
        test_a_written_that_raises_is_the_error_seen_when_the_backend_ends_after_it,
    ):
        try:
            run(table)
        except Exception:
            pass  # each has its own test; here: what the pool holds afterwards
        connection.close()  # back to the pool
    pool = connection.pool
    taken = [pool.getconn() for _ in range(pool.get_stats()["pool_size"])]
    try:
        for raw in taken:
            assert not raw.broken and raw.pgconn.pipeline_status == pq.PipelineStatus.OFF
            assert raw.execute("SELECT 1").fetchone() == (1,)
    finally:
        for raw in taken:
            pool.putconn(raw)
