"""An inbox page says when it was rendered (changed=, microseconds); its socket, once joined, pushes the rows
of its page that changed since (and the counts), so a decision made in another tab while the page loaded, or
while its socket was away, shows without waiting for the ticket's next change."""

from __future__ import annotations

from datetime import timedelta

import pytest
from channels.db import database_sync_to_async
from django.test import Client
from django.utils import timezone

from approvals import services
from approvals.models import PendingCall
from tests.approvals.policy_helpers import open_ticket
from tests.sockets import connect, ws_url

pytestmark = pytest.mark.django_db(transaction=True)
BIG = {"purpose": "conference", "amount": 2500.0}  # the demo's "Large reimbursements": finance, 2 of N


@database_sync_to_async
def _quiet_ticket() -> PendingCall:
    """A 2-of-N ticket last changed a minute ago."""
    ticket = open_ticket(args=BIG)
    PendingCall.objects.filter(pk=ticket.pk).update(updated_at=timezone.now() - timedelta(minutes=1))
    return ticket


@database_sync_to_async
def _inbox_socket_url(user) -> str:
    client = Client()
    client.force_login(user)
    return ws_url(client.get("/").content.decode(), "/ws/approvals/")


async def test_an_inbox_rendered_before_a_decision_elsewhere_gets_that_row_when_its_socket_connects(demo):
    """Before: the socket read the page's rows at connect and pushed nothing: the row said "0 of 2" (or
    open, for a ticket closed meanwhile) until the ticket changed again or the page was reloaded."""
    ticket = await _quiet_ticket()
    url = await _inbox_socket_url(demo["approver2"])
    assert "changed=" in url
    await database_sync_to_async(services.ticket_approve)(ticket=ticket, actor=demo["approver"])
    comm = await connect(url, demo["approver2"])
    row = await comm.receive_from(timeout=5)
    assert f'id="pending-call-{ticket.pk}"' in row and "1 of 2 approvals" in row, row
    assert 'id="nav-open-count"' in await comm.receive_from(timeout=5)
    await comm.disconnect()


async def test_an_inbox_whose_rows_did_not_change_since_it_was_rendered_gets_nothing_at_connect(demo):
    await _quiet_ticket()
    comm = await connect(await _inbox_socket_url(demo["approver2"]), demo["approver2"])
    assert await comm.receive_nothing(timeout=0.5)
    await comm.disconnect()
