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

pytest_plugins = ["tests.conftest_live", "tests.adk_api_server"]
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


# -- failure modes -----------------------------------------------------------------------------------
def _retry(user: Any, session: Any, turn: Turn) -> None:
    client = Client()
    client.force_login(user)
    page = client.get(f"/sessions/{session.pk}/").content.decode()
    assert ">Retry</button>" in page
    r = client.post(f"/sessions/{session.pk}/turns/{turn.pk}/retry/", HTTP_HX_REQUEST="true")
    assert r.status_code == 200 and "Retrying" in r.content.decode()


def test_a_remote_server_that_is_down_fails_the_turn_clearly_and_retry_works_once_it_is_up(demo, worker, wait):
    server = AdkApiServer()
    server.port = __import__("tests.adk_api_server", fromlist=["_free_port"])._free_port()  # reserved, not started
    remote = remote_app(server.url)
    session = start(remote, "Please reimburse 200$ for meals", demo)
    (turn,) = _wait_turns(session, wait)
    label = f"Remote ADK server {server.url} (app cmp_reimburse)"
    assert failed_turns(session) == [
        (
            turn.pk,
            f"agents_app.remote.client.RemoteUnavailable: {label} is unreachable (connection refused or no route).",
        )
    ]
    assert StoredEvent.objects.filter(session=session).count() == 0  # the message never reached an agent
    assert label in _page(demo["requester"], session)

    with server:
        _retry(demo["requester"], session, turn)
        ticket = ticket_opened(session, wait)
        approvals.ticket_approve(ticket=ticket, actor=demo["approver"])
        settle(session, wait)
        assert agent_texts(session)[-1] == "Done: I reimbursed $200.00 for meals."
        assert user_texts(remote_events(server, remote, session)) == ["Please reimburse 200$ for meals"]
        assert_mirrored(server, remote, session)


def test_an_approval_sent_while_the_remote_is_down_reaches_it_once_it_is_up(demo, worker, wait, tmp_path):
    sessions = ["--session_service_uri", f"sqlite:///{tmp_path}/sessions.db", "--artifact_service_uri", "memory://"]
    server = AdkApiServer(extra_args=sessions)  # a remote that keeps its sessions across restarts
    with server:
        remote = remote_app(server)
        session = start(remote, "Please reimburse 200$ for meals", demo)
        ticket = ticket_opened(session, wait)
    approvals.ticket_approve(ticket=ticket, actor=demo["approver"])  # the remote is down meanwhile
    settle(session, wait)
    ((turn_id, error),) = failed_turns(session)
    assert error.endswith(
        f"Remote ADK server {server.url} (app cmp_reimburse) is unreachable (connection refused or no route)."
    )
    ticket.refresh_from_db()
    assert ticket.status == PendingCall.Status.APPROVED  # the decision is kept: it is the turn that failed

    with server:  # up again, on the same port, with its sessions
        _retry(demo["approver"], session, Turn.objects.get(pk=turn_id))
        settle(session, wait)
        assert failed_turns(session) == []
        assert agent_texts(session)[-1] == "Done: I reimbursed $200.00 for meals."
        theirs = remote_events(server, remote, session)
        answers = [
            p for e in theirs for p in e["content"]["parts"] if e["author"] == "user" and "functionResponse" in p
        ]
        assert len(answers) == 1  # sent once
        assert_mirrored(server, remote, session)


def test_a_slow_remote_times_out_clearly_and_the_worker_is_free_again(demo, worker, wait, settings, adk_api_server):
    settings.ADKWEB_REMOTE_READ_TIMEOUT = 1
    slow = remote_app(adk_api_server, "slow")
    session = start(slow, '/call wait_a_while {"seconds": 20}', demo)
    started = time.monotonic()
    (turn,) = _wait_turns(session, wait)
    assert time.monotonic() - started < 10  # not the tool's 20 s
    label = f"Remote ADK server {adk_api_server.url} (app slow)"
    assert failed_turns(session) == [
        (
            turn.pk,
            f"agents_app.remote.client.RemoteUnavailable: {label} did not answer within 1 s "
            "(ADKWEB_REMOTE_READ_TIMEOUT).",
        )
    ]
    # It reached the remote (its call is stored), so it is not offered again: that would repeat it.
    assert [c["name"] for c in calls(session)] == ["wait_a_while"]
    assert ">Retry</button>" not in _page(demo["requester"], session)

    other = start(remote_app(adk_api_server), "Please reimburse 50$ for taxi", demo)
    settle(other, wait, "another conversation, on the freed worker")
    assert agent_texts(other) == ["Done: I reimbursed $50.00 for taxi."]
    assert time.monotonic() - started < 15


