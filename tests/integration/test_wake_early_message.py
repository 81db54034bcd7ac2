"""A message wakes its worker as its transaction's COMMIT leaves (agents_app.enqueue.turn_enqueue,
adkweb.postgresql.base.on_commit_sent), with a real `celery worker` (wake-up drainers, threads pool) on
PostgreSQL + Redis: the push is written once the COMMIT is on its way and before its reply is read (the
worker's pop, drain and claim run during the commit's round trip, not before the COMMIT leaves); the
claim waits on the session row until the commit lands, and the turn runs once, woken once. A message
whose COMMIT fails after its wake-up leaves the worker nothing to claim: no turn, no lease, the session
idle; the failure is Django's error, and the connection is usable after it."""

from __future__ import annotations

import contextlib

import pytest
from django.contrib.auth.models import User
from django.db import IntegrityError, connection, transaction
from psycopg import pq

from agents_app import enqueue, services, wake
from agents_app.models import AdkSession, StoredEvent, Turn
from tests.conftest import wait_for
from tests.engine_scenarios import settle

from .test_wake_early import _lock_waiters, _turns

pytestmark = pytest.mark.django_db(transaction=True)


def _replies(session: AdkSession) -> int:
    return StoredEvent.objects.filter(session=session).exclude(author="user").count()


def _where() -> str:
    """Where the web's transaction is as a wake-up leaves (no statement: the COMMIT may be in flight,
    sent by Django's atomic block's end or with the turn's statement, adkweb.postgresql.pipelined)."""
    if connection.connection.pgconn.transaction_status == pq.TransactionStatus.ACTIVE:
        return "COMMIT in flight"
    return "in the transaction" if transaction.get_connection().in_atomic_block else "after the commit"


def test_a_messages_wake_up_leaves_as_its_commit_does_and_the_turn_runs_once(demo, worker, monkeypatch):
    session = services.session_create(app_name="stock_agent", user_id="requester")
    real, sent = enqueue.session_enqueue, []

    def recorded(*, session_pk: int) -> bool:
        sent.append((session_pk, _where()))
        return real(session_pk=session_pk)

    monkeypatch.setattr("agents_app.enqueue.session_enqueue", recorded)
    services.message_send(session=session, text="price of GOOG?", streaming=False)
    assert sent == [(session.pk, "COMMIT in flight")]  # one wake-up, its COMMIT sent, its reply not read
    assert getattr(wake._left, "pending", None) is None  # its push's reply was read after the commit
    settle(session, wait_for, "the turn")
    assert _turns(session) == [("message", "done")]
    row = AdkSession.objects.get(pk=session.pk)
    assert (row.lease_owner, row.status) == ("", "idle")


@pytest.mark.parametrize("way", ["after a wait", "with its statements"])
def test_a_wake_up_for_a_message_whose_commit_fails_leaves_nothing_to_claim(demo, worker, monkeypatch, way):
    """Its COMMIT sent by Django's atomic block after the follower's wait, or with the turn's statements
    (adkweb.postgresql.pipelined): either way the wake-up leaves before the COMMIT's failure is read."""
    session = services.session_create(app_name="stock_agent", user_id="requester")
    real, sent = enqueue.session_enqueue, []

    def recorded(*, session_pk: int) -> bool:
        sent.append(_where())
        return real(session_pk=session_pk)

    def fails_at_commit() -> None:
        """A deferred foreign key broken in the message's transaction: its COMMIT fails (as a turn's whose
        session or person went meanwhile would)."""
        with connection.cursor() as cursor:
            cursor.execute("UPDATE agents_app_turn SET created_by_id = 2147483647 WHERE session_id = %s", [session.pk])

    monkeypatch.setattr("agents_app.enqueue.session_enqueue", recorded)
    if way == "after a wait":
        waiting, actor = services.before_turn_commit(fails_at_commit), None
    else:  # no such person: the turn's deferred foreign key fails at the COMMIT sent with its statements
        waiting, actor = contextlib.nullcontext(), User(pk=2_147_483_647, username="gone")
    with waiting, pytest.raises(IntegrityError):  # Django's, mapped
        services.message_send(session=session, text="What is the price of GOOG?", actor=actor, streaming=False)
    assert sent == ["COMMIT in flight"]  # the wake-up left before the COMMIT's failure was read
    # psycopg's and Django's state as after any failed commit: no transaction, the connection usable.
    assert connection.connection.pgconn.transaction_status == pq.TransactionStatus.IDLE
    assert not connection.in_atomic_block
    wait_for(lambda: wake.client().llen(wake.key()) == 0, timeout=20, what="the worker to pop the wake-up")
    wait_for(lambda: _lock_waiters() == 0, timeout=20, what="the claim to go on after the failed commit")
    # The claim found nothing owed: no turn, no lease taken, the session idle.
    assert _turns(session) == []
    row = AdkSession.objects.get(pk=session.pk)
    assert (row.lease_owner, row.status) == ("", "idle")
    # The next message runs, once.
    monkeypatch.setattr("agents_app.enqueue.session_enqueue", real)
    services.message_send(session=session, text="What is the price of GOOG?", streaming=False)
    settle(session, wait_for, "the turn")
    assert _turns(session) == [("message", "done")]
    assert _replies(session) >= 1


def test_a_wake_up_that_fails_as_the_commit_leaves_is_sent_after_the_commit(demo, monkeypatch):
    """The enqueue raising as the COMMIT leaves (a monkeypatched or broken broker) neither fails the
    commit nor loses its wake-up: it is sent again once the turn is committed."""
    session = services.session_create(app_name="stock_agent", user_id="requester")
    seen: list[str] = []

    def flaky(*, session_pk: int) -> bool:
        seen.append(_where())
        if len(seen) == 1:
            raise ConnectionError("broker down")
        return True

    monkeypatch.setattr("agents_app.enqueue.session_enqueue", flaky)
    turn = services.message_send(session=session, text="hi", streaming=False)
    assert Turn.objects.filter(pk=turn.pk, status="queued").exists()
    assert seen == ["COMMIT in flight", "after the commit"]


def test_a_messages_wake_up_leaves_after_its_turn_is_built(demo, monkeypatch):
    """The follower's wait (before_turn_commit) and the Turn that message_send returns come before the
    commit; the wake-up once the COMMIT is sent."""
    from agents_app import turn_insert

    session = services.session_create(app_name="stock_agent", user_id="requester")
    order: list[str] = []
    built = turn_insert._queued

    def record_built(*args, **kwargs):
        order.append("built")
        return built(*args, **kwargs)

    def woken(*, session_pk: int) -> bool:
        order.append(f"woken, {_where()}")
        return True

    monkeypatch.setattr(turn_insert, "_queued", record_built)
    monkeypatch.setattr("agents_app.enqueue.session_enqueue", woken)
    with services.before_turn_commit(lambda: order.append("waited")):
        turn = services.message_send(session=session, text="hi", streaming=False)
    assert order == ["waited", "built", "woken, COMMIT in flight"]
    assert Turn.objects.filter(pk=turn.pk, status="queued").exists()
