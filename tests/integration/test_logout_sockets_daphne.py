"""A login that ends closes its websockets at once, on every web process (adkweb.live_logins): logging
out closes the sockets opened under that login (its session cookie) and no other; a password changed
or an account deactivated closes every socket of that person whose login it ended. Two daphne
processes on one Redis channel layer, a re-check interval far longer than the test (adkweb.live_rights
is not what closes them), real logins and the real logout POST with its CSRF token."""

from __future__ import annotations

import sys
import time
from typing import Any

import httpx
import pytest
import redis
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from websockets.sync.client import connect as ws_connect

from agents_app import events, services

from . import processes
from .test_live_rights_daphne import _closed_with, _text_event

pytestmark = pytest.mark.django_db(transaction=True)
WITHIN = 2.0  # seconds: "at once", against a re-check every 600


@pytest.fixture
def webs() -> Any:
    """Two web processes, each a daphne on its own port."""
    started: list[processes.Service] = []
    hosts = []
    try:
        for _ in range(2):
            port = processes.free_port()
            args = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "adkweb.asgi:application"]
            env = processes.service_env(settings.REDIS_URL, ADKWEB_LIVE_RECHECK_SECONDS="600")
            started.append(processes.Service(args, env, ready="Listening on TCP address").start())
            hosts.append(f"127.0.0.1:{port}")
        yield hosts
    finally:
        for web in started:
            web.stop()


def _login(host: str, username: str, password: str) -> httpx.Client:
    """Through the login page, as a browser does (the password stored with the daphne processes' hasher,
    which the tests' settings replace with a fast one)."""
    hasher = PBKDF2PasswordHasher()
    users = get_user_model().objects.filter(username=username).exclude(password__startswith=hasher.algorithm)
    users.update(password=hasher.encode(password, hasher.salt()))  # once: a new hash ends the user's logins
    client = httpx.Client(base_url=f"http://{host}", timeout=30)
    assert client.get("/accounts/login/").status_code == 200
    token = client.cookies["csrftoken"]
    r = client.post("/accounts/login/", data={"username": username, "password": password, "csrfmiddlewaretoken": token})
    assert r.status_code == 302, r.text[:500]
    return client


def _socket(host: str, path: str, login: httpx.Client) -> Any:
    cookie = f"sessionid={login.cookies['sessionid']}"
    headers = {"Cookie": cookie, "Origin": f"http://{host}"}
    return ws_connect(f"ws://{host}{path}", additional_headers=headers, open_timeout=20)


def _still_open_and_receiving(ws: Any, session: Any, text: str) -> None:
    events.notify_session_event(session_pk=session.pk, event_pk=_text_event(session, text).pk)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if text in ws.recv(timeout=10):
            return
    pytest.fail(f"{text!r} never reached the socket")


def test_logging_out_closes_that_logins_sockets_on_every_process_and_no_other(demo, webs):
    one, two = webs
    session = services.session_create(app_name="reimbursement_agent", user_id="requester")
    leaving, staying = _login(one, "approver", "approver-demo"), _login(two, "approver", "approver-demo")
    path = f"/ws/sessions/{session.pk}/?after=0"
    sockets = [_socket(one, path, leaving), _socket(two, "/ws/approvals/", leaving), _socket(one, path, staying)]
    try:
        for ws in (sockets[0], sockets[2]):
            assert 'id="session-status"' in ws.recv(timeout=20)
        raw_key = leaving.cookies["sessionid"]

        r = leaving.post("/accounts/logout/", data={"csrfmiddlewaretoken": leaving.cookies["csrftoken"]})
        assert r.status_code == 302, r.text[:500]
        started = time.monotonic()
        codes = [_closed_with(ws, within=WITHIN)[0] for ws in sockets[:2]]
        assert codes == [4403, 4003], codes  # each socket's refusal: the page does not reconnect
        assert time.monotonic() - started < WITHIN

        # The same person's other login is not logged out: its socket stays open and is still served.
        _still_open_and_receiving(sockets[2], session, "after the logout of another login")
        # The session key names no group in Redis (its hash does).
        keys = redis.Redis.from_url(settings.REDIS_URL).keys("*")
        assert not any(raw_key.encode() in key for key in keys)
    finally:
        for ws in sockets:
            ws.close()


@pytest.mark.parametrize("change", ["password changed", "deactivated"])
def test_a_person_whose_logins_end_has_every_socket_closed_at_once(demo, webs, change):
    """By an administrator (or the person on another login): every login of theirs ends, and their
    sockets close on both processes; someone else's socket stays open."""
    one, two = webs
    session = services.session_create(app_name="reimbursement_agent", user_id="requester")
    first, second = _login(one, "approver", "approver-demo"), _login(two, "approver", "approver-demo")
    observer = _login(two, "observer", "observer-demo")
    path = f"/ws/sessions/{session.pk}/?after=0"
    sockets = [_socket(one, path, first), _socket(two, "/ws/approvals/", second), _socket(two, path, observer)]
    try:
        for ws in (sockets[0], sockets[2]):
            assert 'id="session-status"' in ws.recv(timeout=20)
        approver = get_user_model().objects.get(username="approver")
        if change == "password changed":
            approver.set_password("a new one, after a leak")
        else:
            approver.is_active = False
        approver.save()

        codes = [_closed_with(ws, within=WITHIN)[0] for ws in sockets[:2]]
        assert codes == [4403, 4003], codes
        _still_open_and_receiving(sockets[2], session, "after the change to the approver")
    finally:
        for ws in sockets:
            ws.close()
