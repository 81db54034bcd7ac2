"""`/run`'s reads before its turn is queued, on PostgreSQL: a token's lookup carries the session's
read in its round trip (every `/run` asks both before anything else); the refusals stay those of
reading them apart, in the same order (authentication first, then the body, the user, the app, the
session)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext

from adkweb.errors import Forbidden, NotFound, Unauthenticated, Unprocessable
from agents_app import services
from agents_app.api import run
from agents_app.tokens import token_create

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_connections")]
APP = "reimbursement_agent"


def _request(key: str, body: Any) -> Any:
    data = body if isinstance(body, str) else json.dumps(body)
    return RequestFactory().post(
        "/api/adk/run", data=data, content_type="application/json", headers={"Authorization": f"Token {key}"}
    )


def _body(session_id: str, user_id: str = "approver") -> dict[str, Any]:
    message = {"role": "user", "parts": [{"text": "Please reimburse 200$ for meals"}]}
    return {"appName": APP, "userId": user_id, "sessionId": session_id, "newMessage": message}


def test_the_token_and_the_session_are_read_in_one_round_trip(demo):
    session = services.session_create(app_name=APP, user_id="approver")
    _, key = token_create(user=demo["approver"])
    request = _request(key, _body(session.session_id))
    with CaptureQueriesContext(connection) as ctx:
        body, row, content = run._prepare(request)
    sent = [q["sql"] for q in ctx.captured_queries if not q["sql"].startswith("UPDATE")]  # last_used_at's
    reads = [sql for sql in sent if "agents_app_apitoken" in sql or "agents_app_adksession" in sql]
    assert len(reads) == 1, sent  # (the app's check is a read of its own here: not a code agent)
    assert "agents_app_apitoken" in reads[0] and "agents_app_adksession" in reads[0]
    assert request.user == demo["approver"] and row.pk == session.pk and row.revision == session.revision
    assert content is not None and body.session_id == session.session_id


def test_refusals_come_in_the_order_they_did(demo):
    session = services.session_create(app_name=APP, user_id="approver")
    theirs = services.session_create(app_name=APP, user_id="requester")
    _, key = token_create(user=demo["approver"])
    with pytest.raises(Unauthenticated):  # a bad token first, whatever the body
        run._prepare(_request("nope", "{not json"))
    with pytest.raises(Unauthenticated):
        run._prepare(_request("nope", _body(session.session_id)))
    with pytest.raises(Unprocessable):
        run._prepare(_request(key, "{not json"))
    with pytest.raises(Forbidden):  # another person's session: read in the round trip, never used
        run._prepare(_request(key, _body(theirs.session_id, user_id="requester")))
    with pytest.raises(NotFound):
        run._prepare(_request(key, {**_body(session.session_id), "appName": "no_such_app"}))
    with pytest.raises(NotFound):
        run._prepare(_request(key, _body("no-such-session")))
