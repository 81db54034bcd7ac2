"""Rights re-checked on real websockets under daphne (adkweb.live_rights): sockets whose fragments come
by the layer's direct delivery, without touching the database, stop when their person loses the right to
see them, and get nothing published after."""

from __future__ import annotations

import sys
import time

import pytest
from django.conf import settings
from django.contrib.auth.models import Group
from django.test import Client
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect as ws_connect

from adkweb.roles import APPROVERS
from agents_app import events, services
from agents_app.models import StoredEvent

from . import processes

pytestmark = pytest.mark.django_db(transaction=True)
RECHECK = 0.5


def _daphne() -> tuple[processes.Service, str]:
    port = processes.free_port()
    args = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "adkweb.asgi:application"]
    env = processes.service_env(settings.REDIS_URL, ADKWEB_LIVE_RECHECK_SECONDS=str(RECHECK))
    web = processes.Service(args, env, ready="Listening on TCP address")
    return web.start(), f"127.0.0.1:{port}"


def _closed_with(ws, within: float = 5.0) -> tuple[int | None, list[str]]:
    """The close code the server sent, and the frames before it; (None, frames) if still open."""
    frames: list[str] = []
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            frames.append(ws.recv(timeout=0.1))
        except TimeoutError:
            continue
        except ConnectionClosed as closed:
            return (closed.rcvd.code if closed.rcvd else None), frames
    return None, frames


def _text_event(session, text: str) -> StoredEvent:
    data = {"author": "reimbursement_agent", "content": {"role": "model", "parts": [{"text": text}]}}
    return StoredEvent.objects.create(
        session=session, event_id=f"ev-{text}", author="reimbursement_agent", timestamp=time.time(), data=data
    )


def test_an_approver_removed_while_watching_stops_receiving_under_daphne(demo, django_user_model):
    user = django_user_model.objects.create_user("approver3", password="x")
    user.groups.add(Group.objects.get(name=APPROVERS))
    client = Client()
    client.force_login(user)
    cookie = f"sessionid={client.cookies['sessionid'].value}"
    session = services.session_create(app_name="reimbursement_agent", user_id="requester")
    web, host = _daphne()
    sockets = []
    try:
        for path in [f"/ws/sessions/{session.pk}/?after=0"] * 5 + ["/ws/approvals/"]:
            headers = {"Cookie": cookie, "Origin": f"http://{host}"}
            sockets.append(ws_connect(f"ws://{host}{path}", additional_headers=headers, open_timeout=20))
        for ws in sockets[:5]:
            assert 'id="session-status"' in ws.recv(timeout=20)
        time.sleep(RECHECK * 1.5)  # past a re-check: the rights held, nothing closed
        events.notify_session_event(session_pk=session.pk, event_pk=_text_event(session, "before").pk)
        for ws in sockets[:5]:
            assert "before" in ws.recv(timeout=20)

        user.groups.clear()
        outcomes = [_closed_with(ws) for ws in sockets]
        assert [code for code, _ in outcomes] == [4403] * 5 + [4003]
        events.notify_session_event(session_pk=session.pk, event_pk=_text_event(session, "after").pk)
        time.sleep(0.5)
        for ws in sockets:
            with pytest.raises(ConnectionClosed):
                ws.recv(timeout=0.1)
        assert not any("after" in frame for _, frames in outcomes for frame in frames)
    finally:
        for ws in sockets:
            ws.close()
        web.stop()
