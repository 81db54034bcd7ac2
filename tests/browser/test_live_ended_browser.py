"""In a real browser: a conversation deleted while someone watches it (an ADK client's delete_session)
tells the open page at once that its live updates stopped, instead of the page going quiet."""

from __future__ import annotations

from playwright.sync_api import expect

from agents_app import services
from agents_app.session_archive import session_delete


def test_a_watched_conversation_deleted_elsewhere_says_live_updates_stopped(demo, worker, login):
    session = services.session_create(app_name="reimbursement_agent", user_id="requester")
    page = login("observer")
    page.goto(f"/sessions/{session.pk}/")
    expect(page.locator("section.conversation[data-ws-open]")).to_have_count(1)
    expect(page.locator("#live-ended")).to_be_hidden()

    session_delete(app_name=session.app_name, user_id=session.user_id, session_id=session.session_id)

    # Well inside the rights re-check's 60 s: the deletion's own notice closed the socket.
    expect(page.locator("#live-ended")).to_be_visible(timeout=5_000)
    expect(page.locator("#live-ended")).to_contain_text("Live updates stopped")
    expect(page.locator("section.conversation[data-ws-open]")).to_have_count(0)
