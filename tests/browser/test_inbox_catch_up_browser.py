"""In a real browser: an approver's inbox whose socket connects after a ticket was opened and another decided
(the page loading, its socket held here as a slow network holds it) shows both as they are: the new ticket's
row on top, the decided one's in place, the badge and the total counted again; and a reconnect (a server
restart, a lost connection) shows no row twice (approvals.consumers' catch-up, static/js/app.js)."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect

from approvals import events, services
from tests.approvals.policy_helpers import open_ticket

BIG = {"purpose": "conference", "amount": 2500.0}  # the demo's "Large reimbursements": finance, 2 of N
WATCH = """
window.__opens = 0;
document.addEventListener("htmx:wsOpen", function (e) {
  if (e.target.id === "inbox-results") { window.__inboxSocket = e.detail.socketWrapper; window.__opens++; }
});
"""


def test_an_inbox_whose_socket_connects_late_shows_the_ticket_opened_meanwhile(demo, login):
    quorum = open_ticket(args=BIG)
    page = login("approver")
    routes: list[Any] = []  # the inbox's socket, held (not yet connected to the server) while none is

    def route(ws: Any) -> None:
        ws.connect_to_server() if routes else routes.append(ws)

    page.route_web_socket(lambda url: "/ws/approvals/" in url, route)
    page.add_init_script(WATCH)
    page.goto("/")
    row = page.locator(f"#pending-call-{quorum.pk}")
    expect(row).to_contain_text("0 of 2 approvals")
    expect(page.locator("#nav-open-count")).to_have_text("1")
    for _ in range(100):
        if routes:
            break
        page.wait_for_timeout(50)
    assert routes, "the inbox's socket"

    services.ticket_approve(ticket=quorum, actor=demo["approver2"])  # in another tab: 1 of 2
    new = open_ticket(args={"purpose": "taxi", "amount": 300.0})  # an agent asks
    routes[0].connect_to_server()

    added = page.locator(f"#pending-call-{new.pk}")
    expect(added).to_have_count(1)
    expect(page.locator("#inbox-rows tr").first).to_have_id(f"pending-call-{new.pk}")  # newest on top
    expect(row).to_contain_text("1 of 2 approvals")
    expect(row).to_have_count(1)
    expect(page.locator("#nav-open-count")).to_have_text("2")
    expect(page.locator("#inbox-total")).to_have_text("2 tickets")

    page.evaluate("window.__inboxSocket.reconnect()")  # as the extension does after a lost connection
    page.wait_for_function("window.__opens === 2")
    # (Not data-ws-open: the old socket's close, after reconnect() opened the new one, may take it off.)
    later = open_ticket(args={"purpose": "bus", "amount": 150.0})  # at connect or live: by the new socket
    events.notify_ticket_changed(ticket_id=later.pk, session_pk=later.session_id, opened=True)
    expect(page.locator(f"#pending-call-{later.pk}")).to_have_count(1)
    ids = page.eval_on_selector_all("#inbox-rows tr[id]", "rows => rows.map(r => r.id)")
    assert ids == [f"pending-call-{t.pk}" for t in (later, new, quorum)], ids
