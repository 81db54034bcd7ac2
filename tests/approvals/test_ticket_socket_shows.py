"""What the ticket page's socket knows of the actions card the page shows (ticket_page.actions_shown): it
pushes the card only when that state changes for its viewer, never again for an answer the page's own
htmx request already swapped in (which would wipe a reject reason being typed), and takes a socket
that does not say what its page shows as showing the state of the ticket when it connected."""

from __future__ import annotations

import json
import re

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client
from django.urls import reverse

from approvals import services
from approvals.events import notify_ticket_changed
from tests.approvals.policy_helpers import open_ticket
from tests.sockets import connect, ws_url

pytestmark = pytest.mark.django_db(transaction=True)
BIG = {"purpose": "conference", "amount": 2500.0}  # the demo's "Large reimbursements": finance, 2 of N
CARD = 'id="ticket-actions"'


def _open_page(user, ticket) -> tuple[Client, str, dict[str, str]]:
    """The ticket page as `user`'s browser opens it: its socket's URL and the headers its htmx requests send."""
    client = Client()
    client.force_login(user)
    html = client.get(reverse("approvals:ticket", args=[ticket.pk])).content.decode()
    url = ws_url(html, f"/ws/tickets/{ticket.pk}/")
    headers: dict[str, str] = {}  # htmx merges them from the body down
    for attribute in html.split("hx-headers='")[1:]:
        headers.update(json.loads(attribute.split("'", 1)[0]))
    return client, url, headers


def _approve_on_the_page(client: Client, ticket, headers: dict[str, str]) -> str:
    """Approve as the page's form does (htmx, with the page's headers): the panel it answers with."""
    extra = {f"HTTP_{k.upper().replace('-', '_')}": v for k, v in headers.items()}
    r = client.post(reverse("approvals:ticket-act", args=[ticket.pk, "approve"]), {}, HTTP_HX_REQUEST="true", **extra)
    assert r.status_code == 200, r.content
    return r.content.decode()


async def _frames_until(comm: WebsocketCommunicator, needle: str) -> list[str]:
    """The frames pushed up to and including the first that contains `needle`."""
    frames = []
    while True:
        frames.append(await comm.receive_from(timeout=5))
        if needle in frames[-1]:
            return frames


async def test_my_approval_on_the_page_itself_sends_no_second_card_over_its_socket(demo):
    """Before: the page's own htmx approve swapped in "Your approval counts (1 of 2)", then the socket,
    told at connect that the page showed the approve button, pushed the same card again (at once, or
    as late as the socket got to it): a reject reason typed meanwhile was wiped. Now the decision's
    fan-out says which page made it, and that page's socket leaves its card alone."""
    ticket = await database_sync_to_async(open_ticket)(args=BIG)
    client, url, headers = await database_sync_to_async(_open_page)(demo["approver2"], ticket)
    comm = await connect(url, demo["approver2"])

    html = await database_sync_to_async(_approve_on_the_page)(client, ticket, headers)
    assert 'id="approval-counted">Your approval counts' in html  # what the page now shows
    await database_sync_to_async(services.ticket_update)(ticket=ticket, actor=demo["approver"], message="checking")
    frames = await _frames_until(comm, "checking")
    assert not [f for f in frames if CARD in f], "the page's own answer already swapped the card in"

    # The same viewer's page, while the ticket closes elsewhere (rejected by another approver): the card.
    await database_sync_to_async(services.ticket_reject)(ticket=ticket, actor=demo["approver"], reason="no")
    html = (await _frames_until(comm, CARD))[-1]
    assert "No actions: the ticket is rejected." in html
    await comm.disconnect()


async def test_my_other_tab_still_gets_the_card_for_an_approval_made_on_this_one(demo):
    """A page's name is its own: the approval made on one of approver2's pages still sends the card to
    their other page (another tab, its own socket), as an approval given elsewhere does."""
    ticket = await database_sync_to_async(open_ticket)(args=BIG)
    client, _, headers = await database_sync_to_async(_open_page)(demo["approver2"], ticket)
    _, other_tab, _ = await database_sync_to_async(_open_page)(demo["approver2"], ticket)
    comm = await connect(other_tab, demo["approver2"])

    await database_sync_to_async(_approve_on_the_page)(client, ticket, headers)
    html = (await _frames_until(comm, CARD))[-1]
    assert 'id="approval-counted">Your approval counts' in html and "approve-count" not in html
    await comm.disconnect()


