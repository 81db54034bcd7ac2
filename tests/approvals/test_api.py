"""The approvals API (/api/pending-calls...) against a live ASGI server, with the real in-process worker."""

from __future__ import annotations

import httpx
import pytest

from agents_app import services
from agents_app.models import StoredEvent, Turn
from approvals.models import PendingCall, Response

pytest_plugins = ["tests.conftest_live"]


def _ticket(wait, *, app="reimbursement_agent", user="requester", text="Please reimburse 200$ for meals"):
    session = services.session_create(app_name=app, user_id=user)
    services.message_send(session=session, text=text, streaming=False)
    call = wait(lambda: PendingCall.objects.filter(session=session).first(), what="a ticket")
    if call.kind == "long_running":
        wait(lambda: PendingCall.objects.get(pk=call.pk).initial_response, what="the tool's first response")
    wait(lambda: not Turn.objects.filter(session=session, status__in=["queued", "running"]).exists(), what="the turn")
    return PendingCall.objects.get(pk=call.pk)


def _said(session, words: str) -> bool:
    return any(
        words in p.get("text", "")
        for e in StoredEvent.objects.filter(session=session)
        for p in (e.data.get("content") or {}).get("parts", [])
    )


@pytest.fixture
def as_user(live_asgi, api_token):
    clients = []

    def make(user):
        clients.append(httpx.Client(base_url=live_asgi.url, headers=api_token(user), timeout=30))
        return clients[-1]

    yield make
    for c in clients:
        c.close()


def test_approve_resumes_the_agent(demo, worker, wait, as_user):
    call = _ticket(wait)
    r = as_user(demo["approver"]).post(f"/api/pending-calls/{call.pk}/approve", json={"comment": "fine"})
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["action"] == "approve" and body["final"] is True and body["actor"] == "approver"
    assert body["response"] == {"status": "approved", "comment": "fine"}
    wait(lambda: _said(call.session, "reimbursed $200.00 for meals"), what="the reimbursement")
    detail = as_user(demo["approver"]).get(f"/api/pending-calls/{call.pk}").json()
    assert detail["status"] == "approved" and detail["closed_by"] == "approver"
    assert [x["id"] for x in detail["responses"]] == [body["id"]]


def test_reject_sends_the_reason_to_the_agent(demo, worker, wait, as_user):
    call = _ticket(wait)
    r = as_user(demo["approver"]).post(f"/api/pending-calls/{call.pk}/reject", json={"reason": "no receipt"})
    assert r.status_code == 201 and r.json()["response"] == {"status": "rejected", "reason": "no receipt"}
    wait(lambda: _said(call.session, "was rejected: no receipt"), what="the rejection")
    assert PendingCall.objects.get(pk=call.pk).status == "rejected"


def test_intermediate_updates_keep_the_ticket_open_until_the_final(demo, worker, wait, as_user):
    call = _ticket(wait)
    approver = as_user(demo["approver"])
    url = f"/api/pending-calls/{call.pk}/responses"
    r = approver.post(url, json={"response": {"status": "in_progress", "message": "checking receipts"}, "final": False})
    assert r.status_code == 201 and r.json()["final"] is False
    wait(lambda: _said(call.session, "checking receipts"), what="the agent's reaction to the update")
    assert approver.get(f"/api/pending-calls/{call.pk}").json()["status"] == "in_progress"
    assert approver.post(url, json={"response": {"status": "approved"}, "comment": "ok"}).status_code == 201
    again = approver.post(url, json={"response": {"status": "approved"}})
    assert again.status_code == 409 and "already closed" in again.json()["detail"]
    assert approver.post(f"/api/pending-calls/{call.pk}/reject").status_code == 409
    history = approver.get(url).json()
    assert [(x["final"], x["response"]["status"]) for x in history] == [(False, "in_progress"), (True, "approved")]
    wait(lambda: _said(call.session, "reimbursed"), what="the reimbursement")


def test_confirmation_tickets_take_confirmed_true_or_false(demo, worker, wait, as_user):
    call = _ticket(wait, app="transfer_agent", text="transfer $500 to Bob")
    assert call.kind == "confirmation" and call.tool_name == "transfer_money"
    approver = as_user(demo["approver"])
    bad = approver.post(f"/api/pending-calls/{call.pk}/responses", json={"response": {"confirmed": "yes"}})
    assert bad.status_code == 400 and "confirmed" in bad.json()["detail"]
    update = approver.post(
        f"/api/pending-calls/{call.pk}/responses", json={"response": {"confirmed": True}, "final": False}
    )
    assert update.status_code == 400
    r = approver.post(f"/api/pending-calls/{call.pk}/reject", json={"reason": "unknown recipient"})
    assert r.status_code == 201 and r.json()["response"] == {
        "confirmed": False,
        "payload": {"reason": "unknown recipient"},
    }
    wait(lambda: _said(call.session, "Reason: unknown recipient"), what="the refusal reaching the tool")


