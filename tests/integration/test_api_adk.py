"""The seeds' client loop over ADK's REST API with PostgreSQL, Redis (broker and channel layer) and
a real `celery worker` process: the web side (a live ASGI server) and the agent side only meet
through the database and Redis."""

from __future__ import annotations

from approvals.models import PendingCall
from tests.live_server import seed_client_loop

pytest_plugins = ["tests.conftest_live"]


def test_seed_client_loop_over_run(demo, worker, adk_client):
    loop = seed_client_loop(adk_client(demo["approver"]))
    assert PendingCall.objects.get(call_id=loop["call"]["id"]).status == "approved"


def test_seed_client_loop_over_run_sse(demo, worker, adk_client):
    loop = seed_client_loop(adk_client(demo["approver"]), sse=True)
    assert any(e.get("partial") for e in loop["first"]), "streaming chunks travel through Redis"


def test_approvals_api_approve_resumes_the_agent_in_the_worker(demo, worker, wait, live_asgi, api_token):
    import httpx

    client = httpx.Client(base_url=live_asgi.url, headers=api_token(demo["requester"]), timeout=60)
    session = client.post("/api/adk/apps/reimbursement_agent/users/requester/sessions").json()
    body = {
        "appName": "reimbursement_agent",
        "userId": "requester",
        "sessionId": session["id"],
        "newMessage": {"role": "user", "parts": [{"text": "Please reimburse 300$ for travel"}]},
    }
    assert client.post("/api/adk/run", json=body).status_code == 200
    call = PendingCall.objects.get(session__session_id=session["id"])
    approver = httpx.Client(base_url=live_asgi.url, headers=api_token(demo["approver"]), timeout=30)
    assert approver.post(f"/api/pending-calls/{call.pk}/approve").status_code == 201

    def reimbursed():
        events = client.get(f"/api/adk/apps/reimbursement_agent/users/requester/sessions/{session['id']}").json()[
            "events"
        ]
        return any(
            "reimbursed $300.00 for travel" in p.get("text", "")
            for e in events
            for p in (e.get("content") or {}).get("parts", [])
        )

    wait(reimbursed, what="the reimbursement")
    client.close()
    approver.close()


def test_a_finished_run_leaves_no_listener_on_the_redis_layer(demo, worker, wait, adk_client):
    """/run follows its turn through a channel-layer listener; once answered, that listener ends
    (it used to linger for minutes, holding a Redis connection, after a cancelled receive)."""
    from channels.layers import get_channel_layer

    layer = get_channel_layer()
    seed_client_loop(adk_client(demo["approver"]))
    wait(lambda: layer.receive_count == 0, timeout=5, what="the /run listeners to end")
