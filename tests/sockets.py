"""A websocket to the whole site's routing (every app's consumers), as a logged-in user."""

from __future__ import annotations

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


def ws_url(html: str, path: str) -> str:
    """The socket a rendered page opens at `path` (its ws-connect's URL, which goes on with the page's query)."""
    return path + html.split(f'ws-connect="{path}', 1)[1].split('"', 1)[0].replace("&amp;", "&")