def test_requester_answers_own_request_for_input_but_not_approvals(demo, worker, wait, as_user):
    question = _ticket(wait, app="intake_agent", text="a laptop")
    assert question.kind == "input"
    requester = as_user(demo["requester"])
    schema_miss = requester.post(f"/api/pending-calls/{question.pk}/responses", json={"response": {"budget": 3}})
    assert schema_miss.status_code == 400
    ok = requester.post(f"/api/pending-calls/{question.pk}/responses", json={"response": {"model": "X1"}})
    assert ok.status_code == 201
    approval = _ticket(wait)
    r = requester.post(f"/api/pending-calls/{approval.pk}/approve")
    assert r.status_code == 403 and "only approvers" in r.json()["detail"]
    assert not Response.objects.filter(pending_call=approval).exists()


def test_list_shows_visible_tickets_filtered_and_paginated(demo, worker, wait, as_user):
    mine = _ticket(wait)
    theirs = _ticket(wait, user="someone_else")
    ticket = _ticket(wait, app="ticket_agent", text="open a high ticket")
    approver = as_user(demo["approver"])
    page = approver.get("/api/pending-calls").json()
    assert page["count"] == 3 and [t["id"] for t in page["results"]] == [ticket.pk, theirs.pk, mine.pk]
    first = page["results"][-1]
    assert first["args"] == {"purpose": "meals", "amount": 200.0} and first["initial_response"]["status"] == "pending"
    assert first["session"]["app_name"] == "reimbursement_agent" and first["session"]["user_id"] == "requester"
    assert approver.get("/api/pending-calls?agent=ticket_agent").json()["count"] == 1
    assert approver.get("/api/pending-calls?tool=ask_for_approval").json()["count"] == 2
    assert approver.get("/api/pending-calls?kind=long_running").json()["count"] == 3
    paged = approver.get("/api/pending-calls?page_size=2&page=2").json()
    assert [t["id"] for t in paged["results"]] == [mine.pk] and paged["next"] is None and paged["previous"]
    approver.post(f"/api/pending-calls/{mine.pk}/approve")
    assert approver.get("/api/pending-calls").json()["count"] == 2
    assert approver.get("/api/pending-calls?status=approved").json()["results"][0]["id"] == mine.pk
    assert approver.get("/api/pending-calls?status=closed").json()["count"] == 1
    assert approver.get("/api/pending-calls?status=all").json()["count"] == 3
    assert approver.get("/api/pending-calls?status=bogus").status_code == 400
    assert approver.get("/api/pending-calls?kind=bogus").status_code == 400
    assert approver.get("/api/pending-calls?page=zero").status_code == 400
    # A requester sees only the tickets of their own conversations; others' are 404.
    requester = as_user(demo["requester"])
    assert {t["id"] for t in requester.get("/api/pending-calls?status=all").json()["results"]} == {mine.pk, ticket.pk}
    hidden = requester.get(f"/api/pending-calls/{theirs.pk}")
    assert hidden.status_code == 404 and hidden.json() == {"detail": f"Pending call not found: {theirs.pk}"}
    assert requester.post(f"/api/pending-calls/{theirs.pk}/approve").status_code == 404
    assert approver.get("/api/pending-calls/999999").status_code == 404
    assert as_user(demo["observer"]).get("/api/pending-calls?status=all").json()["count"] == 3


def test_bad_response_bodies_are_400(demo, worker, wait, as_user):
    call = _ticket(wait)
    approver = as_user(demo["approver"])
    url = f"/api/pending-calls/{call.pk}/responses"
    assert approver.post(url, content=b"nope", headers={"Content-Type": "application/json"}).status_code == 400
    assert approver.post(url, json={"final": True}).json()["detail"] == "response: Field required."
    assert approver.post(url, json={"response": "approved"}).status_code == 400
    assert approver.post(url, json={"response": {}, "final": "true"}).status_code == 400
    assert approver.post(url, json={"response": {}, "extra": 1}).status_code == 400
    assert approver.post(f"/api/pending-calls/{call.pk}/approve", json={"comment": 5}).status_code == 400
    assert not Response.objects.exists()
