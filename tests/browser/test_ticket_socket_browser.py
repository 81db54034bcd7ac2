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


def test_a_card_pushed_before_an_answer_sent_back_to_fix_leaves_the_reason_typed_after_it(demo, login):
    """approver2 approved in another tab; the page's socket push of "Your approval counts" is on its way (held
    here, as a slow socket holds it) when they send an update with broken JSON on this page: sent back to fix
    (400), its answer swaps in the card as it is now ("Your approval counts"), and they type a reject reason.
    Then the push arrives. Before: it swapped the same card in again and the reason was gone (6e10b69 left a
    push queued before such an answer to be sent once). Now a pushed card in the state the page's card shows
    already is not swapped in (static/js/app.js): the reason stays. (A 403 answer is not swapped in at all.)"""
    ticket = open_ticket(args=BIG)
    page = login("approver2")
    held: list[Any] = []
    socket: dict[str, Any] = {}

    def route(ws: Any) -> None:  # the ticket socket through Playwright: its frames to the page held while asked
        server = ws.connect_to_server()
        socket.update(page=ws, hold=False)
        server.on_message(lambda message: held.append(message) if socket["hold"] else ws.send(message))

    page.route_web_socket(lambda url: "/ws/tickets/" in url, route)
    page.add_init_script(
        "window.__handled = 0; document.addEventListener('htmx:wsAfterMessage', function () { window.__handled++; });"
    )
    page.goto(f"/tickets/{ticket.pk}/")
    expect(page.locator(".ticket-grid[data-ws-open]")).to_have_count(1)
    socket["hold"] = True
    services.ticket_approve(ticket=ticket, actor=demo["approver2"])  # another tab: 1 of 2
    for _ in range(100):  # its push, on its way
        if any(CARD in str(m) for m in held):
            break
        page.wait_for_timeout(100)
    assert any(CARD in str(m) for m in held), held

    page.get_by_label("Update message").fill("checking")
    page.locator("summary", has_text="Extra JSON (optional)").click()
    page.get_by_label("Extra", exact=True).fill("{not json")
    page.get_by_role("button", name="Send update").click()
    expect(page.locator("#approval-counted")).to_contain_text("Your approval counts (1 of 2)")  # the 400's card
    page.get_by_label(REASON).fill("The dates do not match")
    handled = page.evaluate("window.__handled")
    socket["hold"] = False
    for message in held:
        socket["page"].send(message)
    page.wait_for_function(f"window.__handled >= {handled + len(held)}")  # the held push, swapped or not
    expect(page.get_by_label(REASON)).to_have_value("The dates do not match")
