"""Remote apps: agents served by another ADK server, driven over ADK's REST API.

The remote server is a real `adk api_server` subprocess (tests/adk_api_server.py) serving the
agents folder tests/adk_agents on the offline demo model; adkweb runs its turns in the in-process
Celery worker, stores what the remote streams, opens tickets and sends the answers back.
"""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
from django.test import Client

from agents_app import services
from agents_app.models import RemoteApp, StoredEvent, Turn
from approvals import services as approvals
from approvals.models import PendingCall
from tests.adk_api_server import AdkApiServer
from tests.engine_scenarios import agent_texts, calls, failed_turns, settle, ticket_opened

pytest_plugins = ["tests.adk_api_server"]
SECRET = "Bearer remote-s3cret-9f8e7d6c5b4a"


def remote_app(server: AdkApiServer | str, app: str = "cmp_reimburse", name: str = "", **fields: Any) -> RemoteApp:
    url = server if isinstance(server, str) else server.url
    return RemoteApp.objects.create(
        name=name or f"remote_{app.removeprefix('cmp_')}",
        base_url=url,
        remote_app_name=app,
        auth_header_value=SECRET,
        description=f"{app} on another ADK server",
        **fields,
    )


def remote_events(server: AdkApiServer | str, remote: RemoteApp, session: Any) -> list[dict]:
    """The remote server's own copy of the session (what its agent has seen)."""
    url = server if isinstance(server, str) else server.url
    r = httpx.get(f"{url}/apps/{remote.remote_app_name}/users/{session.user_id}/sessions/{session.session_id}")
    assert r.status_code == 200, r.text
    return r.json()["events"]


def start(remote: RemoteApp, text: str, demo: dict) -> Any:
    session = services.session_create(app_name=remote.name, user_id="requester")
    services.message_send(session=session, text=text, actor=demo["requester"])
    return session


def user_texts(events: list[dict]) -> list[str]:
    return [p["text"] for e in events if e["author"] == "user" for p in e["content"]["parts"] if "text" in p]


def assert_mirrored(server: Any, remote: RemoteApp, session: Any) -> None:
    """Every event the remote agent produced is stored here once, with its id, in the remote's order;
    the user's events are stored once each, with the remote's invocation ids."""
    theirs = remote_events(server, remote, session)
    ours = list(StoredEvent.objects.filter(session=session).order_by("id").values_list("author", "event_id", "data"))
    assert [e["id"] for e in theirs if e["author"] != "user"] == [i for a, i, _ in ours if a != "user"]
    their_users = [(e["invocationId"], e.get("content")) for e in theirs if e["author"] == "user"]
    our_users = [(d["invocation_id"], d.get("content")) for a, _, d in ours if a == "user"]
    assert [i for i, _ in our_users] == [i for i, _ in their_users]
    assert len({i for _, i, _ in ours}) == len(ours)


# -- the seed flows through the dashboard's services -----------------------------------------------
def test_approve_a_remote_agents_ticket(demo, worker, wait, adk_api_server):
    remote = remote_app(adk_api_server)
    session = start(remote, "Please reimburse 200$ for meals", demo)
    ticket = ticket_opened(session, wait)
    assert (ticket.kind, ticket.call_name, ticket.app_name) == ("long_running", "ask_for_approval", remote.name)
    assert ticket.args == {"purpose": "meals", "amount": 200.0}
    assert ticket.initial_response["ticket-id"] in agent_texts(session)[-1]

    approvals.ticket_approve(ticket=ticket, actor=demo["approver"], comment="Fine")
    settle(session, wait)
    assert failed_turns(session) == []
    assert [c["args"] for c in calls(session, "reimburse")] == [{"purpose": "meals", "amount": 200.0}]
    assert agent_texts(session)[-1] == "Done: I reimbursed $200.00 for meals."
    theirs = remote_events(adk_api_server, remote, session)
    parts = [p for e in theirs if e["author"] == "user" for p in e["content"]["parts"]]
    answer = [p["functionResponse"] for p in parts if "functionResponse" in p]
    assert answer == [
        {"id": ticket.call_id, "name": "ask_for_approval", "response": {"status": "approved", "comment": "Fine"}}
    ]  # the approver's answer reached the remote agent exactly as built, nothing added
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


def _page(user: Any, session: Any) -> str:
    client = Client()
    client.force_login(user)
    r = client.get(f"/sessions/{session.pk}/")
    assert r.status_code == 200
    return r.content.decode()


def _wait_turns(session: Any, wait: Any, timeout: float = 30) -> list[Turn]:
    wait(
        lambda: not Turn.objects.filter(session=session, status__in=["queued", "running"]).exists(),
        timeout=timeout,
        what="the session's turns",
    )
    return list(Turn.objects.filter(session=session).order_by("id"))


__all__ = ["time"]
