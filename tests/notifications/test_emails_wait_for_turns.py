"""In embedded mode a ticket's emails go once the process has nothing to run (adkweb.memory_broker's
background queues): after the `/run` that opened the ticket has answered, after a turn that no
request waits for has ended, after an HTTP request being served, not while they run (every thread
shares one GIL: the fan-out's CPU was the turn's). QUIET is made 1 s here, so that "after" shows;
each decider still gets their one email."""

from __future__ import annotations

import socket
import time
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from google.genai import types

from agents_app.models import AdkSession, Turn
from agents_app.session_service import DjangoSessionService
from approvals.models import PendingCall
from approvals.services import message_submit
from notifications.models import Delivery
from tests.conftest import wait_for
from tests.live_server import text_message

pytest_plugins = ["tests.conftest_live"]
pytestmark = pytest.mark.django_db(transaction=True)
APP = "reimbursement_agent"
APPROVERS = ["admin@example.com", "approver2@example.com", "approver@example.com"]


@pytest.fixture
def quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    from adkweb import memory_broker

    monkeypatch.setattr(memory_broker, "QUIET", 1.0)


def _emailed(ticket: PendingCall) -> list[Delivery]:
    def sent() -> list[Delivery]:
        rows = list(Delivery.objects.filter(ticket=ticket, channel=Delivery.Channel.EMAIL))
        return rows if rows and all(d.status == Delivery.Status.DELIVERED for d in rows) else []

    return wait_for(sent, timeout=20, what="the ticket's emails")


def test_a_tickets_emails_go_after_the_run_that_opened_it_has_answered(emails, worker, adk_client, quiet):
    client = adk_client(emails["approver"])
    session = client.create_session(APP)
    response = client.run(APP, session["id"], text_message("Please reimburse 200$ for meals"))
    answered = timezone.now()
    assert response.status_code == 200, response.text
    sent = _emailed(PendingCall.objects.get(session__session_id=session["id"]))
    assert sorted(d.target for d in sent) == APPROVERS
    assert min(d.delivered_at for d in sent) >= answered + timedelta(seconds=0.5)


def test_in_embedded_mode_the_emails_go_from_the_quiet_thread_after_the_run(
    emails, worker, adk_client, quiet, settings, monkeypatch
):
    """The same with the worker counted as this process's (embedded mode): the ticket's outbox row is
    fanned out by adkweb.quiet_work, not by an `event_fan_out` message (notifications.outbox)."""
    from adkweb.celery import app

    settings.ADKWEB_EMBEDDED_WORKER = True
    settings.CELERY_BROKER_TRANSPORT = "adkweb.memory_broker:Transport"
    send, sent = app.send_task, []
    monkeypatch.setattr(app, "send_task", lambda name, *a, **kw: (sent.append(name), send(name, *a, **kw))[1])
    client = adk_client(emails["approver"])
    session = client.create_session(APP)
    response = client.run(APP, session["id"], text_message("Please reimburse 200$ for meals"))
    answered = timezone.now()
    assert response.status_code == 200, response.text
    ticket = PendingCall.objects.get(session__session_id=session["id"])
    emailed = _emailed(ticket)
    assert sorted(d.target for d in emailed) == APPROVERS
    assert min(d.delivered_at for d in emailed) >= answered + timedelta(seconds=0.5)
    assert "notifications.tasks.event_fan_out" not in sent


def test_a_tickets_emails_go_after_a_turn_no_request_waits_for(emails, worker, quiet):
    made = DjangoSessionService().create_session_sync(app_name=APP, user_id="approver")
    session = AdkSession.objects.get(session_id=made.id)
    content = types.Content(role="user", parts=[types.Part(text="Please reimburse 200$ for meals")])
    turn = message_submit(session=session, content=content, actor=emails["approver"])  # as a page's form does
    assert turn is not None
    sent = _emailed(wait_for(lambda: PendingCall.objects.filter(session=session).first(), what="the ticket"))
    turn.refresh_from_db()
    assert turn.status == Turn.Status.DONE and turn.finished_at is not None
    assert sorted(d.target for d in sent) == APPROVERS
    assert min(d.delivered_at for d in sent) >= turn.finished_at + timedelta(seconds=0.5)


def test_a_background_message_waits_for_the_http_request_being_served(live_asgi, monkeypatch):
    from kombu import Connection, Consumer, Queue

    from adkweb import memory_broker

    queue = f"adkweb-test-bg-{uuid.uuid4().hex}"
    monkeypatch.setattr(memory_broker, "BACKGROUND", frozenset({queue}))
    monkeypatch.setattr(memory_broker, "QUIET", 0.3)
    got: list[Any] = []
    host, port = live_asgi.url.removeprefix("http://").split(":")
    with Connection("memory://", transport="adkweb.memory_broker:Transport") as conn:
        Consumer(conn.channel(), [Queue(queue)], callbacks=[lambda body, message: got.append(body)]).consume()
        with socket.create_connection((host, int(port)), timeout=10) as request:
            # A request whose body has not all come yet: it is being served, its view not yet called.
            request.sendall(b"POST /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 4\r\n\r\nab")
            time.sleep(0.3)
            conn.SimpleQueue(queue).put({"n": 1})
            with pytest.raises(TimeoutError):
                conn.drain_events(timeout=1.0)
            request.sendall(b"cd")
            assert request.recv(1024).startswith(b"HTTP/1.1 ")
        conn.drain_events(timeout=10)
    assert got == [{"n": 1}]
