"""Where adkweb's /api/adk differs from ADK's own `adk api_server` on purpose, side by side: a test per
difference (`test_adkweb_differs_...`), with the client script and servers of test_adk_comparison.py."""

from __future__ import annotations

import httpx

from tests.agents_app.adk_compare import USER, Api, answer, pending_call, text

pytest_plugins = ["tests.conftest_live", "tests.adk_api_server", "tests.agents_app.adk_compare"]


def _paused(api: Api) -> tuple[str, dict]:
    """A reimbursement waiting for its approval: the session and the long-running call."""
    sid = api.session("cmp_reimburse")
    _, first = api.run("cmp_reimburse", sid, text("Please reimburse 200$ for meals"))
    return sid, pending_call(first)


def test_adkweb_differs_a_second_final_answer_is_refused_where_adk_rewrites_history(adkweb, adk):
    outcomes = {}
    for api in (adk, adkweb):
        sid, call = _paused(api)
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
        sid, call = _paused(api)
        mixed = answer(call, {"status": "approved"})
        mixed["parts"].append({"text": "and thanks"})
        outcomes[api.name] = api.run("cmp_reimburse", sid, mixed)
    assert outcomes["adk"][0] == 500
    assert outcomes["adkweb"] == (400, {"detail": "Message cannot contain both function responses and text."})


def test_adkweb_differs_app_state_is_set_only_by_agent_admins(adkweb, adk):
    outcomes = {}
    for api in (adk, adkweb):  # USER approves tickets; configuring agents is not theirs
        sid = api.session("cmp_stock")
        r = api.http.patch(f"/apps/cmp_stock/users/{USER}/sessions/{sid}", json={"stateDelta": {"app:tier": 2}})
        outcomes[api.name] = (r.status_code, api.get_session("cmp_stock", sid)["state"].get("app:tier"))
    assert outcomes["adk"] == (200, 2)  # ADK's server has no roles: every user's sessions read it
    assert outcomes["adkweb"] == (403, None)


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


def test_adkweb_differs_no_session_list_for_an_unknown_app(adkweb, adk):
    assert adk.http.get(f"/apps/never_an_app/users/{USER}/sessions").json() == []
    r = adkweb.http.get(f"/apps/never_an_app/users/{USER}/sessions")
    assert (r.status_code, r.json()) == (404, {"detail": "App not found: never_an_app"})


def test_adkweb_differs_a_session_id_no_url_can_address_is_refused(adkweb, adk):
    base = f"/apps/cmp_stock/users/{USER}/sessions"
    assert adk.http.post(base, json={"sessionId": " padded "}).json()["id"] == "padded"  # ADK strips it
    r = adkweb.http.post(base, json={"sessionId": " padded "})
    assert r.status_code == 400 and "starts or ends with whitespace, which ADK strips" in r.json()["detail"]
    assert adkweb.http.get(f"{base}/padded").status_code == 404  # nothing created


def test_adkweb_differs_a_message_with_no_parts_is_refused(adkweb, adk):
    outcomes = {}
    for api in (adk, adkweb):
        sid = api.session("cmp_stock")
        outcomes[api.name] = api.run("cmp_stock", sid, {"role": "user", "parts": []})
    assert outcomes["adk"][0] == 200  # ADK runs the agent again on the (empty) history
    assert outcomes["adkweb"] == (400, {"detail": "newMessage has no parts."})


def test_adkweb_differs_an_answer_with_another_invocation_id_is_refused(adkweb, adk):
    outcomes = {}
    for api in (adk, adkweb):
        sid, call = _paused(api)
        outcomes[api.name] = api.run("cmp_reimburse", sid, answer(call, {"status": "approved"}), invocationId="e-x")
    status, events = outcomes["adk"]  # ADK resumes the answered call's invocation, whatever the id says
    assert status == 200 and "e-x" not in {e["invocationId"] for e in events}
    status, body = outcomes["adkweb"]
    assert status == 400 and body["detail"].startswith("invocationId e-x is not the invocation of function call(s)")
