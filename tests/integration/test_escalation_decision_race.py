"""A ticket past its escalation time, not yet escalated in the record, decided by a member of its escalation
group while the deadline sweep escalates it, from two connections on PostgreSQL's real row locks: whichever
takes the ticket's lock first records the escalation (approvals.escalations), the other finds it written
(or the ticket closed) and writes nothing; the history holds one "Escalated" entry either way, and the
decision stands. Before, a decision that came first left none at all (the sweep skips closed tickets)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.utils import timezone

from approvals import deadlines, services
from approvals.models import PendingCall, TicketActivity
from tests.approvals.policy_helpers import open_ticket, person, policy, team
from tests.integration.races import waiting_on_a_lock

pytestmark = pytest.mark.django_db(transaction=True)


def _ticket() -> tuple[PendingCall, Any]:
    """An open ticket whose escalation time (to ops) came a minute ago; the sweep has not run. And olga, of ops."""
    ops = team("ops")
    olga = person("olga", ops)
    policy("slow", tool="ask_for_approval", groups=(team("fin-team"),), escalation=(ops,), escalate_after_seconds=1800)
    ticket = open_ticket(args={"purpose": "meals", "amount": 200.0})
    PendingCall.objects.filter(pk=ticket.pk).update(escalate_at=timezone.now() - timedelta(minutes=1))
    ticket.refresh_from_db()
    assert ticket.escalated_at is None
    return ticket, olga


def _race(first: Callable[[], Any], second: Callable[[], Any]) -> dict[str, Any]:
    """`first` in a transaction of its own connection, held open (its row locks with it) until `second`, from
    another connection, waits on a lock; then it commits and `second` goes on. What each returned (or raised),
    and whether `second` did wait."""
    out: dict[str, Any] = {}
    holding = threading.Event()

    def run_first() -> None:
        try:
            with transaction.atomic():
                out["first"] = first()
                holding.set()
                give_up = time.monotonic() + 10
                while not (waited := waiting_on_a_lock()) and time.monotonic() < give_up:
                    time.sleep(0.01)
                out["waited"] = waited
        except Exception as exc:  # reported by the test
            out["first"] = exc
        finally:
            holding.set()
            connection.close()

    def run_second() -> None:
        try:
            out["second"] = second()
        except Exception as exc:
            out["second"] = exc
        finally:
            connection.close()

    a = threading.Thread(target=run_first)
    a.start()
    assert holding.wait(20)
    b = threading.Thread(target=run_second)
    b.start()
    a.join(30), b.join(30)
    return out


def _no_worker(monkeypatch) -> None:
    monkeypatch.setattr("agents_app.enqueue.session_enqueue", lambda *, session_pk: True)
    monkeypatch.setattr("agents_app.enqueue.session_enqueue_before_commit", lambda *, session_pk: None)


def _recorded_once(ticket: PendingCall, olga: Any) -> None:
    ticket.refresh_from_db()
    assert ticket.status == PendingCall.Status.APPROVED and ticket.closed_by_id == olga.pk
    assert ticket.escalated_at == ticket.escalate_at
    said = TicketActivity.objects.filter(ticket=ticket, kind=TicketActivity.Kind.ESCALATED)
    assert list(said.values_list("message", flat=True)) == ["Escalated to ops: no decision yet."]


def test_the_decision_first_records_the_escalation_and_the_sweep_behind_it_adds_none(demo, monkeypatch):
    _no_worker(monkeypatch)
    ticket, olga = _ticket()

    def decide() -> Any:
        return services.ticket_approve(ticket=PendingCall.objects.get(pk=ticket.pk), actor=olga)

    out = _race(decide, deadlines.deadlines_sweep)
    assert out["waited"], "the sweep never waited on the decision's lock"
    assert not isinstance(out["first"], Exception), out["first"]
    assert out["second"] == {"reminded": 0, "escalated": 0, "expired": 0}
    _recorded_once(ticket, olga)
    connection.close()


def test_the_sweep_first_records_it_and_the_decision_behind_it_adds_none(demo, monkeypatch):
    _no_worker(monkeypatch)
    ticket, olga = _ticket()

    def decide() -> Any:
        return services.ticket_approve(ticket=PendingCall.objects.get(pk=ticket.pk), actor=olga)

    out = _race(lambda: deadlines.ticket_escalate(ticket_id=ticket.pk), decide)
    assert out["waited"], "the decision never waited on the sweep's lock"
    assert out["first"] is True
    assert not isinstance(out["second"], Exception), out["second"]
    _recorded_once(ticket, olga)
    connection.close()
