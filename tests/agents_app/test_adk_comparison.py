"""adkweb's /api/adk next to ADK's own `adk api_server`: one client script, two servers, the same events.

Both serve the agents folder tests/adk_agents (adkweb through ADKWEB_AGENTS_DIR, ADK as its
AGENTS_DIR) on the offline demo model, so a scenario must produce the same event sequences on
both, modulo what is unique per run: event ids, timestamps, invocation ids, function call ids and
the ids tools make up (each replaced by a placeholder numbered in order of first appearance).

Where adkweb differs on purpose, a test says so by name (`test_adkweb_differs_...`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from tests.adk_api_server import AGENTS_DIR, AdkApiServer

pytest_plugins = ["tests.conftest_live", "tests.adk_api_server"]
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


# -- the scenarios: each drives one server and returns what a client saw --------------------------
def approve(api: Api) -> list:
    sid = api.session("cmp_reimburse")
    status, first = api.run("cmp_reimburse", sid, text("Please reimburse 200$ for meals"))
    status2, second = api.run("cmp_reimburse", sid, answer(pending_call(first), {"status": "approved"}))
    return [status, first, status2, second]


def reject(api: Api) -> list:
    sid = api.session("cmp_reimburse")
    _, first = api.run("cmp_reimburse", sid, text("Please reimburse 300$ for a hotel"))
    status, second = api.run(
        "cmp_reimburse", sid, answer(pending_call(first), {"status": "rejected", "reason": "no receipt"})
    )
    return [first, status, second]


def message_while_paused(api: Api) -> list:
    sid = api.session("cmp_reimburse")
    _, first = api.run("cmp_reimburse", sid, text("Please reimburse 250$ for travel"))
    status, chat = api.run("cmp_reimburse", sid, text("Any news on my request?"))
    _, after = api.run("cmp_reimburse", sid, answer(pending_call(first), {"status": "approved"}))
    return [first, status, chat, after]


def bare_number(api: Api) -> list:
    sid = api.session("cmp_stock")
    return [api.run("cmp_stock", sid, text("What is GOOG at?"))]


def agent_tool_skip_summarization(api: Api) -> list:
    sid = api.session("cmp_assistant")
    return [api.run("cmp_assistant", sid, text("Please summarise the quarterly travel budget note for the team"))]


def confirmation(confirmed: bool) -> Callable[[Api], list]:
    def scenario(api: Api) -> list:
        sid = api.session("cmp_transfer")
        _, first = api.run("cmp_transfer", sid, text("transfer $500 to Bob"))
        request = pending_call(first, "adk_request_confirmation")
        status, second = api.run("cmp_transfer", sid, answer(request, {"confirmed": confirmed}))
        return [first, status, second]

    return scenario


def temp_state_handoff(api: Api) -> list:
    sid = api.session("cmp_state")
    status, events = api.run("cmp_state", sid, text("/call read_note {}"), stateDelta={"temp:note": "hand me over"})
    return [status, events, api.get_session("cmp_state", sid)["state"]]


def intermediate_then_final(api: Api) -> list:
    sid = api.session("cmp_reimburse")
    _, first = api.run("cmp_reimburse", sid, text("Please reimburse 400$ for a course"))
    call = pending_call(first)
    update = answer(call, {"status": "in_progress", "message": "with finance", "progress": 50}, willContinue=True)
    status, middle = api.run("cmp_reimburse", sid, update)
    status2, last = api.run("cmp_reimburse", sid, answer(call, {"status": "approved"}))
    return [status, middle, status2, last]


def tool_raises_sse(api: Api) -> list:
    sid = api.session("cmp_raiser")
    frames = api.run_sse("cmp_raiser", sid, text('/call explode {"reason": "on purpose"}'))
    for frame in frames:
        (frame.get("error_details") or {}).pop("timestamp", None)
    return frames


# -- the rest of the api_server surface ----------------------------------------------------------
def cmp_apps(apps: Any) -> Any:
    """Only the comparison apps (adkweb also serves its demo agents)."""
    if isinstance(apps, dict):
        return {"apps": [a for a in apps["apps"] if a["name"].startswith("cmp_")]}
    return [a for a in apps if a.startswith("cmp_")]


def server_info(api: Api) -> list:
    get = api.http.get
    return [
        get("/health").json(),
        get("/version").json(),
        cmp_apps(get("/list-apps").json()),
        cmp_apps(get("/list-apps?detailed=true").json()),
        get("/apps/cmp_reimburse/app-info").json(),
        get("/apps/cmp_assistant/app-info").json(),
    ]


def sessions_listed_and_patched(api: Api) -> list:
    app, base = "cmp_stock", f"/apps/cmp_stock/users/{USER}/sessions"
    first = api.http.post(base, json={"state": {"topic": "prices", "temp:gone": 1, "user:lang": "en"}}).json()
    second = api.session(app)
    patched = api.http.patch(f"{base}/{second}", json={"stateDelta": {"watch": ["GOOG"], "temp:x": 1, "app:tier": 2}})
    mine = {first["id"], second}
    listed = [s for s in api.http.get(base).json() if s["id"] in mine]
    listed.sort(
        key=lambda s: s["id"] != first["id"]
    )  # the order of two sessions made in one second is not ADK's promise
    return [first, patched.status_code, patched.json(), listed, api.get_session(app, second)]


def run_without_a_new_message(api: Api) -> list:
    sid = api.session("cmp_stock")
    api.run("cmp_stock", sid, text("What is GOOG at?"))
    return [api.run("cmp_stock", sid, None), len(api.get_session("cmp_stock", sid)["events"])]


def schema_refusals(api: Api) -> list:
    return [
        api.http.post("/run", json={"appName": "cmp_stock"}).json(),
        api.http.post("/run", json={"appName": "cmp_stock", "userId": 5, "sessionId": "x"}).json(),
        api.http.post(
            "/run", json={"appName": "cmp_stock", "userId": USER, "sessionId": "x", "streaming": "maybe"}
        ).json(),
        api.http.patch(f"/apps/cmp_stock/users/{USER}/sessions/x", json={}).json(),
    ]


PNG = {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}


def artifacts(api: Api) -> list:
    sid = api.session("cmp_stock")
    base = f"/apps/cmp_stock/users/{USER}/sessions/{sid}/artifacts"
    get, out = api.http.get, []
    out.append(api.http.post(base, json={"filename": "chart.png", "artifact": PNG, "customMetadata": {"k": 1}}).json())
    out.append(api.http.post(base, json={"filename": "chart.png", "artifact": {"text": "v1"}}).json())
    out.append(api.http.post(base, json={"filename": "user:prefs.txt", "artifact": {"text": "dark"}}).json())
    for path in ("", "/chart.png", "/chart.png?version=0", "/chart.png/versions", "/chart.png/versions/metadata"):
        out.append(get(base + path).json())
    for path in ("/chart.png/versions/0", "/chart.png/versions/latest/metadata", "/user:prefs.txt"):
        out.append(get(base + path).json())
    out.append([get(base + "/nope.png").status_code, get(base + "/chart.png/versions/9").status_code])
    out.append(get(base + "/chart.png/versions/x").status_code)
    out.append([api.http.delete(base + "/chart.png").status_code, get(base).json()])
    return out


def streamed_partials(api: Api) -> list:
    """With streaming on, the model's text chunks come as partial events: same ids, invocation, node."""
    sid = api.session("cmp_stock")
    frames = api.run_sse("cmp_stock", sid, text("What is GOOG at?"), streaming=True)
    partials = [f for f in frames if f.get("partial")]
    assert partials, "the demo model streams its text"
    final = next(f for f in frames if not f.get("partial") and "text" in str(f.get("content")))
    return [frames, {f["id"] for f in partials} == {final["id"]}]


