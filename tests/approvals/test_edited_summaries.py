"""What a person reads of a ticket whose arguments an approver edited is what an approval approves: the
edited arguments, marked as edited and by whom, with what the edit changed beside them, in the inbox's
row (also as pushed to inbox sockets), the bulk confirmation (which also says that approving it there is
refused), the approvals API's list and the conversation's ticket card. They summarised the agent's
arguments ("laptop · $2,500.00") while an approval approved $1,800.00."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.template.loader import render_to_string
from django.test.utils import CaptureQueriesContext

from agents_app import selectors as conversations
from approvals import selectors
from approvals.hashing import args_hash
from approvals.models import PendingCall
from tests.approvals.policy_helpers import open_ticket, person, team

BIG = {"purpose": "laptop", "amount": 2500.0}  # the demo's "Large reimbursements": finance, 2 of N
EDITED = {"purpose": "laptop", "amount": 1800.0}
CHANGE = "amount $2,500.00 → $1,800.00"


def edit(client, ticket: PendingCall, args: dict) -> PendingCall:  # noqa: ANN001 - a logged-in Client
    """An approval that edits the arguments (held: 1 of 2 on a quorum ticket), the ticket read again."""
    r = client.post(f"/api/pending-calls/{ticket.pk}/approve", {"editedArgs": args}, content_type="application/json")
    assert r.status_code == 201, r.content
    return PendingCall.objects.get(pk=ticket.pk)


@pytest.fixture
def edited(api, demo) -> PendingCall:
    """A 2-of-N ticket whose amount approver2 edited with their approval (1 of 2)."""
    return edit(api(demo["approver2"]), open_ticket(args=BIG), EDITED)


@pytest.fixture
def fay(demo):
    return person("fay", team("finance"), approver=True)


def _row(html: str, pk: int) -> str:
    found = re.search(rf'<tr id="pending-call-{pk}".*?</tr>', html, re.S)
    assert found, html[:2000]
    return found.group(0)


def _summary(row: str) -> str:
    found = re.search(r'<a class="summary"[^>]*>(.*?)</a>', row, re.S)
    assert found, row
    return found.group(1)


def test_the_inbox_row_shows_the_edited_arguments_and_who_edited_them(api, edited, demo):
    row = _row(api(demo["approver"]).get("/").content.decode(), edited.pk)
    assert _summary(row) == "laptop · $1,800.00"
    assert "edited by approver2" in row and CHANGE in row
    # The row inbox sockets get (approvals.fanout.publish_ticket) is read the same way, with no query of its own.
    ticket = selectors.approvals_attach([selectors.ticket_get(ticket_id=edited.pk)])[0]
    with CaptureQueriesContext(connection) as ctx:
        live = render_to_string("approvals/inbox.html#row", {"ticket": ticket, "oob": "outerHTML"})
    assert _summary(live) == "laptop · $1,800.00" and "edited by approver2" in live and CHANGE in live
    assert len(ctx.captured_queries) == 0


def test_a_ticket_approved_with_edited_arguments_reads_as_approved_with_them(api, demo):
    small = edit(
        api(demo["approver"]),
        open_ticket(args={"purpose": "meals", "amount": 200.0}),
        {"purpose": "meals", "amount": 150.0},
    )
    assert small.status == "approved"
    row = _row(api(demo["approver2"]).get("/?status=closed").content.decode(), small.pk)
    assert _summary(row) == "meals · $150.00" and "edited by approver: amount $200.00 → $150.00" in row
    transfer = edit(api(demo["approver"]), open_ticket(kind="confirmation"), {"amount": 300.0, "recipient": "Bob"})
    # Routed to treasury (the demo's transfer policy), which approver2 is not in: read as its approver.
    row = _row(api(demo["approver"]).get("/?status=closed").content.decode(), transfer.pk)
    assert _summary(row) == "transfer_money: $300.00 · Bob" and "amount $500.00 → $300.00" in row


def test_an_unedited_ticket_reads_as_before(api, demo):
    plain = open_ticket(args={"purpose": "meals", "amount": 200.0})
    row = _row(api(demo["approver"]).get("/").content.decode(), plain.pk)
    assert _summary(row) == "meals · $200.00" and "edited" not in row


def test_edited_text_is_escaped_everywhere_it_is_shown(api, edited, fay):
    evil = {"purpose": "<img src=x onerror=alert(1)>", "amount": 1800.0}
    ticket = edit(api(fay), open_ticket(args=BIG), evil)
    inbox = api(fay).get("/").content.decode()
    bulk = api(fay).post("/inbox/bulk/", {"action": "approve", "ticket": [ticket.pk]}).content.decode()
    for html in (inbox, bulk):
        assert "<img src=x" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html


def _queries(client, url: str) -> int:  # noqa: ANN001
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(url).status_code == 200
    return len(ctx.captured_queries)


def test_the_inbox_reads_who_edited_with_its_rows_not_a_query_each(api, demo, fay):
    """The editor is joined to the rows' query, wherever the rows are read from (and "mine" reads them
    from its participants' table)."""
    me = api(demo["approver2"])
    tickets = [open_ticket(args=BIG, assigned_to=demo["approver2"]) for _ in range(4)]
    urls = ["/", "/?status=all", "/?mine=1", "/?q=laptop"]
    me.get("/")  # warm per-process caches
    before = {url: _queries(me, url) for url in urls}
    for ticket, who in zip(tickets, [demo["approver"], fay, demo["approver"], fay], strict=True):
        edit(api(who), ticket, {**EDITED, "amount": 1000.0 + ticket.pk})
    html = me.get("/?mine=1").content.decode()
    assert all("edited by" in _row(html, t.pk) for t in tickets)
    assert {url: _queries(me, url) for url in urls} == before


