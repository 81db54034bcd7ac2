"""In a real browser: a live element's "live" mark (`data-ws-open`: the dot the page shows, and what tests
wait on) stays while its socket is open, when the socket it replaced finishes closing only after the new one
opened. htmx's ws extension, asked to reconnect, closes the old socket and opens a new one at once; the old
one's close completes when the server answers it, which under load can come after the new one's open: its
`htmx:wsClose` took the mark off a live element (static/js/app.js now ignores a close of a socket that is
no longer the element's)."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect

from tests.approvals.policy_helpers import open_ticket

WATCH = """
window.__opens = 0;
document.addEventListener("htmx:wsOpen", function (e) {
  if (e.target.id === "inbox-results") { window.__inboxSocket = e.detail.socketWrapper; window.__opens++; }
});
window.__closes = 0;
document.addEventListener("htmx:wsClose", function (e) { if (e.target.id === "inbox-results") window.__closes++; });
"""


def test_the_live_mark_stays_when_the_replaced_socket_closes_after_the_new_one_opened(demo, login):
    open_ticket(args={"purpose": "taxi", "amount": 300.0})
    page = login("approver")
    routes: list[Any] = []
    closing: list[Any] = []

    def route(ws: Any) -> None:
        server = ws.connect_to_server()
        if not routes:  # the first socket: its close (the page's) is held, as a slow server holds it
            ws.on_close(lambda code, reason: closing.append((ws, server, code)))
        routes.append(ws)

    page.route_web_socket(lambda url: "/ws/approvals/" in url, route)
    page.add_init_script(WATCH)
    page.goto("/")
    page.wait_for_function("window.__opens === 1")
    results = page.locator("#inbox-results[data-ws-open]")
    expect(results).to_have_count(1)

    page.evaluate("window.__inboxSocket.reconnect()")
    page.wait_for_function("window.__opens === 2")  # the new socket is open, the old one still closing
    assert closing, "the page closed its first socket"
    expect(results).to_have_count(1)
    ws, server, code = closing[0]
    server.close()
    ws.close(code=1000)  # the old socket's close completes now
    page.wait_for_function("window.__closes === 1")
    expect(results).to_have_count(1)  # the page's socket is open: still marked live
    assert page.evaluate("document.getElementById('live-ended').hidden") is True
