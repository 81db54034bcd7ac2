"""An edit of an argument named `status` cannot reach the agent beside the approval's own status. The body
of an approval is {"status": "approved", <edited arguments>}: for a long-running tool with a `status`
argument (set_invoice_status(invoice, status)), an approval editing it to "void" sent the agent
{"status": "void"}: no "approved" left in it, though the record says approved (and an edit to "rejected"
told the agent it was rejected). Now such an edit is refused (400, nothing recorded): reject the ticket
and let the agent ask again with the value meant. An edit of the other arguments goes as before."""

from __future__ import annotations

import json

from django.test import Client

from agents_app.models import Turn
from approvals.models import PendingCall, Response
from tests import approvals_factories

ARGS = {"invoice": "INV-7", "status": "paid"}


def _ticket() -> PendingCall:
    return approvals_factories.ticket(tool_name="set_invoice_status", call_name="set_invoice_status", args=dict(ARGS))


def _approve(user, ticket: PendingCall, body: dict):
    client = Client()
    client.force_login(user)
    return client.post(f"/api/pending-calls/{ticket.pk}/approve", json.dumps(body), content_type="application/json")


def test_an_edit_of_a_status_argument_is_refused_and_nothing_is_sent(demo):
    ticket = _ticket()
    r = _approve(demo["approver"], ticket, {"editedArgs": {"invoice": "INV-7", "status": "void"}})
    assert r.status_code == 400, r.content
    assert "status" in r.json()["detail"] and "Nothing was sent" in r.json()["detail"], r.json()
    ticket.refresh_from_db()
    assert ticket.is_open and ticket.edited_args is None
    assert not Response.objects.filter(pending_call=ticket).exists()
    assert not Turn.objects.filter(session=ticket.session).exists()


def test_an_edit_of_another_argument_of_such_a_tool_goes_as_before(demo):
    ticket = _ticket()
    r = _approve(demo["approver"], ticket, {"editedArgs": {"invoice": "INV-8", "status": "paid"}})
    assert r.status_code == 201, r.content
    (turn,) = Turn.objects.filter(session=ticket.session)
    assert turn.content["parts"][0]["function_response"]["response"] == {"status": "approved", "invoice": "INV-8"}
