"""Page forms, the login form and URLs (unstorable text in paths and query strings, pages out of range)
with bad input: a 4xx or the form again with an error, nothing changed.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import transaction
from django.test import Client

from tests.adkweb.bad_input.sweep import DEEP, MB, TOO_BIG, Objs, _client, _refusal, counts


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
        ("approver", tk("custom"), "a number past a float in the body", "form", {"custom-body": '{"amount": 1e400}'}),
        (
            "approver",
            tk("update"),
            "a number past a float in extra",
            "form",
            {"update-message": "m", "update-extra": '{"p": -1e999}'},
        ),
        (
            "approver",
            tk("approve"),
            "a number past a float in the payload",
            "form",
            {"approve-payload": '{"a": [1e400]}'},
        ),
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
        ("approver", "GET", "/audit/?page=99999999999999999999", False),
        ("approver", "GET", "/audit/?person=%00&agent=%00&tool=%00", False),
        ("approver", "GET", "/audit/export.csv?since=%ED%A0%80&until=2026-13-40", False),
        ("approver", "GET", "/audit/export.jsonl?outcome=%00", False),
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


def test_a_page_number_past_a_capped_list_shows_the_page_past_the_end(objs, monkeypatch):
    """Past COUNT_CAP a list's page number is not clamped to its last page: a typed page times the page size
    overflowed the OFFSET (PostgreSQL's bigint, SQLite's int64): a 500 (the conversation list's socket reads
    the same page, with its ?page= unbounded). Now the page past the end (adkweb.paging.PAGE_MAX), empty."""
    from adkweb import paging
    from agents_app import services as agent_services

    monkeypatch.setattr(paging, "COUNT_CAP", 2)
    for n in range(3):
        agent_services.session_create(app_name="reimbursement_agent", user_id="requester", session_id=f"many-{n}")
    c = _client(objs, "requester")
    before = counts()
    for page in ["999999999999999999", "9" * 20, "10000001"]:  # the last: past PAGE_MAX
        response = c.get("/sessions/", {"page": page})
        assert response.status_code == 200, page
        assert "many-" not in response.content.decode(), page  # no row: past the end
    assert "many-2" in c.get("/sessions/", {"page": "1"}).content.decode()
    assert counts() == before
