"""Inbox triage in real Chromium: keyboard only (j/k/x/a/r, Enter in the confirmation), and bulk
approve of three tickets with one confirmation, each agent resuming."""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import expect

from agents_app import services as agent_services
from approvals.models import PendingCall

DONE = "Done: I reimbursed ${:.2f} for {}."


def ask(purpose: str, amount: int, wait: Any) -> tuple[Any, PendingCall]:
    """A requester's conversation whose agent opens a ticket (as the page would start it)."""
    session = agent_services.session_create(app_name="reimbursement_agent", user_id="requester")
    agent_services.message_send(session=session, text=f"Please reimburse {amount}$ for {purpose}", streaming=False)
    call = wait(lambda: PendingCall.objects.filter(session=session).first(), what=f"the ticket for {purpose}")
    return session, call


def conversation_text(session: Any) -> str:
    return " ".join(str(d) for d in session.events.values_list("data", flat=True))


def test_keyboard_only_triage_moves_selects_approves_and_rejects(demo, worker, login, wait, shot):
    sessions = {p: ask(p, a, wait) for p, a in (("taxi", 120), ("hotel", 300), ("lunch", 150))}
    approver = login("approver")
    approver.goto("/")
    expect(approver.locator("#inbox-results[data-ws-open]")).to_have_count(1)
    rows = approver.locator("#inbox-rows tr")
    expect(rows).to_have_count(3)  # newest first: lunch, hotel, taxi
    keys = approver.keyboard

    keys.press("j")
    expect(approver.locator("tr.cursor")).to_contain_text("lunch")
    keys.press("j")
    keys.press("j")
    keys.press("k")
    expect(approver.locator("tr.cursor")).to_contain_text("hotel")
    keys.press("?")
    expect(approver.locator("#shortcuts-dialog")).to_be_visible()
    keys.press("Escape")
    expect(approver.locator("#shortcuts-dialog")).to_be_hidden()

    keys.press("a")  # approve the ticket under the cursor: one confirmation, Enter confirms
    dialog = approver.locator("#triage-dialog")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("Approve 1 ticket?")
    expect(dialog).to_contain_text("hotel · $300.00")
    expect(dialog.get_by_role("button", name="Approve 1 ticket")).to_be_focused()
    keys.press("Enter")
    expect(dialog).to_contain_text("1 of 1 approved")
    shot(approver, "inbox-keyboard-approved")
    keys.press("Escape")
    expect(dialog).to_be_hidden()
    hotel_session, hotel = sessions["hotel"]
    expect(rows.filter(has_text="hotel")).to_contain_text("approved")
    wait(lambda: DONE.format(300, "hotel") in conversation_text(hotel_session), what="the hotel agent resuming")
    assert PendingCall.objects.get(pk=hotel.pk).closed_by.username == "approver"

    keys.press("/")  # search takes the focus; Escape gives it back to the list
    expect(approver.locator("#id_q")).to_be_focused()
    keys.press("Escape")
    keys.press("j")  # back to taxi (the cursor stays on the list)
    expect(approver.locator("tr.cursor")).to_contain_text("taxi")
    keys.press("x")
    expect(approver.locator("#bulk-count")).to_have_text("1 selected:")
    keys.press("r")  # reject asks for a reason
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("Reject 1 ticket?")
    reason = approver.locator("#bulk-reason")
    expect(reason).to_be_focused()
    keys.type("Taxis need a receipt")
    keys.press("Enter")
    expect(dialog).to_contain_text("1 of 1 rejected")
    taxi_session, taxi = sessions["taxi"]
    wait(lambda: "Taxis need a receipt" in conversation_text(taxi_session), what="the taxi agent told why")
    assert PendingCall.objects.get(pk=taxi.pk).status == "rejected"
    assert PendingCall.objects.get(pk=sessions["lunch"][1].pk).status == "pending"


def test_bulk_approve_three_tickets_with_one_confirmation_each_agent_resuming(demo, worker, login, wait, shot):
    wanted = (("train", 180), ("books", 220), ("parking", 140))
    asked = [ask(p, a, wait) for p, a in wanted]
    approver = login("approver")
    approver.goto("/")
    expect(approver.locator("#inbox-results[data-ws-open]")).to_have_count(1)
    for _, call in asked:
        approver.get_by_label(f"Select ticket #{call.pk}").check()
    expect(approver.locator("#bulk-count")).to_have_text("3 selected:")
    approver.get_by_role("button", name="Approve selected").click()
    dialog = approver.locator("#triage-dialog")
    expect(dialog).to_contain_text("Approve 3 tickets?")
    for purpose in ("train", "books", "parking"):
        expect(dialog).to_contain_text(purpose)
    shot(approver, "inbox-bulk-confirm", publish=True)
    dialog.get_by_role("button", name="Approve 3 tickets").click()
    expect(dialog).to_contain_text("3 of 3 approved")
    for _, call in asked:
        expect(dialog.locator(f"#bulk-result-{call.pk}")).to_contain_text("Approved; the agent is resuming.")
    for (session, call), (purpose, amount) in zip(asked, wanted, strict=True):
        text = DONE.format(amount, purpose)
        wait(lambda s=session, t=text: t in conversation_text(s), what=f"the {purpose} agent resuming")
        assert PendingCall.objects.get(pk=call.pk).status == "approved"
    dialog.get_by_role("link", name="Back to the inbox").click()
    expect(dialog).to_be_hidden()
    expect(approver.locator("#bulk-count")).to_have_text("Select tickets with x or the checkboxes:")


def test_ticket_page_shows_who_was_emailed_live_and_a_copied_link_approves_from_a_phone(
    demo, worker, login, wait, shot, browser, live_asgi, settings
):
    settings.ADKWEB_BASE_URL = live_asgi.url  # where the links point
    session, call = ask("a team dinner", 260, wait)
    approver = login("approver")
    approver.goto(f"/tickets/{call.pk}/")
    expect(approver.locator(".ticket-grid[data-ws-open]")).to_have_count(1)
    # admin, approver and approver2 (the demo's second finance approver)
    expect(approver.locator("#ticket-notifications")).to_contain_text("emailed 3 approvers")
    approver.get_by_role("button", name="Copy approval link").click()
    approve_link = approver.get_by_label("Approve link")
    expect(approve_link).to_have_value(re.compile(r"/a/[^/]+/$"))
    shot(approver, "ticket-approval-link", publish=True)

    phone = browser.new_context(viewport={"width": 390, "height": 760})  # logged out
    try:
        page = phone.new_page()
        page.goto(approve_link.input_value())
        expect(page.get_by_text("Approve this request as approver?")).to_be_visible()
        shot(page, "one-tap-confirm", publish=True)
        assert PendingCall.objects.get(pk=call.pk).status == "pending"
        page.get_by_role("button", name=f"Approve ticket #{call.pk}").click()
        expect(page.get_by_text("Approved. The agent is resuming.")).to_be_visible()
    finally:
        phone.close()
    expect(approver.locator("#ticket-status")).to_contain_text("Approved by approver")
    wait(lambda: DONE.format(260, "a team dinner") in conversation_text(session), what="the agent resuming")