def memory(api: Api) -> list:
    """A session added to memory (PATCH .../memory) is found by a tool in the user's next session."""
    first = api.session("cmp_memory")
    _, before = api.run("cmp_memory", first, text("My favourite city is Lisbon"))
    patched = api.http.patch(f"/apps/cmp_memory/users/{USER}/memory", json={"sessionId": first})
    second = api.session("cmp_memory")
    _, after = api.run("cmp_memory", second, text("Which city is my favourite?"))
    missing = api.http.patch(f"/apps/cmp_memory/users/{USER}/memory", json={"sessionId": "nope"}).status_code
    assert "My favourite city is Lisbon" in json.dumps(after), "the second session's tool found the first's words"
    return [before, patched.status_code, patched.json(), after, missing]


def resume_an_invocation(api: Api) -> list:
    """invocationId and no newMessage: ADK continues that invocation on the stored history."""
    sid = api.session("cmp_stock")
    _, first = api.run("cmp_stock", sid, text("What is GOOG at?"))
    status, resumed = api.run("cmp_stock", sid, None, invocationId=first[0]["invocationId"])
    assert {e["invocationId"] for e in resumed} == {first[0]["invocationId"]}
    # An id the session has never seen: ADK runs the agent under it (a new invocation of that id).
    other = api.session("cmp_stock")
    fresh = api.run("cmp_stock", other, None, invocationId="e-chosen-by-the-client")
    return [first, status, resumed, fresh]


SCENARIOS: dict[str, Callable[[Api], list]] = {
    "invocationId without newMessage (resume)": resume_an_invocation,
    "memory (adkweb: ADKWEB_MEMORY_SERVICE=django)": memory,
    "streamed partial events (run_sse, streaming)": streamed_partials,
    "health, version, list-apps, app-info": server_info,
    "sessions listed and patched": sessions_listed_and_patched,
    "run without newMessage": run_without_a_new_message,
    "schema refusals (422)": schema_refusals,
    "artifacts": artifacts,
    "approve": approve,
    "reject": reject,
    "message while paused": message_while_paused,
    "bare-number tool result": bare_number,
    "agent tool with skip_summarization": agent_tool_skip_summarization,
    "tool confirmation approved": confirmation(True),
    "tool confirmation rejected": confirmation(False),
    "temp: state handoff": temp_state_handoff,
    "intermediate then final answer": intermediate_then_final,
    "a tool that raises (run_sse)": tool_raises_sse,
}


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


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_same_events_as_adk_api_server(scenario, adkweb, adk):
    theirs = normalise(SCENARIOS[scenario](adk))
    ours = normalise(SCENARIOS[scenario](adkweb))
    assert ours == theirs


