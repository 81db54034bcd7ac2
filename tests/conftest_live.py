"""Fixtures for tests that talk to a live adkweb over HTTP (see tests/live_server.py).

Load them in a test module with `pytest_plugins = ["tests.conftest_live"]`.

- `live_asgi_server` (session): one uvicorn server for the whole run.
- `live_asgi` (function): the same server, for a test that also uses committed data
  (`transactional_db`, which `worker` implies): request it next to `worker`.
- `api_token(user)`: an `Authorization` header dict for a user, e.g. `api_token(demo["approver"])`.
- `adk_client(user)`: an `AdkClient` for the live server, authenticated with a new token of `user`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.live_server import AdkClient, LiveAsgiServer


@pytest.fixture(scope="session")
def live_asgi_server(django_db_setup: Any, django_db_blocker: Any) -> Iterator[LiveAsgiServer]:
    # The server's threads query the database between tests' own unblocks: keep it unblocked.
    with django_db_blocker.unblock():
        server = LiveAsgiServer().start()
        try:
            yield server
        finally:
            server.stop()


@pytest.fixture
def live_asgi(transactional_db: Any, live_asgi_server: LiveAsgiServer) -> LiveAsgiServer:
    return live_asgi_server


@pytest.fixture
def api_token() -> Callable[[Any], dict[str, str]]:
    from agents_app.tokens import token_create

    def make(user: Any) -> dict[str, str]:
        _, key = token_create(user=user, name="test")
        return {"Authorization": f"Token {key}"}

    return make


@pytest.fixture
def adk_client(live_asgi: LiveAsgiServer, api_token: Callable[[Any], dict[str, str]]) -> Iterator[Callable[[Any], Any]]:
    clients: list[AdkClient] = []

    def make(user: Any) -> AdkClient:
        clients.append(AdkClient(live_asgi.url, headers=api_token(user), username=user.get_username()))
        return clients[-1]

    yield make
    for client in clients:
        client.close()