@pytest.mark.parametrize("query", ["", "?after=0", "?shows=", "?shows=something-else"])
async def test_a_socket_that_does_not_say_what_its_page_shows_gets_the_card_only_when_it_changes(demo, query):
    """Chosen: a socket that does not say (or names no state the card has) is taken as showing the card
    of the ticket as it was when the socket connected. Before, its first push re-sent the card whatever
    had changed (another approver's update wiped the forms being filled in). A change of what this
    viewer may do after it connected still sends the card."""
    ticket = await database_sync_to_async(open_ticket)(args=BIG)
    comm = await connect(f"/ws/tickets/{ticket.pk}/{query}", demo["approver2"])
    await database_sync_to_async(services.ticket_update)(ticket=ticket, actor=demo["approver"], message="checking")
    frames = await _frames_until(comm, "checking")
    assert not [f for f in frames if CARD in f], "nothing changed for this viewer: no card"
    await database_sync_to_async(services.ticket_approve)(ticket=ticket, actor=demo["approver2"])
    html = (await _frames_until(comm, CARD))[-1]
    assert 'id="approval-counted">Your approval counts' in html
    await comm.disconnect()


def _act_on_the_page(client: Client, ticket, headers: dict[str, str], action: str, data: dict) -> tuple[int, str]:
    """An action as the page's form sends it (htmx, with the page's headers): the status and the panel."""
    extra = {f"HTTP_{k.upper().replace('-', '_')}": v for k, v in headers.items()}
    r = client.post(reverse("approvals:ticket-act", args=[ticket.pk, action]), data, HTTP_HX_REQUEST="true", **extra)
    return r.status_code, r.content.decode()


async def test_a_refused_approve_tells_the_socket_the_card_it_swapped_in(demo):
    """approver2's tab shows Approve; they approved in another tab before this tab's socket heard of it (its
    socket joined after: the page says shows=answer). Approve here is refused (403) and its answer swaps in
    "Your approval counts ... You may still reject it": they type a reason. Before: the socket still took
    the page as showing Approve, and the next change of the ticket (another approver's update) pushed the
    card again, wiping the reason. Now the refused answer tells the page's socket the card it shows."""
    ticket = await database_sync_to_async(open_ticket)(args=BIG)
    client, url, headers = await database_sync_to_async(_open_page)(demo["approver2"], ticket)
    other_tab, _, other_headers = await database_sync_to_async(_open_page)(demo["approver2"], ticket)
    await database_sync_to_async(_approve_on_the_page)(other_tab, ticket, other_headers)
    assert "shows=answer" in url
    # A page that does not say which change of the ticket it shows (changed=): a page that does is sent the
    # card at connect (test_a_page_rendered_before_my_approval_in_another_tab_gets_the_card_at_connect).
    url = re.sub(r"&changed=\d+", "", url)
    comm = await connect(url, demo["approver2"])

    status, html = await database_sync_to_async(_act_on_the_page)(client, ticket, headers, "approve", {})
    assert status == 403, html
    assert 'id="approval-counted">Your approval counts' in html  # the card the page now shows
    await database_sync_to_async(services.ticket_update)(ticket=ticket, actor=demo["approver"], message="checking")
    frames = await _frames_until(comm, "checking")
    assert not [f for f in frames if CARD in f], "the refused answer swapped this card in already"

    # A change of what approver2 may do still sends the card: the ticket closes elsewhere.
    await database_sync_to_async(services.ticket_reject)(ticket=ticket, actor=demo["approver"], reason="no")
    assert "No actions: the ticket is rejected." in (await _frames_until(comm, CARD))[-1]
    await comm.disconnect()


