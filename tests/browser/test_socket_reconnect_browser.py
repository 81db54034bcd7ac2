"""In a real browser: a ticket page whose socket reconnects (a server restart, a lost connection: htmx's ws
extension opens the URL again) does not show the conversation's events twice. The socket's `after=` said
the last event at page load, so its catch-up re-appended every event that had arrived live since; the
page's JS now says the newest event the page shows (static/js/app.js)."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from agents_app import services as conversations
from approvals import services
from approvals.models import PendingCall
from tests.conftest import wait_for

OPENS = """
window.__opens = 0;
document.addEventListener("htmx:wsOpen", function (e) {
  if (e.target.classList.contains("ticket-grid")) { window.__ticketSocket = e.detail.socketWrapper; window.__opens++; }
});
"""
PROGRESS = "Update on your reimbursement of $200.00 for meals: checking the receipts"


def test_a_reconnected_ticket_page_shows_each_event_once(demo, worker, login):
    session = conversations.session_create(app_name="reimbursement_agent", user_id="requester")
    conversations.message_send(session=session, text="Please reimburse 200$ for meals", actor=demo["requester"])
    wait_for(lambda: PendingCall.objects.filter(session=session).exists(), timeout=20, what="the ticket")
    ticket = PendingCall.objects.get(session=session)
    page = login("approver")
    urls: list[str] = []
    page.on("websocket", lambda ws: urls.append(ws.url) if "/ws/tickets/" in ws.url else None)
    page.add_init_script(OPENS)
    page.goto(f"/tickets/{ticket.pk}/")
    page.wait_for_function("window.__opens === 1")

    services.ticket_update(ticket=ticket, actor=demo["approver2"], message="checking the receipts")
    progress = page.locator("#conversation-events article", has_text=PROGRESS)
    expect(progress).to_have_count(1)  # arrived live, after the page loaded

    page.evaluate("window.__ticketSocket.reconnect()")  # as the extension does after a lost connection
    page.wait_for_function("window.__opens === 2")
    after = [int(m.group(1)) for u in urls if (m := re.search(r"[?&]after=(\d+)", u))]
    assert len(after) == 2 and after[1] > after[0], urls  # the newest event shown, not the page load's
    services.ticket_update(ticket=ticket, actor=demo["approver2"], message="receipts fine")
    expect(page.locator("#ticket-history")).to_contain_text("receipts fine")  # the socket is live again
    expect(progress).to_have_count(1)
    ids = page.eval_on_selector_all("#conversation-events article[id]", "els => els.map(e => e.id)")
    assert len(ids) == len(set(ids)), ids
