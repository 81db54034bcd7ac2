"""A real ASGI server (uvicorn, in a thread) serving `adkweb.asgi.application` against the test
database, for tests that talk HTTP (and websockets, and SSE) to a live adkweb.

pytest-django's `live_server` is WSGI-only and buffers streaming responses; this one runs the
project's ASGI application as deployed (HTTP through Django, websockets through Channels).

Use it through the fixtures in `tests/conftest_live.py`:

    pytest_plugins = ["tests.conftest_live"]

    def test_something(live_asgi, worker):      # `worker`: the embedded or integration worker
        httpx.get(live_asgi.url + "/api/adk/list-apps", headers=...)

or directly:

    with LiveAsgiServer() as server:
        print(server.url)   # http://127.0.0.1:<random free port>

The server shares this process's Django settings (so the test database pytest-django created)
and its channel layer (the in-memory one in embedded tests, Redis in integration tests).
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from typing import Any

import httpx


class LiveAsgiServer:
    """uvicorn on 127.0.0.1 and a free port, in a daemon thread with its own event loop."""

    def __init__(self, app: Any = None, host: str = "127.0.0.1") -> None:
        self.app = app
        self.host = host
        self.port = 0
        self._server: Any = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://{self.host}:{self.port}"

    def start(self, timeout: float = 15.0) -> LiveAsgiServer:
        import uvicorn

        if self.app is None:
            from adkweb.asgi import application

            self.app = application
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, 0))  # the kernel picks a free port; no race with other runs
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(self.app, lifespan="off", log_level="warning", access_log=False, ws="auto")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=lambda: asyncio.run(self._server.serve(sockets=[sock])), name="live-asgi", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("The live ASGI server did not start.")
            time.sleep(0.02)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)

    def __enter__(self) -> LiveAsgiServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


# -- a client of ADK's REST API, for tests ----------------------------------------------------------


class AdkClient:
    """A small client of ADK's REST API, written as an ADK user would (nothing adkweb-specific)."""

    def __init__(self, base_url: str, *, headers: dict[str, str], username: str, timeout: float = 60) -> None:
        self.http = httpx.Client(base_url=base_url, headers=headers, timeout=timeout)
        self.user = username

    def close(self) -> None:
        self.http.close()

    def create_session(self, app: str, **body: Any) -> dict[str, Any]:
        r = self.http.post(f"/api/adk/apps/{app}/users/{self.user}/sessions", json=body or None)
        assert r.status_code == 200, r.text
        return r.json()

    def get_session(self, app: str, session_id: str) -> dict[str, Any]:
        r = self.http.get(f"/api/adk/apps/{app}/users/{self.user}/sessions/{session_id}")
        assert r.status_code == 200, r.text
        return r.json()

    def run_body(self, app: str, session_id: str, message: dict[str, Any], **extra: Any) -> dict[str, Any]:
        return {"appName": app, "userId": self.user, "sessionId": session_id, "newMessage": message, **extra}

    def run(self, app: str, session_id: str, message: dict[str, Any], **extra: Any) -> httpx.Response:
        return self.http.post("/api/adk/run", json=self.run_body(app, session_id, message, **extra))

    def run_sse(self, app: str, session_id: str, message: dict[str, Any], **extra: Any) -> list[dict[str, Any]]:
        """POST /run_sse and collect every `data:` payload until the stream ends."""
        out = []
        with self.http.stream("POST", "/api/adk/run_sse", json=self.run_body(app, session_id, message, **extra)) as r:
            assert r.status_code == 200, r.read().decode()
            assert r.headers["content-type"].startswith("text/event-stream")
            for line in r.iter_lines():
                if line.startswith("data: "):
                    out.append(json.loads(line[len("data: ") :]))
        return out


def text_message(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"text": text}]}


def function_response_message(call_id: str, name: str, response: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "parts": [{"functionResponse": {"id": call_id, "name": name, "response": response}}]}


def long_running_call(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The function call whose id is in its event's longRunningToolIds (the seed client's loop)."""
    for event in events:
        for part in (event.get("content") or {}).get("parts", []):
            call = part.get("functionCall")
            if call and call.get("id") in (event.get("longRunningToolIds") or []):
                return call
    raise AssertionError(f"No long-running function call in {events}")


def function_response(events: list[dict[str, Any]], call_id: str) -> dict[str, Any]:
    for event in events:
        for part in (event.get("content") or {}).get("parts", []):
            fr = part.get("functionResponse")
            if fr and fr.get("id") == call_id:
                return fr
    raise AssertionError(f"No function response for {call_id} in {events}")


def function_calls(events: list[dict[str, Any]]) -> list[str]:
    return [
        p["functionCall"]["name"]
        for e in events
        for p in (e.get("content") or {}).get("parts", [])
        if p.get("functionCall")
    ]


def texts(events: list[dict[str, Any]]) -> list[str]:
    return [p["text"] for e in events for p in (e.get("content") or {}).get("parts", []) if p.get("text")]


def seed_client_loop(client: AdkClient, *, sse: bool = False) -> dict[str, Any]:
    """The seeds' long-running-tool client, over HTTP: run, find the pending call, read its ticket
    id, send the updated response with the same id and name, and see the agent reimburse."""
    app = "reimbursement_agent"
    session = client.create_session(app)

    def send(message: dict[str, Any]) -> list[dict[str, Any]]:
        if sse:
            return client.run_sse(app, session["id"], message, streaming=True)
        r = client.run(app, session["id"], message)
        assert r.status_code == 200, r.text
        return r.json()

    first = send(text_message("Please reimburse 200$ for meals"))
    call = long_running_call(first)
    assert call["name"] == "ask_for_approval"
    ticket_id = function_response(first, call["id"])["response"]["ticket-id"]
    assert ticket_id.startswith("approval-ticket-")
    updated = {"status": "approved", "ticket-id": ticket_id}
    second = send(function_response_message(call["id"], call["name"], updated))
    assert "reimburse" in function_calls(second)
    assert any("reimbursed $200.00 for meals" in t for t in texts(second))
    return {"session": session, "call": call, "first": first, "second": second}
