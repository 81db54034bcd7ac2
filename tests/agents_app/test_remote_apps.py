"""Remote apps: agents served by another ADK server, driven over ADK's REST API.

The remote server is a real `adk api_server` subprocess (tests/adk_api_server.py) serving the
agents folder tests/adk_agents on the offline demo model; adkweb runs its turns in the in-process
Celery worker, stores what the remote streams, opens tickets and sends the answers back.

Failure modes, exactly-once recovery and security are in test_remote_apps_failures.py.
"""

from __future__ import annotations

import httpx
import pytest
from django.test import Client

from agents_app import services
from agents_app.models import StoredEvent
from approvals import services as approvals
from approvals.models import PendingCall
from tests.agents_app.remote_helpers import (
    _closed_port,
    _page,
    assert_mirrored,
    remote_app,
    remote_events,
    start,
    user_texts,
)
from tests.engine_scenarios import agent_texts, calls, failed_turns, settle, ticket_opened

pytest_plugins = ["tests.conftest_live", "tests.adk_api_server"]


# -- the seed flows through the dashboard's services -----------------------------------------------
def test_approve_a_remote_agents_ticket(demo, worker, wait, adk_api_server):
    remote = remote_app(adk_api_server)
    session = start(remote, "Please reimburse 200$ for meals", demo)
    ticket = ticket_opened(session, wait)
    assert (ticket.kind, ticket.call_name, ticket.app_name) == ("long_running", "ask_for_approval", remote.name)
    assert ticket.args == {"purpose": "meals", "amount": 200.0}
    assert ticket.initial_response["ticket-id"] in agent_texts(session)[-1]

    approvals.ticket_update(ticket=ticket, actor=demo["approver"], message="Manager is reviewing", progress=40)
    settle(session, wait)
    assert agent_texts(session)[-1] == (
        "Update on your reimbursement of $200.00 for meals: Manager is reviewing (40% done). "
        "I'll tell you when it's decided."
    )
    approvals.ticket_approve(ticket=ticket, actor=demo["approver"], comment="Fine")
    settle(session, wait)
    assert failed_turns(session) == []
    assert [c["args"] for c in calls(session, "reimburse")] == [{"purpose": "meals", "amount": 200.0}]
    assert agent_texts(session)[-1] == "Done: I reimbursed $200.00 for meals."
    theirs = remote_events(adk_api_server, remote, session)
    parts = [p for e in theirs if e["author"] == "user" for p in e["content"]["parts"]]
    answer = [p["functionResponse"] for p in parts if "functionResponse" in p]
    update = {"status": "in_progress", "message": "Manager is reviewing", "progress": 40}
    assert answer == [  # the approver's answers reached the remote agent as built, no willContinue added
        {"id": ticket.call_id, "name": "ask_for_approval", "response": update},
        {"id": ticket.call_id, "name": "ask_for_approval", "response": {"status": "approved", "comment": "Fine"}},
    ]
    assert user_texts(theirs) == ["Please reimburse 200$ for meals"]
    assert_mirrored(adk_api_server, remote, session)

    page = _page(demo["requester"], session)
    assert "Done: I reimbursed $200.00 for meals." in page


def test_reject_a_remote_agents_ticket_with_the_reason(demo, worker, wait, adk_api_server):
    remote = remote_app(adk_api_server)
    session = start(remote, "Please reimburse 300$ for a hotel", demo)
    ticket = ticket_opened(session, wait)
    approvals.ticket_reject(ticket=ticket, actor=demo["approver"], reason="No receipt attached")
    settle(session, wait)
    ticket.refresh_from_db()
    assert ticket.status == PendingCall.Status.REJECTED
    assert agent_texts(session)[-1] == (
        "Sorry, your reimbursement of $300.00 for a hotel was rejected: No receipt attached"
    )
    assert calls(session, "reimburse") == []
    assert_mirrored(adk_api_server, remote, session)


