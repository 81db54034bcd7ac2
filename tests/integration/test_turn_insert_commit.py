"""A message's whole transaction in one write on PostgreSQL (agents_app.turn_insert with `ends`,
adkweb.postgresql.pipelined): its BEGIN, its turn's statements and its COMMIT sent together, the
wake-up pushed once the statements' results are in, with the COMMIT on its way; the same rows as
before. A COMMIT that fails raises Django's error after the wake-up left, writes nothing and leaves
the connection usable; where the transaction holds more than the turn (an outer atomic block, the
follower's wait) the COMMIT is Django's as before."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from django.contrib.auth.models import User
from django.db import IntegrityError, connection, transaction
from django.db.transaction import TransactionManagementError
from psycopg import pq

from agents_app import services
from agents_app.models import AdkSession, Turn

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[Any]]:
    """The turn statements' texts as Django's execute wrappers see them, and where each wake-up
    leaves: the COMMIT in flight with the statements' (libpq's pipeline mode on) or not."""
    got: dict[str, list[Any]] = {"sql": [], "woken": []}

    def woken(*, session_pk: int) -> bool:
        pgconn = connection.connection.pgconn
        in_flight = pgconn.transaction_status == pq.TransactionStatus.ACTIVE
        pipelined = pgconn.pipeline_status != pq.PipelineStatus.OFF
        got["woken"].append((in_flight, pipelined))
        return True

    def record(execute, sql, params, many, context):
        if "agents_app_turn" in sql:
            got["sql"].append(sql)
        return execute(sql, params, many, context)

    monkeypatch.setattr("agents_app.enqueue.session_enqueue", woken)
    with connection.execute_wrapper(record):
        yield got


def _statuses(session: AdkSession) -> list[str]:
    return list(Turn.objects.filter(session=session).values_list("status", flat=True))


@pytest.mark.parametrize("person", [False, True], ids=["plain", "capped"])
def test_a_messages_begin_statements_and_commit_leave_together(demo, seen, person):
    session = services.session_create(app_name="stock_agent", user_id="requester")
    actor = demo["requester"] if person else None
    turn = services.message_send(session=session, text="hi", actor=actor, streaming=False)
    assert len(seen["sql"]) == 1 and seen["sql"][0].startswith("BEGIN; ") and seen["sql"][0].endswith("; COMMIT")
    assert seen["woken"] == [(True, True)]  # once the statements' results were in, the COMMIT on its way
    assert connection.connection.pgconn.transaction_status == pq.TransactionStatus.IDLE
    row = Turn.objects.get(pk=turn.pk)
    assert (row.status, row.content, row.created_by_id) == ("queued", turn.content, actor.pk if actor else None)
    assert AdkSession.objects.get(pk=session.pk).status == "running"


def test_a_failed_commit_raises_djangos_error_writes_nothing_and_leaves_the_connection_usable(demo, seen):
    session = services.session_create(app_name="stock_agent", user_id="requester")
    gone = User(pk=2_147_483_647, username="gone")  # no such row: the turn's deferred foreign key fails at COMMIT
    with pytest.raises(IntegrityError):  # Django's, mapped
        services.message_send(session=session, text="hi", actor=gone, streaming=False)
    assert seen["woken"] == [(True, True)]  # it left before the COMMIT's failure was read
    assert connection.connection.pgconn.transaction_status == pq.TransactionStatus.IDLE
    assert connection.connection.pgconn.pipeline_status == pq.PipelineStatus.OFF
    assert not connection.in_atomic_block
    assert _statuses(session) == []
    assert AdkSession.objects.get(pk=session.pk).status == "idle"  # the status write went with it
    services.message_send(session=session, text="hi", streaming=False)
    assert _statuses(session) == ["queued"]


def test_a_transaction_with_more_than_the_turn_commits_as_before(demo, seen):
    session = services.session_create(app_name="stock_agent", user_id="requester")
    with transaction.atomic():  # an outer block: the caller may write more before its commit
        services.message_send(session=session, text="hi", streaming=False)
    with services.before_turn_commit(lambda: None):  # a wait that may still roll the turn back
        services.message_send(session=session, text="hi", streaming=False)
    assert [sql.endswith("; COMMIT") for sql in seen["sql"]] == [False, False]
    assert [pipelined for _, pipelined in seen["woken"]] == [False, False]
    assert _statuses(session) == ["queued", "queued"]


def test_a_psycopg_error_in_the_pipeline_is_djangos(demo):
    from adkweb.postgresql.pipelined import committed_with

    with pytest.raises(Exception) as caught, transaction.atomic(), connection.cursor() as cursor:
        committed_with(cursor, "SELECT 1/0", {}, lambda results: None)
    assert not isinstance(caught.value, psycopg.Error)  # Django's DataError, not psycopg's
    assert connection.connection.pgconn.pipeline_status == pq.PipelineStatus.OFF
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        assert cursor.fetchone() == (1,)


def test_no_statement_runs_between_the_commit_sent_with_the_statements_and_the_blocks_end(demo):
    """It would run in a transaction of its own after the commit: refused, and the block's end lets the
    connection be used again."""
    from adkweb.postgresql.pipelined import committed_with

    with pytest.raises(TransactionManagementError), transaction.atomic():
        with connection.cursor() as cursor:
            committed_with(cursor, "SELECT 1", {}, lambda results: None)
        AdkSession.objects.exists()
    assert not connection.in_atomic_block
    assert AdkSession.objects.exists() in (True, False)  # usable again
