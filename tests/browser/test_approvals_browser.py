"""In a real browser: a requester asks, an approver's open inbox shows the ticket live, the
approver answers on the ticket page, and the requester's conversation shows the agent resume."""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import expect

from approvals.models import PendingCall


def start_conversation(page: Any, agent: str, text: str) -> None:
    """Through the New conversation page, as a requester would."""
    page.goto("/sessions/new/")
    page.get_by_label("Agent").select_option(agent)
    page.get_by_label("First message").fill(text)
    page.get_by_role("button", name="Start conversation").click()
    page.wait_for_url(re.compile(r"/sessions/\d+/$"))


def open_inbox(page: Any) -> None:
    page.goto("/")
    expect(page.locator("#inbox-results[data-ws-open]")).to_have_count(1)


def open_ticket_from_inbox(page: Any, summary: str) -> None:
    page.get_by_role("link", name=summary).click()
    page.wait_for_url(re.compile(r"/tickets/\d+/$"))
    expect(page.locator(".ticket-grid[data-ws-open]")).to_have_count(1)


def test_reimbursement_update_then_approve_live_in_both_browsers(demo, worker, login, shot):
    approver = login("approver")
    open_inbox(approver)
    expect(approver.locator("#nav-open-count")).to_have_text("0")

    requester = login("requester")
    start_conversation(requester, "reimbursement_agent", "Please reimburse 200$ for meals")

    # The ticket arrives in the already-open inbox, no reload; the nav count follows.
    row = approver.locator("#inbox-rows tr", has_text="meals · $200.00")
    expect(row).to_be_visible()
    expect(row).to_contain_text("ask_for_approval")
    expect(row).to_contain_text("requester")
    expect(approver.locator("#nav-open-count")).to_have_text("1")
    shot(approver, "inbox-first-ticket")

    open_ticket_from_inbox(approver, "meals · $200.00")
    expect(approver).to_have_title(re.compile(r"Ticket #\d+ · ask_for_approval · adkweb"))
    expect(approver.locator("#ticket-call, .card").first).to_contain_text("approval-ticket-")
    expect(approver.locator("#conversation-events")).to_contain_text("Please reimburse 200$ for meals")

    approver.get_by_label("Update message").fill("Checking the receipts")
    approver.get_by_label("Progress % (optional)").fill("50")
    approver.get_by_role("button", name="Send update").click()
    expect(approver.locator("#ticket-history")).to_contain_text("intermediate")
    expect(approver.locator("#ticket-status")).to_contain_text("in progress")
    # The agent resumes on the intermediate response: its next event arrives live on both pages.
    progress = "Update on your reimbursement of $200.00 for meals: Checking the receipts (50.0% done)"
    expect(approver.locator("#conversation-events")).to_contain_text(progress)
    expect(requester.locator("#conversation-events")).to_contain_text(progress)

    approver.get_by_label("Comment (optional)").fill("Looks fine")
    approver.get_by_role("button", name="Approve").click()
    expect(approver.locator("#ticket-status")).to_contain_text("Approved by approver")
    expect(approver.get_by_role("button", name="Approve")).to_have_count(0)
    expect(approver.locator("#conversation-events")).to_contain_text("Done: I reimbursed $200.00 for meals.")
    shot(approver, "ticket-approved")

    expect(requester.locator("#conversation-events")).to_contain_text("Done: I reimbursed $200.00 for meals.")
    shot(requester, "conversation-after-approval")
    call = PendingCall.objects.get()
    assert call.status == "approved" and call.responses.count() == 2


def test_rejection_reason_reaches_the_requester(demo, worker, login, shot):
    approver = login("approver")
    open_inbox(approver)
    requester = login("requester")
    start_conversation(requester, "reimbursement_agent", "Please reimburse 450$ for a conference dinner")
    expect(approver.locator("#inbox-rows tr", has_text="conference dinner")).to_be_visible()
    open_ticket_from_inbox(approver, "a conference dinner · $450.00")

    reason = approver.get_by_label("Reason (the agent receives it)")
    approver.get_by_role("button", name="Reject").click()  # no reason: the browser asks for one, nothing sent
    assert reason.evaluate("e => !e.validity.valid")
    assert not PendingCall.objects.get().responses.exists()
    reason.fill("Dinners are not covered")
    approver.get_by_role("button", name="Reject").click()
    expect(approver.locator("#ticket-status")).to_contain_text("Rejected by approver")
    expected = "Sorry, your reimbursement of $450.00 for a conference dinner was rejected: Dinners are not covered"
    expect(requester.locator("#conversation-events")).to_contain_text(expected)
    shot(requester, "conversation-after-rejection")
    # The decided row changed in place in the inbox the approver left open earlier? It was left;
    # a fresh inbox no longer lists it.
    open_inbox(approver)
    expect(approver.locator("#inbox-rows tr", has_text="conference dinner")).to_have_count(0)


def test_confirmation_ticket_and_a_second_approver_sees_it_closed(demo, worker, login, shot):
    approver = login("approver")
    open_inbox(approver)
    admin = login("admin")
    open_inbox(admin)
    requester = login("requester")
    start_conversation(requester, "transfer_agent", "transfer $500 to Bob")

    row = approver.locator("#inbox-rows tr", has_text="transfer_money: $500.00 · Bob")
    expect(row).to_be_visible()
    expect(row).to_contain_text("confirmation")
    expect(admin.locator("#inbox-rows tr", has_text="transfer_money: $500.00 · Bob")).to_be_visible()
    open_ticket_from_inbox(admin, "transfer_money: $500.00 · Bob")
    open_ticket_from_inbox(approver, "transfer_money: $500.00 · Bob")
    expect(approver.get_by_role("heading", name="What will run if approved")).to_be_visible()
    expect(approver.locator(".hint")).to_contain_text("transfer_money")
    expect(approver.get_by_role("button", name="Send update")).to_have_count(0)
    shot(approver, "ticket-confirmation")

    approver.get_by_role("button", name="Approve").click()
    expect(approver.locator("#ticket-status")).to_contain_text("Approved by approver")
    expect(requester.locator("#conversation-events")).to_contain_text(re.compile(r"Transferred \$500\.00 to Bob"))

    # The admin's page was open on the same ticket: its buttons went away live.
    expect(admin.locator("#ticket-status")).to_contain_text("Approved by approver")
    expect(admin.get_by_role("button", name="Approve")).to_have_count(0)
    shot(admin, "ticket-closed-by-someone-else")
