"""`Idempotency-Key` on decisions and /run: a retry with the key gets the original answer (not a
409, not a second turn); the key on a different request is refused with 422 (issue 8)."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from agents_app import services
from agents_app.models import Turn
from approvals.models import Response
from tests.approvals_factories import ticket
from tests.engine_scenarios import dialogue


def _client(user) -> Client:
    c = Client()
    c.force_login(user)
    return c


def _post(c: Client, path: str, body: dict, key: str | None = None):
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key is not None else {}
    return c.post(path, json.dumps(body), content_type="application/json", **headers)


@pytest.mark.parametrize(
    "action,body",
    [("approve", {"comment": "ok"}), ("reject", {"reason": "no receipt"}), ("responses", {"response": {"x": 1}})],
)
def test_a_retried_decision_gets_the_original_answer(demo, action, body):
    t = ticket()
    c = _client(demo["approver"])
    path = f"/api/pending-calls/{t.pk}/{action}"
    first = _post(c, path, body, key="k-1")
    again = _post(c, path, body, key="k-1")
    assert (first.status_code, again.status_code) == (201, 201), again.content
    assert again.json() == first.json() and again["Idempotent-Replayed"] == "true"
    assert "Idempotent-Replayed" not in first
    assert Response.objects.filter(pending_call=t).count() == 1
    assert Turn.objects.filter(session=t.session).count() == 1
    assert _post(c, path, body).status_code == 409  # without the key, a second decision is refused


def test_the_same_key_on_another_request_is_refused_and_changes_nothing(demo):
    t = ticket()
    c = _client(demo["approver"])
    assert _post(c, f"/api/pending-calls/{t.pk}/approve", {"comment": "ok"}, key="k-2").status_code == 201
    for path, body in [
        (f"/api/pending-calls/{t.pk}/approve", {"comment": "a different comment"}),
        (f"/api/pending-calls/{t.pk}/reject", {"comment": "ok"}),
    ]:
        r = _post(c, path, body, key="k-2")
        assert r.status_code == 422 and "different request" in r.json()["detail"], r.content
    assert Response.objects.filter(pending_call=t).count() == 1


def test_keys_belong_to_their_user(demo):
    t1, t2 = ticket(), ticket()
    assert _post(_client(demo["approver"]), f"/api/pending-calls/{t1.pk}/approve", {}, key="k-3").status_code == 201
    r = _post(_client(demo["admin"]), f"/api/pending-calls/{t2.pk}/approve", {}, key="k-3")
    assert r.status_code == 201 and r.json()["pending_call"] == t2.pk


def test_a_refused_request_records_no_key(demo):
    t = ticket()
    c = _client(demo["approver"])
    assert _post(c, f"/api/pending-calls/{t.pk}/approve", {"comment": ["x"]}, key="k-4").status_code == 400
    assert _post(c, f"/api/pending-calls/{t.pk}/approve", {"comment": "x"}, key="k-4").status_code == 201


@pytest.mark.parametrize("key", ["", "a b", "x" * 256, "é"])
def test_a_malformed_key_is_refused(demo, key):
    t = ticket()
    r = _post(_client(demo["approver"]), f"/api/pending-calls/{t.pk}/approve", {}, key=key)
    assert r.status_code == 400 and "Idempotency-Key" in r.json()["detail"]
    assert Response.objects.filter(pending_call=t).count() == 0


def test_a_retried_run_follows_the_first_turn(demo, worker):
    session = services.session_create(app_name="stock_agent", user_id="requester")
    c = _client(demo["requester"])
    body = {
        "appName": "stock_agent",
        "userId": "requester",
        "sessionId": session.session_id,
        "newMessage": {"role": "user", "parts": [{"text": "What is the price of GOOG?"}]},
    }
    first = _post(c, "/api/adk/run", body, key="run-1")
    again = _post(c, "/api/adk/run", body, key="run-1")
    assert (first.status_code, again.status_code) == (200, 200), again.content
    assert again.json() == first.json() and again["Idempotent-Replayed"] == "true"
    assert Turn.objects.filter(session=session).count() == 1
    assert dialogue(session) == [
        ("user", "What is the price of GOOG?"),
        ("stock_agent", "The current price of GOOG is $178.42."),
    ]
    other = {**body, "newMessage": {"role": "user", "parts": [{"text": "And AAPL?"}]}}
    assert _post(c, "/api/adk/run", other, key="run-1").status_code == 422
