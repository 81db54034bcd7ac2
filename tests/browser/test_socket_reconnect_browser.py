"""In a real browser: a ticket page whose socket reconnects (a server restart, a lost connection: htmx's ws
extension opens the URL again) does not show the conversation's events twice. The socket's `after=` said
the last event at page load, so its catch-up re-appended every event that had arrived live since; the
page's JS now says the newest event the page shows (static/js/app.js)."""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import expect

from agents_app import services as conversations
from agents_app.models import AdkSession, Turn
from approvals import services
from approvals.models import PendingCall
from tests.approvals.policy_helpers import open_ticket
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


def test_a_ticket_page_back_from_a_lost_connection_shows_what_changed_and_sends_nothing_twice(demo, login):
    """Its socket away (held here, as a lost connection holds it) while the agent started working: back, the
    page says "agent working…", not "idle" (before: the activity is pushed only when the ticket changes); and
    what the page got live before (an update) is not sent again: the socket is told the change the page shows
    (changed=, static/js/app.js), not the page load's (before: the status, history and arguments every time)."""
    ticket = open_ticket(args={"purpose": "taxi", "amount": 300.0})
    page = login("approver")
    held: list[Any] = []
    frames: list[str] = []
    frames_of: dict[str, bool] = {}

    def route(ws: Any) -> None:  # the first connection at once, a later one held until released
        if frames_of.get("hold"):
            held.append(ws)
            return
        server = ws.connect_to_server()
        server.on_message(lambda message: (frames.append(str(message)), ws.send(message)))

    page.route_web_socket(lambda url: "/ws/tickets/" in url, route)
    page.add_init_script(OPENS)
    page.goto(f"/tickets/{ticket.pk}/")
    page.wait_for_function("window.__opens === 1")
    services.ticket_update(ticket=ticket, actor=demo["approver2"], message="checking the receipts")
    expect(page.locator("#ticket-history")).to_contain_text("checking the receipts")  # live
    running = Turn.objects.filter(session_id=ticket.session_id, status__in=["queued", "running"])
    wait_for(lambda: not running.exists(), timeout=20, what="the agent's turn for the update")
    expect(page.locator("#session-activity")).to_have_text("waiting for a person")

    frames_of["hold"] = True
    page.evaluate("window.__ticketSocket.reconnect()")  # the connection lost: a new one, held
    for _ in range(100):
        if held:
            break
        page.wait_for_timeout(50)
    assert held, "the page's new socket"
    AdkSession.objects.filter(pk=ticket.session_id).update(status="running")  # the agent works meanwhile (as if)
    sent = len(frames)
    server = held[0].connect_to_server()
    server.on_message(lambda message: (frames.append(str(message)), held[0].send(message)))
    page.wait_for_function("window.__opens === 2")
    expect(page.locator("#session-activity")).to_have_text("agent working…")
    page.wait_for_timeout(500)
    assert not [f for f in frames[sent:] if 'id="ticket-history"' in f], frames[sent:]
    expect(page.locator("#ticket-history li", has_text="checking the receipts")).to_have_count(1)
    AdkSession.objects.filter(pk=ticket.session_id).update(status="waiting")  # as its turns and ticket say
