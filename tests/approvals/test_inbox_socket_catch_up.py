"""An inbox page says when it was rendered (changed=, microseconds); its socket, once joined, pushes the rows
of its page that changed since (and the counts), so a decision made in another tab while the page loaded, or
while its socket was away, shows without waiting for the ticket's next change."""

from __future__ import annotations

from datetime import timedelta

import pytest
from channels.db import database_sync_to_async
from django.utils import timezone

from approvals import services
from approvals.models import PendingCall
from tests.approvals.policy_helpers import open_ticket
from tests.sockets import connect, page_socket_url

pytestmark = pytest.mark.django_db(transaction=True)
BIG = {"purpose": "conference", "amount": 2500.0}  # the demo's "Large reimbursements": finance, 2 of N


@database_sync_to_async
def _quiet_ticket() -> PendingCall:
    """A 2-of-N ticket last changed a minute ago."""
    ticket = open_ticket(args=BIG)
    PendingCall.objects.filter(pk=ticket.pk).update(updated_at=timezone.now() - timedelta(minutes=1))
    return ticket


async def _inbox_socket_url(user) -> str:
    return await database_sync_to_async(page_socket_url)(user, "/", "/ws/approvals/")


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


async def test_a_ticket_opened_after_the_inbox_was_rendered_is_added_when_its_socket_connects(demo):
    """Before: the socket read its page at connect, the new ticket on it, so it took the ticket for one the
    page showed: it pushed nothing then, and only ever replaced that row (which the page did not have). The
    approver never saw the ticket waiting for them until they reloaded. Now it comes as a new row, on top,
    and the counts the page says (open=, total=) with it."""
    await _quiet_ticket()
    url = await _inbox_socket_url(demo["approver2"])
    assert "open=1" in url and "total=1" in url, url
    new = await database_sync_to_async(open_ticket)(args={"purpose": "taxi", "amount": 300.0})
    comm = await connect(url, demo["approver2"])
    row = await comm.receive_from(timeout=5)
    assert row.startswith('<tbody id="inbox-rows" hx-swap-oob="afterbegin">'), row
    assert f'id="pending-call-{new.pk}"' in row, row
    counts = await comm.receive_from(timeout=5)
    assert '<span id="nav-open-count"' in counts and ">2<" in counts and "2 tickets" in counts, counts
    assert 'id="inbox-empty"' in counts  # its "Nothing here" line goes, if the page had one
    assert await comm.receive_nothing(timeout=0.2)
    await comm.disconnect()


async def test_the_nav_badge_of_a_page_rendered_before_a_new_ticket_is_counted_again_at_connect(demo):
    """Every other page of an approver: its badge's socket (nav=1) says the count the page shows."""
    await _quiet_ticket()
    url = await database_sync_to_async(page_socket_url)(demo["approver2"], "/sessions/", "/ws/approvals/?nav=1")
    assert url.endswith("open=1"), url
    comm = await connect(url, demo["approver2"])
    assert await comm.receive_nothing(timeout=0.3)  # the count it shows: nothing
    await comm.disconnect()
    await database_sync_to_async(open_ticket)(args={"purpose": "taxi", "amount": 300.0})
    comm = await connect(url, demo["approver2"])
    badge = await comm.receive_from(timeout=5)
    assert 'id="nav-open-count"' in badge and ">2<" in badge, badge
    await comm.disconnect()
