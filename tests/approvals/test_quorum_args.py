"""Approvals of a ticket whose arguments an approver edited must say which arguments they approve:
an approval sent with neither the hash of the arguments its sender saw (`argsHash`, the ticket page's
hidden field) nor its own `editedArgs` is refused (409, nothing recorded) wherever it comes from:
the approvals API, the ticket page, the inbox's bulk approve, a FunctionResponse on /run. It used to
count toward arguments its sender may never have seen. A ticket nobody edited is answered as before."""

from __future__ import annotations

import json
import re

import pytest
from django.test import Client

from agents_app.models import Turn
from approvals.models import PendingCall, Response
from tests.approvals.policy_helpers import open_ticket, person, team

BIG = {"purpose": "laptop", "amount": 2500.0}  # the demo's "Large reimbursements": finance, 2 of N
EDITED = {"purpose": "laptop", "amount": 1800.0}


def _post(client: Client, url: str, body: dict | None = None):
    return client.post(url, data=body or {}, content_type="application/json")


@pytest.fixture
def edited(api, demo) -> PendingCall:
    """A 2-of-N ticket whose amount approver2 edited with their approval (which counts: 1 of 2)."""
    ticket = open_ticket(args=BIG)
    r = _post(api(demo["approver2"]), f"/api/pending-calls/{ticket.pk}/approve", {"editedArgs": EDITED})
    assert r.status_code == 201 and r.json()["final"] is False
    ticket.refresh_from_db()
    assert ticket.edited_args == EDITED
    return ticket


@pytest.fixture
def fay(demo):
    return person("fay", team("finance"), approver=True)


def _unchanged(ticket: PendingCall, responses: int = 1) -> None:
    """Nothing recorded: the ticket still open with its one approval, the agent not resumed."""
    ticket.refresh_from_db()
    assert ticket.status == "pending" and Response.objects.filter(pending_call=ticket).count() == responses
    assert not Turn.objects.filter(session=ticket.session).exists()


def _names_the_edit(detail: str, ticket: PendingCall) -> None:
    assert f"arguments of ticket #{ticket.pk} were edited by approver2" in detail, detail
    assert "amount $2,500.00 → $1,800.00" in detail and "argsHash" in detail, detail


def test_an_api_approval_that_does_not_say_which_arguments_is_refused(api, edited, fay):
    url = f"/api/pending-calls/{edited.pk}"
    bare = [("/approve", {}), ("/approve", {"comment": "ok"}), ("/responses", {"response": {"status": "approved"}})]
    for path, body in bare:
        r = _post(api(fay), url + path, body)
        assert r.status_code == 409, (path, r.content)
        _names_the_edit(r.json()["detail"], edited)
    _unchanged(edited)
    shown = api(fay).get(url).json()["argsHash"]  # the ticket's JSON says the hash of what it shows now
    assert shown == edited.args_hash
    done = _post(api(fay), url + "/approve", {"argsHash": shown})
    assert done.status_code == 201 and done.json()["final"] is True
    assert done.json()["response"] == {"status": "approved", "amount": 1800.0}


def test_an_api_approval_with_its_own_edited_arguments_says_which(api, edited, fay):
    r = _post(api(fay), f"/api/pending-calls/{edited.pk}/approve", {"editedArgs": EDITED})
    assert r.status_code == 201 and r.json()["final"] is True, r.content


def test_a_custom_approval_with_the_hash_and_a_rejection_without_it_are_taken(api, edited, fay, demo):
    url = f"/api/pending-calls/{edited.pk}"
    ok = _post(api(fay), url + "/responses", {"response": {"status": "approved"}, "argsHash": edited.args_hash})
    assert ok.status_code == 201 and ok.json()["final"] is True, ok.content
    other = open_ticket(args=BIG)
    _post(api(demo["approver2"]), f"/api/pending-calls/{other.pk}/approve", {"editedArgs": EDITED})
    no = _post(api(fay), f"/api/pending-calls/{other.pk}/reject", {"reason": "no"})  # approves nothing
    assert no.status_code == 201 and no.json()["final"] is True


