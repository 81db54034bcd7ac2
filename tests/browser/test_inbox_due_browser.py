"""In a real browser: an approver's open inbox shows a ticket "due in …"; at its due time the row says
"past due: it expires", without a reload (the inbox socket's timer: approvals.consumers)."""

from __future__ import annotations

import time
from datetime import timedelta

from django.utils import timezone
from playwright.sync_api import expect

from approvals.models import PendingCall
from tests.approvals.policy_helpers import open_ticket
from tests.browser.test_approvals_browser import open_inbox

AHEAD = 5  # seconds: the due time, after the inbox has opened


def test_an_open_inbox_row_turns_past_due_at_its_due_time(demo, login):
    ticket = open_ticket()
    page = login("approver")  # logged in first: a slow login does not eat the time before the due time
    due = timezone.now() + timedelta(seconds=AHEAD)
    PendingCall.objects.filter(pk=ticket.pk).update(due_at=due)
    open_inbox(page)
    row = page.locator(f"#pending-call-{ticket.pk}")
    expect(row).to_contain_text("due in")
    loads = page.evaluate("performance.getEntriesByType('navigation').length")
    expect(row).to_contain_text("past due: it expires", timeout=(AHEAD + 6) * 1000)
    assert time.time() >= due.timestamp(), "not before the due time"
    assert page.evaluate("performance.getEntriesByType('navigation').length") == loads  # no reload
