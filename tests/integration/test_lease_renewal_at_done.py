"""The lease keeper's renewal that lands while a drain's turn ends (agents_app.leases): the turn's DONE
statement (agents_app.turn_sql.done_next) releases the session's lease when nothing more is owed, and
a renewal the keeper runs at that moment (it waits for the statement's row lock) finds no lease. That
is the drain's own release: no "lease lost to another worker" warning for operators to chase, and no
lease marked lost. A lease really taken by another worker is still warned about."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connection

from agents_app import leases, runner, services
from agents_app.models import AdkSession
from tests.agents_app.test_worker_loop import _turn, drained  # noqa: F401 - the fixture, used below

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("demo", "drained")]

LOST = "run lease lost to another worker"


def _beat(heartbeat: leases.Heartbeat) -> bool:
    """One renewal on a thread of the loop's executor, and that thread's connection back to the pool after
    it, as the keeper's thread gives its own back after its beats: kept, it outlived the session's pools
    (tests/integration/conftest.py closes only what is in them), and the test database could not be dropped
    at the end of the run ("is being accessed by other users")."""
    try:
        return heartbeat.beat()
    finally:
        connection.close()


def _beat_at_the_done(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Right after each DONE statement returns, before the drain lets go of its heartbeat, renew every
    lease the process's keeper holds, as its thread would if its beat fell then. Returns each beat's
    answer (False: renew no more)."""
    beats: list[bool] = []
    original = runner._adone_next

    async def done_then_beat(turn: Any, lease: leases.Lease) -> Any:
        done = await original(turn, lease)
        held = list(leases._keeper()._held.values())
        assert held, "the drain's heartbeat is held during its DONE"
        for heartbeat in held:
            beats.append(await sync_to_async(_beat, thread_sensitive=False)(heartbeat))
        return done

    monkeypatch.setattr(runner, "_adone_next", done_then_beat)
    return beats


def test_a_renewal_that_meets_the_drains_own_release_warns_of_no_loss(monkeypatch, caplog):
    session = services.session_create(app_name="stock_agent", user_id="requester")
    beats = _beat_at_the_done(monkeypatch)
    with caplog.at_level(logging.WARNING, logger="agents_app.leases"):
        for _ in range(3):
            _turn(session)
    assert beats == [False, False, False]  # each found the lease released by the DONE: renewed no more
    assert [r.getMessage() for r in caplog.records if LOST in r.getMessage()] == []
    assert AdkSession.objects.values_list("lease_owner", flat=True).get(pk=session.pk) == ""


def test_a_lease_taken_by_another_worker_is_still_warned_about(monkeypatch, caplog):
    session = services.session_create(app_name="stock_agent", user_id="requester")
    lease = leases.Lease(session.pk, "worker-a")
    assert leases.lease_acquire(session.pk, "worker-a")
    with leases.Heartbeat(lease) as heartbeat, caplog.at_level(logging.WARNING, logger="agents_app.leases"):
        AdkSession.objects.filter(pk=session.pk).update(lease_owner="worker-b")  # taken over
        assert heartbeat.beat() is False
    assert lease.lost
    assert [r.getMessage() for r in caplog.records if LOST in r.getMessage()] == [f"Session {session.pk}: {LOST}."]
