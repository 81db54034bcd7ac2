"""Redis (broker and channel layer) down for 30 s while approvers decide: every decision made
during the outage is kept and answered 2xx, none is lost, and every agent resumes within 10 s
of Redis coming back; websockets open again after the outage (issue 8: decisions answered 500
yet saved, a run in flight failed for good, the first websocket after the outage got a 500).

Everything is a real process on a Redis of the test's own: the web server (uvicorn), a celery
worker and celery beat, with default settings; this process only plays the browsers."""

from __future__ import annotations

import secrets
import time

import httpx
import pytest
from django.test import Client
from websockets.sync.client import connect as ws_connect

from agents_app import services
from agents_app.models import Turn
from agents_app.tokens import token_create
from approvals.models import PendingCall, Response
from tests.conftest import wait_for
from tests.engine_scenarios import agent_texts, calls, settle

from . import processes

pytestmark = pytest.mark.django_db(transaction=True)
OUTAGE = 30.0
CUSTOM = '{"status": "approved"}'


@pytest.fixture
def stack(monkeypatch, demo):
    redis = processes.RedisServer().start()
    env = processes.service_env(redis.url)
    producer = processes.producer(redis.url)
    monkeypatch.setattr(
        "agents_app.enqueue.session_enqueue", lambda *, session_pk: processes.send_drain(producer, session_pk)
    )
    port = processes.free_port()
    web_args = [processes.sys.executable, "-m", "uvicorn", "adkweb.asgi:application", "--port", str(port)]
    services_ = [
        processes.Service([*web_args, "--lifespan", "off"], env, ready="Uvicorn running"),
        processes.worker(env),
        processes.beat(env),
    ]
    for service in services_:
        service.start()
    yield redis, f"127.0.0.1:{port}"
    for service in services_:
        service.stop()
    redis.stop()


def _browser(user) -> tuple[dict[str, str], dict[str, str]]:
    c = Client()
    c.force_login(user)
    csrf = secrets.token_hex(16)
    cookies = {"sessionid": c.cookies["sessionid"].value, "csrftoken": csrf}
    return cookies, {"X-CSRFToken": csrf, "HX-Request": "true"}


def _ws_handshake(host: str, cookies: dict[str, str], path: str) -> str:
    try:
        cookie = {"Cookie": f"sessionid={cookies['sessionid']}"}
        with ws_connect(f"ws://{host}{path}", origin=f"http://{host}", additional_headers=cookie, open_timeout=10):
            return "open"
    except Exception as exc:  # InvalidStatus (e.g. 500) or a refused / closed handshake
        return f"{type(exc).__name__}: {exc}"


def test_decisions_during_a_redis_outage_are_kept_and_every_agent_resumes_within_10s(demo, stack):
    redis, host = stack
    sessions = [services.session_create(app_name="reimbursement_agent", user_id="requester") for _ in range(4)]
    for session in sessions:
        services.message_send(session=session, text="Please reimburse 200$ for meals", streaming=False)
    tickets = [wait_for(lambda s=s: PendingCall.objects.filter(session=s).first(), timeout=30) for s in sessions]
    for session in sessions:
        settle(session, wait_for)
    _, token = token_create(user=demo["approver"], name="outage")
    api = httpx.Client(base_url=f"http://{host}", headers={"Authorization": f"Token {token}"}, timeout=60)
    cookies, headers = _browser(demo["approver"])
    page = httpx.Client(base_url=f"http://{host}", cookies=cookies, headers=headers, timeout=60)
    assert _ws_handshake(host, cookies, f"/ws/tickets/{tickets[0].pk}/") == "open"

    redis.stop()
    down_at = time.monotonic()
    answers = [
        api.post(f"/api/pending-calls/{tickets[0].pk}/approve", json={"comment": "during the outage"}),
        api.post(f"/api/pending-calls/{tickets[1].pk}/reject", json={"reason": "no receipt"}),
        page.post(f"/tickets/{tickets[2].pk}/approve/", data={"approve-comment": "from the page"}),
        page.post(
            f"/tickets/{tickets[3].pk}/custom/", data={"custom-body": '{"status": "approved"}', "custom-final": "on"}
        ),
    ]
    during = _ws_handshake(host, cookies, f"/ws/tickets/{tickets[0].pk}/")
    assert [a.status_code for a in answers] == [201, 201, 200, 200], [a.text[:300] for a in answers]
    assert "500" not in during, during
    time.sleep(max(0.0, OUTAGE - (time.monotonic() - down_at)))
    redis.start()
    up_at = time.time()

    assert _ws_handshake(host, cookies, f"/ws/tickets/{tickets[0].pk}/") == "open"
    wait_for(
        lambda: (
            not Turn.objects.filter(status__in=["queued", "running"]).exists()
            and Turn.objects.filter(kind="function_response", status="done").count() == 4
        ),
        timeout=30,
        what="every agent to resume after Redis came back",
    )
    slowest = max(t.finished_at.timestamp() for t in Turn.objects.filter(kind="function_response")) - up_at
    print(f"the last agent resumed {slowest:.1f} s after Redis came back")
    assert slowest < 10, f"the last agent resumed {slowest:.1f} s after Redis came back"
    for session, ticket in zip(sessions, tickets, strict=True):
        ticket.refresh_from_db()
        assert Response.objects.filter(pending_call=ticket).count() == 1
        assert list(Turn.objects.filter(session=session).values_list("status", flat=True)) == ["done", "done"]
        if ticket.status == "approved":
            assert len(calls(session, "reimburse")) == 1, session
            assert agent_texts(session)[-1] == "Done: I reimbursed $200.00 for meals."
        else:
            assert ticket.status == "rejected" and calls(session, "reimburse") == []
