"""adkweb's /api/adk next to ADK's own `adk api_server`: one client script, two servers, the same events.

Both serve the agents folder tests/adk_agents (adkweb through ADKWEB_AGENTS_DIR, ADK as its
AGENTS_DIR) on the offline demo model, so a scenario must produce the same event sequences on
both, modulo what is unique per run: event ids, timestamps, invocation ids, function call ids and
the ids tools make up (each replaced by a placeholder numbered in order of first appearance).

Where adkweb differs on purpose, a test says so by name, in test_adk_differences.py (`test_adkweb_differs_...`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.agents_app.adk_compare import USER, Api, answer, normalise, pending_call, text

pytest_plugins = ["tests.conftest_live", "tests.adk_api_server", "tests.agents_app.adk_compare"]


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
    patched = api.http.patch(f"{base}/{second}", json={"stateDelta": {"watch": ["GOOG"], "temp:x": 1, "user:tier": 2}})
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
        # Not JSON, or no body at all: FastAPI's items (where the parser stopped, and why; a missing body).
        api.http.post("/run", content=b'{"appName": ', headers=JSON).json(),
        api.http.post("/run_sse", content=b"{bad", headers=JSON).json(),
        api.http.patch(f"/apps/cmp_stock/users/{USER}/sessions/x", content=b"[1,]", headers=JSON).json(),
        api.http.post("/run", content=b"", headers=JSON).json(),
        api.http.post(f"/apps/cmp_stock/users/{USER}/sessions/x", json=[1]).json(),  # the old create's state
    ]


JSON = {"content-type": "application/json"}
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


def artifact_saved_by_a_tool(api: Api) -> list:
    """/run_sse streams an event that carries content and an artifactDelta as two frames of one id (the
    content with an empty artifactDelta, then the delta alone), as ADK Web renders them; /run and the
    session keep the one event."""
    sid = api.session("cmp_artifacts")
    frames = api.run_sse("cmp_artifacts", sid, text('/call save_report {"text": "hello"}'))
    ids = [frame["id"] for frame in frames]
    other = api.session("cmp_artifacts")
    ran = api.run("cmp_artifacts", other, text('/call save_report {"text": "again"}'))
    return [frames, [ids.count(i) for i in ids], ran, api.get_session("cmp_artifacts", sid)["events"]]


def sessions_deleted(api: Api) -> list:
    """DELETE answers null; deleting a session that is not there (again, never made, of an app that does
    not exist) is done too: a retried DELETE is not an error."""
    base = f"/apps/cmp_stock/users/{USER}/sessions"
    sid = api.session("cmp_stock")
    deletes = [f"{base}/{sid}", f"{base}/{sid}", f"{base}/never-made", f"/apps/no_such_app/users/{USER}/sessions/x"]
    answers = [(r.status_code, r.json()) for r in map(api.http.delete, deletes)]
    return [answers, sid in {s["id"] for s in api.http.get(base).json()}, api.http.get(f"{base}/{sid}").status_code]


def sessions_created_with_options(api: Api) -> list:
    """CreateSessionRequest's `options` go to the session service, which takes none here (ADK's in-memory
    one neither): refused, saying so; empty or null options are no options."""
    base = f"/apps/cmp_stock/users/{USER}/sessions"
    bodies = [{"options": {"ttl": 60}}, {"options": {"state": {}, "ttl": 1}}, {"options": {}}, {"options": None}]
    return [(r.status_code, r.json()) for r in (api.http.post(base, json=body) for body in bodies)]


def trailing_slashes(api: Api) -> list:
    """A path with a trailing slash is redirected (307) to the route without it, as Starlette's router does:
    a client following redirects gets the route's answer (a POST keeps its method and body)."""
    base = f"/apps/cmp_stock/users/{USER}/sessions"
    created = api.http.post(base + "/", json={"state": {"via": "slash"}}, follow_redirects=True)
    sid = created.json().get("id", "none")
    listed = api.http.get("/list-apps/?detailed=true", follow_redirects=True)
    answers = [(created, created.json()), (listed, cmp_apps(listed.json()))]
    got = api.http.get(f"{base}/{sid}/", follow_redirects=True)
    return [[[h.status_code for h in r.history], r.status_code, body] for r, body in [*answers, (got, got.json())]]


SCENARIOS: dict[str, Callable[[Api], list]] = {
    "a trailing slash is redirected": trailing_slashes,
    "sessions created with options": sessions_created_with_options,
    "sessions deleted (twice, never made)": sessions_deleted,
    "a tool saves an artifact (run_sse splits its event)": artifact_saved_by_a_tool,
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


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_same_events_as_adk_api_server(scenario, adkweb, adk):
    theirs = normalise(SCENARIOS[scenario](adk))
    ours = normalise(SCENARIOS[scenario](adkweb))
    assert ours == theirs


def test_run_sse_names_its_charset_so_every_client_reads_non_ascii_text(adkweb, adk):
    """ADK's stream is `text/event-stream; charset=utf-8`. Without the charset, `requests` (and any client
    that follows HTTP's old default for text/*) decodes the stream as ISO-8859-1: 'café' read 'cafÃ©'."""
    import requests

    read = {}
    for api in (adk, adkweb):
        sid = api.session("cmp_assistant")
        body = api.body("cmp_assistant", sid, text("Please summarise the café budget note for the team"))
        url = str(api.http.base_url).rstrip("/") + "/run_sse"
        auth = {"Authorization": api.http.headers.get("Authorization", "")}
        with requests.post(url, json=body, headers=auth, stream=True, timeout=60) as r:
            lines = [line for line in r.iter_lines(decode_unicode=True) if line.startswith("data:")]
        read[api.name] = (r.headers["content-type"], any("café" in line for line in lines))
    assert read["adkweb"] == read["adk"] == ("text/event-stream; charset=utf-8", True)
