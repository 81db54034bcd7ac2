"""A message wakes its worker before its commit (agents_app.enqueue.wake_before_commit), with a real
`celery worker` (wake-up listener, threads pool) on PostgreSQL + Redis: the worker pops the wake-up
while the message's transaction is still open, its claim waits on the session row the new turn's
insert locked, and the turn runs once, woken once, when the commit lands. A message whose transaction
rolls back after its wake-up leaves the worker nothing to do: no turn, no lease, the session idle."""

from __future__ import annotations

import pytest
from django.db import transaction

from agents_app import enqueue, services
from agents_app.models import AdkSession, StoredEvent, Turn
from tests.conftest import wait_for
from tests.engine_scenarios import settle

from .test_wake_early import HeldOpen, _lock_waiters, _turns

pytestmark = pytest.mark.django_db(transaction=True)


def _replies(session: AdkSession) -> int:
    return StoredEvent.objects.filter(session=session).exclude(author="user").count()


def test_a_messages_wake_up_leaves_before_its_commit_and_the_claim_waits_for_it(demo, worker, monkeypatch):
    session = services.session_create(app_name="stock_agent", user_id="requester")
    held = HeldOpen(monkeypatch)
    thread = held.start(lambda: services.message_send(session=session, text="price of GOOG?", streaming=False))
    try:
        held.claim_waiting("the message")
        assert not _turns(session), "the turn is seen before its commit"
    finally:
        held.finish(thread)
    assert "error" not in held.outcome, held.outcome
    settle(session, wait_for, "the turn")
    assert _turns(session) == [("message", "done")]
    assert held.sent == [session.pk]  # one wake-up, before the commit (the claim waited for it); none after
    row = AdkSession.objects.get(pk=session.pk)
    assert (row.lease_owner, row.status) == ("", "idle")


def test_a_wake_up_for_a_message_that_rolls_back_does_nothing(demo, worker, monkeypatch):
    session = services.session_create(app_name="stock_agent", user_id="requester")
    real = enqueue.session_enqueue

    def then_fail(*, session_pk: int) -> bool:
        """The wake-up as sent; once the worker's claim waits on the session row, the message fails
        before its commit (rolled back, as a COMMIT that fails, or a web process that dies there, is)."""
        real(session_pk=session_pk)
        wait_for(lambda: _lock_waiters() >= 1, timeout=20, what="the worker's claim to wait on the session row")
        transaction.set_rollback(True)  # the message's atomic block ends in a ROLLBACK
        return True

    monkeypatch.setattr("agents_app.enqueue.session_enqueue", then_fail)
    services.message_send(session=session, text="What is the price of GOOG?", streaming=False)
    monkeypatch.setattr("agents_app.enqueue.session_enqueue", real)
    wait_for(lambda: _lock_waiters() == 0, timeout=20, what="the claim to go on after the rollback")
    # The claim found nothing owed: no turn, no lease taken, the session idle.
    assert _turns(session) == []
    row = AdkSession.objects.get(pk=session.pk)
    assert (row.lease_owner, row.status) == ("", "idle")
    # The next message runs, once.
    services.message_send(session=session, text="What is the price of GOOG?", streaming=False)
    settle(session, wait_for, "the turn")
    assert _turns(session) == [("message", "done")]
    assert _replies(session) >= 1


def test_an_early_wake_up_that_fails_is_sent_after_the_commit(demo, monkeypatch):
    """The enqueue raising before the commit (a monkeypatched or broken broker) neither rolls the
    message back nor loses its wake-up: it is sent again once the turn is committed."""
    session = services.session_create(app_name="stock_agent", user_id="requester")
    seen: list[tuple[bool, int]] = []

    def flaky(*, session_pk: int) -> bool:
        seen.append((transaction.get_connection().in_atomic_block, len(_turns(session))))
        if len(seen) == 1:
            raise ConnectionError("broker down")
        return True

    monkeypatch.setattr("agents_app.enqueue.session_enqueue", flaky)
    turn = services.message_send(session=session, text="hi", streaming=False)
    assert Turn.objects.filter(pk=turn.pk, status="queued").exists()
    assert seen == [(True, 1), (False, 1)]  # before the commit (seen in it), then after it


def test_a_messages_wake_up_leaves_as_soon_as_its_row_is_written(demo, monkeypatch):
    """On the queue stage's way: the wake-up is sent right after the turn's statement, before the
    Turn that message_send returns is built from it; the follower's wait (before_turn_commit) still
    comes first."""
    from agents_app import turn_insert

    session = services.session_create(app_name="stock_agent", user_id="requester")
    order: list[str] = []
    built = turn_insert._queued

    def record_built(*args, **kwargs):
        order.append("built")
        return built(*args, **kwargs)

    def woken(*, session_pk: int) -> bool:
        order.append("woken" if transaction.get_connection().in_atomic_block else "woken after the commit")
        return True

    monkeypatch.setattr(turn_insert, "_queued", record_built)
    monkeypatch.setattr("agents_app.enqueue.session_enqueue", woken)
    with services.before_turn_commit(lambda: order.append("waited")):
        turn = services.message_send(session=session, text="hi", streaming=False)
    assert order == ["waited", "woken", "built"]
    assert Turn.objects.filter(pk=turn.pk, status="queued").exists()
