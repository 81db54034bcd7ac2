"""A per-person cap on queued and running turns (ADKWEB_MAX_QUEUED_TURNS_PER_USER): each turn may cost
model calls, so a message or /run beyond the cap is refused with 429 and a message saying why, on the
API (/run, /run_sse) and on the pages' forms; answers to tickets are never capped, and nothing is
queued by a refused request."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from google.genai import types

from agents_app import services
from agents_app.models import AdkSession, Turn
from agents_app.tokens import token_create

CAP = 2


@pytest.fixture
def capped(demo, settings):
    settings.ADKWEB_MAX_QUEUED_TURNS_PER_USER = CAP
    requester = demo["requester"]
    session = services.session_create(app_name="stock_agent", user_id="requester", session_id="s1")
    return requester, session


def _fill(user, session, status=Turn.Status.QUEUED, n=CAP):
    """Turns that stay queued or running for the test (created directly: no worker is told)."""
    return [
        Turn.objects.create(session=session, kind=Turn.Kind.MESSAGE, content={}, status=status, created_by=user)
        for _ in range(n)
    ]


def _api(user):
    _, key = token_create(user=user, name="cap")
    return Client(HTTP_AUTHORIZATION=f"Token {key}")


def _run_body(text="What is GOOG at?"):
    return {
        "appName": "stock_agent",
        "userId": "requester",
        "sessionId": "s1",
        "newMessage": {"role": "user", "parts": [{"text": text}]},
    }


def test_run_and_run_sse_beyond_the_cap_are_429_with_a_message_and_queue_nothing(capped):
    requester, session = capped
    _fill(requester, session, n=1)
    _fill(requester, session, status=Turn.Status.RUNNING, n=1)  # queued and running both count
    api = _api(requester)
    for path in ("/api/adk/run", "/api/adk/run_sse"):
        before = Turn.objects.count()
        r = api.post(path, json.dumps(_run_body()), content_type="application/json", HTTP_IDEMPOTENCY_KEY=path)
        assert r.status_code == 429, r.content
        detail = r.json()["detail"]
        assert "2 agent turns queued or running" in detail and "(2)" in detail and "Wait for one to finish" in detail
        assert Turn.objects.count() == before  # nothing queued, and the Idempotency-Key not spent
    rerun = api.post(
        "/api/adk/run",
        json.dumps({k: v for k, v in _run_body().items() if k != "newMessage"}),
        content_type="application/json",
    )
    assert rerun.status_code == 429  # running the agent again without a message is new work too


def test_the_conversation_form_beyond_the_cap_comes_back_with_the_text_and_why(capped):
    requester, session = capped
    _fill(requester, session)
    page = Client()
    page.force_login(requester)
    url = f"/sessions/{session.pk}/messages/"
    before = Turn.objects.count()
    plain = page.post(url, {"text": "one more"})
    assert plain.status_code == 429
    assert "agent turns queued or running" in plain.content.decode() and "one more" in plain.content.decode()
    htmx = page.post(url, {"text": "one more"}, HTTP_HX_REQUEST="true")
    assert htmx.status_code == 429 and 'id="message-form"' in htmx.content.decode()
    assert "Wait for one to finish" in htmx.content.decode()
    assert Turn.objects.count() == before
    new = page.post("/sessions/new/", {"agent": "stock_agent", "text": "hello"})
    assert new.status_code == 429 and "agent turns queued or running" in new.content.decode()
    assert AdkSession.objects.filter(user_id="requester").count() == 1  # no empty conversation left behind


def test_under_the_cap_after_a_turn_finishes_and_for_other_people(capped, demo):
    requester, session = capped
    turns = _fill(requester, session)
    with pytest.raises(services.TooManyTurns):
        services.message_send(session=session, text="hi", actor=requester)
    turns[0].status = Turn.Status.DONE
    turns[0].save()
    assert services.message_send(session=session, text="hi", actor=requester).status == Turn.Status.QUEUED
    other = services.session_create(app_name="stock_agent", user_id="approver")
    assert services.message_send(session=other, text="hi", actor=demo["approver"])  # another person's own cap


def test_answers_to_tickets_are_never_capped_and_zero_means_no_cap(capped, settings):
    requester, session = capped
    _fill(requester, session)
    answer = types.Content(
        role="user",
        parts=[types.Part(function_response=types.FunctionResponse(id="c1", name="t", response={"ok": True}))],
    )
    assert services.turn_create(session=session, content=answer, actor=requester).kind == Turn.Kind.FUNCTION_RESPONSE
    settings.ADKWEB_MAX_QUEUED_TURNS_PER_USER = 0
    assert services.message_send(session=session, text="hi", actor=requester)
