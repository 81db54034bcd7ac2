"""The approvals sockets: who may connect, and what each pushed fragment says."""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser

from agents_app.models import StoredEvent
from approvals.consumers import REFUSED
from approvals.events import notify_ticket_changed
from approvals.routing import websocket_urlpatterns
from tests.approvals_factories import session_for, ticket

pytestmark = pytest.mark.django_db(transaction=True)
app = URLRouter(websocket_urlpatterns)


async def connect(path: str, user) -> tuple[WebsocketCommunicator, bool]:
    communicator = WebsocketCommunicator(app, path)
    communicator.scope["user"] = user
    connected, code = await communicator.connect()
    return communicator, connected


async def changed(call, opened: bool = False) -> None:
    """What a decision or the session store publishes after commit (approvals.events)."""
    await database_sync_to_async(notify_ticket_changed)(ticket_id=call.pk, session_pk=call.session_id, opened=opened)


async def session_send(session_pk: int, message: dict) -> None:
    await get_channel_layer().group_send(f"session-{session_pk}", message)


make_ticket = database_sync_to_async(ticket)


# -- the inbox socket ----------------------------------------------------------------------------
async def test_anonymous_socket_is_refused_through_the_real_stack(demo):
    from adkweb.asgi import application

    communicator = WebsocketCommunicator(application, "/ws/approvals/", headers=[(b"origin", b"http://testserver")])
    connected, code = await communicator.connect()
    assert not connected and code == REFUSED


@pytest.mark.parametrize("username", ["requester", "observer"])
async def test_non_approver_inbox_socket_is_refused(demo, username):
    _, connected = await connect("/ws/approvals/", demo[username])
    assert not connected


async def test_new_ticket_is_pushed_to_the_top_of_page_one_with_the_count(demo):
    communicator, connected = await connect("/ws/approvals/", demo["approver"])
    assert connected
    call = await make_ticket()
    await changed(call)
    rows, counts = [await communicator.receive_from() for _ in range(2)]
    # Table markup travels alone in its frame (body-mode parsing would drop <tr>/<tbody> tags); the
    # counts and the line that goes with the first row share the next one.
    assert (
        rows.startswith('<tbody id="inbox-rows" hx-swap-oob="afterbegin">') and f'id="pending-call-{call.pk}"' in rows
    )
    assert "meals · $200.00" in rows
    assert counts == (
        '<span id="nav-open-count" class="badge" title="open tickets" hx-swap-oob="true">1</span>'
        '<span id="inbox-total" hx-swap-oob="true">1 ticket</span>'
        '<p id="inbox-empty" hx-swap-oob="delete"></p>'
    )
    assert await communicator.receive_nothing(timeout=0.1)
    await communicator.disconnect()


async def test_decided_ticket_changes_in_place_and_the_count_drops(demo):
    call = await make_ticket()
    communicator, _ = await connect("/ws/approvals/", demo["approver"])
    call.status, call.closed_by = "approved", demo["approver"]
    await database_sync_to_async(call.save)()
    await changed(call)
    html = await communicator.receive_from()
    assert html.startswith(f'<tr id="pending-call-{call.pk}" class="row-approved closed" hx-swap-oob="outerHTML">')
    assert "by approver" in html
    counts = await communicator.receive_from()
    assert 'hx-swap-oob="true">0</span>' in counts and "0 tickets" in counts  # the open list's total
    await communicator.disconnect()


async def test_ticket_outside_the_filters_only_updates_the_count(demo):
    communicator, _ = await connect("/ws/approvals/?agent=transfer_agent", demo["approver"])
    call = await make_ticket()
    await changed(call)
    counts = await communicator.receive_from()
    assert "nav-open-count" in counts and "0 tickets" in counts
    assert await communicator.receive_nothing(timeout=0.1)
    await communicator.disconnect()


async def test_ticket_for_a_later_page_shows_a_notice(demo):
    session = await database_sync_to_async(session_for)()
    for _ in range(26):
        await make_ticket(session=session)
    communicator, _ = await connect("/ws/approvals/?page=2", demo["approver"])
    call = await make_ticket()
    await changed(call)
    counts = await communicator.receive_from()
    assert "nav-open-count" in counts and "27 tickets" in counts and "New tickets arrived on another page" in counts
    await communicator.disconnect()


async def test_nav_only_socket_sends_just_the_count(demo):
    communicator, _ = await connect("/ws/approvals/?nav=1", demo["admin"])
    await changed(await make_ticket())
    html = await communicator.receive_from()
    assert html.startswith('<span id="nav-open-count"') and "pending-call" not in html
    await communicator.disconnect()


