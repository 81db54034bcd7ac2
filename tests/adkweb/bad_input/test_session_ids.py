"""A session id the caller chooses must be usable as one segment of the session's URL
(`/api/adk/apps/<app>/users/<user>/sessions/<id>`) and visible where it is shown. ADK's own store takes
any string: " " and "\\n" (blank: a generated uuid in its place), " x" (stored as "x": ADK strips it),
".." and "." (which clients and browsers normalise out of a URL), "a/b" (no URL reaches it), control
characters (a URL parser drops tabs and newlines; the dashboard shows nothing). adkweb created each; now
a 400 naming why, nothing created. Ids ADK's clients make (uuids, slugs, its eval sessions' prefixes)
stay accepted, no id (or "") still gets a generated one, and a row that already has such an id can
still be read."""

from __future__ import annotations

import json
import uuid
from urllib.parse import quote

import pytest
from django.db import transaction

from agents_app.session_service import DjangoSessionService
from tests.adkweb.bad_input.sweep import Objs, _client, _refusal, counts

BASE = "/api/adk/apps/reimbursement_agent/users/requester/sessions"

REFUSED = {  # id -> a word of the reason the 400 gives
    " ": "blank",
    "\n": "blank",
    "\t \r\n": "blank",
    "\u3000": "blank",
    " x": "whitespace",
    "x\n": "whitespace",
    ".": "'.' and '..'",
    "..": "'.' and '..'",
    "/": "'/'",
    "a/b": "'/'",
    "../a": "'/'",
    "a\\b": "'\\'",
    "a\nb": "U+000A",
    "a\tb": "U+0009",
    "a\x7fb": "U+007F",
    "a\u200bb": "U+200B",
    "a\u2028b": "U+2028",
}

ACCEPTED = [
    str(uuid.uuid4()),
    "session-123",
    "my_session.v2",
    "a b",
    "...",
    "Ünïcödé-会话",
    f"___eval___session___{uuid.uuid4()}",
    f"adk-eval-session-{uuid.uuid4()}",
]


@pytest.mark.parametrize("session_id", list(REFUSED), ids=[repr(s) for s in REFUSED])
def test_a_session_id_no_url_can_address_is_refused_on_create(objs: Objs, session_id: str):
    c = _client(objs, "requester")
    failures: list[str] = []
    posts = [(BASE, json.dumps({"sessionId": session_id}))]
    if "/" not in session_id:  # ADK's deprecated create-with-id: the id in the path (a "/" routes elsewhere)
        posts.append((f"{BASE}/{quote(session_id, safe='')}", "{}"))  # as an HTTP client sends it
    for path, body in posts:
        with transaction.atomic():
            before = counts()
            r = c.post(path, data=body, content_type="application/json")
            after = counts()
            transaction.set_rollback(True)
        failures += _refusal(f"POST {path!r} {body!r}", r, before, after, api=True)
        if r.status_code == 400:
            detail = r.json()["detail"]
            if "session id" not in detail or REFUSED[session_id] not in detail or "Nothing was created" not in detail:
                failures.append(f"POST {path!r} {body!r}: 400 without why: {detail!r}")
    assert not failures, "\n".join(failures)


def test_ids_adk_clients_make_are_accepted(objs: Objs):
    c = _client(objs, "requester")
    for session_id in ACCEPTED:
        r = c.post(BASE, data=json.dumps({"sessionId": session_id}), content_type="application/json")
        assert r.status_code == 200 and r.json()["id"] == session_id, (session_id, r.status_code, r.content)
    r = c.post(f"{BASE}/made-by-path", data="{}", content_type="application/json")
    assert r.status_code == 200 and r.json()["id"] == "made-by-path", r.content
    for body in ("", "{}", '{"sessionId": null}', '{"sessionId": ""}'):  # no id: a generated uuid, as in ADK
        r = c.post(BASE, data=body, content_type="application/json")
        assert r.status_code == 200 and uuid.UUID(r.json()["id"]), (body, r.content)


def test_a_session_that_has_such_an_id_stays_readable(objs: Objs):
    DjangoSessionService().create_session_sync(app_name="reimbursement_agent", user_id="requester", session_id="..")
    c = _client(objs, "requester")
    r = c.get(f"{BASE}/..")
    assert r.status_code == 200 and r.json()["id"] == "..", r.content
    assert ".." in [s["id"] for s in c.get(BASE).json()]
