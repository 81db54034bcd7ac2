"""A websocket to the whole site's routing (every app's consumers), as a logged-in user."""

from __future__ import annotations

import time
from typing import Any

from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from adkweb.routing import websocket_urlpatterns

app = URLRouter(websocket_urlpatterns)


async def connect(path: str, user: Any) -> WebsocketCommunicator:
    """A connected communicator (the test fails if the socket is refused)."""
    comm = WebsocketCommunicator(app, path)
    comm.scope["user"] = user
    connected, _ = await comm.connect()
    assert connected, path
    return comm


async def closed_with(comm: WebsocketCommunicator, within: float = 3.0) -> int | None:
    """The code the server closed the socket with (frames before it skipped); None if it stayed open."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if await comm.receive_nothing(timeout=0.05):
            continue
        out = await comm.receive_output()
        if out["type"] == "websocket.close":
            return out.get("code")
    return None


def ws_url(html: str, path: str) -> str:
    """The socket a rendered page opens at `path` (its ws-connect's URL, which goes on with the page's query)."""
    return path + html.split(f'ws-connect="{path}', 1)[1].split('"', 1)[0].replace("&amp;", "&")


def page_socket_url(user: Any, page: str, path: str) -> str:
    """The socket `page`, rendered for `user` now, opens at `path` (sync: the test client)."""
    from django.test import Client

    client = Client()
    client.force_login(user)
    return ws_url(client.get(page).content.decode(), path)
