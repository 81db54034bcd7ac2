"""`app:` session state is read by every user's sessions of the app: only people who may configure
agents (agent admins, superusers) set it through the API. Everyone else gets a 403 naming the keys,
on every path that takes state from a person, and nothing is written; `user:`, `temp:` and plain keys
stay everyone's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from agents_app import services, tokens
from agents_app.models import AppState, RemoteApp
from tests.adkweb.bad_input.sweep import counts
from tests.approvals_factories import ticket
from tests.live_server import function_response_message, text_message

SHARED = {"app:policy_limit": 999999, "k": 1}
SESSIONS = "/api/adk/apps/{app}/users/{user}/sessions"


def _client(user: Any) -> Client:
    c = Client()
    c.force_login(user)
    return c


def _run(app: str, user: str, session_id: str, message: dict | None = None) -> dict:
    body = {"appName": app, "userId": user, "sessionId": session_id, "stateDelta": SHARED}
    return {**body, "newMessage": message} if message else body


def _cases() -> list[tuple[str, str]]:
    """(label, caller): each way a person writes session state."""
    return [
        ("create: state", "requester"),
        ("create with an id (ADK's deprecated POST): the body", "requester"),
        ("PATCH stateDelta", "requester"),
        ("/run stateDelta with a message", "requester"),
        ("/run_sse stateDelta with a message", "requester"),
        ("/run stateDelta without a message (a run on the history)", "requester"),
        ("/run stateDelta with an answer to a ticket", "approver"),  # may answer, may not set app: state
        ("remote app: create: state", "requester"),
        ("remote app: /run_sse stateDelta", "requester"),
    ]


def _prepared(c: Client, label: str, user: str) -> Callable[[], Any]:
    """What the case needs (a session, a ticket, a remote app), and the request that sends the state."""
    app = "stock_agent"
    if label.startswith("remote app"):
        app = RemoteApp.objects.create(name="remote_stock", base_url="http://127.0.0.1:9", remote_app_name="x").name
    sessions = SESSIONS.format(app=app, user=user)
    if label.startswith("create with an id"):
        return lambda: c.post(f"{sessions}/s-new", SHARED, "application/json")
    if label.startswith(("create", "remote app: create")):
        return lambda: c.post(sessions, {"sessionId": "s-new", "state": SHARED}, "application/json")
    session = services.session_create(app_name=app, user_id=user, session_id="s-mine")
    if label.startswith("PATCH"):
        return lambda: c.patch(f"{sessions}/s-mine", {"stateDelta": SHARED}, "application/json")
    path = "/api/adk/run_sse" if "/run_sse" in label else "/api/adk/run"
    message: dict | None = text_message("GOOG?")
    if "answer" in label:
        call = ticket(session=session, invocation_id="inv-1")
        message = function_response_message(call.call_id, call.call_name, {"status": "approved"})
    elif "without a message" in label:
        message = None
    return lambda: c.post(path, _run(app, user, "s-mine", message), "application/json")


def _app_state() -> dict[str, Any]:
    """What an approver's session of the app reads, and the app state rows."""
    sessions = SESSIONS.format(app="stock_agent", user="approver")
    read = _client(User.objects.get(username="approver")).get(f"{sessions}/s-other").json()["state"]
    return {"approver's session": read, "app state rows": list(AppState.objects.values_list("app_name", "state"))}


@pytest.mark.parametrize(("label", "who"), _cases(), ids=[c[0] for c in _cases()])
def test_app_state_from_anyone_but_an_agent_admin_is_refused_and_nothing_is_written(demo, settings, label, who):
    settings.ADKWEB_API_RUN_TIMEOUT = 1  # were it queued, /run would wait for a worker this test has not
    services.session_create(app_name="stock_agent", user_id="approver", session_id="s-other")
    send = _prepared(_client(demo[who]), label, who)
    before = {**counts(), **_app_state()}
    r = send()
    assert r.status_code == 403
    detail = r.json()["detail"]
    assert "app:policy_limit" in detail and "agent admins" in detail, detail
    assert {**counts(), **_app_state()} == before
    assert before["app state rows"] == [] and "app:policy_limit" not in before["approver's session"]


def test_agent_admins_and_superusers_set_app_state_and_every_users_session_reads_it(demo):
    other = services.session_create(app_name="stock_agent", user_id="approver")
    admin = _client(demo["agentadmin"])
    sessions = SESSIONS.format(app="stock_agent", user="agentadmin")
    mine = admin.post(sessions, {"state": {"app:policy_limit": 100}}, "application/json")
    assert mine.status_code == 200 and mine.json()["state"] == {"app:policy_limit": 100}
    patched = admin.patch(
        f"{sessions}/{mine.json()['id']}", {"stateDelta": {"app:policy_limit": 200}}, "application/json"
    )
    assert patched.status_code == 200
    assert admin.post(f"{sessions}/s-admin", {"app:tier": "gold"}, "application/json").status_code == 200
    superuser = _client(demo["admin"]).post(
        SESSIONS.format(app="stock_agent", user="admin"), {"state": {"app:region": "eu"}}, "application/json"
    )
    assert superuser.status_code == 200
    read = _client(demo["approver"]).get(f"{SESSIONS.format(app='stock_agent', user='approver')}/{other.session_id}")
    assert read.json()["state"] == {"app:policy_limit": 200, "app:tier": "gold", "app:region": "eu"}


def test_user_temp_and_plain_keys_stay_everyones(demo):
    c = _client(demo["requester"])
    sessions = SESSIONS.format(app="stock_agent", user="requester")
    created = c.post(sessions, {"state": {"user:lang": "en", "k": 1, "temp:t": 2, "App:x": 3}}, "application/json")
    assert created.status_code == 200
    url = f"{sessions}/{created.json()['id']}"
    assert c.patch(url, {"stateDelta": {"user:lang": "fr", "k": 2}}, "application/json").status_code == 200
    assert c.get(url).json()["state"] == {"user:lang": "fr", "k": 2, "App:x": 3}


def test_run_takes_app_state_from_an_agent_admin_and_user_state_from_anyone(demo, worker):
    for who, delta in (("agentadmin", {"app:policy_limit": 7}), ("requester", {"user:lang": "en", "k": 1})):
        session = services.session_create(app_name="stock_agent", user_id=who)
        body = {"appName": "stock_agent", "userId": who, "sessionId": session.session_id, "stateDelta": delta}
        r = _client(demo[who]).post("/api/adk/run", {**body, "newMessage": text_message("GOOG?")}, "application/json")
        assert r.status_code == 200 and r.json(), r.content[:300]
        url = f"{SESSIONS.format(app='stock_agent', user=who)}/{session.session_id}"
        assert _client(demo[who]).get(url).json()["state"].items() >= delta.items()
    assert AppState.objects.get(app_name="stock_agent").state == {"policy_limit": 7}


def test_a_token_caller_is_refused_the_same(demo, settings):
    settings.ADKWEB_API_RUN_TIMEOUT = 1
    _, key = tokens.token_create(user=demo["requester"])
    session = services.session_create(app_name="stock_agent", user_id="requester")
    c = Client(headers={"Authorization": f"Token {key}"})
    r = c.post(
        "/api/adk/run", _run("stock_agent", "requester", session.session_id, text_message("GOOG?")), "application/json"
    )
    assert r.status_code == 403 and "app:policy_limit" in r.json()["detail"]
    assert counts()["turns"] == 0 and not AppState.objects.exists()
