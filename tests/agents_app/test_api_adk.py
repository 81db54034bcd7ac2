"""ADK's REST API (/api/adk/) against a live ASGI server, with the real in-process worker."""

from __future__ import annotations

import httpx

from agents_app.models import AdkSession, StoredEvent, Turn
from approvals.models import PendingCall
from tests.live_server import (
    function_calls,
    function_response_message,
    long_running_call,
    seed_client_loop,
    text_message,
    texts,
)

pytest_plugins = ["tests.conftest_live"]


def test_seed_client_loop_over_run(demo, worker, adk_client):
    client = adk_client(demo["approver"])
    apps = client.http.get("/api/adk/list-apps").json()
    assert "reimbursement_agent" in apps
    loop = seed_client_loop(client)
    first, second = loop["first"], loop["second"]
    # ADK's event JSON: camelCase, and only the run's agent events (not the user's message).
    assert all(e["author"] == "reimbursement_agent" for e in first + second)
    assert {"id", "invocationId", "author", "timestamp", "actions"} <= set(first[0])
    assert loop["call"]["args"] == {"purpose": "meals", "amount": 200.0}
    # The answer resumed the original invocation.
    assert {e["invocationId"] for e in second} == {first[0]["invocationId"]}
    session = client.get_session("reimbursement_agent", loop["session"]["id"])
    assert session["appName"] == "reimbursement_agent" and session["userId"] == "approver"
    assert len(session["events"]) == len(first) + len(second) + 2  # + the two user messages
    ticket = PendingCall.objects.get(call_id=loop["call"]["id"])
    assert ticket.status == "approved" and ticket.closed_by == demo["approver"]


def test_seed_client_loop_over_run_sse_streams_partials(demo, worker, adk_client):
    client = adk_client(demo["approver"])
    loop = seed_client_loop(client, sse=True)
    partials = [e for e in loop["first"] if e.get("partial")]
    finals = [e for e in loop["first"] if not e.get("partial")]
    assert partials, "streaming: true sends the model's chunks"
    # Chunks share the id of the final event that carries the whole text.
    final_text_event = next(e for e in finals if texts([e]))
    assert {p["id"] for p in partials} == {final_text_event["id"]}
    assert "".join(texts(partials)) == texts([final_text_event])[0]
    # Each chunk is the partial event ADK gave: its invocation and its node in the agent tree.
    assert {p["invocationId"] for p in partials} == {final_text_event["invocationId"]}
    assert {p["nodeInfo"]["path"] for p in partials} == {final_text_event["nodeInfo"]["path"]}
    assert final_text_event["nodeInfo"]["path"].startswith("reimbursement_agent")
    assert not StoredEvent.objects.filter(data__partial=True).exists()


def test_run_sse_without_streaming_sends_only_stored_events(demo, worker, adk_client):
    client = adk_client(demo["approver"])
    session = client.create_session("stock_agent")
    events = client.run_sse("stock_agent", session["id"], text_message("What is GOOG at?"))
    assert not any(e.get("partial") for e in events)
    assert function_calls(events) == ["get_stock_price"]
    assert any("$178.42" in t for t in texts(events))


def test_sessions_create_list_get_delete(demo, live_asgi, api_token):
    http = httpx.Client(base_url=live_asgi.url, headers=api_token(demo["requester"]))
    base = "/api/adk/apps/stock_agent/users/requester/sessions"
    r = http.post(base, json={"sessionId": "s1", "state": {"topic": "prices", "temp:x": 1}})
    assert r.status_code == 200, r.text
    assert r.json() == {
        "id": "s1",
        "appName": "stock_agent",
        "userId": "requester",
        "state": {"topic": "prices"},
        "events": [],
        "lastUpdateTime": r.json()["lastUpdateTime"],
    }
    assert http.post(base, json={"session_id": "s2"}).json()["id"] == "s2"  # snake_case, as ADK accepts
    generated = http.post(base).json()["id"]  # no body at all
    assert http.post(base, json={"sessionId": "s1"}).json() == {"detail": "Session already exists: s1"}
    assert http.post(base, json={"sessionId": "s1"}).status_code == 409
    listed = http.get(base).json()
    assert {s["id"] for s in listed} == {"s1", "s2", generated}
    assert all(s["events"] == [] for s in listed)
    assert http.get(f"{base}/s1").json()["state"] == {"topic": "prices"}
    assert http.post(f"{base}/s3", json={"k": "v"}).json()["state"] == {"k": "v"}  # ADK's create-with-id
    assert http.delete(f"{base}/s1").status_code == 200
    r = http.get(f"{base}/s1")
    assert (r.status_code, r.json()) == (404, {"detail": "Session not found: s1"})
    assert http.delete(f"{base}/s1").json() is None  # as ADK: deleting what is gone is done (a retried DELETE)


