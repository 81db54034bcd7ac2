"""What the agent does on an approval is what the ticket approved, over the live server and its worker.
A transfer of $500 to Bob approved through the API with `{"payload": {"amount": 99999}}`, or confirmed on
`/run` with `{"confirmed": true, "payload": {"amount": 99999}}`, transferred $99,999 (the tool reads its
confirmation's payload for the values to use), and a $200 reimbursement answered on `/run` with
`{"status": "approved", "amount": 99999}` was reimbursed $99,999: no edit recorded, no policy matched
against $99,999, every summary saying $500 or $200. Now each is refused 400 ("to change the arguments, edit
them (editedArgs)"), nothing recorded or run, and the same answer without the changed value goes through."""

from __future__ import annotations

import httpx

from agents_app.models import Turn
from approvals.models import PendingCall, Response
from tests.live_server import function_response_message, long_running_call, text_message

pytest_plugins = ["tests.conftest_live"]


def _results(events: list[dict], name: str) -> list[dict]:
    return [
        p["functionResponse"]["response"]
        for e in events
        for p in (e.get("content") or {}).get("parts", [])
        if p.get("functionResponse", {}).get("name") == name
    ]


def _unanswered(ticket: PendingCall, turns: int) -> None:
    assert PendingCall.objects.get(pk=ticket.pk).status == "pending"
    assert not Response.objects.filter(pending_call=ticket).exists() and Turn.objects.count() == turns


def _refused(r: httpx.Response) -> None:
    assert r.status_code == 400, (r.status_code, r.text)
    detail = r.json()["detail"]
    assert "amount" in detail and "edit them (editedArgs" in detail, detail


def test_a_transfer_approved_with_a_payload_amount_is_refused_on_the_api_and_on_run(
    demo, worker, adk_client, api_token, wait
):
    requester = adk_client(demo["requester"])
    session = requester.create_session("transfer_agent")
    call = long_running_call(
        requester.run("transfer_agent", session["id"], text_message("transfer $500 to Bob")).json()
    )
    ticket = PendingCall.objects.get(call_id=call["id"])
    assert ticket.tool_args == {"amount": 500, "recipient": "Bob"}, ticket.tool_args
    admin = httpx.Client(base_url=requester.http.base_url, headers=api_token(demo["admin"]), timeout=60)
    turns = Turn.objects.count()

    _refused(admin.post(f"/api/pending-calls/{ticket.pk}/approve", json={"payload": {"amount": 99999}}))
    _unanswered(ticket, turns)
    answer = function_response_message(call["id"], call["name"], {"confirmed": True, "payload": {"amount": 99999}})
    _refused(admin.post("/api/adk/run", json=requester.run_body("transfer_agent", session["id"], answer)))
    _unanswered(ticket, turns)

    r = admin.post(f"/api/pending-calls/{ticket.pk}/approve", json={"payload": {"note": "checked", "amount": 500}})
    assert r.status_code == 201, r.text
    wait(lambda: not Turn.objects.filter(status__in=["queued", "running"]).exists(), timeout=30, what="the turn")
    events = requester.get_session("transfer_agent", session["id"])["events"]
    made = [(t["status"], t["amount"]) for t in _results(events, "transfer_money") if "error" not in t]
    assert made == [("transferred", 500)], events


def test_a_reimbursement_approved_on_run_with_another_amount_is_refused(demo, worker, adk_client, api_token):
    requester = adk_client(demo["requester"])
    session = requester.create_session("reimbursement_agent")
    first = requester.run("reimbursement_agent", session["id"], text_message("Please reimburse 200$ for meals")).json()
    call = long_running_call(first)
    ticket = PendingCall.objects.get(call_id=call["id"])
    approver = httpx.Client(base_url=requester.http.base_url, headers=api_token(demo["admin"]), timeout=60)
    turns = Turn.objects.count()

    answer = function_response_message(call["id"], call["name"], {"status": "approved", "amount": 99999})
    _refused(approver.post("/api/adk/run", json=requester.run_body("reimbursement_agent", session["id"], answer)))
    _unanswered(ticket, turns)

    echoed = {**_results(first, "ask_for_approval")[0], "status": "approved"}  # the seeds' client: the response back
    answer = function_response_message(call["id"], call["name"], echoed)
    ok = approver.post("/api/adk/run", json=requester.run_body("reimbursement_agent", session["id"], answer))
    assert ok.status_code == 200, ok.text
    assert [(t["status"], t["amount"]) for t in _results(ok.json(), "reimburse")] == [("ok", 200)], ok.json()
    assert PendingCall.objects.get(pk=ticket.pk).status == "approved"
