"""In a real browser: a requester's empty conversation list whose socket connects after they started a
conversation in another tab (the page loading, its socket held here as a slow network holds it) shows it:
the table appears, "No conversations" goes (agents_app.list_consumer's catch-up, static/js/app.js). Before:
the socket counted the new conversation as shown and pushed nothing; and a row pushed live into an empty
list went into its hidden table, so the page kept saying there were none."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect

from agents_app import events, services


def test_an_empty_list_shows_the_conversation_started_before_its_socket_connected(demo, login):
    page = login("requester")
    routes: list[Any] = []  # the list's socket, held (not yet connected to the server) while none is

    def route(ws: Any) -> None:
        ws.connect_to_server() if routes else routes.append(ws)

    page.route_web_socket(lambda url: "/ws/sessions/" in url, route)
    page.goto("/sessions/")
    expect(page.locator("#sessions-empty")).to_be_visible()
    for _ in range(100):
        if routes:
            break
        page.wait_for_timeout(50)
    assert routes, "the list's socket"

    first = services.session_create(app_name="reimbursement_agent", user_id="requester")  # another tab
    routes[0].connect_to_server()
    expect(page.locator(f"#session-row-{first.pk}")).to_be_visible()
    expect(page.locator("#sessions-empty")).to_have_count(0)

    second = services.session_create(app_name="stock_agent", user_id="requester")
    events.notify_session_status(session_pk=second.pk)  # live
    expect(page.locator(f"#session-row-{second.pk}")).to_be_visible()
    ids = page.eval_on_selector_all("#session-rows tr[id]", "rows => rows.map(r => r.id)")
    assert ids == [f"session-row-{second.pk}", f"session-row-{first.pk}"], ids