def test_list_apps_detailed(demo, live_asgi, api_token):
    apps = httpx.get(f"{live_asgi.url}/api/adk/list-apps?detailed=true", headers=api_token(demo["requester"])).json()
    by_name = {a["name"]: a for a in apps["apps"]}
    assert by_name["reimbursement_agent"]["rootAgentName"] == "reimbursement_agent"
    assert "manager" in by_name["reimbursement_agent"]["description"]


def test_bad_input_is_refused_with_a_message(demo, live_asgi, api_token):
    http = httpx.Client(base_url=live_asgi.url, headers=api_token(demo["requester"]))
    http.post("/api/adk/apps/stock_agent/users/requester/sessions", json={"sessionId": "s"})
    body = {"appName": "stock_agent", "userId": "requester", "sessionId": "s", "newMessage": text_message("hi")}

    def run(payload=None, content=None):
        r = (
            http.post("/api/adk/run", json=payload)
            if content is None
            else http.post("/api/adk/run", content=content, headers={"Content-Type": "application/json"})
        )
        return r.status_code, r.json()["detail"]

    def schema_refusal(payload=None, content=None):
        """ADK's (FastAPI's) 422: a list of (where, what) items."""
        status, detail = run(payload, content)
        assert status == 422, (status, detail)
        return [(tuple(item["loc"]), item["msg"]) for item in detail]

    assert schema_refusal(content=b"{not json") == [(("body", 1), "JSON decode error")]  # FastAPI's item
    assert schema_refusal(content=b"[1, 2]") == [
        (("body",), "Input should be a valid dictionary or object to extract fields from")
    ]
    assert schema_refusal({**body, "userId": 5}) == [(("body", "userId"), "Input should be a valid string")]
    assert schema_refusal({**body, "streaming": "maybe"}) == [
        (("body", "streaming"), "Input should be a valid boolean, unable to interpret input")
    ]
    missing = {k: v for k, v in body.items() if k != "sessionId"}
    assert schema_refusal(missing) == [(("body", "sessionId"), "Field required")]
    assert schema_refusal({**body, "newMessage": "hi"})[0][0] == ("body", "newMessage")
    assert schema_refusal({**body, "newMessage": {"parts": [{"text": 3}]}})[0][0][:2] == ("body", "newMessage")
    assert run({**body, "newMessage": {"role": "user", "parts": []}}) == (400, "newMessage has no parts.")
    assert run({**body, "appName": "nope"}) == (404, "App not found: nope")
    assert run({**body, "sessionId": "missing"}) == (404, "Session not found: missing")
    mixed = {"role": "user", "parts": [{"text": "hi"}, {"functionResponse": {"id": "x", "name": "y", "response": {}}}]}
    assert run({**body, "newMessage": mixed}) == (400, "Message cannot contain both function responses and text.")
    unknown = function_response_message("no-such-call", "ask_for_approval", {"status": "approved"})
    assert run({**body, "newMessage": unknown}) == (
        400,
        "Function call not found for function response ids: no-such-call. Nothing was sent.",
    )
    assert http.post("/api/adk/apps/nope/users/requester/sessions").status_code == 404
    assert http.post("/api/adk/apps/stock_agent/users/requester/sessions", json={"state": [1]}).status_code == 422
    assert http.get("/api/adk/run").status_code == 405
    assert not Turn.objects.exists(), "a refused request changes nothing"


