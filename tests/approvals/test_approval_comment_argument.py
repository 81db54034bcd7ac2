"""An approver's comment never takes the place of an argument in the answer the agent reads. The
approval's body was {"status": "approved", <edited arguments>, "comment": <the approver's comment>}: for
a tool with an argument named `comment` (an expense's note, a ticket's text), the approver's comment
overwrote the edited value the approval approved, and an unedited call's `comment` was masked by it
(an agent that reads the approved arguments from the answer, as the demo agent reads `amount`, would
file the approver's remark as the expense's note). Now the approver's comment goes under a key that
names no argument of the call (`approver_comment`), and an edited `comment` reaches the agent as
approved."""

from __future__ import annotations

import json

from django.test import Client

from agents_app.models import Turn
from approvals import payloads
from approvals.models import PendingCall, Response
from tests import approvals_factories

ARGS = {"amount": 200.0, "comment": "client dinner, Acme"}


def _ticket() -> PendingCall:
    return approvals_factories.ticket(tool_name="file_expense", call_name="file_expense", args=dict(ARGS))


def _approve(user, ticket: PendingCall, body: dict):
    client = Client()
    client.force_login(user)
    url = f"/api/pending-calls/{ticket.pk}/approve"
    return client.post(url, json.dumps(body), content_type="application/json")


def _sent(ticket: PendingCall) -> dict:
    """What the agent receives: the function response of the turn the approval queued."""
    (turn,) = Turn.objects.filter(session=ticket.session)
    return turn.content["parts"][0]["function_response"]["response"]


def test_an_edited_comment_argument_reaches_the_agent_as_approved(demo):
    ticket = _ticket()
    edited = {"amount": 200.0, "comment": "client dinner, Acme (2 people)"}
    r = _approve(demo["approver"], ticket, {"editedArgs": edited, "comment": "checked the receipt"})
    assert r.status_code == 201, r.content
    sent = _sent(ticket)
    assert sent["status"] == "approved"
    assert sent["comment"] == "client dinner, Acme (2 people)", sent
    assert sent["approver_comment"] == "checked the receipt", sent
    recorded = Response.objects.get(pending_call=ticket)
    assert recorded.payload == sent and recorded.comment == "checked the receipt"


def test_an_unedited_comment_argument_is_not_masked_by_the_approvers_comment(demo):
    ticket = _ticket()
    r = _approve(demo["approver"], ticket, {"comment": "fine by me"})
    assert r.status_code == 201, r.content
    sent = _sent(ticket)
    assert sent.get("comment", ARGS["comment"]) == ARGS["comment"], sent  # the call's value, or none said
    assert sent["approver_comment"] == "fine by me", sent


def test_a_tool_without_a_comment_argument_gets_the_comment_as_before(demo):
    ticket = approvals_factories.ticket()  # ask_for_approval(purpose, amount)
    assert payloads.approve_payload(ticket, "ok") == {"status": "approved", "comment": "ok"}


def test_the_comment_key_names_no_argument_even_when_approver_comment_is_one(demo):
    args = {"comment": "a", "approver_comment": "b"}
    ticket = approvals_factories.ticket(tool_name="file_note", call_name="file_note", args=args)
    body = payloads.approve_payload(ticket, "looks right")
    assert body.get("comment", "a") == "a" and body.get("approver_comment", "b") == "b", body
    assert "looks right" in body.values(), body