# -- an ADK client through /api/adk: the same events as from the remote server itself --------------
REMOTE_SCENARIOS = [
    "approve",
    "reject",
    "message while paused",
    "bare-number tool result",
    "agent tool with skip_summarization",
    "tool confirmation approved",
    "tool confirmation rejected",
    "temp: state handoff",
    "intermediate then final answer",
    "streamed partial events (run_sse, streaming)",
    "invocationId without newMessage (resume)",
    "run without newMessage",
]


@pytest.fixture
def fronted(demo, worker, live_asgi, api_token, adk_api_server):
    """adkweb's /api/adk serving the comparison apps as remote apps (same names) of the real ADK server."""
    from tests.agents_app.test_adk_comparison import USER, Api

    for app in ("cmp_reimburse", "cmp_transfer", "cmp_stock", "cmp_assistant", "cmp_state"):
        remote_app(adk_api_server, app, name=app)
    api = Api("adkweb", live_asgi.url + "/api/adk", api_token(demo[USER]))
    yield api
    api.http.close()


@pytest.mark.parametrize("scenario", REMOTE_SCENARIOS)
def test_an_adk_client_sees_the_remote_servers_events_through_adkweb(scenario, fronted, adk_api_server):
    from tests.agents_app.test_adk_comparison import SCENARIOS, Api, normalise

    direct = Api("adk", adk_api_server.url)
    try:
        theirs = normalise(SCENARIOS[scenario](direct))
    finally:
        direct.http.close()
    assert normalise(SCENARIOS[scenario](fronted)) == theirs


# -- everywhere apps are listed ------------------------------------------------------------------------
def test_a_remote_app_is_listed_like_any_app(demo, adk_api_server, api_token):
    remote = remote_app(adk_api_server)
    remote_app(adk_api_server, "cmp_stock", enabled=False)
    client = Client()
    client.force_login(demo["requester"])
    headers = {"HTTP_AUTHORIZATION": api_token(demo["requester"])["Authorization"]}
    names = client.get("/api/adk/list-apps", **headers).json()
    assert remote.name in names and "remote_stock" not in names
    detailed = client.get("/api/adk/list-apps?detailed=true", **headers).json()["apps"]
    assert {
        "name": remote.name,
        "rootAgentName": "cmp_reimburse",
        "description": remote.description,
        "language": "python",
        "isComputerUse": False,
        "agents": None,
    } in detailed
    assert f'value="{remote.name}"' in client.get("/sessions/new/").content.decode()
    start(remote, "Please reimburse 50$ for taxi", demo)
    assert f'<option value="{remote.name}"' in client.get("/sessions/").content.decode()

    page = client.get("/agents/").content.decode()
    card = page.split(f'id="agent-{remote.name}"')[1].split("</section>")[0]
    assert "remote ADK server" in card and f"{adk_api_server.url} (app cmp_reimburse)" in card
    assert "Authorization: •••••• (set)" in card
    assert 'id="agent-remote_stock"' in page  # a disabled one is shown, as disabled


def test_app_info_comes_from_the_remote_server_and_its_state_is_not_patched_here(demo, adk_api_server, api_token):
    remote = remote_app(adk_api_server)
    down = remote_app(f"http://127.0.0.1:{_closed_port()}", name="remote_down")
    client = Client(HTTP_AUTHORIZATION=api_token(demo["requester"])["Authorization"])
    theirs = httpx.get(f"{adk_api_server.url}/apps/cmp_reimburse/app-info").json()
    assert client.get(f"/api/adk/apps/{remote.name}/app-info").json() == {**theirs, "name": remote.name}
    r = client.get(f"/api/adk/apps/{down.name}/app-info")
    assert r.status_code == 502 and "is unreachable" in r.json()["detail"]

    session = services.session_create(app_name=remote.name, user_id="requester")
    url = f"/api/adk/apps/{remote.name}/users/requester/sessions/{session.session_id}"
    r = client.patch(url, {"stateDelta": {"x": 1}}, content_type="application/json")
    assert r.status_code == 400 and "runs on a remote ADK server" in r.json()["detail"]
    assert StoredEvent.objects.filter(session=session).count() == 0
