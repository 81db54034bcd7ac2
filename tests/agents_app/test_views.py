"""Conversation pages: the list, one conversation, the message box, a new conversation."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from agents_app import services
from agents_app.models import AdkSession, Turn
from approvals.models import PendingCall


def _client(user) -> Client:
    c = Client()
    c.force_login(user)
    return c


@pytest.fixture
def sessions(demo):
    mine = services.session_create(app_name="reimbursement_agent", user_id="requester")
    other = services.session_create(app_name="stock_agent", user_id="someone_else")
    return {"mine": mine, "other": other}


def test_pages_need_login(db):
    c = Client()
    for url in ("/sessions/", "/sessions/new/", "/sessions/1/", "/agents/"):
        r = c.get(url)
        assert r.status_code == 302 and "/accounts/login/" in r["Location"], url


def test_requester_lists_only_own_conversations(demo, sessions):
    r = _client(demo["requester"]).get("/sessions/")
    assert r.status_code == 200
    html = r.content.decode()
    assert "<title>Conversations · adkweb</title>" in html
    assert f'id="session-row-{sessions["mine"].pk}"' in html
    assert f'id="session-row-{sessions["other"].pk}"' not in html
    assert 'ws-connect="/ws/sessions/?' in html


@pytest.mark.parametrize("who", ["observer", "approver", "admin"])
def test_observers_and_approvers_list_every_conversation(demo, sessions, who):
    html = _client(demo[who]).get("/sessions/").content.decode()
    assert f'id="session-row-{sessions["mine"].pk}"' in html and f'id="session-row-{sessions["other"].pk}"' in html


def test_list_shows_status_and_filters_by_agent_and_status(demo, sessions):
    mine, other = sessions["mine"], sessions["other"]
    PendingCall.objects.create(
        session=mine,
        app_name=mine.app_name,
        requester="requester",
        kind="long_running",
        call_id="c1",
        call_name="ask_for_approval",
    )
    Turn.objects.create(session=other, kind="message", content={}, status="failed", error="boom")
    c = _client(demo["observer"])
    html = c.get("/sessions/").content.decode()
    assert "waiting for a human" in html and ">failed<" in html
    html = c.get("/sessions/?status=waiting").content.decode()
    assert f'session-row-{mine.pk}"' in html and f'session-row-{other.pk}"' not in html
    html = c.get("/sessions/?agent=stock_agent").content.decode()
    assert f'session-row-{other.pk}"' in html and f'session-row-{mine.pk}"' not in html
    Turn.objects.create(session=other, kind="message", content={}, status="running")
    html = c.get("/sessions/?status=running").content.decode()
    assert f'session-row-{other.pk}"' in html and f'session-row-{mine.pk}"' not in html
    html = c.get("/sessions/?status=idle").content.decode()
    assert "No conversations match these filters" in html


def test_list_is_paginated_without_n_plus_1(demo):
    for _ in range(30):
        services.session_create(app_name="stock_agent", user_id="requester")
    c = _client(demo["requester"])
    c.get("/sessions/")  # warm caches
    with CaptureQueriesContext(connection) as q1:
        r = c.get("/sessions/")
    html = r.content.decode()
    assert html.count('id="session-row-') == 25 and "Page 1 of 2" in html
    assert "Page 2 of 2" in c.get("/sessions/?page=2").content.decode()
    for _ in range(10):
        services.session_create(app_name="stock_agent", user_id="requester")
    with CaptureQueriesContext(connection) as q2:
        c.get("/sessions/")
    assert len(q2) == len(q1)


def test_htmx_filter_request_gets_only_the_list_fragment(demo, sessions):
    r = _client(demo["requester"]).get("/sessions/?agent=reimbursement_agent", HTTP_HX_REQUEST="true")
    html = r.content.decode()
    assert html.lstrip().startswith('<section id="session-list"') and "<html" not in html


def test_owner_sees_conversation_with_message_box(demo, sessions):
    r = _client(demo["requester"]).get(f"/sessions/{sessions['mine'].pk}/")
    html = r.content.decode()
    assert r.status_code == 200 and "reimbursement_agent · conversation" in html
    assert 'id="message-form"' in html and "csrfmiddlewaretoken" in html
    assert f'ws-connect="/ws/sessions/{sessions["mine"].pk}/?after=0"' in html
    assert 'id="session-status"' in html and ">idle<" in html


def test_observer_reads_without_message_box(demo, sessions):
    html = _client(demo["observer"]).get(f"/sessions/{sessions['mine'].pk}/").content.decode()
    assert 'id="message-form"' not in html and "You are watching this conversation" in html


def test_other_requester_gets_404(demo, sessions, django_user_model):
    stranger = django_user_model.objects.create_user("stranger", password="x")
    assert _client(stranger).get(f"/sessions/{sessions['mine'].pk}/").status_code == 404
    assert _client(stranger).post(f"/sessions/{sessions['mine'].pk}/messages/", {"text": "hi"}).status_code == 404
    assert _client(stranger).get("/sessions/999999/").status_code == 404


def test_owner_posts_a_message_without_js(demo, sessions):
    s = sessions["mine"]
    r = _client(demo["requester"]).post(f"/sessions/{s.pk}/messages/", {"text": "Please reimburse 50$ for taxi"})
    assert r.status_code == 302 and r["Location"] == f"/sessions/{s.pk}/"
    turn = Turn.objects.get(session=s)
    assert turn.content["parts"][0]["text"] == "Please reimburse 50$ for taxi" and turn.streaming
    assert turn.created_by == demo["requester"]


def test_owner_posts_with_htmx_and_gets_a_fresh_form(demo, sessions):
    s = sessions["mine"]
    r = _client(demo["requester"]).post(f"/sessions/{s.pk}/messages/", {"text": "hi"}, HTTP_HX_REQUEST="true")
    html = r.content.decode()
    assert r.status_code == 200 and html.lstrip().startswith('<form id="message-form"') and "Sent." in html
    assert Turn.objects.filter(session=s).count() == 1


@pytest.mark.parametrize("htmx", [False, True])
def test_empty_message_is_a_clear_400_and_queues_nothing(demo, sessions, htmx):
    s = sessions["mine"]
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    r = _client(demo["requester"]).post(f"/sessions/{s.pk}/messages/", {"text": "   "}, **headers)
    assert r.status_code == 400
    assert "The message is empty" in r.content.decode()
    assert not Turn.objects.filter(session=s).exists()


def test_observer_cannot_post(demo, sessions):
    r = _client(demo["observer"]).post(f"/sessions/{sessions['mine'].pk}/messages/", {"text": "hi"})
    assert r.status_code == 403 and not Turn.objects.exists()


def test_message_post_enforces_csrf(demo, sessions):
    c = Client(enforce_csrf_checks=True)
    c.force_login(demo["requester"])
    url = f"/sessions/{sessions['mine'].pk}/messages/"
    assert c.post(url, {"text": "hi"}).status_code == 403
    assert not Turn.objects.exists()
    c.get(f"/sessions/{sessions['mine'].pk}/")
    token = c.cookies["csrftoken"].value
    assert c.post(url, {"text": "hi", "csrfmiddlewaretoken": token}).status_code == 302
    assert c.post(url, {"text": "again"}, HTTP_X_CSRFTOKEN=token, HTTP_HX_REQUEST="true").status_code == 200
    assert Turn.objects.count() == 2


def test_message_get_is_not_allowed(demo, sessions):
    assert _client(demo["requester"]).get(f"/sessions/{sessions['mine'].pk}/messages/").status_code == 405


def test_new_conversation_creates_session_and_sends_first_message(demo):
    c = _client(demo["requester"])
    r = c.get("/sessions/new/?agent=stock_agent")
    html = r.content.decode()
    assert r.status_code == 200 and "<title>New conversation · adkweb</title>" in html
    assert '<option value="stock_agent" selected>' in html
    r = c.post("/sessions/new/", {"agent": "stock_agent", "text": "What is GOOG at?"})
    session = AdkSession.objects.get()
    assert r.status_code == 302 and r["Location"] == f"/sessions/{session.pk}/"
    assert session.user_id == "requester" and session.app_name == "stock_agent"
    assert Turn.objects.get(session=session).content["parts"][0]["text"] == "What is GOOG at?"


@pytest.mark.parametrize(
    "data, error",
    [
        ({"agent": "stock_agent", "text": " "}, "The message is empty"),
        ({"agent": "no_such_agent", "text": "hi"}, "Pick one of the enabled agents"),
        ({"agent": "", "text": "hi"}, "This field is required"),
    ],
)
def test_new_conversation_refuses_bad_input(demo, data, error):
    r = _client(demo["requester"]).post("/sessions/new/", data)
    assert r.status_code == 400 and error in r.content.decode()
    assert not AdkSession.objects.exists() and not Turn.objects.exists()


def test_new_conversation_offers_only_enabled_agents(demo):
    from agents_app.models import AgentConfig

    AgentConfig.objects.filter(name="stock_agent").update(enabled=False)
    html = _client(demo["requester"]).get("/sessions/new/").content.decode()
    assert 'value="stock_agent"' not in html and 'value="reimbursement_agent"' in html
    r = _client(demo["requester"]).post("/sessions/new/", {"agent": "stock_agent", "text": "hi"})
    assert r.status_code == 400 and not AdkSession.objects.exists()


def test_conversation_page_shows_events_tickets_and_failed_turns_in_constant_queries(demo, sessions):
    from google.adk.events.event import Event
    from google.genai import types

    from agents_app.models import StoredEvent
    from agents_app.session_service import event_to_json

    s = sessions["mine"]

    def store(ev):
        return StoredEvent.objects.create(
            session=s, event_id=ev.id, author=ev.author, timestamp=ev.timestamp, data=event_to_json(ev)
        )

    def add_round(n):
        store(
            Event(author="user", content=types.Content(role="user", parts=[types.Part(text=f"Please reimburse {n}")]))
        )
        call = types.FunctionCall(id=f"call-{n}", name="ask_for_approval", args={"amount": n})
        store(
            Event(
                author="reimbursement_agent",
                long_running_tool_ids={f"call-{n}"},
                content=types.Content(role="model", parts=[types.Part(function_call=call)]),
            )
        )
        return PendingCall.objects.create(
            session=s,
            app_name=s.app_name,
            requester="requester",
            kind="long_running",
            call_id=f"call-{n}",
            call_name="ask_for_approval",
        )

    ticket = add_round(1)
    Turn.objects.create(session=s, kind="message", content={}, status="failed", error="Boom: tool exploded")
    c = _client(demo["requester"])
    with CaptureQueriesContext(connection) as q1:
        html = c.get(f"/sessions/{s.pk}/").content.decode()
    assert "Please reimburse 1" in html and f'href="/tickets/{ticket.pk}/"' in html
    assert "Boom: tool exploded" in html and "waiting for a human" in html
    last = StoredEvent.objects.filter(session=s).order_by("-pk").first()
    assert f"?after={last.pk}" in html
    for n in range(2, 6):
        add_round(n)
    with CaptureQueriesContext(connection) as q2:
        c.get(f"/sessions/{s.pk}/")
    assert len(q2) == len(q1)
