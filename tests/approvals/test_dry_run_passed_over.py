"""The dry run tells a policy admin what the tickets would: a policy that would approve at once is passed
over where its condition cannot be read on a ticket's arguments (approvals.policy_match), and a ticket
lists such policies (`passedOver`). The dry run left those tickets out ("0 match"), saying nothing of the
policy passed over, nor, for the policy that applied instead, of the one passed over ahead of it."""

from __future__ import annotations

import re
from html import unescape

from django.test import Client

from approvals import services
from approvals.models import Policy
from approvals.policy_routes import DryRunOut
from tests.approvals.policy_helpers import open_ticket, policy

WHY = "amount '12,00' could not be read as a number"


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", html)))


def _closed(demo) -> tuple:
    petty = policy("petty cash", tool="ask_for_approval", condition="amount < 50", auto_decision="approve", priority=5)
    unread = open_ticket(args={"purpose": "coffee", "amount": "12,00"})  # petty cash passed over: Large applies
    services.ticket_reject(ticket=unread, actor=demo["approver"], reason="write the amount as 12.00")
    read = open_ticket(args={"purpose": "coffee", "amount": 12})  # approved at once by petty cash
    assert read.status == "approved" and unread.policy_name == "Large reimbursements"
    return petty, unread, read


def _dry(client: Client, policy_id: int) -> str:
    r = client.get(f"/policies/{policy_id}/dry-run/?last=10", HTTP_HX_REQUEST="true")
    assert r.status_code == 200
    return _text(r.content.decode())


def test_the_dry_run_page_shows_the_policies_passed_over(demo):
    petty, unread, read = _closed(demo)
    c = Client()
    c.force_login(demo["agentadmin"])
    text = _dry(c, petty.pk)
    assert "1 of the last 2 closed tickets match" in text
    assert "passed over (its condition could not be read on the arguments; a person decides): 1" in text, text
    assert f"#{unread.pk} (rejected): passed over: a person decides; 'petty cash' passed over: {WHY}" in text, text
    assert f"#{read.pk} (approved): auto-approved" in text
    text = _dry(c, Policy.objects.get(name="Large reimbursements").pk)  # the policy that applied instead
    assert f"#{unread.pk} (rejected): routed to finance; 'petty cash' passed over: {WHY}" in text, text


def test_the_dry_run_json_lists_the_policies_passed_over(demo):
    petty, unread, read = _closed(demo)
    c = Client()
    c.force_login(demo["agentadmin"])
    body = c.get(f"/api/policies/{petty.pk}/dry-run?last=10").json()
    DryRunOut.model_validate(body)
    assert (body["matched"], body["wouldApply"], body["passedOver"]) == (1, 1, 1)
    tickets = {t["id"]: t for t in body["tickets"]}
    assert tickets[unread.pk]["passedOver"] == [{"name": "petty cash", "version": 1, "why": WHY}]
    assert tickets[read.pk]["passedOver"] == []