async def test_a_closed_tickets_card_is_not_sent_again_for_its_notices(demo):
    """Closed, the card says so once: the ticket's later changes (its notices' delivery status, shown on
    the page, announced as each is sent) push its status and history, not the same closed card again."""
    ticket = await database_sync_to_async(open_ticket)(args=BIG)
    comm = await connect(f"/ws/tickets/{ticket.pk}/?shows=answer", demo["approver2"])
    await database_sync_to_async(services.ticket_reject)(ticket=ticket, actor=demo["approver"], reason="no")
    assert "No actions: the ticket is rejected." in (await _frames_until(comm, CARD))[-1]
    while not await comm.receive_nothing(timeout=0.5):  # the rejection's other pushes
        await comm.receive_from()
    await database_sync_to_async(notify_ticket_changed)(ticket_id=ticket.pk, session_pk=ticket.session_id, inbox=False)
    frames = await _frames_until(comm, 'id="ticket-history"')
    assert not [f for f in frames if CARD in f], "the closed card again"
    await comm.disconnect()


async def test_a_page_whose_ticket_closed_before_its_socket_connected_gets_the_closed_card(demo):
    """The page rendered Approve; the ticket was rejected elsewhere before its socket joined (the page still
    loading, or its socket reconnecting after a restart: shows=answer, as the page says). Before: nothing was
    pushed, and the page offered Approve on a closed ticket until a click was refused. Now the card at once."""
    ticket = await database_sync_to_async(open_ticket)(args=BIG)
    _, url, _ = await database_sync_to_async(_open_page)(demo["approver2"], ticket)
    await database_sync_to_async(services.ticket_reject)(ticket=ticket, actor=demo["approver"], reason="no")
    assert "shows=answer" in url
    comm = await connect(url, demo["approver2"])
    assert "No actions: the ticket is rejected." in (await _frames_until(comm, CARD))[-1]
    await comm.disconnect()


async def test_a_page_rendered_before_my_approval_in_another_tab_gets_the_card_at_connect(demo):
    """approver2's page rendered Approve on a 2-of-N ticket; before its socket connected (the page loading,
    or its socket away), they approved in another tab: still open, 1 of 2. Before: the socket took the
    page's word (shows=answer) and the page offered Approve until something else changed. Now the page
    says which change of the ticket it read (changed=), and a socket that finds a later one pushes the
    ticket's parts at once: "Your approval counts", the count, the history."""
    ticket = await database_sync_to_async(open_ticket)(args=BIG)
    _, url, _ = await database_sync_to_async(_open_page)(demo["approver2"], ticket)
    other_tab, _, other_headers = await database_sync_to_async(_open_page)(demo["approver2"], ticket)
    await database_sync_to_async(_approve_on_the_page)(other_tab, ticket, other_headers)
    assert "shows=answer" in url and "&changed=" in url
    comm = await connect(url, demo["approver2"])
    html = "".join(await _frames_until(comm, CARD))
    assert 'id="approval-counted">Your approval counts' in html and 'id="ticket-history"' in html
    await comm.disconnect()

    # A page rendered after it (the ticket as it is): nothing at connect, as before.
    _, current, _ = await database_sync_to_async(_open_page)(demo["approver2"], ticket)
    assert "shows=counted" in current
    comm = await connect(current, demo["approver2"])
    assert await comm.receive_nothing(timeout=0.5)
    await comm.disconnect()


async def test_a_page_rendered_before_an_update_gets_the_ticket_as_it_is_at_connect_not_the_card(demo):
    """Another approver's update between the page's render and its socket: the history and status at connect;
    the card stays (nothing changed for this viewer: a form being filled in is left alone)."""
    ticket = await database_sync_to_async(open_ticket)(args=BIG)
    _, url, _ = await database_sync_to_async(_open_page)(demo["approver2"], ticket)
    await database_sync_to_async(services.ticket_update)(ticket=ticket, actor=demo["approver"], message="checking")
    comm = await connect(url, demo["approver2"])
    frames = await _frames_until(comm, "checking")
    assert not [f for f in frames if CARD in f]
    await comm.disconnect()
