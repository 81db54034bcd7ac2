"""In a real browser, `make run`'s first look: the demo conversations (`demo_setup --conversations`) put
tickets in the approver's inbox before anyone typed anything; the approver answers the meals one and the
requester's conversation shows the agent resume. Publishes the README's inbox and ticket screenshots."""

from __future__ import annotations

import io
import threading

import pytest
from django.core.management import call_command
from django.db import connection
from playwright.sync_api import expect

from tests.browser.test_approvals_browser import open_inbox, open_ticket_from_inbox


@pytest.fixture
def demo_conversations(worker, monkeypatch: pytest.MonkeyPatch) -> None:
    """`make run`'s demo step, its drains in the command as there (the in-process worker takes no wake-up
    of theirs meanwhile), on a thread of its own (Playwright's loop runs in this one); afterwards enqueues
    reach the worker again."""

    def seed() -> None:
        try:
            call_command("demo_setup", "--conversations", stdout=io.StringIO())
        finally:
            connection.close()

    with monkeypatch.context() as m:
        m.setattr("agents_app.enqueue.session_enqueue", lambda **kw: True)
        thread = threading.Thread(target=seed)
        thread.start()
        thread.join(60)


def test_the_approver_finds_the_demo_tickets_and_answers_one_live(demo_conversations, login, shot):
    approver = login("approver")
    open_inbox(approver)
    expect(approver.locator("#nav-open-count")).to_have_text("3")
    rows = approver.locator("#inbox-rows tr")
    expect(rows).to_have_count(3)
    expect(rows.filter(has_text="laptop · $2,500.00")).to_contain_text("1 of 2 approvals")
    expect(rows.filter(has_text="$500.00 · Bob")).to_contain_text("transfer_agent")
    shot(approver, "inbox", publish=True)

    requester = login("requester")
    requester.goto("/sessions/")
    requester.get_by_role("row").filter(has_text="demo-meals").get_by_role("link").click()
    expect(requester.locator("#conversation-events")).to_contain_text("needs a manager's approval")
    expect(requester.locator(".conversation[data-ws-open]")).to_have_count(1)

    open_ticket_from_inbox(approver, "meals · $200.00")
    approver.get_by_label("Update message").fill("Checking the receipts")
    approver.get_by_role("button", name="Send update").click()
    progress = "Update on your reimbursement of $200.00 for meals: Checking the receipts."
    expect(requester.locator("#conversation-events")).to_contain_text(progress)
    approver.get_by_label("Comment (optional)").fill("Looks fine")
    approver.get_by_role("button", name="Approve").click()
    expect(approver.locator("#ticket-status")).to_contain_text("Approved by approver")
    expect(approver.locator("#conversation-events")).to_contain_text("Done: I reimbursed $200.00 for meals.")
    expect(requester.locator("#conversation-events")).to_contain_text("Done: I reimbursed $200.00 for meals.")
    shot(approver, "ticket", publish=True)
