"""The API says when a policy that would approve a ticket at once was passed over because its condition
could not be decided on the arguments (approvals.policy_match): the ticket's history and page said why a
person decides, the ticket JSON said nothing ("policy": null under the default rule). Now `passedOver`
lists such policies, with why, on the ticket and in the list; empty where none was."""

from __future__ import annotations

from django.test import Client

from approvals.api_routes import Ticket
from tests.approvals.policy_helpers import open_ticket, policy
from tests.approvals_factories import session_for

PASSED = [{"name": "petty cash", "version": 1, "why": "amount '12,00' could not be read as a number"}]


def _ticket_json(user, pk: int) -> dict:
    client = Client()
    client.force_login(user)
    body = client.get(f"/api/pending-calls/{pk}").json()
    Ticket.model_validate(body)  # as the API's schema says
    return body


def test_the_ticket_json_says_an_auto_approving_policy_was_passed_over(demo):
    policy("petty cash", tool="ask_for_approval", condition="amount < 50", auto_decision="approve", priority=5)
    default = open_ticket(args={"purpose": "coffee", "amount": "12,00"}, session=session_for(app_name="transfer_agent"))
    body = _ticket_json(demo["approver"], default.pk)
    assert body["policy"] is None and body["requiredApprovals"] == 1  # the default rule: a person decides
    assert body["passedOver"] == PASSED
    under_next = open_ticket(args={"purpose": "coffee", "amount": "12,00"})
    body = _ticket_json(demo["approver"], under_next.pk)
    assert body["policy"]["name"] == "Large reimbursements" and body["passedOver"] == PASSED
    client = Client()
    client.force_login(demo["approver"])
    listed = {t["id"]: t for t in client.get("/api/pending-calls?status=open").json()["results"]}
    assert listed[default.pk]["passedOver"] == PASSED and listed[under_next.pk]["passedOver"] == PASSED


def test_nothing_passed_over_is_an_empty_list(demo):
    policy("petty cash", tool="ask_for_approval", condition="amount < 50", auto_decision="approve", priority=5)
    for args in ({"purpose": "coffee", "amount": "$12"}, {"purpose": "laptop", "amount": 2500}):
        ticket = open_ticket(args=args)
        assert _ticket_json(demo["approver"], ticket.pk)["passedOver"] == [], args
