"""The client script of the adk api_server comparison (test_adk_comparison.py, test_adk_differences.py):
one `Api` per server, message builders, `normalise` (what is unique per run taken out), and the two
servers as fixtures (`adkweb` on a live ASGI server with a worker, `adk` as ADK's own api_server)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.adk_api_server import AGENTS_DIR, AdkApiServer

USER = "approver"


class Api:
    """The client script's view of one server: ADK's REST routes under `base`."""

    def __init__(self, name: str, base: str, headers: dict[str, str] | None = None) -> None:
        self.name = name
        self.http = httpx.Client(base_url=base, headers=headers or {}, timeout=60)

    def session(self, app: str) -> str:
        r = self.http.post(f"/apps/{app}/users/{USER}/sessions", json={})
        assert r.status_code == 200, (self.name, r.text)
        return r.json()["id"]

    def get_session(self, app: str, sid: str) -> dict:
        return self.http.get(f"/apps/{app}/users/{USER}/sessions/{sid}").json()

    def body(self, app: str, sid: str, message: dict | None, **extra: Any) -> dict:
        body = {"appName": app, "userId": USER, "sessionId": sid, **extra}
        if message is not None:
            body["newMessage"] = message
        return body

    def run(self, app: str, sid: str, message: dict | None, **extra: Any) -> tuple[int, Any]:
        r = self.http.post("/run", json=self.body(app, sid, message, **extra))
        try:
            return r.status_code, r.json()
        except ValueError:
            return r.status_code, r.text

    def run_sse(self, app: str, sid: str, message: dict | None, **extra: Any) -> list[dict]:
        frames = []
        with self.http.stream("POST", "/run_sse", json=self.body(app, sid, message, **extra)) as r:
            assert r.status_code == 200, (self.name, r.read())
            for line in r.iter_lines():
                if line.startswith("data:"):
                    frames.append(json.loads(line[5:]))
        return frames


def text(message: str) -> dict:
    return {"role": "user", "parts": [{"text": message}]}


def answer(call: dict, response: dict, **fields: Any) -> dict:
    return {
        "role": "user",
        "parts": [{"functionResponse": {"id": call["id"], "name": call["name"], "response": response, **fields}}],
    }


def pending_call(events: list[dict], name: str | None = None) -> dict:
    """The long-running function call of a run (the pause a client answers)."""
    for event in events:
        for part in (event.get("content") or {}).get("parts", []):
            call = part.get("functionCall")
            if call and call["id"] in event.get("longRunningToolIds", []) and name in (None, call["name"]):
                return call
    raise AssertionError(f"no pending call in {events}")


UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")  # event ids
ID_PATTERNS = [
    r"\bcall-[0-9a-f]{16}\b",  # the demo model's function call ids
    r"\badk-[0-9a-f-]{36}\b",  # ADK's own (confirmation requests)
    r"\be-[0-9a-f-]{36}\b",  # invocation ids
    r"\bp-[0-9a-f-]{36}\b",  # PATCH's state-change invocations
    r"\bapproval-ticket-[0-9a-f]{8}\b",
    r"\bTR-[0-9A-F]{8}\b",
]


def normalise(value: Any) -> Any:
    """Drop event ids and timestamps; number every other run-unique id by first appearance."""
    seen: dict[str, str] = {}

    def placeholder(match: re.Match) -> str:
        return seen.setdefault(match.group(0), f"<id{len(seen) + 1}>")

    def unique(key: str, value: Any) -> bool:
        return key in {"timestamp", "lastUpdateTime", "createTime", "canonicalUri"} or (
            key == "id" and bool(UUID.fullmatch(str(value)))
        )

    def strip(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: strip(v) for k, v in node.items() if not unique(k, v)}
        if isinstance(node, (list, tuple)):
            return [strip(v) for v in node]
        return node

    dumped = json.dumps(strip(value), sort_keys=True)
    return json.loads(re.sub("|".join(ID_PATTERNS), placeholder, dumped))


@pytest.fixture
def adkweb(demo, worker, live_asgi, api_token, settings) -> Iterator[Api]:
    settings.ADKWEB_AGENTS_DIR = str(AGENTS_DIR)
    settings.ADKWEB_MEMORY_SERVICE = "django"  # held to ADK's in-memory service's answers
    api = Api("adkweb", live_asgi.url + "/api/adk", api_token(demo[USER]))
    yield api
    api.http.close()


@pytest.fixture
def adk(adk_api_server: AdkApiServer) -> Iterator[Api]:
    api = Api("adk", adk_api_server.url)
    yield api
    api.http.close()
