"""A socket's login ends where nothing announces it: its session expires (the socket closes then, its
expiry read when it connected, not at the next re-check every 600 s here; a session renewed meanwhile
keeps it open), or a logout or a password change lands while the socket's handshake is between its
authentication and joining the group that would hear of it (the socket reads its login again once it
has joined: it is refused). Real logins (session cookies), the project's ASGI application."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.test import Client
from django.utils import timezone

from adkweb.live_socket_login import LoginBound
from tests.adkweb.test_live_logins import _login, _still_served
from tests.adkweb.test_live_rights import _closed_with, _open_with_cookie

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def slow_recheck(settings):
    settings.ADKWEB_LIVE_RECHECK_SECONDS = 600


@sync_to_async
def _expire_in(client: Client, seconds: int) -> None:
    session = client.session
    session.set_expiry(seconds)
    session.save()


class _Clock:
    """Django's clock (timezone.now: the sockets' expiry timers, the session store's check) stands still
    until moved: a session expires when the test says, not when a loaded machine gets there."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.now = timezone.now()
        monkeypatch.setattr(timezone, "now", lambda: self.now)

    def move(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock(monkeypatch) -> _Clock:
    return _Clock(monkeypatch)


@pytest.fixture
def expiry_reads(monkeypatch) -> Callable[[int], Awaitable[None]]:
    """Waits until the sockets' expiry timers have gone off and read their logins again, n times in all
    (adkweb.live_socket_login: at the expiry they read when they connected, by Django's clock)."""
    reads: list[Any] = []
    read_again = LoginBound._login_again

    async def counted(self: LoginBound) -> None:
        await read_again(self)
        reads.append(self)

    monkeypatch.setattr(LoginBound, "_login_again", counted)

    async def wait(n: int) -> None:
        async with asyncio.timeout(30):
            while len(reads) < n:
                await asyncio.sleep(0.01)

    return wait


async def test_a_socket_closes_when_its_logins_session_expires(demo, clock, expiry_reads):
    approver = demo["approver"]
    expiring, lasting = await _login(approver), await _login(approver)
    await _expire_in(expiring, 1)
    sockets = [await _open_with_cookie("/ws/approvals/", expiring), await _open_with_cookie("/ws/sessions/", expiring)]
    other = await _open_with_cookie("/ws/approvals/", lasting)
    await expiry_reads(2)  # each socket's timer went off (1 s on) and read the session: the clock says not yet
    assert [await _closed_with(s, within=0.1) for s in sockets] == [None, None]  # not before
    clock.move(seconds=1)  # its expiry: each socket's next timer reads it expired
    assert [await _closed_with(s, within=30) for s in sockets] == [4003, 4403]
    assert await _closed_with(other, within=0.1) is None
    await _still_served(other)
    for s in [*sockets, other]:
        await s.disconnect()


async def test_a_session_renewed_before_it_expires_keeps_its_socket_open(demo, clock, expiry_reads):
    login = await _login(demo["approver"])
    await _expire_in(login, 1)
    inbox = await _open_with_cookie("/ws/approvals/", login)
    await _expire_in(login, 600)
    clock.move(seconds=1)  # the expiry the socket read when it connected
    await expiry_reads(1)  # its timer went off then and read the session: renewed
    assert await _closed_with(inbox, within=0.1) is None
    await _still_served(inbox)
    await inbox.disconnect()


@pytest.mark.parametrize("ending", ["logged out", "password changed"])
async def test_a_login_ending_during_the_handshake_before_the_socket_joins_its_group_is_refused(
    demo, monkeypatch, ending
):
    """Authenticated by its cookie, the socket is about to join the group of its person's logins when
    the login ends (the message announcing it sent to a group it is not in yet)."""
    from adkweb.asgi import application

    approver = demo["approver"]
    login = await _login(approver)
    layer = get_channel_layer()
    group_add = layer.group_add

    @sync_to_async
    def end() -> None:
        if ending == "logged out":
            login.logout()
        else:
            approver.set_password("a new one")
            approver.save()

    async def ended_first(group: str, channel: str) -> Any:
        if group == f"logins-{approver.pk}":
            await end()
        return await group_add(group, channel)

    monkeypatch.setattr(layer, "group_add", ended_first)
    cookie = f"sessionid={login.cookies['sessionid'].value}".encode()
    socket = WebsocketCommunicator(
        application, "/ws/approvals/", headers=[(b"origin", b"http://testserver"), (b"cookie", cookie)]
    )
    connected, code = await socket.connect()
    if connected:
        code = await _closed_with(socket, within=1.0)
    assert (connected, code) == (False, 4003)
    await socket.disconnect()


def test_a_logouts_message_leaves_once_its_session_is_gone(demo, monkeypatch):
    """So a socket that joins its group too late to hear it finds the session gone when it reads its
    login (the case above); where the message left first and Django deleted the session after, a socket
    joining and reading in between stayed open."""
    from django.contrib.sessions.models import Session

    from adkweb import live

    stored: list[bool] = []
    send = live.group_send

    def watching(group: str, message: dict) -> None:
        if message.get("type") == "login.ended":
            stored.append(Session.objects.filter(session_key=key).exists())
        send(group, message)

    monkeypatch.setattr(live, "group_send", watching)
    client = Client()
    client.force_login(demo["approver"])
    key = client.cookies["sessionid"].value
    client.logout()
    assert stored == [False]


async def test_an_account_deleted_has_its_sockets_closed_at_once(demo):
    user = demo["approver2"]
    sockets = [await _open_with_cookie("/ws/approvals/", await _login(user)) for _ in range(2)]
    other = await _open_with_cookie("/ws/approvals/", await _login(demo["approver"]))
    await sync_to_async(user.delete)()
    assert [await _closed_with(s, within=1.0) for s in sockets] == [4003, 4003]
    assert await _closed_with(other, within=0.1) is None
    for s in [*sockets, other]:
        await s.disconnect()