def test_auth_is_required_and_user_paths_are_the_callers_own(demo, live_asgi, api_token):
    url = live_asgi.url + "/api/adk/apps/stock_agent/users/requester/sessions"
    r = httpx.get(url)
    assert r.status_code == 401 and "Authorization: Token" in r.json()["detail"]
    assert httpx.get(url, headers={"Authorization": "Token nope"}).json() == {"detail": "Invalid or revoked API token."}
    other = httpx.get(url, headers=api_token(demo["approver"]))  # approvers answer tickets; they are not staff
    assert other.status_code == 403
    assert (
        other.json()["detail"]
        == "You may only use your own sessions: the user in the path must be 'approver', not 'requester'."
    )
    assert httpx.get(url, headers=api_token(demo["observer"])).status_code == 200  # observers watch every session
    assert httpx.post(url, headers=api_token(demo["observer"])).status_code == 403  # ...but do not act for others
    assert httpx.post(url, headers=api_token(demo["admin"])).status_code == 200  # staff may
    body = {"appName": "stock_agent", "userId": "requester", "sessionId": "x", "newMessage": text_message("hi")}
    assert httpx.post(live_asgi.url + "/api/adk/run", json=body, headers=api_token(demo["approver"])).status_code == 403


def test_answers_through_run_follow_the_approvals_rules(demo, worker, adk_client, api_token):
    requester = adk_client(demo["requester"])
    session = requester.create_session("reimbursement_agent")
    first = requester.run("reimbursement_agent", session["id"], text_message("Please reimburse 200$ for meals")).json()
    call = long_running_call(first)
    answer = function_response_message(call["id"], call["name"], {"status": "approved"})
    r = requester.run("reimbursement_agent", session["id"], answer)
    assert r.status_code == 403 and "only approvers" in r.json()["detail"]
    # The admin (staff, an approver) answers in the requester's session: accepted, the agent pays.
    admin = httpx.Client(base_url=requester.http.base_url, headers=api_token(demo["admin"]), timeout=60)
    body = requester.run_body("reimbursement_agent", session["id"], answer)
    ok = admin.post("/api/adk/run", json=body)
    assert ok.status_code == 200 and "reimburse" in function_calls(ok.json())
    again = admin.post("/api/adk/run", json=body)
    assert again.status_code == 409 and "already closed" in again.json()["detail"]
    wrong_invocation = admin.post("/api/adk/run", json={**body, "invocationId": "e-other"})
    assert wrong_invocation.status_code == 400
    assert Turn.objects.filter(session__session_id=session["id"]).count() == 2


def test_a_failed_agent_run_is_an_error_not_events(demo, worker, adk_client):
    from agents_app.models import AgentConfig

    AgentConfig.objects.create(name="broken_agent", tools=["no_such_tool"], model="demo-offline")
    client = adk_client(demo["requester"])
    session = client.create_session("broken_agent")
    r = client.run("broken_agent", session["id"], text_message("hello"))
    assert r.status_code == 500
    assert r.json()["detail"].startswith("The agent run failed: ") and "no_such_tool" in r.json()["detail"]
    streamed = client.run_sse("broken_agent", session["id"], text_message("hello"))
    assert len(streamed) == 1 and "no_such_tool" in streamed[0]["error"]


def test_a_run_that_does_not_finish_in_time_is_a_504(demo, worker, adk_client, settings):
    from datetime import timedelta

    from django.utils import timezone

    from agents_app.enqueue import session_enqueue

    settings.ADKWEB_API_RUN_TIMEOUT = 1
    client = adk_client(demo["requester"])
    session = client.create_session("stock_agent")
    row = AdkSession.objects.get(session_id=session["id"])
    # Another worker holds the session: our turn stays queued.
    AdkSession.objects.filter(pk=row.pk).update(
        lease_owner="elsewhere", lease_expires_at=timezone.now() + timedelta(minutes=5)
    )
    r = client.run("stock_agent", session["id"], text_message("GOOG?"))
    assert r.status_code == 504 and "did not finish within 1 s" in r.json()["detail"]
    AdkSession.objects.filter(pk=row.pk).update(lease_owner="", lease_expires_at=None)
    session_enqueue(session_pk=row.pk)  # the turn was kept: it runs once the session is free
