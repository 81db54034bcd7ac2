"""A websocket handshake to a path no socket lives at is refused (HTTP 403 under daphne), as an unknown page is a 404:
never a server error with a traceback in the log."""

from __future__ import annotations

import pytest
from channels.testing import WebsocketCommunicator

pytestmark = pytest.mark.django_db(transaction=True)

SAME_ORIGIN = [(b"host", b"testserver"), (b"origin", b"http://testserver")]


@pytest.mark.parametrize("path", ["/ws/inbox/", "/ws/sessions/abc/", "/ws/", "/nope"])
async def test_a_handshake_to_no_socket_is_refused_not_a_server_error(path):
    from adkweb.asgi import application

    comm = WebsocketCommunicator(application, path, headers=SAME_ORIGIN)
    connected, _ = await comm.connect()  # it raised ValueError ("No route found"): a 500 under daphne
    assert connected is False


async def test_a_known_path_still_routes(demo):
    from adkweb.asgi import application

    comm = WebsocketCommunicator(
        application, "/ws/sessions/", headers=SAME_ORIGIN
    )  # anonymous: refused by its consumer
    connected, _ = await comm.connect()
    assert connected is False
