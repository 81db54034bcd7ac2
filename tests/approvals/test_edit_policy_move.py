"""An approver's edit may not move a ticket under another policy's rules. A $200 reimbursement (the
default rule: any approver, one decision) edited to $2,500 and approved by one approver was paid: the
agent reimbursed $2,500 with one approval, where the demo's "Large reimbursements" (amount > 1000) takes
two from finance; a transfer confirmed for Bob, under a policy of transfers to Bob, edited to another
recipient went out under rules that never covered it. An edit's arguments are matched against the
policies as the agent's are: where the policy that would govern them is not the one that governs the
arguments the agent asked with, the approval is refused (409, naming both), nothing recorded."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from agents_app.models import Turn
from approvals import services
from approvals.edits import EditChangesRules
from approvals.models import PendingCall, Response, TicketActivity
from tests.approvals.policy_helpers import open_ticket, policy, team

SMALL = {"purpose": "laptop", "amount": 200.0}
BIG = {"purpose": "laptop", "amount": 2500.0}


def _approve(user, ticket: PendingCall, edited: dict):
    client = Client()
    client.force_login(user)
    body = json.dumps({"editedArgs": edited, "argsHash": ticket.args_hash})
    return client.post(f"/api/pending-calls/{ticket.pk}/approve", body, content_type="application/json")


def _untouched(ticket: PendingCall) -> None:
    ticket.refresh_from_db()
    assert ticket.is_open and ticket.edited_args is None
    assert not Response.objects.filter(pending_call=ticket).exists() and not Turn.objects.exists()
    assert not TicketActivity.objects.filter(ticket=ticket, kind=TicketActivity.Kind.EDITED).exists()


def test_an_edit_past_a_stricter_policys_condition_is_refused(demo):
    ticket = open_ticket(args=SMALL)
    assert ticket.policy_name == "" and ticket.required_approvals == 1
    r = _approve(demo["approver"], ticket, {**SMALL, "amount": 2500.0})
    assert r.status_code == 409, r.content
    detail = r.json()["detail"]
    assert "'Large reimbursements'" in detail and "default rule" in detail and "Nothing was sent" in detail, detail
    _untouched(ticket)


def test_an_edit_out_of_its_policy_is_refused_too(demo):
    """Down across the threshold as well: the rules of the arguments as edited are not the ticket's; the
    agent asks again with them (a reject says so)."""
    ticket = open_ticket(args=BIG)
    assert ticket.policy_name == "Large reimbursements"
    with pytest.raises(EditChangesRules, match="'Large reimbursements'"):
        services.ticket_approve(
            ticket=ticket, actor=demo["approver"], edited_args={**BIG, "amount": 150.0}, args_hash=ticket.args_hash
        )
    _untouched(ticket)


def test_a_confirmation_edited_to_a_recipient_its_policy_does_not_cover_is_refused(demo):
    treasury = team("treasury", demo["approver"])
    policy("transfers to Bob", tool="transfer_money", condition='recipient == "Bob"', groups=(treasury,), priority=5)
    ticket = open_ticket(kind="confirmation")
    assert ticket.policy_name == "transfers to Bob"
    r = _approve(demo["approver"], ticket, {"amount": 500.0, "recipient": "Mallory"})
    assert r.status_code == 409 and "'transfers to Bob'" in r.json()["detail"], r.content
    _untouched(ticket)


def test_edits_under_the_same_rules_go_as_before(demo):
    ticket = open_ticket(args=SMALL)
    r = _approve(demo["approver"], ticket, {**SMALL, "amount": 150.0})
    assert r.status_code == 201 and r.json()["response"] == {"status": "approved", "amount": 150.0}, r.content
    big = open_ticket(args=BIG)
    r = _approve(demo["approver"], big, {**BIG, "amount": 1800.0})
    assert r.status_code == 201 and r.json()["final"] is False, r.content  # 1 of 2: held, under its own rules
