"""Services mode: expiry survives a restart of `celery beat` (the due time is a database row, not a
timer): beat is killed before the ticket is due, nothing expires it while beat is down, and a new
beat process expires it and the agent tells the user."""

from __future__ import annotations

import signal
import time

from approvals.models import PendingCall, Policy, Response
from tests.engine_scenarios import agent_texts, settle, ticket_opened
from tests.engine_scenarios.policies import _start

from .conftest import beat_start, beat_stop


def test_expiry_survives_a_beat_restart(demo, worker, wait, tmp_path):
    Policy.objects.create(name="Fast", tool="ask_for_approval", due_in_seconds=5, priority=99)
    (tmp_path / "first").mkdir()
    (tmp_path / "second").mkdir()
    beat, _ = beat_start(tmp_path / "first")
    session = _start("reimbursement_agent", "Please reimburse 200$ for meals", demo["requester"])
    ticket = ticket_opened(session, wait)
    beat.send_signal(signal.SIGKILL)
    beat.wait(timeout=20)
    assert ticket.due_at is not None
    time.sleep(max(0.0, (ticket.due_at - ticket.created_at).total_seconds()) + 1.5)
    ticket.refresh_from_db()
    assert ticket.status == "pending" and not Response.objects.filter(pending_call=ticket).exists()

    beat, log = beat_start(tmp_path / "second")
    try:
        wait(lambda: PendingCall.objects.get(pk=ticket.pk).status == "expired", timeout=30, what="the expiry")
        settle(session, wait)
        expected = "Sorry, your reimbursement request of $200.00 for meals expired: nobody decided it in time."
        assert agent_texts(session)[-1] == expected
        assert Response.objects.get(pending_call=ticket).action == "expire"
    finally:
        beat_stop(beat)
