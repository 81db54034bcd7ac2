"""adkweb.postgresql.base.on_commit_sent on PostgreSQL: a step run once the transaction's COMMIT is
written, before its reply is read, and a callback after the commit; both dropped by a rollback of the
transaction or of the savepoint they were registered in; a step that fails neither fails the commit
nor skips the callback."""

from __future__ import annotations

import logging

import pytest
from django.contrib.auth.models import Group
from django.db import connection, transaction
from psycopg import pq

from adkweb.postgresql.base import on_commit_sent

pytestmark = pytest.mark.django_db(transaction=True)


def _steps(log: list[str], name: str = "") -> tuple:
    def sent() -> None:
        busy = connection.connection.pgconn.transaction_status == pq.TransactionStatus.ACTIVE
        log.append(f"sent{name}, COMMIT in flight" if busy else f"sent{name}, not in flight")

    return sent, lambda: log.append(f"done{name}")


def _row(name: str) -> bool:
    return Group.objects.filter(name=name).exists()


def test_the_step_runs_with_the_commit_in_flight_and_the_callback_after_it():
    log: list[str] = []
    with transaction.atomic():
        Group.objects.create(name="committed")
        assert on_commit_sent(*_steps(log))
        transaction.on_commit(lambda: log.append("on_commit"))
        log.append("before the commit")
    assert log == ["before the commit", "sent, COMMIT in flight", "done", "on_commit"]
    assert _row("committed")


def test_a_rollback_drops_both():
    log: list[str] = []
    with transaction.atomic():
        Group.objects.create(name="rolled back")
        on_commit_sent(*_steps(log))
        transaction.set_rollback(True)
    with transaction.atomic():  # the next transaction's commit runs nothing of it
        Group.objects.create(name="the next")
    assert log == []


def test_a_savepoint_rolled_back_drops_its_own_only():
    log: list[str] = []
    with transaction.atomic():
        Group.objects.create(name="kept")
        on_commit_sent(*_steps(log, " 1"))
        with pytest.raises(RuntimeError), transaction.atomic():
            on_commit_sent(*_steps(log, " 2"))
            raise RuntimeError("the savepoint rolls back")
    assert log == ["sent 1, COMMIT in flight", "done 1"]


def test_a_failing_step_neither_fails_the_commit_nor_skips_the_callback(caplog):
    log: list[str] = []

    def fails() -> None:
        raise ConnectionError("broker down")

    with caplog.at_level(logging.ERROR, logger="adkweb.postgresql.base"), transaction.atomic():
        Group.objects.create(name="committed")
        on_commit_sent(fails, lambda: log.append("done"))
    assert log == ["done"]
    assert _row("committed")
    assert "A step run as a COMMIT left failed." in caplog.text
    assert connection.connection.pgconn.transaction_status == pq.TransactionStatus.IDLE


def test_asked_with_the_commit_sent_with_the_statements_the_step_runs_at_once_and_the_callback_after_the_block():
    """From adkweb.postgresql.pipelined's `written` (its COMMIT already on its way): the step now, once;
    the callback at the atomic block's end, after the commit, with the block's other callbacks."""
    from adkweb.postgresql.pipelined import committed_with

    log: list[str] = []

    def written(results: list) -> None:
        assert on_commit_sent(*_steps(log))
        log.append("written")

    with transaction.atomic():
        transaction.on_commit(lambda: log.append("on_commit"))
        with connection.cursor() as cursor:
            sql = "INSERT INTO auth_group (name) VALUES (%(name)s)"
            committed_with(cursor, sql, {"name": "with its COMMIT"}, written)
        log.append("before the block's end")
    assert log == ["sent, COMMIT in flight", "written", "before the block's end", "on_commit", "done"]
    assert _row("with its COMMIT")
