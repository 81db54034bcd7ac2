"""What a person sees when a limit answers 429: the conversation form swapped in place by htmx with the
message and their text kept (the per-user turn cap), and the lockout page after repeated wrong
passwords (login throttling)."""

from __future__ import annotations

from datetime import timedelta

from agents_app import services
from agents_app.models import Turn


def test_the_turn_cap_message_appears_in_the_conversation_form(demo, login, settings):
    settings.ADKWEB_MAX_QUEUED_TURNS_PER_USER = 1
    requester = demo["requester"]
    session = services.session_create(app_name="stock_agent", user_id="requester")
    Turn.objects.create(session=session, kind="message", content={}, status="running", created_by=requester)
    page = login("requester")
    page.goto(f"/sessions/{session.pk}/")
    page.fill("#message-form textarea", "one more, please")
    page.get_by_role("button", name="Send").click()
    alert = page.locator("#message-form [role=alert]")
    alert.wait_for()
    assert "agent turns queued or running" in alert.inner_text()
    assert page.input_value("#message-form textarea") == "one more, please"  # nothing lost
    assert Turn.objects.filter(session=session).count() == 1


def test_the_lockout_page_after_repeated_wrong_passwords(demo, browser, live_asgi, settings):
    settings.AXES_ENABLED = True
    settings.AXES_FAILURE_LIMIT = 3
    settings.AXES_COOLOFF_TIME = timedelta(minutes=15)
    context = browser.new_context(base_url=live_asgi.url)
    try:
        page = context.new_page()
        for _ in range(3):
            page.goto("/accounts/login/")
            page.fill("#id_username", "approver")
            page.fill("#id_password", "wrong")
            page.get_by_role("button", name="Log in").click()
            page.wait_for_load_state()
        assert page.get_by_role("heading", name="Too many failed logins").is_visible()
        assert "Try again in 15 minutes" in page.locator("[role=alert]:visible").inner_text()
    finally:
        context.close()
