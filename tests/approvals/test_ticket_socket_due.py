"""An open ticket page turns "past due" at the ticket's due time, over its socket: from then a decision is
refused (409, approvals.decision_plan.PastDue) whether or not the deadline sweep has expired it yet, so
the page stops offering Approve and Reject then, not at a reload or at the sweep."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from channels.db import database_sync_to_async
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from approvals import services
from approvals.models import PendingCall
from tests.approvals.policy_helpers import open_ticket
from tests.sockets import connect, ws_url

pytestmark = pytest.mark.django_db(transaction=True)
CARD = 'id="ticket-actions"'
AHEAD = 2.5  # seconds: the due time, a moment after the page opened (room for a busy machine's page load)


def _due_soon_page(user) -> tuple[PendingCall, str, float]:
    """A ticket due AHEAD seconds from now, its page as `user`'s browser opens it (Approve offered): the
    ticket, its socket's URL, and the due time (as time.time() counts)."""
    ticket = open_ticket()
    due = timezone.now() + timedelta(seconds=AHEAD)
    PendingCall.objects.filter(pk=ticket.pk).update(due_at=due)
    ticket.refresh_from_db()
    client = Client()
    client.force_login(user)
    html = client.get(reverse("approvals:ticket", args=[ticket.pk])).content.decode()
    assert ">Approve" in html and ">Reject</button>" in html
    return ticket, ws_url(html, f"/ws/tickets/{ticket.pk}/"), due.timestamp()


async def test_the_open_page_turns_past_due_at_the_due_time(demo):
    """Before: nothing was pushed at the due time; the page kept Approve and Reject until a reload or the
    sweep, and a click was refused 409 "past due". Now the socket pushes the card at the due time."""
    ticket, url, due = await database_sync_to_async(_due_soon_page)(demo["approver"])
    comm = await connect(url, demo["approver"])
    html = await comm.receive_from(timeout=AHEAD + 3)
    assert time.time() >= due, "not before the due time"
    assert CARD in html, html
    assert f"You cannot answer this ticket: Ticket #{ticket.pk} was due at " in html
    assert ">Approve" not in html and ">Reject</button>" not in html
    assert await comm.receive_nothing(timeout=1)  # once
    await comm.disconnect()


async def test_a_ticket_decided_before_its_due_time_pushes_nothing_then(demo):
    """The due time's push is for an open ticket: decided before it, the page shows the closed card and
    no "past due" comes at the due time."""
    ticket, url, due = await database_sync_to_async(_due_soon_page)(demo["approver"])
    comm = await connect(url, demo["approver"])
    await database_sync_to_async(services.ticket_reject)(ticket=ticket, actor=demo["approver"], reason="no")
    while CARD not in (html := await comm.receive_from(timeout=5)):
        pass
    assert "No actions: the ticket is rejected." in html
    while time.time() < due + 1:  # the decision's other pushes (the agent resumes; its notices are sent)
        if not await comm.receive_nothing(timeout=0.2):
            assert "was due at" not in await comm.receive_from(timeout=1)
    await comm.disconnect()
