"""Remote apps when things go wrong: a remote that is down, slow or failing, a worker that dies
mid-turn (the message is never sent twice), and the secret auth header.
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
from tests.agents_app.remote_helpers import (
    SECRET,
    _closed_port,
    _page,
    _retry,
    _wait_turns,
    assert_mirrored,
    remote_app,
    remote_events,
    start,
    user_texts,
)
from tests.engine_scenarios import agent_texts, calls, failed_turns, settle, ticket_opened

pytest_plugins = ["tests.conftest_live", "tests.adk_api_server"]


# -- failure modes -----------------------------------------------------------------------------------
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
    # 3 s: long enough for the remote's first frame (the tool call) on a loaded machine, far below the tool's 20 s.
    settings.ADKWEB_REMOTE_READ_TIMEOUT = 3
    slow = remote_app(adk_api_server, "slow")
    session = start(slow, '/call wait_a_while {"seconds": 20}', demo)
    started = time.monotonic()
    (turn,) = _wait_turns(session, wait)
    assert time.monotonic() - started < 12  # not the tool's 20 s
    label = f"Remote ADK server {adk_api_server.url} (app slow)"
    assert failed_turns(session) == [
        (
            turn.pk,
            f"agents_app.remote.client.RemoteUnavailable: {label} did not answer within 3 s "
            "(ADKWEB_REMOTE_READ_TIMEOUT).",
        )
    ]
    # It reached the remote (its call is stored), so it is not offered again: that would repeat it.
    assert [c["name"] for c in calls(session)] == ["wait_a_while"]
    assert ">Retry</button>" not in _page(demo["requester"], session)

    other = start(remote_app(adk_api_server), "Please reimburse 50$ for taxi", demo)
    settle(other, wait, "another conversation, on the freed worker")
    assert agent_texts(other) == ["Done: I reimbursed $50.00 for taxi."]
    assert time.monotonic() - started < 18


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
    monkeypatch.setattr("agents_app.enqueue.session_enqueue", lambda **kw: True)


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
