"""An open inbox's row turns "past due" at its ticket's due time, over the inbox socket: from then the
ticket takes no decision (approvals.decision_plan.PastDue), whether or not the deadline sweep has expired
it yet, so its row says so then, not at the sweep or a reload. One timer per socket (approvals.consumers)."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from channels.db import database_sync_to_async
from django.utils import timezone

from approvals import services
from approvals.events import notify_ticket_changed
from approvals.models import PendingCall
from tests.approvals.policy_helpers import open_ticket
from tests.sockets import connect

pytestmark = pytest.mark.django_db(transaction=True)
AHEAD = 1.5  # seconds: the first due time, a moment after the inbox opened
PAST_DUE = "past due: it expires"


@database_sync_to_async
def _due_in(seconds: float, **fields) -> tuple[PendingCall, float]:
    """An open ticket due `seconds` from now, and its due time (as time.time() counts)."""
    ticket = open_ticket(**fields)
    due = timezone.now() + timedelta(seconds=seconds)
    PendingCall.objects.filter(pk=ticket.pk).update(due_at=due)
    ticket.refresh_from_db()
    return ticket, due.timestamp()


async def _row_frame(comm, ticket: PendingCall, within: float) -> str:
    """The next frame that carries the ticket's row (others skipped)."""
    deadline = time.monotonic() + within
    while (left := deadline - time.monotonic()) > 0:
        html = await comm.receive_from(timeout=left)
        if f'id="pending-call-{ticket.pk}"' in html:
            return html
    raise AssertionError(f"no row of ticket #{ticket.pk}")


async def test_rows_on_the_page_turn_past_due_each_at_its_due_time(demo):
    """Before: nothing was pushed at a due time; the row said "due in 0 minutes" until the sweep expired the
    ticket or a reload. Now each row, at its own due time (one timer, set again for the next)."""
    first, first_due = await _due_in(AHEAD)
    second, second_due = await _due_in(AHEAD + 1.5)
    comm = await connect("/ws/approvals/", demo["approver"])
    html = await _row_frame(comm, first, AHEAD + 3)
    assert time.time() >= first_due, "not before the due time"
    assert PAST_DUE in html and 'hx-swap-oob="outerHTML"' in html, html
    html = await _row_frame(comm, second, 4)
    assert time.time() >= second_due
    assert PAST_DUE in html, html
    assert f'id="pending-call-{first.pk}"' not in html  # each row once
    assert await comm.receive_nothing(timeout=0.5)
    await comm.disconnect()


async def test_a_row_added_live_turns_past_due_at_its_due_time(demo):
    """A ticket that arrives while the inbox is open: its row (added at the top of page one) counts down too."""
    comm = await connect("/ws/approvals/", demo["approver"])
    ticket, due = await _due_in(AHEAD)
    await database_sync_to_async(notify_ticket_changed)(ticket_id=ticket.pk, session_pk=ticket.session_id, opened=True)
    html = await _row_frame(comm, ticket, 3)
    assert PAST_DUE not in html and "due in" in html, html
    html = await _row_frame(comm, ticket, AHEAD + 3)
    assert time.time() >= due
    assert PAST_DUE in html, html
    await comm.disconnect()


async def test_a_row_decided_before_its_due_time_is_not_pushed_then(demo):
    """Decided before its due time, the row says so, and nothing comes for it at the due time."""
    ticket, due = await _due_in(AHEAD)
    comm = await connect("/ws/approvals/", demo["approver"])
    await database_sync_to_async(services.ticket_reject)(ticket=ticket, actor=demo["approver"], reason="no")
    html = await _row_frame(comm, ticket, 3)
    assert "row-rejected" in html, html
    while time.time() < due + 1:
        if not await comm.receive_nothing(timeout=0.2):
            assert PAST_DUE not in await comm.receive_from(timeout=1)
    await comm.disconnect()
