"""A function response on `/run` answers the call whose id it carries under that call's name, as ADK's
clients send it. One with another name (or none) was recorded as the ticket's decision and passed on
as sent, where ADK does not take it for that call's answer: a confirmation answered as `transfer_money`
(the confirmed tool's name, not `adk_request_confirmation`) closed the ticket "approved by admin" while
ADK dropped the answer and the agent said the transfer was not made; the ticket closed, nobody could
confirm it again. Now 400 naming the call's name, nothing recorded, and the right answer still goes."""

from __future__ import annotations

import httpx

from agents_app.models import Turn
from approvals.models import PendingCall, Response
from tests.live_server import function_response_message, long_running_call, text_message

pytest_plugins = ["tests.conftest_live"]


def test_an_answer_under_another_name_than_its_calls_is_refused_and_records_nothing(
    demo, worker, adk_client, api_token
):
    requester = adk_client(demo["requester"])
    session = requester.create_session("transfer_agent")
    first = requester.run("transfer_agent", session["id"], text_message("transfer $500 to Bob")).json()
    call = long_running_call(first)
    assert call["name"] == "adk_request_confirmation"
    ticket = PendingCall.objects.get(call_id=call["id"])
    admin = httpx.Client(base_url=requester.http.base_url, headers=api_token(demo["admin"]), timeout=60)
    turns = Turn.objects.count()
    for name in ("transfer_money", None):
        answer = function_response_message(call["id"], name, {"confirmed": True})
        if name is None:
            del answer["parts"][0]["functionResponse"]["name"]
        r = admin.post("/api/adk/run", json=requester.run_body("transfer_agent", session["id"], answer))
        assert r.status_code == 400, (name, r.status_code, r.text)
        detail = r.json()["detail"]
        assert call["id"] in detail and "'adk_request_confirmation'" in detail, detail
        assert PendingCall.objects.get(pk=ticket.pk).status == "pending"
        assert not Response.objects.filter(pending_call=ticket).exists() and Turn.objects.count() == turns

    answer = function_response_message(call["id"], call["name"], {"confirmed": True})
    ok = admin.post("/api/adk/run", json=requester.run_body("transfer_agent", session["id"], answer))
    assert ok.status_code == 200, ok.text
    results = [
        p["functionResponse"]["response"]
        for e in ok.json()
        for p in (e.get("content") or {}).get("parts", [])
        if p.get("functionResponse", {}).get("name") == "transfer_money"
    ]
    assert [r.get("status") for r in results] == ["transferred"], ok.json()
    assert PendingCall.objects.get(pk=ticket.pk).status == "approved"
