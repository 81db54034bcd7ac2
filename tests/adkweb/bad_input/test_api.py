"""Every API POST endpoint × garbage bodies (raw and wrong JSON), and a closed ticket: 4xx with a JSON
detail, nothing changed.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import transaction

from tests.adkweb.bad_input.sweep import DEEP, MB, TOO_BIG, Objs, _client, _refusal, attempt, counts

# -- raw bodies: (label, content type, body) -------------------------------------------------------
RAW_BODIES = [
    ("malformed JSON", "application/json", '{"response": '),
    ("JSON list", "application/json", "[]"),
    ("JSON string", "application/json", '"approve"'),
    ("JSON number", "application/json", "42"),
    ("JSON null", "application/json", "null"),
    ("JSON true", "application/json", "true"),
    ("deeply nested JSON", "application/json", DEEP),
    ("NaN", "application/json", '{"response": {"amount": NaN}, "reason": NaN, "comment": NaN}'),
    ("not UTF-8", "application/json", b"\xff\xfe{\x00}"),
    ("form-encoded", "application/x-www-form-urlencoded", "response=approved&final=true"),
    ("text/plain prose", "text/plain", "please approve"),
    ("body over the upload limit", "application/json", json.dumps({"reason": TOO_BIG, "comment": TOO_BIG})),
]


def api_json_cases(o: Objs) -> list[tuple[str, str, str, Any]]:
    """(endpoint label, path, case label, JSON value): well-formed JSON that is wrong for the endpoint."""
    t = o.call
    fr = {"id": t.call_id, "name": t.call_name, "response": {"status": "approved"}}
    run = {"appName": "reimbursement_agent", "userId": "requester", "sessionId": "s-bad"}

    def msg(*parts: Any) -> dict:
        return {**run, "newMessage": {"role": "user", "parts": list(parts)}}

    responses = f"/api/pending-calls/{t.pk}/responses"
    input_responses = f"/api/pending-calls/{o.input_call.pk}/responses"
    approve, reject = f"/api/pending-calls/{t.pk}/approve", f"/api/pending-calls/{t.pk}/reject"
    sessions = "/api/adk/apps/reimbursement_agent/users/requester/sessions"
    cases = [
        ("responses", responses, "missing response", {"final": True}),
        ("responses", responses, "response is a list", {"response": ["approved"]}),
        ("responses", responses, "response is a string", {"response": "approved"}),
        ("responses", responses, "response is null", {"response": None}),
        ("responses", responses, "final is a string", {"response": {"status": "approved"}, "final": "yes"}),
        ("responses", responses, "comment is a number", {"response": {"status": "approved"}, "comment": 5}),
        ("responses", responses, "unknown key", {"response": {"status": "approved"}, "approve": True}),
        ("responses", responses, "huge comment", {"response": {"status": "approved"}, "comment": MB}),
        (
            "responses",
            responses,
            "huge comment (the forms allow 2000 characters)",
            {"response": {}, "comment": "c" * 2001},
        ),
        ("responses (input)", input_responses, "does not fit the schema", {"response": {"budget": "lots"}}),
        ("responses (input)", input_responses, "missing a required key", {"response": {"budget": 5}}),
        ("approve (input)", f"/api/pending-calls/{o.input_call.pk}/approve", "schema needs a model", {}),
        ("reject (input)", f"/api/pending-calls/{o.input_call.pk}/reject", "schema needs a model", {"reason": "no"}),
        ("approve", approve, "comment is a list", {"comment": ["ok"]}),
        ("approve", approve, "payload is a string", {"payload": "yes"}),
        ("approve", approve, "unknown key", {"reason": "ok", "confirmed": True}),
        ("approve", approve, "huge comment", {"comment": MB + "\u0000"}),
        ("assign", f"/api/pending-calls/{t.pk}/assign", "assignee is another user", {"assignee": "observer"}),
        ("assign", f"/api/pending-calls/{t.pk}/assign", "assignee missing", {}),
        ("assign", f"/api/pending-calls/{t.pk}/assign", "assignee is a number", {"assignee": 5}),
        ("reject", reject, "reason is a number", {"reason": 3}),
        ("reject", reject, "unknown key", {"why": "no"}),
        ("reject", reject, "huge reason", {"reason": {"text": MB}}),
        ("create session", sessions, "sessionId is a number", {"sessionId": 7}),
        ("create session", sessions, "state is a list", {"state": ["a"]}),
        ("create session", sessions, "with events", {"events": [{"author": "user"}]}),
        ("create session", sessions, "existing sessionId", {"sessionId": "s-bad"}),
        ("create session", sessions, "sessionId longer than the column (128)", {"sessionId": "s" * 129}),
        ("create session", sessions, "1 MB sessionId", {"sessionId": MB}),
        ("create session (deprecated)", f"{sessions}/new-one", "state is a list", ["a"]),
        ("create session (deprecated)", f"{sessions}/{'s' * 200}", "sessionId longer than the column", {}),
        ("run", "/api/adk/run", "missing everything", {}),
        ("run", "/api/adk/run", "userId is a number", {**msg({"text": "hi"}), "userId": 5}),
        ("run", "/api/adk/run", "unknown session", {**msg({"text": "hi"}), "sessionId": "nope"}),
        ("run", "/api/adk/run", "unknown app", {**msg({"text": "hi"}), "appName": "nope"}),
        ("run", "/api/adk/run", "someone else's user", {**msg({"text": "hi"}), "userId": "approver"}),
        ("run", "/api/adk/run", "newMessage is a string", {**run, "newMessage": "hi"}),
        ("run", "/api/adk/run", "parts is a string", {**run, "newMessage": {"parts": "hi"}}),
        ("run", "/api/adk/run", "no parts", {**run, "newMessage": {"role": "user", "parts": []}}),
        ("run", "/api/adk/run", "text is a number", msg({"text": 5})),
        ("run", "/api/adk/run", "text and function response", msg({"text": "hi"}, {"functionResponse": fr})),
        (
            "run",
            "/api/adk/run",
            "function call from the user",
            msg({"functionCall": {"name": "reimburse", "args": {}}}),
        ),
        ("run", "/api/adk/run", "unknown function response id", msg({"functionResponse": {**fr, "id": "nope"}})),
        (
            "run",
            "/api/adk/run",
            "function response without id",
            msg({"functionResponse": {"name": "x", "response": {}}}),
        ),
        ("run", "/api/adk/run", "response is a list", msg({"functionResponse": {**fr, "response": [1]}})),
        (
            "run",
            "/api/adk/run",
            "function response under another call's name",
            msg({"functionResponse": {"id": o.input_call.call_id, "name": t.call_name, "response": {"model": "x"}}}),
        ),
        (
            "run",
            "/api/adk/run",
            "function response without a name",
            msg({"functionResponse": {"id": o.input_call.call_id, "response": {"model": "x"}}}),
        ),
        ("run", "/api/adk/run", "not an approver", msg({"functionResponse": fr})),
        ("run", "/api/adk/run", "same call answered twice", msg({"functionResponse": fr}, {"functionResponse": fr})),
        (
            "run",
            "/api/adk/run",
            "two invocations",
            msg(
                {"functionResponse": fr},
                {
                    "functionResponse": {
                        "id": o.input_call.call_id,
                        "name": "adk_request_input",
                        "response": {"model": "x"},
                    }
                },
            ),
        ),
        (
            "run",
            "/api/adk/run",
            "input that fails the schema",
            msg(
                {
                    "functionResponse": {
                        "id": o.input_call.call_id,
                        "name": "adk_request_input",
                        "response": {"budget": 1},
                    }
                }
            ),
        ),
        (
            "run",
            "/api/adk/run",
            "wrong invocationId",
            {
                **msg(
                    {
                        "functionResponse": {
                            "id": o.input_call.call_id,
                            "name": "adk_request_input",
                            "response": {"model": "x"},
                        }
                    }
                ),
                "invocationId": "inv-9",
            },
        ),
        ("run", "/api/adk/run", "stateDelta is a list", {**msg({"text": "hi"}), "stateDelta": [1]}),
        ("run", "/api/adk/run", "streaming is not a boolean", {**msg({"text": "hi"}), "streaming": "maybe"}),
        ("run", "/api/adk/run", "1 MB sessionId", {**msg({"text": "hi"}), "sessionId": MB}),
        ("run", "/api/adk/run", "invocationId longer than the column (128)", {**run, "invocationId": "i" * 129}),
        ("run_sse", "/api/adk/run_sse", "invocationId longer than the column", {**run, "invocationId": MB}),
        ("run_sse", "/api/adk/run_sse", "newMessage is a string", {**run, "newMessage": "hi"}),
        ("run_sse", "/api/adk/run_sse", "unknown function response id", msg({"functionResponse": {**fr, "id": "x"}})),
    ]
    return cases + unstorable_json_cases(o)


NUL, SURROGATE, LOW_SURROGATE = "\u0000", "\ud800", "\udfff"  # PostgreSQL text and jsonb take neither


def unstorable_json_cases(o: Objs) -> list[tuple[str, str, str, Any]]:
    """Text that no database column can hold, in every text, JSON value and id the API stores."""
    t = o.call
    fr = {"id": t.call_id, "name": t.call_name, "response": {"status": "approved"}}
    run = {"appName": "reimbursement_agent", "userId": "requester", "sessionId": "s-bad"}
    text = {**run, "newMessage": {"role": "user", "parts": [{"text": "hi"}]}}
    sessions = "/api/adk/apps/reimbursement_agent/users/requester/sessions"
    responses, approve = f"/api/pending-calls/{t.pk}/responses", f"/api/pending-calls/{t.pk}/approve"
    reject = f"/api/pending-calls/{t.pk}/reject"
    cases = []
    for bad, name in ((NUL, "NUL"), (SURROGATE, "a lone surrogate"), (LOW_SURROGATE, "a lone low surrogate")):
        answer = {
            **run,
            "newMessage": {"role": "user", "parts": [{"functionResponse": {**fr, "response": {"s": bad}}}]},
        }
        cases += [
            ("run", "/api/adk/run", f"{name} in the text", {**text, "newMessage": {"parts": [{"text": f"hi{bad}"}]}}),
            ("run", "/api/adk/run", f"{name} in the session id", {**text, "sessionId": f"s-bad{bad}"}),
            ("run", "/api/adk/run", f"{name} in the user id", {**text, "userId": f"requester{bad}"}),
            ("run", "/api/adk/run", f"{name} in a stateDelta value", {**text, "stateDelta": {"k": bad}}),
            ("run", "/api/adk/run", f"{name} in a stateDelta key", {**text, "stateDelta": {bad: 1}}),
            ("run", "/api/adk/run", f"{name} in a function response", answer),
            ("run_sse", "/api/adk/run_sse", f"{name} in the text", {**text, "newMessage": {"parts": [{"text": bad}]}}),
            ("create session", sessions, f"{name} in the session id", {"sessionId": f"new{bad}"}),
            ("create session", sessions, f"{name} in the state", {"state": {"k": [bad]}}),
            ("create session (deprecated)", f"{sessions}/new-one", f"{name} in the state", {"k": bad}),
            ("responses", responses, f"{name} in the response", {"response": {"status": f"approved{bad}"}}),
            ("responses", responses, f"{name} in a response key", {"response": {bad: "approved"}}),
            ("responses", responses, f"{name} in the comment", {"response": {"status": "x"}, "comment": bad}),
            ("approve", approve, f"{name} in the comment", {"comment": f"ok{bad}"}),
            ("approve", approve, f"{name} in the payload", {"payload": {"note": bad}}),
            ("reject", reject, f"{name} in the reason", {"reason": f"no{bad}"}),
        ]
    return cases


API_POSTS = {  # endpoint label -> path (for the raw-body sweep)
    "responses": lambda o: f"/api/pending-calls/{o.call.pk}/responses",
    "approve": lambda o: f"/api/pending-calls/{o.call.pk}/approve",
    "reject": lambda o: f"/api/pending-calls/{o.call.pk}/reject",
    "assign": lambda o: f"/api/pending-calls/{o.call.pk}/assign",
    "create session": lambda o: "/api/adk/apps/reimbursement_agent/users/requester/sessions",
    "create session (deprecated)": lambda o: "/api/adk/apps/reimbursement_agent/users/requester/sessions/new-one",
    "run": lambda o: "/api/adk/run",
    "run_sse": lambda o: "/api/adk/run_sse",
}

# The API user for each endpoint: the one who would succeed with a good body.
API_USER = {"responses": "approver", "approve": "approver", "reject": "approver", "assign": "approver"}

# Bodies the contract accepts: approve/reject and session creation take no body, and JSON null
# means no body (as in ADK's FastAPI server). Any other non-object ([] , 0, false) is refused.
ACCEPTED = {
    (endpoint, "JSON null") for endpoint in ("approve", "reject", "create session", "create session (deprecated)")
}


@pytest.mark.parametrize("endpoint", list(API_POSTS))
def test_api_raw_garbage_bodies(objs, endpoint):
    path = API_POSTS[endpoint](objs)
    c = _client(objs, API_USER.get(endpoint, "requester"))
    failures: list[str] = []
    for label, content_type, body in RAW_BODIES:
        if (endpoint, label) in ACCEPTED:
            continue
        with transaction.atomic():
            before = counts()
            response = c.generic("POST", path, body, content_type=content_type)
            after = counts()
            transaction.set_rollback(True)
        failures += _refusal(f"POST {path} ({endpoint}) with {label}", response, before, after, api=True)
    assert not failures, "\n".join(failures)


def test_api_wrong_json_for_each_endpoint(objs):
    failures: list[str] = []
    for endpoint, path, label, value in api_json_cases(objs):
        who = (
            "approver"
            if endpoint in API_USER or endpoint.startswith("responses") and "input" not in endpoint
            else "requester"
        )
        c = _client(objs, who)
        with transaction.atomic():
            before = counts()
            response = c.post(path, data=json.dumps(value), content_type="application/json")
            after = counts()
            transaction.set_rollback(True)
        failures += _refusal(f"POST {path[:90]} ({endpoint}) as {who} with {label}", response, before, after, api=True)
    assert not failures, "\n".join(failures)


def test_closed_ticket_is_409_and_changes_nothing(objs):
    c = _client(objs, "approver")
    assert (
        c.post(f"/api/pending-calls/{objs.call.pk}/approve", data="{}", content_type="application/json").status_code
        == 201
    )
    for path, body in [
        (f"/api/pending-calls/{objs.call.pk}/approve", {}),
        (f"/api/pending-calls/{objs.call.pk}/reject", {"reason": "late"}),
        (f"/api/pending-calls/{objs.call.pk}/responses", {"response": {"status": "x"}, "final": False}),
    ]:
        before = counts()
        r = c.post(path, data=json.dumps(body), content_type="application/json")
        assert r.status_code == 409 and "detail" in r.json(), (path, r.status_code, r.content)
        assert counts() == before, path
    before = counts()
    r = c.post(f"/tickets/{objs.call.pk}/approve/", {})
    assert r.status_code == 409 and "already" in r.content.decode().lower(), r.status_code
    assert counts() == before


def past_a_float_cases(o: Objs) -> list[tuple[str, str, str, str]]:
    """(who, method, path, raw JSON body): a number JSON allows but no float holds. Python's json reads 1e400
    as infinity, which a JSON column would store as "Infinity" (PostgreSQL's jsonb and SQLite's JSON_VALID
    refuse it: a 500 after the session's lock or the ticket's was taken)."""
    t = o.call
    sessions = "/api/adk/apps/reimbursement_agent/users/requester/sessions"
    run = '"appName": "reimbursement_agent", "userId": "requester", "sessionId": "s-bad"'
    text = '"newMessage": {"role": "user", "parts": [{"text": "hi"}]}'
    i = o.input_call
    answer = f'{{"id": "{i.call_id}", "name": "adk_request_input", "response": {{"model": "m", "budget": 1e400}}}}'
    return [
        ("requester", "POST", "/api/adk/run", f'{{{run}, {text}, "stateDelta": {{"k": 1e400}}}}'),
        ("requester", "POST", "/api/adk/run_sse", f'{{{run}, {text}, "stateDelta": {{"k": -1e400}}}}'),
        (
            "requester",
            "POST",
            "/api/adk/run",
            f'{{{run}, "newMessage": {{"parts": [{{"functionResponse": {answer}}}]}}}}',
        ),
        ("requester", "POST", sessions, '{"sessionId": "new", "state": {"k": [1e400]}}'),
        ("requester", "POST", f"{sessions}/new-one", '{"k": 1e400}'),
        ("requester", "PATCH", f"{sessions}/s-bad", '{"stateDelta": {"k": 1e400}}'),
        (
            "requester",
            "POST",
            f"{sessions}/s-bad/artifacts",
            '{"filename": "a.txt", "artifact": {"text": "x"}, "customMetadata": {"k": 1e400}}',
        ),
        ("approver", "POST", f"/api/pending-calls/{t.pk}/responses", '{"response": {"amount": 1e400}}'),
        ("approver", "POST", f"/api/pending-calls/{t.pk}/approve", '{"payload": {"amount": 1e400}}'),
    ]


def test_api_numbers_past_a_float_are_refused(objs):
    failures: list[str] = []
    for who, method, path, body in past_a_float_cases(objs):
        response, before, after = attempt(_client(objs, who), method, path, body)
        failures += _refusal(f"{method} {path[:90]} as {who} with {body[-40:]}", response, before, after, api=True)
    assert not failures, "\n".join(failures)


def test_api_artifacts_longer_than_their_columns_are_refused(objs):
    """An artifact's name, type or session id longer than its column: PostgreSQL refused the row (DataError:
    a 500, its file already written); now 400 with the limit, and nothing stored."""
    from agents_app.models import Artifact

    base = "/api/adk/apps/reimbursement_agent/users/requester/sessions"
    text = {"text": "x"}
    cases = [
        (f"{base}/s-bad/artifacts", {"filename": "d/" * 300 + "a.txt", "artifact": text}),
        (f"{base}/s-bad/artifacts", {"filename": "user:" + "u" * 600, "artifact": text}),
        (f"{base}/s-bad/artifacts", {"filename": "a.bin", "artifact": {"inlineData": {"mimeType": "m" * 256}}}),
        (
            f"{base}/s-bad/artifacts",
            {"filename": "a.ref", "artifact": {"fileData": {"fileUri": "gs://b/a", "mimeType": "m" * 256}}},
        ),
        (f"{base}/{'s' * 129}/artifacts", {"filename": "a.txt", "artifact": text}),
    ]
    c = _client(objs, "requester")
    failures: list[str] = []
    for path, body in cases:
        with transaction.atomic():
            before = {**counts(), "artifacts": Artifact.objects.count()}
            saved = transaction.savepoint()  # a 500's failed statement would abort the test's transaction
            response = c.post(path, data=json.dumps(body), content_type="application/json")
            if response.status_code >= 500:
                transaction.savepoint_rollback(saved)
            after = {**counts(), "artifacts": Artifact.objects.count()}
            transaction.set_rollback(True)
        failures += _refusal(f"POST {path[-40:]} with {json.dumps(body)[:60]}", response, before, after, api=True)
        if response.status_code == 400 and "at most" not in response.json()["detail"]:
            failures.append(f"POST {path[-40:]}: 400 without the limit: {response.content[:200]!r}")
    assert not failures, "\n".join(failures)
