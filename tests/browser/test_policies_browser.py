"""In a real browser, under the demo's policies: a reimbursement over $1000 needs two finance
approvers, and the second one watches "1 of 2 approvals" arrive live on the open ticket page; an
approver edits the amount before approving, sees the diff, and the agent reimburses the new amount."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from approvals.models import PendingCall, Response
from tests.browser.test_approvals_browser import open_inbox, open_ticket_from_inbox, start_conversation


def test_one_of_two_approvals_shows_live_to_the_second_approver(demo, worker, login, shot):
    first, second = login("approver"), login("approver2")
    open_inbox(first)
    open_inbox(second)
    requester = login("requester")
    start_conversation(requester, "reimbursement_agent", "Please reimburse 2500$ for laptop")
    for page in (first, second):
        expect(page.locator("#inbox-rows tr", has_text="laptop · $2,500.00")).to_contain_text("0 of 2 approvals")
        open_ticket_from_inbox(page, "laptop · $2,500.00")
    expect(second.locator("#ticket-rules")).to_contain_text("Policy Large reimbursements v1: decided by finance")
    expect(second.locator("#approval-count")).to_contain_text("0 of 2 approvals")

    first.get_by_role("button", name="Approve (1 of 2)").click()
    expect(first.locator("#approval-counted")).to_contain_text("Your approval counts (1 of 2)")
    # The second approver's page, open all along, hears it: no reload.
    expect(second.locator("#approval-count")).to_contain_text("1 of 2 approvals: approver.")
    expect(second.locator("#ticket-history")).to_contain_text("approval, held for the others")
    expect(second.locator("#ticket-status")).to_contain_text("pending")
    shot(second, "policies-ticket", publish=True)
    assert not PendingCall.objects.get().responses.filter(final=True).exists()
    expect(requester.locator("#conversation-events")).not_to_contain_text("reimbursed")

    second.get_by_role("button", name=re.compile(r"^Approve")).click()
    expect(second.locator("#ticket-status")).to_contain_text("Approved by approver2")
    expect(first.locator("#ticket-status")).to_contain_text("Approved by approver2")
    expect(first.locator("#approval-count")).to_contain_text("2 of 2 approvals: approver, approver2.")
    expect(requester.locator("#conversation-events")).to_contain_text("Done: I reimbursed $2,500.00 for laptop.")
    ticket = PendingCall.objects.get()
    assert ticket.status == "approved" and ticket.responses.filter(final=True).count() == 1

    admin = login("agentadmin")  # the rules behind it, on the Policies page
    admin.get_by_role("link", name="Policies").click()
    expect(admin.locator("table.policies")).to_contain_text("2 approvals from finance · four-eyes · due in 1 day")
    shot(admin, "policies", publish=True)


def test_edit_before_approve_shows_the_diff_and_the_agent_pays_the_edited_amount(demo, worker, login, shot):
    approver = login("approver")
    open_inbox(approver)
    watcher = login("admin")
    requester = login("requester")
    start_conversation(requester, "reimbursement_agent", "Please reimburse 200$ for meals")
    expect(approver.locator("#inbox-rows tr", has_text="meals · $200.00")).to_be_visible()
    open_ticket_from_inbox(approver, "meals · $200.00")
    watcher.goto(approver.url)
    expect(watcher.locator(".ticket-grid[data-ws-open]")).to_have_count(1)

    approver.get_by_text("Edit the arguments before approving").click()
    amount = approver.get_by_label("Amount")
    expect(amount).to_have_value("200.0")
    amount.fill("150")
    approver.get_by_label("Comment (optional)").fill("Receipt says 150")
    approver.get_by_role("button", name="Approve").click()
    expect(approver.locator("#ticket-status")).to_contain_text("Approved by approver")

    for page in (approver, watcher):  # the one who edited, and a page that was open elsewhere
        diff = page.locator("#args-diff")
        expect(diff).to_contain_text("Edited by approver")
        expect(diff.locator("tr.changed")).to_have_count(1)
        expect(diff.locator("tr.changed del")).to_have_text("$200.00")
        expect(diff.locator("tr.changed ins")).to_have_text("$150.00")
    expect(approver.locator("#ticket-history")).to_contain_text("Arguments edited: amount $200.00 → $150.00")
    shot(approver, "ticket-edited", publish=True)
    expect(requester.locator("#conversation-events")).to_contain_text("Done: I reimbursed $150.00 for meals.")
    response = Response.objects.get()
    assert response.payload == {"status": "approved", "amount": 150, "comment": "Receipt says 150"}
    ticket = PendingCall.objects.get()
    assert (ticket.args["amount"], ticket.edited_args["amount"], ticket.edited_by.username) == (200.0, 150, "approver")
