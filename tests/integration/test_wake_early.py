"""A decision wakes its worker before its commit (approvals.decisions, "Waking before the commit"), with a
real `celery worker` (wake-up drainers, threads pool) on PostgreSQL + Redis: the worker pops the wake-up
while the decision's transaction is still open, its claim waits on the session row the decision holds,
and the turn runs once the commit lands, woken once. A decision that rolls back after its wake-up leaves
nothing for the worker to do: no turn, no lease taken, the ticket still open, and the next decision
resumes the agent."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from django.db import connection

from agents_app import enqueue
from agents_app import services as agent_services
from agents_app.models import AdkSession, Turn
from approvals import services
from approvals.models import PendingCall, Response
from tests.conftest import wait_for
from tests.engine_scenarios import calls, settle

from . import processes

pytestmark = pytest.mark.django_db(transaction=True)


def _waiting_ticket() -> tuple[AdkSession, PendingCall]:
    session = agent_services.session_create(app_name="reimbursement_agent", user_id="requester")
    agent_services.message_send(session=session, text="Please reimburse 200$ for meals", streaming=False)
    ticket = wait_for(lambda: PendingCall.objects.filter(session=session).first(), timeout=30, what="the ticket")
    settle(session, wait_for)
    return session, ticket


def _lock_waiters() -> int:
    sql = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
    with psycopg.connect(processes.database_url(), autocommit=True) as conn:
        row = conn.execute(sql).fetchone()
    return row[0] if row else 0


def _turns(session: AdkSession) -> list[tuple[str, str]]:
    return list(Turn.objects.filter(session=session).order_by("id").values_list("kind", "status"))


class HeldOpen:
    """session_enqueue replaced by: the wake-up as sent, then the caller's transaction held open (its
    COMMIT not reached) until `commit` is set; `start(work)` runs the work that enqueues in a thread."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.real = enqueue.session_enqueue
        self.sent: list[int] = []
        self.woken, self.commit = threading.Event(), threading.Event()
        self.outcome: dict[str, Any] = {}
        monkeypatch.setattr("agents_app.enqueue.session_enqueue", self._held_open)

    def _held_open(self, *, session_pk: int) -> bool:
        self.sent.append(session_pk)
        self.real(session_pk=session_pk)
        self.woken.set()
        assert self.commit.wait(30)
        return True

    def claim_waiting(self, what: str) -> None:
        """The wake-up was sent before the commit, and the worker's claim waits on the session row."""
        assert self.woken.wait(30), f"{what} sent no wake-up before its commit"
        wait_for(lambda: _lock_waiters() >= 1, timeout=20, what="the worker's claim to wait on the session row")

    def finish(self, thread: threading.Thread) -> None:
        """Let the transaction commit and its thread end."""
        self.commit.set()
        thread.join(30)

    def start(self, work: Callable[[], Any]) -> threading.Thread:
        def run() -> None:
            try:
                self.outcome["result"] = work()
            except Exception as exc:  # noqa: BLE001 - reported by the test
                self.outcome["error"] = exc
            finally:
                connection.close()

        thread = threading.Thread(target=run)
        thread.start()
        return thread


def test_the_wake_up_leaves_before_the_commit_and_the_claim_waits_for_it(demo, worker, monkeypatch):
    session, ticket = _waiting_ticket()
    held = HeldOpen(monkeypatch)
    thread = held.start(lambda: services.ticket_approve(ticket=ticket, actor=demo["approver"]))
    try:
        held.claim_waiting("the decision")
        # Not committed yet: nobody else sees the turn, and the worker has claimed nothing.
        assert _turns(session) == [("message", "done")]
        assert AdkSession.objects.get(pk=session.pk).lease_owner == ""
    finally:
        held.finish(thread)
    assert "error" not in held.outcome, held.outcome
    settle(session, wait_for, "the resumed turn")
    assert _turns(session) == [("message", "done"), ("function_response", "done")]
    assert held.sent == [session.pk]  # one wake-up, none after the commit
    assert len(calls(session, "reimburse")) == 1


def test_a_wake_up_for_a_decision_that_rolls_back_does_nothing(demo, worker, monkeypatch):
    session, ticket = _waiting_ticket()
    real = enqueue.session_enqueue

    def then_fail(*, session_pk: int) -> bool:
        """The wake-up as sent; once the worker's claim waits on the session row, the decision fails
        before its commit (as a COMMIT that fails, or a web process that dies there, would)."""
        real(session_pk=session_pk)
        wait_for(lambda: _lock_waiters() >= 1, timeout=20, what="the worker's claim to wait on the session row")
        raise RuntimeError("no commit")

    monkeypatch.setattr("agents_app.enqueue.session_enqueue", then_fail)
    with pytest.raises(RuntimeError, match="no commit"):
        services.ticket_approve(ticket=ticket, actor=demo["approver"])
    monkeypatch.setattr("agents_app.enqueue.session_enqueue", real)
    wait_for(lambda: _lock_waiters() == 0, timeout=20, what="the claim to go on after the rollback")
    # The claim found nothing owed: no turn, no lease left taken, the ticket open, nothing recorded.
    assert _turns(session) == [("message", "done")]
    row = AdkSession.objects.get(pk=session.pk)
    assert (row.lease_owner, row.status) == ("", "waiting")
    ticket.refresh_from_db()
    assert ticket.is_open and not Response.objects.filter(pending_call=ticket).exists()
    assert calls(session, "reimburse") == []
    # The next decision resumes the agent, once.
    services.ticket_approve(ticket=ticket, actor=demo["approver"])
    settle(session, wait_for, "the resumed turn")
    assert _turns(session) == [("message", "done"), ("function_response", "done")]
    assert len(calls(session, "reimburse")) == 1