# -- the ticket socket ---------------------------------------------------------------------------
async def test_ticket_socket_refuses_anonymous_unknown_and_other_users_tickets(demo):
    call = await make_ticket(session=await database_sync_to_async(session_for)(user_id="observer"))
    assert not (await connect(f"/ws/tickets/{call.pk}/", AnonymousUser()))[1]
    assert not (await connect(f"/ws/tickets/{call.pk}/", demo["requester"]))[1]
    assert not (await connect("/ws/tickets/999999/", demo["approver"]))[1]


async def test_ticket_socket_pushes_status_history_and_removes_actions_when_closed(demo):
    call = await make_ticket()
    communicator, connected = await connect(f"/ws/tickets/{call.pk}/", demo["requester"])
    assert connected
    call.status, call.closed_by = "rejected", demo["approver"]
    await database_sync_to_async(call.save)()
    await session_send(call.session_id, {"type": "ticket.changed", "ticket_id": call.pk, "session_pk": call.session_id})
    html = await communicator.receive_from()
    assert '<section id="ticket-status"' in html and "Rejected by <strong>approver</strong>" in html
    assert '<section id="ticket-actions"' in html and "No actions" in html and '<section id="ticket-history"' in html
    assert "nav-open-count" not in html  # the requester is not an approver
    await communicator.disconnect()


async def test_ticket_socket_updates_other_tickets_cards_only_ignores_partials_and_appends_events(demo):
    call = await make_ticket()
    other = await make_ticket(session=call.session)
    communicator, _ = await connect(f"/ws/tickets/{call.pk}/", demo["approver"])
    await session_send(
        call.session_id, {"type": "ticket.changed", "ticket_id": other.pk, "session_pk": call.session_id}
    )
    html = await communicator.receive_from()
    assert f'id="conv-ticket-{other.pk}"' in html and "ticket-status" not in html and "nav-open-count" in html
    await session_send(
        call.session_id,
        {
            "type": "session.partial",
            "session_pk": call.session_id,
            "event_id": "e",
            "author": "reimbursement_agent",
            "text": "Do",
            "turn_id": 1,
        },
    )
    assert await communicator.receive_nothing(timeout=0.2)
    event = await database_sync_to_async(StoredEvent.objects.create)(
        session=call.session,
        event_id="ev-1",
        author="reimbursement_agent",
        timestamp=1.0,
        data={
            "author": "reimbursement_agent",
            "content": {"role": "model", "parts": [{"text": "Done: I reimbursed <b>$200.00</b>."}]},
        },
    )
    await session_send(call.session_id, {"type": "session.event", "session_pk": call.session_id, "event_pk": event.pk})
    html = await communicator.receive_from()
    assert '<div id="conversation-events" hx-swap-oob="beforeend">' in html
    assert "Done: I reimbursed &lt;b&gt;$200.00&lt;/b&gt;." in html
    # The end sent ahead of the turn's DONE, for API followers (agents_app.events.anotify_turn_ended):
    # nothing on the page; the DONE's own turn.finished follows.
    ahead = {"type": "turn.finished", "session_pk": call.session_id, "turn_id": 1, "status": "done", "ahead": True}
    await session_send(call.session_id, {**ahead, "revision": 3})
    assert await communicator.receive_nothing(timeout=0.2)
    await session_send(
        call.session_id, {"type": "turn.finished", "session_pk": call.session_id, "turn_id": 1, "status": "done"}
    )
    activity = await communicator.receive_from()
    assert (
        '<span id="session-activity" class="chip act-waiting" hx-swap-oob="true" data-activity="waiting">' in activity
    )
    await session_send(call.session_id, {"type": "session.status", "session_pk": call.session_id})
    assert "session-activity" in await communicator.receive_from()
    await communicator.disconnect()
    await asyncio.sleep(0)


async def test_ticket_socket_catches_up_after_the_page_and_skips_events_already_sent(demo):
    call = await make_ticket()
    create = database_sync_to_async(StoredEvent.objects.create)
    first = await create(
        session=call.session,
        event_id="ev-a",
        author="user",
        timestamp=1.0,
        data={"author": "user", "content": {"role": "user", "parts": [{"text": "first"}]}},
    )
    second = await create(
        session=call.session,
        event_id="ev-b",
        author="reimbursement_agent",
        timestamp=2.0,
        data={"author": "reimbursement_agent", "content": {"role": "model", "parts": [{"text": "second"}]}},
    )
    communicator, _ = await connect(f"/ws/tickets/{call.pk}/?after={first.pk}", demo["approver"])
    html = await communicator.receive_from()
    assert "second" in html and "first" not in html
    await session_send(call.session_id, {"type": "session.event", "session_pk": call.session_id, "event_pk": second.pk})
    assert await communicator.receive_nothing(timeout=0.2)
    await communicator.disconnect()
