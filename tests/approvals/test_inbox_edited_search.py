"""The inbox's search finds a ticket by its arguments as an approver edited them, as by those the agent
asked with: a $2,500 'Large reimbursements' ticket edited to $1,800 (held, 1 of 2) showed $1,800 in the
inbox, and a search for 1800 did not find it (the search read the original arguments only)."""

from __future__ import annotations

from django.test import Client

from approvals import selectors, services
from approvals.selectors import InboxFilters
from tests.approvals.policy_helpers import open_ticket


def _edited(demo):
    ticket = open_ticket(args={"purpose": "laptop", "amount": 2500.0})
    services.ticket_approve(
        ticket=ticket, actor=demo["approver"], edited_args={"purpose": "docking station", "amount": 1800.0}
    )
    ticket.refresh_from_db()
    assert ticket.is_open and ticket.edited_args["amount"] == 1800  # held: 1 of 2
    return ticket


def test_the_inbox_finds_a_ticket_by_its_edited_and_its_original_arguments(demo):
    ticket = _edited(demo)
    other = open_ticket(args={"purpose": "meals", "amount": 200.0})
    client = Client()
    client.force_login(demo["approver2"])
    for q in ("1800", "docking", "2500", "laptop"):
        html = client.get("/", {"q": q}).content.decode()
        assert f"/tickets/{ticket.pk}/" in html and "1 ticket" in html and f"/tickets/{other.pk}/" not in html, q
        found = client.get("/api/pending-calls", {"q": q}).json()["results"]
        assert [t["id"] for t in found] == [ticket.pk], q
        page = selectors.inbox_page(filters=InboxFilters(q=q), user=demo["approver2"])
        assert [t.pk for t in page] == [ticket.pk], q
    assert "0 tickets" in client.get("/", {"q": "1700"}).content.decode()
