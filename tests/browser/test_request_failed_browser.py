"""In a real browser: an htmx button whose request fails shows why, rather than nothing happening. The ticket
page's Approve after the site's CSRF cookie changed (a login in another tab rotates it): the 403 was one htmx
swaps nowhere (base.html's responseHandling), so the click did nothing visible. Now the page's notice says
"...: reload the page and try again" (adkweb.error_pages, static/js/app.js), and the ticket stays open."""

from __future__ import annotations

from playwright.sync_api import expect

from approvals.models import PendingCall
from tests.approvals.policy_helpers import open_ticket


def test_an_htmx_button_refused_for_csrf_says_reload_the_page(demo, login, live_asgi):
    ticket = open_ticket(args={"purpose": "taxi", "amount": 20.0})
    page = login("approver")
    page.goto(f"/tickets/{ticket.pk}/")
    expect(page.locator("#request-failed")).to_be_hidden()
    page.context.add_cookies([{"name": "csrftoken", "value": "x" * 32, "url": live_asgi.url}])
    page.get_by_role("button", name="Approve").first.click()
    expect(page.locator("#request-failed")).to_be_visible()
    expect(page.locator("#request-failed")).to_contain_text("reload the page and try again")
    assert PendingCall.objects.get(pk=ticket.pk).status == "pending"


def test_the_notice_of_a_failed_request_goes_when_a_later_one_succeeds(demo, login, live_asgi):
    """Before: the notice stayed after the approver reloaded the cookie and approved: the page said the request
    failed under the ticket it showed approved."""
    ticket = open_ticket(args={"purpose": "taxi", "amount": 20.0})
    page = login("approver")
    page.goto(f"/tickets/{ticket.pk}/")
    token = next(c for c in page.context.cookies() if c["name"] == "csrftoken")
    page.context.add_cookies([{"name": "csrftoken", "value": "x" * 32, "url": live_asgi.url}])
    page.get_by_role("button", name="Approve").first.click()
    expect(page.locator("#request-failed")).to_be_visible()
    page.context.add_cookies([{"name": "csrftoken", "value": token["value"], "url": live_asgi.url}])
    page.get_by_role("button", name="Approve").first.click()
    expect(page.locator("#ticket-status")).to_contain_text("Approved")
    expect(page.locator("#request-failed")).to_be_hidden()
    assert PendingCall.objects.get(pk=ticket.pk).status == "approved"
