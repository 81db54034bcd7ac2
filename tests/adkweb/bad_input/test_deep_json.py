"""JSON nested a few hundred levels inside a body's free-form object (a session's state, a state delta, an
artifact's metadata, a ticket's response, a function response): Python's parser reads it (it stops near
1,000 levels, which was already refused), but pydantic serialises at most 254 levels, so ADK's session
code, the event's JSON or the turn's run failed: a 500 on creating a session, PATCHing its state, saving an
artifact, answering a ticket, /run's answers and state deltas (the agent's run failed once queued). Now any
request body nested more than adkweb.storable.MAX_DEPTH (100) levels is refused with 400 (422 in ADK's
API, as FastAPI's malformed JSON), nothing stored. 100 levels is still far more than any client sends."""

from __future__ import annotations

import pytest

from adkweb.storable import MAX_DEPTH
from tests.adkweb.bad_input.sweep import Objs, _client, _refusal, attempt

S = "/api/adk/apps/reimbursement_agent/users/requester/sessions"


def nested(levels: int) -> str:
    return '{"a":' * (levels - 1) + "[1]" + "}" * (levels - 1)


def cases(o: Objs, deep: str) -> list[tuple[str, str, str, str]]:
    """(who, method, path, raw body) with `deep` inside the body's free-form object."""
    run = '"appName": "reimbursement_agent", "userId": "requester", "sessionId": "s-bad"'
    text = '"newMessage": {"role": "user", "parts": [{"text": "hi"}]}'
    fr = f'{{"id": "{o.call.call_id}", "name": "{o.call.call_name}", "response": {{"k": {deep}}}}}'
    tickets = f"/api/pending-calls/{o.call.pk}"
    return [
        ("requester", "POST", S, f'{{"sessionId": "new", "state": {{"k": {deep}}}}}'),
        ("requester", "POST", f"{S}/new-one", f'{{"k": {deep}}}'),
        ("requester", "PATCH", f"{S}/s-bad", f'{{"stateDelta": {{"k": {deep}}}}}'),
        (
            "requester",
            "POST",
            f"{S}/s-bad/artifacts",
            f'{{"filename": "a.txt", "artifact": {{"text": "x"}}, "customMetadata": {{"k": {deep}}}}}',
        ),
        ("requester", "POST", "/api/adk/run", f'{{{run}, {text}, "stateDelta": {{"k": {deep}}}}}'),
        ("requester", "POST", "/api/adk/run_sse", f'{{{run}, {text}, "stateDelta": {{"k": {deep}}}}}'),
        ("admin", "POST", "/api/adk/run", f'{{{run}, "newMessage": {{"parts": [{{"functionResponse": {fr}}}]}}}}'),
        ("approver", "POST", f"{tickets}/responses", f'{{"response": {{"k": {deep}}}, "final": false}}'),
    ]


@pytest.mark.parametrize("levels", [MAX_DEPTH, 300, 900])
def test_json_nested_past_the_limit_is_refused(demo, objs: Objs, levels: int):
    failures: list[str] = []
    for who, method, path, body in cases(objs, nested(levels)):
        c = _client(objs, "approver" if who == "approver" else "requester")
        if who == "admin":
            c.force_login(demo["admin"])
        r, before, after = attempt(c, method, path, body)
        failures += _refusal(f"{method} {path} as {who} nested {levels}", r, before, after, api=True)
        if 400 <= r.status_code < 500 and "100 levels" not in r.content.decode():
            failures.append(f"{method} {path} nested {levels}: {r.status_code} without the limit: {r.content[:200]!r}")
    assert not failures, "\n".join(failures)


def test_json_nested_to_the_limit_is_taken(objs: Objs):
    """The body itself is the first level: a state value may nest MAX_DEPTH - 2 levels more."""
    c = _client(objs, "requester")
    r = c.post(
        S, data=f'{{"sessionId": "deep", "state": {{"k": {nested(MAX_DEPTH - 2)}}}}}', content_type="application/json"
    )
    assert r.status_code == 200, r.content[:300]
