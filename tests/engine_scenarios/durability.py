"""A committed response reaches the agent even if the broker is down when it is enqueued."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

import redis
from django.conf import settings
from django.utils import timezone

from adkweb.celery import app
from agents_app import leases, services, tasks, wake
from agents_app.models import AdkSession, Turn
from approvals import services as approvals
from approvals.models import PendingCall

from . import Wait, agent_texts, calls, dialogue, settle
from .tickets import _reimbursement_ticket

DEAD_BROKER = "redis://127.0.0.1:1/0"  # nothing listens on port 1: connection refused


@contextmanager
def broker_down() -> Iterator[list[logging.LogRecord]]:
    """Point this process's task producer and its wake-ups (agents_app.wake) at a dead broker (the
    worker keeps its own connections), and collect what the services log meanwhile."""
    # The dead broker is a Redis URL: the producer's transport is Redis too (embedded mode names its
    # memory transport in broker_transport, which kombu would otherwise use for any URL).
    saved = app.conf.broker_write_url, app.conf.broker_transport, app._pool, app.amqp._producer_pool
    app.conf.broker_write_url, app.conf.broker_transport, app._pool, app.amqp._producer_pool = (
        DEAD_BROKER,
        None,
        None,
        None,
    )
    saved_wake = wake._clients.swap(redis.Redis.from_url(DEAD_BROKER))
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = records.append  # type: ignore[method-assign]
    logger = logging.getLogger("agents_app.services")
    logger.addHandler(handler)
    try:
        yield records
    finally:
        logger.removeHandler(handler)
        # The dead broker's pool is left open: kombu caches pools per URL process-wide, so closing
        # it would make the next outage raise "Acquire on closed pool" instead of a broker error.
        app.conf.broker_write_url, app.conf.broker_transport, app._pool, app.amqp._producer_pool = saved
        wake._clients.swap(saved_wake)


def approval_survives_a_broker_outage(demo: dict, wait: Wait) -> None:
    session, call = _reimbursement_ticket(demo, wait)
    # The drain that opened the ticket must not see the new turn: it looks for more work once more
    # after releasing the lease and would run it itself, with no broker message needed. So wait for
    # the release and hold the session's lease, as a busy worker would, while the approval is made.
    settle(session, wait)
    wait(lambda: leases.lease_acquire(session.pk, "scenario"), what="the drain to release the session")
    with broker_down() as logged:
        approvals.ticket_approve(ticket=call, actor=demo["approver"])
    leases.lease_release(session.pk, "scenario")
    assert [r.getMessage() for r in logged] == [f"Could not enqueue session {session.pk}; the sweeper will retry."]
    call.refresh_from_db()
    assert call.status == PendingCall.Status.APPROVED  # the answer is committed...
    turn = Turn.objects.filter(session=session).latest("id")
    assert turn.kind == Turn.Kind.FUNCTION_RESPONSE
    # ...but no worker heard of it: once it is old enough to be owed, it is still queued.
    wait(
        lambda: time.time() - turn.created_at.timestamp() > settings.ADKWEB_REQUEUE_AFTER_SECONDS + 0.5,
        what="the turn to become owed",
    )
    turn.refresh_from_db()
    assert turn.status == Turn.Status.QUEUED and turn.attempts == 0
    assert calls(session, "reimburse") == []

    tasks.turns_requeue_owed.delay()  # what celery beat sends every 15 s
    settle(session, wait, "the sweeper to get the owed turn run")
    turn.refresh_from_db()
    assert turn.status == Turn.Status.DONE
    assert [c["args"] for c in calls(session, "reimburse")] == [{"purpose": "meals", "amount": 200.0}]
    assert agent_texts(session)[-1] == "Done: I reimbursed $200.00 for meals."


def turn_of_a_dead_worker_is_retried(demo: dict, wait: Wait) -> None:
    """A worker died mid-turn: its turn is left running and its session lease runs out."""
    session = services.session_create(app_name="stock_agent", user_id="requester")
    with broker_down():
        turn = services.message_send(session=session, text="What is the price of AAPL?", actor=demo["requester"])
    Turn.objects.filter(pk=turn.pk).update(status=Turn.Status.RUNNING, attempts=1, started_at=timezone.now())
    AdkSession.objects.filter(pk=session.pk).update(
        lease_owner="worker-that-died", lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    tasks.turns_requeue_owed.delay()  # what celery beat sends every 15 s
    settle(session, wait, "the sweeper to retry the dead worker's turn")
    turn.refresh_from_db()
    assert (turn.status, turn.attempts) == (Turn.Status.DONE, 2)
    assert dialogue(session) == [
        ("user", "What is the price of AAPL?"),
        ("stock_agent", "The current price of AAPL is $229.87."),
    ]
    # The worker releases the lease just after it records the turn as done.
    wait(lambda: AdkSession.objects.get(pk=session.pk).lease_owner == "", what="the session lease to be released")
