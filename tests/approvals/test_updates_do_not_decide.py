"""An update (an intermediate answer: the ticket stays open) may not tell the agent its request was decided.
One approver of a $2,500 'Large reimbursements' ticket (two approvals from finance) sent
`{"response": {"status": "approved"}, "final": false}` to /responses: 201, the ticket "in progress" with
no approval counted, and the agent reimbursed $2,500.00 at once ("Done: I reimbursed $2,500.00 for
laptop."). The same through /run (`will_continue: true`) and the ticket page's update form (its Extra JSON
sets the status). Now an update whose status decides (approved, rejected, done, expired, ...) is refused
with 400 before anything is recorded; updates with other statuses go as before."""

from __future__ import annotations

import time

import httpx
from django.test import Client
from django.urls import reverse

from agents_app.demo import model as demo_model
from agents_app.models import StoredEvent, Turn
from approvals import payloads
from approvals.models import PendingCall, Response
from tests.approvals.policy_helpers import open_ticket
from tests.live_server import function_response_message, long_running_call, text_message

pytest_plugins = ["tests.conftest_live"]

BIG = {"purpose": "laptop", "amount": 2500.0}


def _reimbursed(session_id: str) -> list[dict]:
    calls = []
    for event in StoredEvent.objects.filter(session__session_id=session_id):
        for part in (event.data.get("content") or {}).get("parts") or []:
            call = part.get("function_call") or part.get("functionCall")
            if call and call.get("name") == "reimburse":
                calls.append(call["args"])
    return calls


def _untouched(ticket: PendingCall, turns: int) -> None:
    ticket.refresh_from_db()
    assert ticket.status == PendingCall.Status.PENDING
    assert not Response.objects.filter(pending_call=ticket).exists()
    assert Turn.objects.filter(session=ticket.session).count() == turns


def test_an_update_saying_approved_is_refused_and_the_agent_pays_nothing(demo, worker, adk_client, api_token):
    requester = adk_client(demo["requester"])
    session = requester.create_session("reimbursement_agent")
    first = requester.run("reimbursement_agent", session["id"], text_message("Please reimburse 2500$ for laptop"))
    call = long_running_call(first.json())
    ticket = PendingCall.objects.get(call_id=call["id"])
    assert (ticket.policy_name, ticket.required_approvals) == ("Large reimbursements", 2)
    turns = Turn.objects.filter(session=ticket.session).count()
    base = requester.http.base_url
    approver = httpx.Client(base_url=base, headers=api_token(demo["approver"]), timeout=60)

    r = approver.post(
        f"/api/pending-calls/{ticket.pk}/responses", json={"response": {"status": "approved"}, "final": False}
    )
    assert r.status_code == 400, r.text
    assert "An update (final: false) reports progress" in r.json()["detail"], r.text
    update = function_response_message(call["id"], call["name"], {"status": "Approved"})
    update["parts"][0]["functionResponse"]["willContinue"] = True
    admin = httpx.Client(base_url=base, headers=api_token(demo["admin"]), timeout=60)
    r = admin.post("/api/adk/run", json=requester.run_body("reimbursement_agent", session["id"], update))
    assert r.status_code == 400 and "reports progress" in r.json()["detail"], r.text
    time.sleep(0.5)  # a queued turn would have run by now
    _untouched(ticket, turns)
    assert _reimbursed(session["id"]) == []

    ok = approver.post(
        f"/api/pending-calls/{ticket.pk}/responses", json={"response": {"status": "checking"}, "final": False}
    )
    assert ok.status_code == 201 and ok.json()["final"] is False, ok.text


def test_the_pages_update_form_may_not_set_a_deciding_status(demo):
    ticket = open_ticket(args=BIG)
    client = Client()
    client.force_login(demo["approver"])
    url = reverse("approvals:ticket-act", args=[ticket.pk, "update"])
    for status in ("approved", "rejected", "done", " EXPIRED "):
        body = {"update-message": "nearly there", "update-extra": f'{{"status": "{status}"}}'}
        r = client.post(url, body)
        assert r.status_code == 400 and "reports progress" in r.content.decode(), (status, r.status_code)
    _untouched(ticket, 0)
    r = client.post(url, {"update-message": "checking receipts", "update-extra": '{"eta": "1h"}'})
    assert r.status_code == 302 and Response.objects.get(pending_call=ticket).payload["status"] == "in_progress"


def test_the_demo_agents_decision_words_are_deciding_words():
    """The words the demo agent acts on as a decision are refused in an update."""
    assert demo_model.APPROVED | demo_model.REJECTED <= payloads.DECIDING_WORDS
