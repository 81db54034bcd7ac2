"""In a real browser in New York: the ticket page's and the inbox's absolute times are New York's, named
("Due by 2026-12-07 13:57 EST"), and every time's title says the whole instant there, not UTC's (static/js/
localtime.js). The app keeps no per-user time zone: the server writes UTC, named, and the browser knows its own.
Before: "Due by … 18:57 UTC" beside "due in 10 minutes", the titles in UTC without saying so."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from playwright.sync_api import expect

from approvals.models import PendingCall
from tests.approvals.policy_helpers import open_ticket
from tests.chromium import log_in

NEW_YORK = ZoneInfo("America/New_York")


def test_absolute_times_are_the_readers_own_named(demo, browser, live_asgi):
    ticket = open_ticket()
    due = datetime.now(UTC).replace(microsecond=0) + timedelta(days=2)
    PendingCall.objects.filter(pk=ticket.pk).update(due_at=due)
    ticket.refresh_from_db()
    context = browser.new_context(base_url=live_asgi.url, timezone_id="America/New_York", locale="en-US")
    try:
        page = log_in(context.new_page(), "approver")
        there = due.astimezone(NEW_YORK)
        page.goto(f"/tickets/{ticket.pk}/")
        due_by = page.locator(".due time:not([data-rel])")
        expect(due_by).to_have_text(there.strftime("%Y-%m-%d %H:%M %Z"))  # EST in December, EDT in summer
        expect(due_by).to_have_attribute("title", there.strftime("%Y-%m-%d %H:%M:%S %Z"))
        created = ticket.created_at.astimezone(NEW_YORK).strftime("%Y-%m-%d %H:%M:%S %Z")
        expect(page.locator(".meta time[data-rel=ago]")).to_have_attribute("title", created)

        page.goto("/")
        age = page.locator(f"#pending-call-{ticket.pk} td[data-label=Age] time")
        expect(age).to_have_attribute("title", created)
    finally:
        context.close()