def test_the_ticket_pages_forms_say_which_arguments_and_a_post_without_is_refused(api, edited, fay):
    page = api(fay).get(f"/tickets/{edited.pk}/").content.decode()
    for form in ("approve", "reject", "update", "custom"):
        assert re.search(rf'name="{form}-args_hash" value="{edited.args_hash}"', page), form
    assert ">Args hash<" not in page  # a hidden field, not a labelled one
    bare = api(fay).post(f"/tickets/{edited.pk}/approve/", {"approve-comment": "ok"}, HTTP_HX_REQUEST="true")
    assert bare.status_code == 409
    _names_the_edit(bare.content.decode(), edited)
    _unchanged(edited)
    custom = {"custom-body": '{"status": "approved"}', "custom-final": "on", "custom-args_hash": edited.args_hash}
    sent = api(fay).post(f"/tickets/{edited.pk}/custom/", custom, HTTP_HX_REQUEST="true")
    assert sent.status_code == 200, sent.content.decode()[:500]
    edited.refresh_from_db()
    assert edited.status == "approved"


def test_a_bulk_approval_of_an_edited_ticket_is_refused_and_the_others_go_through(api, edited, fay):
    plain = open_ticket(args={"purpose": "meals", "amount": 200.0})
    body = {"action": "approve", "confirm": "1", "ticket": [edited.pk, plain.pk]}
    html = api(fay).post("/inbox/bulk/", body).content.decode()
    refused = re.search(rf'id="bulk-result-{edited.pk}">(.*?)</li>', html, re.S)
    assert refused and "were edited by approver2" in refused.group(1), html
    _unchanged(edited)
    plain.refresh_from_db()
    assert plain.status == "approved"


def _run(client: Client, ticket: PendingCall, response: dict):
    part = {"functionResponse": {"id": ticket.call_id, "name": ticket.call_name, "response": response}}
    body = {
        "appName": ticket.session.app_name,
        "userId": ticket.session.user_id,
        "sessionId": ticket.session.session_id,
        "newMessage": {"role": "user", "parts": [part]},
    }
    return client.post("/api/adk/run", json.dumps(body), content_type="application/json")


def test_a_run_function_response_approving_an_edited_ticket_is_refused(api, edited, demo):
    r = _run(api(demo["admin"]), edited, {"status": "approved"})
    assert r.status_code == 409, r.content
    _names_the_edit(r.json()["detail"], edited)
    assert f"/api/pending-calls/{edited.pk}/approve" in r.json()["detail"]
    _unchanged(edited)


def test_a_run_function_response_approving_an_unedited_ticket_works_as_before(api, demo):
    ticket = open_ticket(args=BIG)
    r = _run(api(demo["admin"]), ticket, {"status": "approved"})
    assert r.status_code == 200 and r.json() == []  # held: 1 of 2, no run
    assert Response.objects.get(pending_call=ticket).action == "approve"


def test_a_custom_approval_closing_an_edited_ticket_sends_the_edited_arguments(api, edited, fay):
    """approver2's approval edited $2,500 to $1,800 and counts; fay closes the ticket with a custom
    approval (`{"status": "approved"}` and the hash of the $1,800 arguments). The agent was sent that body
    as written, no amount in it, and the demo agent, which falls back to the call's amount, would reimburse
    $2,500 where the record says $1,800 was approved. Now the edit is merged in, as an approve's is."""
    url = f"/api/pending-calls/{edited.pk}/responses"
    ok = _post(api(fay), url, {"response": {"status": "approved", "note": "fine"}, "argsHash": edited.args_hash})
    assert ok.status_code == 201 and ok.json()["final"] is True, ok.content
    assert ok.json()["response"] == {"status": "approved", "note": "fine", "amount": 1800.0}
    turn = Turn.objects.get(session=edited.session)
    sent = turn.content["parts"][0]["function_response"]["response"]
    assert sent == {"status": "approved", "note": "fine", "amount": 1800.0}


def test_a_custom_approval_of_an_unedited_ticket_is_sent_as_written(api, demo, fay):
    ticket = open_ticket(args=BIG)
    url = f"/api/pending-calls/{ticket.pk}"
    assert _post(api(demo["approver2"]), url + "/approve").status_code == 201
    ok = _post(api(fay), url + "/responses", {"response": {"status": "approved", "note": "fine"}})
    assert ok.status_code == 201 and ok.json()["response"] == {"status": "approved", "note": "fine"}, ok.content


def test_a_confirmations_custom_approval_carries_the_edit_in_its_payload(demo):
    """The confirmation's tool reads the values to use from tool_confirmation.payload."""
    from approvals import payloads
    from tests.approvals_factories import ticket

    call = ticket(kind="confirmation")
    call.edited_args = {**call.current_args, "amount": 300.0}
    body = payloads.with_edits(call, {"confirmed": True, "payload": {"note": "ok"}})
    assert body == {"confirmed": True, "payload": {"note": "ok", "amount": 300.0}}
    assert payloads.with_edits(call, {"confirmed": True}) == {"confirmed": True, "payload": {"amount": 300.0}}