def test_a_remote_error_frame_fails_the_turn_with_the_remote_error(demo, worker, wait, adk_api_server):
    raiser = remote_app(adk_api_server, "cmp_raiser")
    session = start(raiser, '/call explode {"reason": "on purpose"}', demo)
    (turn,) = _wait_turns(session, wait)
    label = f"Remote ADK server {adk_api_server.url} (app cmp_raiser)"
    assert failed_turns(session) == [
        (
            turn.pk,
            f"agents_app.remote.client.RemoteRunError: {label}: the agent run failed (RuntimeError): "
            "the tool exploded: on purpose",
        )
    ]
    assert [c["name"] for c in calls(session)] == ["explode"]
    assert_mirrored(adk_api_server, raiser, session)


# -- exactly once: a worker that dies mid-turn ---------------------------------------------------------
@pytest.fixture
def drains_by_hand(monkeypatch, transactional_db):
    """No worker: the test runs each drain itself (what the sweeper triggers once a dead worker's lease ran out)."""
    monkeypatch.setattr(services, "session_enqueue", lambda **kw: True)


def _crash_at(monkeypatch, where: str, nth: int = 1) -> None:
    """Make the worker 'die' (a BaseException nothing catches) at the nth call of a step of the remote run."""
    from agents_app.remote import run
    from tests.engine_scenarios.crashy import SimulatedCrash

    if where == "store":
        target, name = run.RemoteTurn, "_store"
    else:
        target, name = run, where
    original, seen = getattr(target, name), []

    def step(*args: Any, **kwargs: Any) -> Any:
        seen.append(1)
        if len(seen) == nth:
            if where == "_unsettle":
                original(*args, **kwargs)  # recorded, then the worker dies before sending
            raise SimulatedCrash(f"crash at {where} #{nth}")
        return original(*args, **kwargs)

    monkeypatch.setattr(target, name, step)


def _remote_quiet(server: Any, remote: RemoteApp, session: Any) -> None:
    """Wait until the remote server stopped storing events for the session (it seals an aborted run)."""
    last, stable = -1, 0
    while stable < 3:
        n = len(remote_events(server, remote, session))
        stable, last = (stable + 1, n) if n == last else (0, n)
        time.sleep(0.1)


@pytest.mark.parametrize(
    "where,nth",
    [
        ("_unsettle", 1),  # recorded as about to be sent; died before sending
        ("store", 1),  # sent, the remote's first event arrived; died before storing anything
        ("store", 3),  # the user's event and the call stored; died before storing the tool's response
        ("_settle", 1),  # every event stored; died before saying so
    ],
)
def test_a_worker_that_dies_mid_turn_never_sends_the_message_twice(
    where, nth, demo, drains_by_hand, monkeypatch, adk_api_server
):
    from agents_app import runner
    from tests.engine_scenarios.crashy import SimulatedCrash

    remote = remote_app(adk_api_server, "cmp_stock")
    session = services.session_create(app_name=remote.name, user_id="requester")
    services.message_send(session=session, text="What is GOOG at?", actor=demo["requester"], streaming=False)
    with monkeypatch.context() as m:
        _crash_at(m, where, nth)
        with pytest.raises(SimulatedCrash):
            runner.session_turns_run(session.pk)
    assert Turn.objects.get(session=session).status == "running"  # as a dead worker leaves it
    _remote_quiet(adk_api_server, remote, session)

    assert runner.session_turns_run(session.pk) == 1
    turn = Turn.objects.get(session=session)
    theirs = remote_events(adk_api_server, remote, session)
    assert user_texts(theirs) == ["What is GOOG at?"]  # once, whatever the crash point
    assert_mirrored(adk_api_server, remote, session)
    aborted = any(e.get("errorCode") == "INVOCATION_ABORTED" and e.get("content") for e in theirs)
    if turn.status == "done":  # resumed: the model answered what the remote stored for its tool
        expected = "I couldn't find a price for GOOG." if aborted else "The current price of GOOG is $178.42."
        assert agent_texts(session)[-1] == expected
    else:  # the remote aborted its run when the stream broke, before its tool ran: resuming gave nothing
        assert (where, turn.status) == ("store", "failed") and turn.error.endswith(
            "had received this turn, but its run stopped when adkweb's worker did and resuming it produced "
            "nothing; adkweb does not send a message twice: send a new one to go on."
        )


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


