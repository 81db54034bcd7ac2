"""`notify_ticket_changed` (approvals/events.py), sent as the services send it, renders on every
socket that shows the ticket: the inbox, the ticket page and its conversation."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from approvals import events
from tests.approvals_factories import ticket
from tests.sockets import connect

pytestmark = pytest.mark.django_db(transaction=True)


async def test_notify_ticket_changed_updates_the_inbox_the_ticket_page_and_the_conversation(demo):
    t = await sync_to_async(ticket)()
    inbox = await connect("/ws/approvals/", demo["approver"])
    page = await connect(f"/ws/tickets/{t.pk}/", demo["approver"])
    conversation = await connect(f"/ws/sessions/{t.session_id}/?after=0", demo["requester"])
    await conversation.receive_from()  # the status on connect

    await sync_to_async(events.notify_ticket_changed)(ticket_id=t.pk, session_pk=t.session_id)

    row, counts = [await inbox.receive_from() for _ in range(2)]
    assert counts == (
        '<span id="nav-open-count" class="badge" title="open tickets" hx-swap-oob="true">1</span>'
        '<span id="inbox-total" hx-swap-oob="true">1 ticket</span>'
    )
    assert row.startswith(f'<tr id="pending-call-{t.pk}"') and "meals · $200.00" in row
    html = await page.receive_from()
    assert f'id="conv-ticket-{t.pk}"' in html and 'id="ticket-status"' in html and "nav-open-count" in html
    card = await conversation.receive_from()
    assert card.strip().startswith(f'<div id="conv-ticket-{t.pk}"') and 'hx-swap-oob="true"' in card
    for comm in (inbox, page, conversation):
        await comm.disconnect()


async def test_a_ticket_page_only_change_reaches_its_pages_and_not_the_inboxes(demo):
    """inbox=False (e.g. its notification status changed): the ticket page shows the delivery line."""
    from notifications.models import Delivery, NotificationEvent

    t = await sync_to_async(ticket)()

    def delivered() -> None:
        event = NotificationEvent.objects.create(name="ticket.opened", ticket=t)
        Delivery.objects.create(
            event=event, ticket=t, channel="email", role="decider", recipient=demo["approver"], status="delivered"
        )

    await sync_to_async(delivered)()
    inbox = await connect("/ws/approvals/", demo["approver"])
    page = await connect(f"/ws/tickets/{t.pk}/", demo["approver"])
    await sync_to_async(events.notify_ticket_changed)(ticket_id=t.pk, session_pk=t.session_id, inbox=False)
    html = await page.receive_from()
    assert 'id="ticket-status"' in html and "emailed 1 approver" in html
    assert await inbox.receive_nothing(timeout=0.3)
    for comm in (inbox, page):
        await comm.disconnect()


def test_a_tools_initial_response_is_announced_to_the_ticket_pages_only(demo, monkeypatch):
    """The session store opens a ticket (inbox and pages), then the tool's initial response arrives:
    its page shows it, its inbox row and facts do not change, so the inboxes are not told."""
    from google.adk.events.event import Event
    from google.genai import types

    from agents_app.session_service import DjangoSessionService
    from approvals import fanout
    from approvals.models import PendingCall

    # Only what this test's thread sends: an earlier test's notification tasks may still be running on
    # the in-process worker, and they announce delivery status to their own tickets' pages.
    here = threading.get_ident()
    published: list[tuple[int, bool]] = []
    sent: list[dict] = []

    def publish(*, ticket_id: int, opened: bool = False, opened_as: Any = None) -> None:
        if threading.get_ident() == here:
            published.append((ticket_id, opened))

    def send(group: str, message: Any) -> None:
        if threading.get_ident() == here:
            sent.append(dict(message))

    monkeypatch.setattr(fanout, "publish_ticket", publish)
    monkeypatch.setattr(events, "group_send", send)
    service = DjangoSessionService()
    session = service.create_session_sync(app_name="reimbursement_agent", user_id="requester")
    call = types.FunctionCall(id="c1", name="ask_for_approval", args={"purpose": "meals", "amount": 20})
    service._store_event(
        session,
        Event(
            author="a",
            invocation_id="i",
            long_running_tool_ids={"c1"},
            content=types.Content(parts=[types.Part(function_call=call)]),
        ),
        None,
    )
    ticket = PendingCall.objects.get(call_id="c1")
    assert published == [(ticket.pk, True)]
    answer = types.FunctionResponse(id="c1", name="ask_for_approval", response={"status": "pending"})
    service._store_event(
        session,
        Event(author="a", invocation_id="i", content=types.Content(parts=[types.Part(function_response=answer)])),
        None,
    )
    assert PendingCall.objects.get(pk=ticket.pk).initial_response == {"status": "pending"}
    assert published == [(ticket.pk, True)]  # not again
    assert [m["type"] for m in sent] == ["ticket.changed", "ticket.changed"]  # its pages, both times
