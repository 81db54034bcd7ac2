"""Cross-site websocket hijacking: a logged-in person's browser, on another site's page, opens adkweb's
sockets with their cookie. A websocket handshake has no CSRF token, so its Origin is the check, and it
is as strict as Django's for a POST: the page's origin must be the host the socket is addressed to (its
Host header; any port or sibling subdomain is another origin), or one of CSRF_TRUSTED_ORIGINS (a proxy
that does not pass the Host on)."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from agents_app import services

pytestmark = pytest.mark.django_db(transaction=True)


async def _connects(path: str, cookie: bytes, headers: list[tuple[bytes, bytes]]) -> bool:
    from adkweb.asgi import application

    comm = WebsocketCommunicator(application, path, headers=[*headers, (b"cookie", cookie)])
    connected, _ = await comm.connect()
    if connected:
        await comm.disconnect()
    return connected


@pytest.fixture
async def approver_cookie(demo) -> bytes:
    client = Client()
    await sync_to_async(client.force_login)(demo["approver"])
    return f"sessionid={client.cookies['sessionid'].value}".encode()


@pytest.mark.parametrize(
    "host, origin",
    [
        (b"localhost:8000", b"http://localhost:9999"),  # another app on the same machine
        (b"127.0.0.1:8000", b"http://localhost:8000"),  # another host name of it: another origin
        (b"127.0.0.1:8000", b"null"),  # a sandboxed frame, a file: page
        (b"localhost:8000", b"http://[::1"),  # no URL at all: refused, no 500
        (b"localhost:\xff", b"http://localhost:8000"),  # nor a Host that is not one
    ],
)
async def test_a_socket_opened_from_another_origin_is_refused(demo, approver_cookie, host, origin):
    session = await sync_to_async(services.session_create)(app_name="reimbursement_agent", user_id="requester")
    for path in (f"/ws/sessions/{session.pk}/", "/ws/approvals/", "/ws/sessions/"):
        assert not await _connects(path, approver_cookie, [(b"host", host), (b"origin", origin)]), path


async def test_a_socket_opened_by_adkwebs_own_page_connects(demo, approver_cookie):
    for host, origin in ((b"localhost:8000", b"http://localhost:8000"), (b"127.0.0.1", b"http://127.0.0.1")):
        assert await _connects("/ws/approvals/", approver_cookie, [(b"host", host), (b"origin", origin)])
    assert not await _connects("/ws/approvals/", approver_cookie, [(b"host", b"localhost:8000")])  # no Origin


async def test_behind_a_proxy_that_rewrites_the_host_a_trusted_origin_connects(demo, approver_cookie, settings):
    settings.ALLOWED_HOSTS = ["adkweb.example.com"]
    settings.CSRF_TRUSTED_ORIGINS = ["https://adkweb.example.com"]
    proxied = [(b"host", b"adkweb"), (b"origin", b"https://adkweb.example.com")]  # nginx's upstream name
    assert await _connects("/ws/approvals/", approver_cookie, proxied)
    sibling = [(b"host", b"adkweb"), (b"origin", b"https://evil.example.com")]
    assert not await _connects("/ws/approvals/", approver_cookie, sibling)


async def test_a_wildcard_allowed_host_does_not_let_a_sibling_subdomain_in(demo, approver_cookie, settings):
    settings.ALLOWED_HOSTS = [".example.com"]
    own = [(b"host", b"adkweb.example.com"), (b"origin", b"https://adkweb.example.com")]
    assert await _connects("/ws/approvals/", approver_cookie, own)
    sibling = [(b"host", b"adkweb.example.com"), (b"origin", b"https://evil.example.com")]
    assert not await _connects("/ws/approvals/", approver_cookie, sibling)
