"""The ticket page's approve button counts the approvals live ("Approve (2 of 2)" once another
approver approved), over the ticket socket, without replacing the forms being filled in."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.test import Client
from django.urls import reverse

from approvals import services
from approvals.routing import websocket_urlpatterns
from tests.approvals.policy_helpers import open_ticket, person, team

pytestmark = pytest.mark.django_db(transaction=True)
app = URLRouter(websocket_urlpatterns)
BIG = {"purpose": "conference", "amount": 2500.0}  # the demo's "Large reimbursements": finance, 2 of N


async def _page(user, ticket, shows: str = "answer") -> WebsocketCommunicator:
    """The socket of a ticket page that shows its actions card in state `shows` (ticket_page.actions_shown)."""
    comm = WebsocketCommunicator(app, f"/ws/tickets/{ticket.pk}/?shows={shows}")
    comm.scope["user"] = user
    connected, _ = await comm.connect()
    assert connected
    return comm


async def _until(comm: WebsocketCommunicator, needle: str) -> str:
    """The first pushed frame that contains `needle` (the service publishes after commit)."""
    while True:
        html = await comm.receive_from(timeout=5)
        if needle in html:
            return html


async def test_another_approval_updates_the_approve_button_and_my_counted_line(demo):
    def setup():
        fay = person("fay", team("finance"), approver=True)
        ticket = open_ticket(args=BIG)
        ticket.required_approvals = 3
        ticket.save(update_fields=["required_approvals"])
        return fay, ticket

    fay, ticket = await database_sync_to_async(setup)()
    second, third = await _page(demo["approver2"], ticket), await _page(fay, ticket)
    await database_sync_to_async(services.ticket_approve)(ticket=ticket, actor=demo["approver"])
    html = await _until(second, 'id="ticket-status"')
    assert '<span id="approve-count" hx-swap-oob="true">(2 of 3)</span>' in html
    assert 'id="ticket-actions"' not in html, "the forms being filled in stay as they are"
    assert "(2 of 3)" in await _until(third, 'id="approve-count"')
    await database_sync_to_async(services.ticket_approve)(ticket=ticket, actor=demo["approver2"])
    html = await _until(second, 'id="ticket-actions"')  # their own approval, given elsewhere: the whole card
    assert 'id="approval-counted">Your approval counts (<span id="counted-count"' in html and ">2 of 3</span>)" in html
    assert "approve-count" not in html
    await database_sync_to_async(services.ticket_update)(ticket=ticket, actor=fay, message="checking")
    html = await _until(second, 'id="ticket-status"')  # then only the count again
    assert '<span id="counted-count" hx-swap-oob="true">2 of 3</span>' in html and 'id="ticket-actions"' not in html
    assert '<span id="approve-count" hx-swap-oob="true">(3 of 3)</span>' in await _until(third, "(3 of 3)")
    observer = await _page(demo["observer"], ticket, shows="refused")  # may not answer: no button, nothing to count
    await database_sync_to_async(services.ticket_update)(ticket=ticket, actor=fay, message="looking")
    html = await _until(observer, 'id="ticket-status"')
    assert "approve-count" not in html and "counted-count" not in html
    for comm in (second, third, observer):
        await comm.disconnect()


async def test_my_approval_given_elsewhere_takes_the_approve_button_off_my_open_page(demo):
    """Before: approver2's page, open while they approved on another device (or through the API), got
    only the counts and kept "Approve (2 of 2)" and "Copy approval link", each refused; a reload said
    "Your approval counts (1 of 2)". Now the push says it too. The socket is the one the page opens."""

    def page():
        ticket = open_ticket(args=BIG)
        client = Client()
        client.force_login(demo["approver2"])
        html = client.get(reverse("approvals:ticket", args=[ticket.pk])).content.decode()
        assert 'id="approve-count">(1 of 2)' in html and "Copy approval link" in html
        url = html.split('ws-connect="/ws/tickets/', 1)[1].split('"', 1)[0].replace("&amp;", "&")
        return ticket, "/ws/tickets/" + url

    ticket, url = await database_sync_to_async(page)()
    comm = WebsocketCommunicator(app, url)
    comm.scope["user"] = demo["approver2"]
    assert (await comm.connect())[0]

    def approve_through_the_api():
        client = Client()
        client.force_login(demo["approver2"])
        r = client.post(
            f"/api/pending-calls/{ticket.pk}/approve", {"argsHash": ticket.args_hash}, content_type="application/json"
        )
        assert r.status_code == 201, r.content

    await database_sync_to_async(approve_through_the_api)()
    html = await _until(comm, 'id="ticket-actions"')
    assert 'Your approval counts (<span id="counted-count"' in html and ">1 of 2</span>)" in html
    assert "approve-count" not in html and "Copy approval link" not in html and ">Reject</button>" in html
    await comm.disconnect()
