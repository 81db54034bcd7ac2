"""An approval's payload or answer body may not change the call's arguments. A transfer confirmation
approved with `{"payload": {"amount": 99999}}` (the API's approve, the ticket page's payload field, or a
`{"confirmed": true, "payload": {...}}` response) reached the tool as its confirmation's payload, which the
tool reads for the values to use: $99,999 went out where the ticket, its hash, its summaries and its policy
said $500, and no edit was recorded; a reimbursement answered `{"status": "approved", "amount": 99999}` was
reimbursed $99,999. Now a value under one of the call's arguments' names that is not the argument's value
as approved is refused (400: "to change the arguments, edit them (editedArgs)"), nothing recorded; a value
equal to it (a client echoing the call back) and every other key (a note) go as before."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.urls import reverse

from agents_app.models import Turn
from approvals import services
from approvals.models import PendingCall, Response, TicketActivity
from approvals.payloads import InvalidResponse
from tests.approvals_factories import ticket


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _post(user, url: str, body: dict):
    return _client(user).post(url, json.dumps(body), content_type="application/json")


def _untouched(call: PendingCall) -> None:
    call.refresh_from_db()
    assert call.is_open and call.edited_args is None
    assert not Response.objects.filter(pending_call=call).exists() and not Turn.objects.exists()
    assert not TicketActivity.objects.filter(ticket=call, kind=TicketActivity.Kind.EDITED).exists()


def _refused(r, name: str = "amount") -> None:
    assert r.status_code == 400, r.content
    detail = r.json()["detail"]
    assert name in detail and "edit them (editedArgs" in detail and "Nothing was sent" in detail, detail


def test_a_confirmations_approve_payload_naming_an_argument_is_refused(demo):
    call = ticket(kind="confirmation")
    url = f"/api/pending-calls/{call.pk}/approve"
    _refused(_post(demo["approver"], url, {"payload": {"amount": 99999}}))
    _untouched(call)
    _refused(_post(demo["approver"], url, {"payload": {"note": "ok", "recipient": "Mallory"}}), "recipient")
    _untouched(call)


def test_a_confirmations_payload_keeps_its_other_keys_and_may_echo_the_arguments(demo):
    call = ticket(kind="confirmation")
    r = _post(demo["approver"], f"/api/pending-calls/{call.pk}/approve", {"payload": {"note": "ok", "amount": 500}})
    assert r.status_code == 201, r.content
    assert r.json()["response"] == {"confirmed": True, "payload": {"note": "ok", "amount": 500}}


def test_a_payload_beside_an_edit_must_say_the_edited_values(demo):
    call = ticket(kind="confirmation")
    url = f"/api/pending-calls/{call.pk}/approve"
    edited = {"amount": 450.0, "recipient": "Bob"}
    _refused(_post(demo["approver"], url, {"editedArgs": edited, "payload": {"amount": 99999}}))
    _untouched(call)
    r = _post(demo["approver"], url, {"editedArgs": edited, "payload": {"amount": 450, "note": "n"}})
    assert r.status_code == 201 and r.json()["response"]["payload"] == {"amount": 450.0, "note": "n"}, r.content
    assert TicketActivity.objects.filter(ticket=call, kind=TicketActivity.Kind.EDITED).exists()


def test_the_ticket_pages_payload_field_is_refused_the_same(demo):
    call = ticket(kind="confirmation")
    url = reverse("approvals:ticket-act", args=[call.pk, "approve"])
    r = _client(demo["approver"]).post(url, {"approve-payload": '{"amount": 99999}'}, HTTP_HX_REQUEST="true")
    html = r.content.decode()
    assert r.status_code == 400 and "edit them (editedArgs" in html and "Nothing was sent" in html, html[-3000:]
    _untouched(call)


@pytest.mark.parametrize(
    ("kind", "body"),
    [
        ("confirmation", {"confirmed": True, "payload": {"amount": 99999}}),
        ("long_running", {"status": "approved", "amount": 99999}),
        ("long_running", {"status": "ok", "purpose": "yacht"}),
    ],
)
def test_an_approving_response_naming_an_argument_is_refused(demo, kind, body):
    call = ticket(kind=kind)
    _refused(
        _post(demo["approver"], f"/api/pending-calls/{call.pk}/responses", {"response": body, "final": True}),
        next(k for k in ("amount", "purpose") if k in (body.get("payload") or body)),
    )
    _untouched(call)


def test_an_approving_response_echoing_the_arguments_goes_as_before(demo):
    call = ticket()
    body = {"status": "approved", "amount": 200, "purpose": "meals", "ticket-id": "approval-ticket-1", "note": "x"}
    r = _post(demo["approver"], f"/api/pending-calls/{call.pk}/responses", {"response": body, "final": True})
    assert r.status_code == 201 and r.json()["response"] == body, r.content
    call.refresh_from_db()
    assert call.status == "approved"


def test_a_rejection_may_carry_what_it_likes(demo):
    """Not an approval: nothing runs on the arguments it names (a confirmation rejected does not run
    its tool; an agent told "rejected" does not act)."""
    rejected = ticket(kind="confirmation")
    r = _post(
        demo["approver"],
        f"/api/pending-calls/{rejected.pk}/responses",
        {"response": {"confirmed": False, "payload": {"amount": 1}}, "final": True},
    )
    assert r.status_code == 201, r.content
    rejected = ticket()
    r = _post(
        demo["approver"],
        f"/api/pending-calls/{rejected.pk}/responses",
        {"response": {"status": "rejected", "amount": 180}, "final": True},
    )
    assert r.status_code == 201, r.content


@pytest.mark.parametrize("status", ["done", "completed", "resolved", "closed", "filed as EXP-1"])
def test_a_final_answer_an_agent_may_act_on_may_not_carry_other_arguments(demo, status):
    """{"status": "done", "amount": 99999} on a $200 reimbursement (one approver, the default rule) was
    recorded "answered", no approval's rule applied, and the demo agent, which reads "done" as approved and
    the amount from the answer, reimbursed $99,999. An answer no word reads ("closed", a tool's own result)
    may be taken for an approval by an agent too: the same refusal."""
    call = ticket()
    body = {"status": status, "amount": 99999}
    _refused(_post(demo["approver"], f"/api/pending-calls/{call.pk}/responses", {"response": body, "final": True}))
    _untouched(call)


@pytest.mark.parametrize(
    ("status", "outcome"),
    [("done", "approved"), ("Completed", "approved"), (" Approved ", "approved"), ("cancelled", "rejected")],
)
def test_a_final_answer_saying_done_is_recorded_as_the_approval_it_is(demo, status, outcome):
    call = ticket()
    r = _post(
        demo["approver"], f"/api/pending-calls/{call.pk}/responses", {"response": {"status": status}, "final": True}
    )
    assert r.status_code == 201, r.content
    call.refresh_from_db()
    assert call.status == outcome


def test_the_service_refuses_it_too(demo):
    call = ticket(kind="confirmation")
    with pytest.raises(InvalidResponse, match=r"edit them \(editedArgs"):
        services.ticket_approve(ticket=call, actor=demo["approver"], payload={"amount": 99999})
    _untouched(call)
