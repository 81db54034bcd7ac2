"""In a real browser: an approver approves a 2-of-N ticket on its page and starts typing a reject reason;
the ticket page's socket does not push the actions card back at them (htmx sends the page's name with the
approve: approvals.events.on_page), not even after the socket reconnects (the page's JS says the card's
state then: static/js/app.js), and another approver's update still arrives live."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect

from approvals import services
from tests.approvals.policy_helpers import open_ticket

BIG = {"purpose": "conference", "amount": 2500.0}  # the demo's "Large reimbursements": finance, 2 of N
CARD = 'id="ticket-actions"'
REASON = "Reason (the agent receives it)"
# Before the page's scripts: the ticket socket's wrapper (to reconnect it as the extension does), its opens counted.
WATCH = """
window.__opens = 0;
document.addEventListener("htmx:wsOpen", function (e) {
  if (e.target.classList.contains("ticket-grid")) { window.__ticketSocket = e.detail.socketWrapper; window.__opens++; }
});
"""


def _watch_sockets(page: Any) -> tuple[list[str], list[str]]:
    """The ticket sockets' URLs as opened, and the frames they received with the actions card."""
    urls: list[str] = []
    cards: list[str] = []

    def opened(ws: Any) -> None:
        if "/ws/tickets/" in ws.url:
            urls.append(ws.url)
            ws.on("framereceived", lambda payload: cards.append(payload) if CARD in str(payload) else None)

    page.on("websocket", opened)
    page.add_init_script(WATCH)
    return urls, cards


def test_my_approval_on_the_page_leaves_the_reject_reason_i_type_alone(demo, login):
    ticket = open_ticket(args=BIG)
    page = login("approver2")
    urls, cards = _watch_sockets(page)
    page.goto(f"/tickets/{ticket.pk}/")
    page.wait_for_function("window.__opens === 1")
    assert "shows=answer" in urls[0], urls

    page.get_by_role("button", name="Approve (1 of 2)").click()
    expect(page.locator("#approval-counted")).to_contain_text("Your approval counts (1 of 2)")
    page.get_by_label(REASON).fill("The dates do not match")
    services.ticket_update(ticket=ticket, actor=demo["approver"], message="checking the dates")
    expect(page.locator("#ticket-history")).to_contain_text("checking the dates")  # live
    expect(page.get_by_label(REASON)).to_have_value("The dates do not match")
    assert cards == [], "the page's own approve swapped the card in; the socket did not push it again"

    # The socket reconnects (as after a server restart): it says the state the card shows now.
    page.evaluate("window.__ticketSocket.reconnect()")
    page.wait_for_function("window.__opens === 2")
    assert "shows=counted" in urls[-1], urls
    services.ticket_update(ticket=ticket, actor=demo["approver"], message="dates checked")
    expect(page.locator("#ticket-history")).to_contain_text("dates checked")
    expect(page.get_by_label(REASON)).to_have_value("The dates do not match")
    assert cards == []
