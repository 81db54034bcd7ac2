"""Bad input sweep: every POST endpoint (pages and API) × garbage bodies.

Each case must get a 4xx with a message (API: JSON `detail`; pages: the form's error), never a
5xx, and must change nothing: counts of sessions, turns, responses, stored events and every
ticket's status are compared before and after.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

import pytest
from django.db import transaction
from django.test import Client

from agents_app import services as agent_services
from agents_app.models import AdkSession, StoredEvent, Turn
from approvals.models import PendingCall, Response
from tests.approvals_factories import ticket

MB = "x" * (1 << 20)
DEEP = "[" * 100_000 + "]" * 100_000  # nesting deeper than any parser's recursion limit
TOO_BIG = "y" * (3 << 20)  # over DATA_UPLOAD_MAX_MEMORY_SIZE (2.5 MB)


@pytest.fixture(autouse=True)
def _quiet_request_logs():
    logger = logging.getLogger("django.request")
    level = logger.level
    logger.setLevel(logging.ERROR)
    yield
    logger.setLevel(level)


@dataclass
class Objs:
    session: AdkSession
    call: PendingCall  # long-running, answered by approvers
    input_call: PendingCall  # request for input with a schema, answerable by the requester
    approver: Any
    requester: Any


@pytest.fixture
def objs(demo) -> Objs:
    session = agent_services.session_create(app_name="reimbursement_agent", user_id="requester", session_id="s-bad")
    call = ticket(session=session, invocation_id="inv-1")
    input_call = ticket(session=session, kind="input", invocation_id="inv-2")  # schema: model (required), budget
    return Objs(session, call, input_call, demo["approver"], demo["requester"])


def counts() -> dict[str, Any]:
    return {
        "sessions": AdkSession.objects.count(),
        "turns": Turn.objects.count(),
        "responses": Response.objects.count(),
        "events": StoredEvent.objects.count(),
        "ticket statuses": sorted(PendingCall.objects.values_list("pk", "status", "assigned_to")),
    }


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


def _client(o: Objs, who: str) -> Client:
    c = Client()
    c.force_login(o.approver if who == "approver" else o.requester)
    return c


def _schema_detail(detail: Any) -> bool:
    return (
        isinstance(detail, list)
        and bool(detail)
        and all(isinstance(i, dict) and i.get("msg") and (i.get("loc") or [""])[0] == "body" for i in detail)
    )


def _refusal(where: str, response: Any, before: dict, after: dict, *, api: bool) -> list[str]:
    body = response.content.decode(errors="replace") if not getattr(response, "streaming", False) else "(stream)"
    problems = []
    if not 400 <= response.status_code < 500:
        problems.append(f"{where}: got {response.status_code}, expected a 4xx: {body[:200]!r}")
    elif api:
        try:
            detail = json.loads(body).get("detail")
        except (ValueError, AttributeError):
            detail = None
        if response.status_code == 422 and " /api/adk/" in where:
            # ADK's schema failures (FastAPI's shape): a list of items, each with where and what.
            if not _schema_detail(detail):
                problems.append(f"{where}: 422 without ADK's detail list: {body[:200]!r}")
        elif not isinstance(detail, str) or not detail:
            problems.append(f"{where}: {response.status_code} without a JSON detail message: {body[:200]!r}")
    if before != after:
        problems.append(f"{where}: changed state {before} -> {after}")
    return problems


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


# -- pages -----------------------------------------------------------------------------------------
def page_cases(o: Objs) -> list[tuple[str, str, str, str, Any]]:
    """(who, path, label, kind, body): kind "form" (a dict) or a content type (a raw body)."""
    t, i = o.call, o.input_call
    msg, new = f"/sessions/{o.session.pk}/messages/", "/sessions/new/"
    tk = lambda action, call=t: f"/tickets/{call.pk}/{action}/"  # noqa: E731
    return [
        ("requester", msg, "missing text", "form", {}),
        ("requester", msg, "blank text", "form", {"text": "   \n "}),
        ("requester", msg, "1 MB text", "form", {"text": MB}),
        ("requester", msg, "NUL in text", "form", {"text": "hi\u0000there"}),
        ("requester", msg, "JSON body", "application/json", json.dumps({"text": "hi"})),
        ("requester", msg, "body over the upload limit", "form", {"text": TOO_BIG}),
        ("requester", new, "unknown agent", "form", {"agent": "nope", "text": "hi"}),
        ("requester", new, "disabled-looking agent name", "form", {"agent": "<script>", "text": "hi"}),
        ("requester", new, "missing text", "form", {"agent": "stock_agent"}),
        ("requester", new, "1 MB text", "form", {"agent": "stock_agent", "text": MB}),
        ("requester", new, "JSON body", "application/json", json.dumps({"agent": "stock_agent", "text": "hi"})),
        ("approver", tk("reject"), "missing reason", "form", {}),
        ("approver", tk("reject"), "1 MB reason", "form", {"reject-reason": MB}),
        ("approver", tk("update"), "missing message", "form", {"update-progress": "10"}),
        ("approver", tk("update"), "progress not a number", "form", {"update-message": "m", "update-progress": "lots"}),
        ("approver", tk("update"), "progress infinite", "form", {"update-message": "m", "update-progress": "1e309"}),
        ("approver", tk("update"), "progress NaN", "form", {"update-message": "m", "update-progress": "nan"}),
        ("approver", tk("update"), "progress out of range", "form", {"update-message": "m", "update-progress": "101"}),
        ("approver", tk("update"), "extra is a list", "form", {"update-message": "m", "update-extra": "[1]"}),
        ("approver", tk("update"), "extra is malformed", "form", {"update-message": "m", "update-extra": "{"}),
        ("approver", tk("update"), "extra deeply nested", "form", {"update-message": "m", "update-extra": DEEP}),
        ("approver", tk("update"), "extra with NaN", "form", {"update-message": "m", "update-extra": '{"p": NaN}'}),
        ("approver", tk("approve"), "payload malformed", "form", {"approve-payload": "{'a': 1}"}),
        ("approver", tk("approve"), "payload a string", "form", {"approve-payload": '"yes"'}),
        ("approver", tk("approve"), "payload deeply nested", "form", {"approve-payload": DEEP}),
        ("approver", tk("custom"), "missing body", "form", {"custom-final": "on"}),
        ("approver", tk("custom"), "malformed body", "form", {"custom-body": '{"status": approved}'}),
        ("approver", tk("custom"), "body is a list", "form", {"custom-body": "[]"}),
        ("approver", tk("custom"), "body is null", "form", {"custom-body": "null"}),
        ("approver", tk("custom"), "body deeply nested", "form", {"custom-body": DEEP}),
        ("approver", tk("custom"), "body with Infinity", "form", {"custom-body": '{"amount": Infinity}'}),
        ("approver", tk("custom"), "JSON request body", "application/json", json.dumps({"custom-body": "{}"})),
        ("approver", tk("custom"), "body over the upload limit", "form", {"custom-body": TOO_BIG}),
        ("approver", tk("custom"), "NUL in the body", "form", {"custom-body": '{"status": "ok\\u0000"}'}),
        ("approver", tk("custom"), "lone surrogate in the body", "form", {"custom-body": '{"status": "\\ud800"}'}),
        ("approver", tk("custom"), "NUL in a body key", "form", {"custom-body": '{"\\u0000": 1}'}),
        ("approver", tk("update"), "NUL in extra", "form", {"update-message": "m", "update-extra": '{"a": "\\u0000"}'}),
        (
            "approver",
            tk("update"),
            "surrogate in extra",
            "form",
            {"update-message": "m", "update-extra": '["\\udc00"]'},
        ),
        ("approver", tk("approve"), "NUL in the payload", "form", {"approve-payload": '{"a": "\\u0000"}'}),
        ("approver", tk("reject"), "NUL in the reason", "form", {"reject-reason": "no\u0000"}),
        ("approver", tk("approve"), "NUL in the comment", "form", {"approve-comment": "ok\u0000"}),
        ("approver", tk("update"), "NUL in the message", "form", {"update-message": "m\u0000"}),
        ("requester", msg, "NUL in the text (JSON escape is plain text here)", "form", {"text": "a\u0000b"}),
        ("requester", tk("custom", i), "NUL in an input field", "form", {"custom-s_model": "m\u0000"}),
        ("requester", tk("custom", i), "input missing a required field", "form", {"custom-s_budget": "5"}),
        (
            "requester",
            tk("custom", i),
            "input number not a number",
            "form",
            {"custom-s_model": "m", "custom-s_budget": "x"},
        ),
    ]


def test_page_posts_with_bad_input(objs):
    failures: list[str] = []
    for who, path, label, kind, body in page_cases(objs):
        c = _client(objs, who)
        with transaction.atomic():
            before = counts()
            if kind == "form":
                response = c.post(path, body)
            else:
                response = c.generic("POST", path, body, content_type=kind)
            after = counts()
            transaction.set_rollback(True)
        where = f"POST {path} as {who} with {label}"
        problems = _refusal(where, response, before, after, api=False)
        if not problems and response.status_code == 400 and len(response.content) < 50:
            problems.append(f"{where}: 400 without a message: {response.content!r}")
        failures += problems
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize(
    "body",
    [
        {"username": "approver", "password": "nope"},
        {"username": MB, "password": "x"},
        {"username": "approver"},
        {"username": "a\u0000b", "password": "x"},
    ],
    ids=["wrong password", "1 MB username", "no password", "NUL in username"],
)
def test_login_with_bad_input_rerenders_the_form_with_an_error(db, body):
    """Django's LoginView answers a failed login with the form again (200), never a 5xx, and logs
    nobody in. (Only non-field errors are shown by templates/registration/login.html: a missing
    password or a too-long username re-renders the form without saying why.)"""
    r = Client().post("/accounts/login/", body)
    assert r.status_code == 200 and "_auth_user_id" not in r.client.session
    if body.get("password") == "nope":
        assert 'class="alert error" role="alert"' in r.content.decode()


# -- URLs: unstorable text in paths and query strings, pages out of range -------------------------
def url_cases(o: Objs) -> list[tuple[str, str, str, bool]]:
    """(who, method, path, api): each must be refused (API: 400 with a detail), never a 5xx."""
    sessions = "/api/adk/apps/reimbursement_agent/users/requester/sessions"
    return [
        ("approver", "GET", "/api/pending-calls?page=99999999999999999999", True),
        ("approver", "GET", "/api/pending-calls?page_size=99999999999999999999", True),
        ("approver", "GET", "/api/pending-calls?agent=a%00b", True),
        ("approver", "GET", "/api/pending-calls?tool=%00&status=open", True),
        ("requester", "GET", f"{sessions}/s%00x", True),
        ("requester", "GET", "/api/adk/apps/reimbursement_agent/users/requester%00/sessions", True),
        ("requester", "GET", "/api/adk/apps/reimbursement%00agent/users/requester/sessions", True),
        ("requester", "DELETE", f"{sessions}/s-bad%00", True),
        ("requester", "POST", f"{sessions}/new%00one", True),
        ("approver", "GET", "/?page=99999999999999999999", False),
        ("approver", "GET", "/?agent=%00&tool=%00&kind=%00", False),
        ("requester", "GET", "/sessions/?page=99999999999999999999", False),
        ("requester", "GET", "/sessions/?agent=%00&status=%00", False),
        ("approver", "GET", f"/tickets/{o.call.pk}/?after=%00", False),
    ]


def test_urls_with_unstorable_text_or_pages_out_of_range(objs):
    failures: list[str] = []
    for who, method, path, api in url_cases(objs):
        c = _client(objs, who)
        with transaction.atomic():
            before = counts()
            response = c.generic(method, path, "", content_type="application/json")
            after = counts()
            transaction.set_rollback(True)
        where = f"{method} {path} as {who}"
        if api:
            failures += _refusal(where, response, before, after, api=True)
            if response.status_code != 400:
                failures.append(f"{where}: {response.status_code}, expected 400")
        elif response.status_code >= 500 or before != after:
            failures.append(f"{where}: {response.status_code}")
    assert not failures, "\n".join(failures)
