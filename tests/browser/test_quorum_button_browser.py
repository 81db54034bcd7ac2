"""In a real browser: two finance approvers have the same 2-of-N ticket open; when the first
approves, the second's button turns from "Approve (1 of 2)" into "Approve (2 of 2)" live (no
reload), and the comment they were typing stays; their approval then closes the ticket."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from approvals.models import PendingCall
from tests.approvals.policy_helpers import open_ticket

BIG = {"purpose": "conference", "amount": 2500.0}  # the demo's "Large reimbursements": finance, 2 of N


def test_the_approve_button_counts_another_approvers_approval_live(demo, login):
    ticket = open_ticket(args=BIG)
    first, second = login("approver"), login("approver2")
    for page in (first, second):
        page.goto(f"/tickets/{ticket.pk}/")
        expect(page.locator(".ticket-grid[data-ws-open]")).to_have_count(1)
        expect(page.get_by_role("button", name="Approve (1 of 2)")).to_be_visible()
    second.get_by_label("Comment (optional)").fill("Matches the invoice")

    first.get_by_role("button", name="Approve (1 of 2)").click()
    expect(first.locator("#approval-counted")).to_contain_text("Your approval counts (1 of 2)")
    expect(second.get_by_role("button", name="Approve (2 of 2)")).to_be_visible()  # live, no reload
    expect(second.get_by_role("button", name=re.compile(r"Approve \(1 of 2\)"))).to_have_count(0)
    expect(second.get_by_label("Comment (optional)")).to_have_value("Matches the invoice")

    second.get_by_role("button", name="Approve (2 of 2)").click()
    expect(second.locator("#ticket-status")).to_contain_text("Approved by approver2")
    expect(first.locator("#ticket-status")).to_contain_text("Approved by approver2")
    closed = PendingCall.objects.get(pk=ticket.pk)
    assert closed.status == "approved" and closed.responses.get(final=True).comment == "Matches the invoice"