# -- deliberate differences ----------------------------------------------------------------------
def test_adkweb_differs_a_second_final_answer_is_refused_where_adk_rewrites_history(adkweb, adk):
    outcomes = {}
    for api in (adk, adkweb):
        sid = api.session("cmp_reimburse")
        _, first = api.run("cmp_reimburse", sid, text("Please reimburse 200$ for meals"))
        call = pending_call(first)
        api.run("cmp_reimburse", sid, answer(call, {"status": "approved"}))
        outcomes[api.name] = api.run("cmp_reimburse", sid, answer(call, {"status": "rejected"}))
    assert outcomes["adk"][0] == 200  # ADK takes it: the model now sees a rejection
    status, body = outcomes["adkweb"]
    assert status == 409 and "already closed" in body["detail"]


def test_adkweb_differs_an_unknown_call_id_is_a_400_not_a_500(adkweb, adk):
    outcomes = {}
    for api in (adk, adkweb):
        sid = api.session("cmp_reimburse")
        outcomes[api.name] = api.run("cmp_reimburse", sid, answer({"id": "nope", "name": "ask_for_approval"}, {}))
    assert outcomes["adk"][0] == 500
    status, body = outcomes["adkweb"]
    assert status == 400 and "Function call not found for function response ids: nope" in body["detail"]


def test_adkweb_differs_a_failed_run_is_a_json_500_with_the_error(adkweb, adk):
    outcomes = {}
    for api in (adk, adkweb):
        sid = api.session("cmp_raiser")
        outcomes[api.name] = api.run("cmp_raiser", sid, text('/call explode {"reason": "on purpose"}'))
    assert outcomes["adk"] == (500, "Internal Server Error")
    assert outcomes["adkweb"] == (500, {"detail": "The agent run failed: RuntimeError: the tool exploded: on purpose"})


def test_adkweb_differs_text_mixed_with_answers_is_a_400_not_a_500(adkweb, adk):
    outcomes = {}
    for api in (adk, adkweb):
        sid = api.session("cmp_reimburse")
        _, first = api.run("cmp_reimburse", sid, text("Please reimburse 200$ for meals"))
        mixed = answer(pending_call(first), {"status": "approved"})
        mixed["parts"].append({"text": "and thanks"})
        outcomes[api.name] = api.run("cmp_reimburse", sid, mixed)
    assert outcomes["adk"][0] == 500
    assert outcomes["adkweb"] == (400, {"detail": "Message cannot contain both function responses and text."})


def test_adkweb_differs_a_missing_session_is_named_in_the_404(adkweb, adk):
    missing = f"/apps/cmp_stock/users/{USER}/sessions/no-such-session"
    assert adk.http.get(missing).json() == {"detail": "Session not found"}
    assert adkweb.http.get(missing).json() == {"detail": "Session not found: no-such-session"}


def test_adkweb_differs_sessions_are_not_created_with_initial_events(adkweb, adk):
    body = {"events": [{"author": "user", "content": {"role": "user", "parts": [{"text": "hi"}]}}]}
    assert adk.http.post(f"/apps/cmp_stock/users/{USER}/sessions", json=body).status_code == 200
    r = adkweb.http.post(f"/apps/cmp_stock/users/{USER}/sessions", json=body)
    assert r.status_code == 400 and "initial events is not supported" in r.json()["detail"]


def test_adkweb_differs_every_call_but_health_and_version_needs_credentials(adkweb, adk):
    anonymous = httpx.Client(base_url=str(adkweb.http.base_url))
    assert adk.http.get("/list-apps").status_code == 200  # ADK's server has no authentication
    assert anonymous.get("/list-apps").status_code == 401
    assert anonymous.get("/health").json() == adk.http.get("/health").json() == {"status": "ok"}
    anonymous.close()


def test_adkweb_differs_artifact_uris_are_adks_artifact_references(adkweb, adk):
    uris = {}
    for api in (adk, adkweb):
        sid = api.session("cmp_stock")
        base = f"/apps/cmp_stock/users/{USER}/sessions/{sid}/artifacts"
        uris[api.name] = (sid, api.http.post(base, json={"filename": "a.txt", "artifact": {"text": "x"}}).json())
    assert uris["adk"][1]["canonicalUri"].startswith("memory://")
    sid, meta = uris["adkweb"]
    assert meta["canonicalUri"] == f"artifact://apps/cmp_stock/users/{USER}/sessions/{sid}/artifacts/a.txt/versions/0"


def test_adkweb_differs_no_session_for_an_unknown_app(adkweb, adk):
    assert adk.http.post(f"/apps/no_such_app/users/{USER}/sessions", json={}).status_code == 200
    r = adkweb.http.post(f"/apps/no_such_app/users/{USER}/sessions", json={})
    assert (r.status_code, r.json()) == (404, {"detail": "App not found: no_such_app"})