def _bulk_item(html: str, pk: int) -> str:
    found = re.search(rf'<li><input type="hidden" name="ticket" value="{pk}">.*?</li>', html, re.S)
    assert found, html[:2000]
    return found.group(0)


def test_the_bulk_confirmation_shows_the_edited_arguments_and_that_approving_them_there_is_refused(api, edited, fay):
    plain = open_ticket(args={"purpose": "meals", "amount": 200.0})
    ids = [edited.pk, plain.pk]
    html = api(fay).post("/inbox/bulk/", {"action": "approve", "ticket": ids}).content.decode()
    item = _bulk_item(html, edited.pk)
    assert "laptop · $1,800.00" in item and "laptop · $2,500.00" not in item
    assert "edited by approver2" in item and CHANGE in item
    refusal = re.search(rf'id="bulk-refusal-{edited.pk}">(.*?)</span>', item, re.S)
    assert refusal and "edited by approver2" in refusal.group(1) and "on its page" in refusal.group(1), item
    other = _bulk_item(html, plain.pk)
    assert "meals · $200.00" in other and "edited" not in other and "will be refused" not in other
    # A rejection approves no arguments: it is not refused, and it says what it rejects.
    html = api(fay).post("/inbox/bulk/", {"action": "reject", "ticket": ids}).content.decode()
    item = _bulk_item(html, edited.pk)
    assert "laptop · $1,800.00" in item and "edited by approver2" in item and "will be refused" not in item


def test_the_api_list_gives_the_edited_arguments_who_edited_them_and_the_original(api, edited, fay):
    body = api(fay).get("/api/pending-calls").json()
    row = next(t for t in body["results"] if t["id"] == edited.pk)
    assert row["args"] == BIG and row["editedArgs"] == EDITED and row["editedBy"] == "approver2"
    assert row["argsHash"] == args_hash(EDITED)


def test_the_conversation_card_says_the_arguments_were_edited_and_by_whom(edited):
    """The card sits under the agent's call (its arguments as the agent sent them): it says the edit."""
    cards = [
        conversations.session_ticket_get(session_pk=edited.session_id, ticket_id=edited.pk),
        conversations.tickets_by_call_id(edited.session_id)[edited.call_id],
    ]
    for ticket in cards:
        with CaptureQueriesContext(connection) as ctx:
            html = render_to_string("agents_app/partials/ticket_card.html", {"ticket": ticket})
        assert "arguments edited by approver2" in html and CHANGE in html
        assert len(ctx.captured_queries) == 0


def test_the_decision_that_edited_says_so_in_the_audit_trail_and_the_tickets_history(api, edited, fay):
    audit = api(fay).get("/audit/").content.decode()
    row = re.search(r'<tr id="decision-\d+">.*?</tr>', audit, re.S).group(0)  # the one decision
    assert "approver2" in row and f"edited the arguments: {CHANGE}" in row
    page = api(fay).get(f"/tickets/{edited.pk}/").content.decode()
    history = re.search(r'<section id="ticket-history".*?</section>', page, re.S).group(0)
    assert f"Edited the arguments: {CHANGE}" in history and f"Arguments edited: {CHANGE}" in history