# -- security ----------------------------------------------------------------------------------------
def test_the_auth_header_is_sent_on_every_request_and_never_shown_or_logged(
    demo, worker, wait, adk_api_server, monkeypatch, caplog
):
    sent: list[tuple[str, str | None]] = []
    original = httpx.AsyncHTTPTransport.handle_async_request

    async def recording(self: Any, request: httpx.Request) -> httpx.Response:
        sent.append((f"{request.method} {request.url.path}", request.headers.get("authorization")))
        return await original(self, request)

    monkeypatch.setattr(httpx.AsyncHTTPTransport, "handle_async_request", recording)
    caplog.set_level("DEBUG")
    remote = remote_app(adk_api_server)
    session = start(remote, "Please reimburse 200$ for meals", demo)
    approvals.ticket_approve(ticket=ticket_opened(session, wait), actor=demo["approver"])
    settle(session, wait)
    assert agent_texts(session)[-1] == "Done: I reimbursed $200.00 for meals."
    assert [path for path, _ in sent] == [
        "POST /apps/cmp_reimburse/users/requester/sessions",
        "POST /run_sse",
        "POST /run_sse",
    ]
    assert {auth for _, auth in sent} == {SECRET}

    down = remote_app(f"http://127.0.0.1:{_closed_port()}", name="remote_down")
    start(down, "Please reimburse 20$ for tea", demo)
    settle(Turn.objects.filter(session__app_name="remote_down").get().session, wait)
    assert SECRET not in caplog.text and SECRET.split()[-1] not in caplog.text
    assert not Turn.objects.filter(error__contains=SECRET.split()[-1]).exists()

    admin = Client()
    admin.force_login(demo["admin"])
    for url in (
        "/agents/",
        "/admin/agents_app/remoteapp/",
        f"/admin/agents_app/remoteapp/{remote.pk}/change/",
        f"/sessions/{session.pk}/",
        "/api/adk/list-apps?detailed=true",
        f"/api/adk/apps/{remote.name}/users/requester/sessions/{session.session_id}",
    ):
        body = admin.get(url).content.decode()
        assert SECRET.split()[-1] not in body, url
    assert (
        "Authorization: •••••• (set)" in admin.get(f"/admin/agents_app/remoteapp/{remote.pk}/change/").content.decode()
    )


def _closed_port() -> int:
    from tests.adk_api_server import _free_port

    return _free_port()


def test_only_agent_admins_configure_remote_apps_and_the_secret_is_write_only(demo):
    from django.contrib.auth.models import User

    for who in ("requester", "approver", "observer"):
        c = Client()
        c.force_login(demo[who])
        assert c.get("/admin/agents_app/remoteapp/add/").status_code in (302, 403), who
    form = {
        "name": "billing_agent",
        "description": "Runs in Go",
        "base_url": "https://agents.internal:8080/",
        "remote_app_name": "billing",
        "auth_header_name": "X-API-Key",
        "new_auth_header_value": "k-123456789-secret",
        "enabled": "on",
    }
    admin = Client()
    admin.force_login(User.objects.get(username="agentadmin"))
    assert admin.post("/admin/agents_app/remoteapp/add/", form).status_code == 302
    remote = RemoteApp.objects.get(name="billing_agent")
    assert (remote.base_url, remote.auth_header_value) == ("https://agents.internal:8080", "k-123456789-secret")
    change = f"/admin/agents_app/remoteapp/{remote.pk}/change/"
    assert "k-123456789-secret" not in admin.get(change).content.decode()
    assert admin.post(change, {**form, "new_auth_header_value": ""}).status_code == 302  # empty: kept
    remote.refresh_from_db()
    assert remote.auth_header_value == "k-123456789-secret"
    assert admin.post(change, {**form, "new_auth_header_value": "", "clear_auth_header": "on"}).status_code == 302
    remote.refresh_from_db()
    assert (remote.auth_header_value, remote.auth_label) == ("", "none")

    clash = admin.post("/admin/agents_app/remoteapp/add/", {**form, "name": "reimbursement_agent"})
    assert clash.status_code == 200 and "already runs here" in clash.content.decode()
    bad = admin.post("/admin/agents_app/remoteapp/add/", {**form, "name": "x2", "base_url": "ftp://nope"})
    assert bad.status_code == 200 and "must start with http:// or https://" in bad.content.decode()


def test_remote_output_is_escaped_like_local_output(demo, worker, wait, adk_api_server):
    remote = remote_app(adk_api_server)
    session = start(remote, "Please reimburse 50$ for <img src=x onerror=alert(1)>", demo)
    settle(session, wait)
    assert agent_texts(session) == ["Done: I reimbursed $50.00 for <img src=x onerror=alert(1)>."]
    page = _page(demo["requester"], session)
    assert "<img src=x onerror=alert(1)>" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page


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
