"""Conversations at scale: the latest events first with "Load earlier events", the ticket page with
its own part of the conversation, and a constant number of queries per page (the conversation, its
earlier events, the ticket page, the conversation lists), whatever the number of events or sessions."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from google.adk.events.event import Event
from google.genai import types

from agents_app import selectors, services
from agents_app.models import AdkSession, StoredEvent, Turn
from agents_app.session_service import event_to_json
from approvals import services as approvals
from approvals.models import PendingCall


@pytest.fixture(autouse=True)
def small_window(monkeypatch):
    monkeypatch.setattr(selectors, "TIMELINE_LATEST", 6)


def _client(user) -> Client:
    c = Client()
    c.force_login(user)
    return c


def store(session: AdkSession, ev: Event) -> StoredEvent:
    return StoredEvent.objects.create(
        session=session,
        event_id=ev.id,
        author=ev.author,
        invocation_id=ev.invocation_id,
        timestamp=ev.timestamp,
        data=event_to_json(ev),
    )


def add_round(session: AdkSession, n: int) -> PendingCall:
    """A user message and the agent's pause on a person (2 events, one ticket), in invocation inv-n."""
    text = types.Content(role="user", parts=[types.Part(text=f"Please reimburse {n}")])
    store(session, Event(author="user", invocation_id=f"inv-{n}", content=text))
    call = types.FunctionCall(id=f"call-{n}", name="ask_for_approval", args={"amount": n})
    content = types.Content(role="model", parts=[types.Part(function_call=call)])
    store(
        session,
        Event(
            author="reimbursement_agent", invocation_id=f"inv-{n}", long_running_tool_ids={f"call-{n}"}, content=content
        ),
    )
    return PendingCall.objects.create(
        session=session,
        app_name=session.app_name,
        requester=session.user_id,
        invocation_id=f"inv-{n}",
        kind="long_running",
        call_id=f"call-{n}",
        call_name="ask_for_approval",
        tool_name="ask_for_approval",
        args={"amount": n},
    )


def texts(html: str) -> list[int]:
    return [int(n) for n in re.findall(r"Please reimburse (\d+)", html)]


def queries(client: Client, url: str) -> tuple[int, str]:
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    assert response.status_code == 200, url
    return len(ctx.captured_queries), response.content.decode()


def earlier_url(html: str) -> str | None:
    found = re.search(r'hx-get="(/sessions/\d+/events/\?before=\d+)"', html)
    return found.group(1) if found else None


def test_a_long_conversation_shows_its_latest_events_and_loads_earlier_ones(demo):
    s = services.session_create(app_name="reimbursement_agent", user_id="requester")
    for n in range(1, 11):
        add_round(s, n)  # 20 events
    c = _client(demo["requester"])
    html = c.get(f"/sessions/{s.pk}/").content.decode()
    assert texts(html) == [8, 9, 10]  # the latest 6 events: 3 rounds
    last = StoredEvent.objects.filter(session=s).order_by("-pk").first()
    assert f"?after={last.pk}" in html  # the socket catches up from the newest event shown
    seen, url = texts(html), earlier_url(html)
    while url:
        fragment = c.get(url, HTTP_HX_REQUEST="true").content.decode()
        assert "<html" not in fragment
        seen = texts(fragment) + seen
        url = earlier_url(fragment)
    assert seen == list(range(1, 11))  # every event once, in order


def test_failed_turns_show_in_their_stretch_of_the_conversation(demo):
    s = services.session_create(app_name="reimbursement_agent", user_id="requester")
    for n in range(1, 4):
        add_round(s, n)
    ts = [e.timestamp for e in StoredEvent.objects.filter(session=s).order_by("pk")]
    between = datetime.fromtimestamp((ts[1] + ts[2]) / 2, tz=UTC)  # after round 1, before round 2
    turn = Turn.objects.create(session=s, kind="message", content={}, status="failed", error="Boom: early")
    Turn.objects.filter(pk=turn.pk).update(finished_at=between)
    for n in range(4, 8):
        add_round(s, n)
    c = _client(demo["requester"])
    html = c.get(f"/sessions/{s.pk}/").content.decode()
    assert "Boom: early" not in html
    whole, url = html, earlier_url(html)
    while url:
        fragment = c.get(url).content.decode()
        whole, url = fragment + whole, earlier_url(fragment)
    assert whole.count("Boom: early") == 1  # in exactly one window: the one of its time
    assert whole.index("Please reimburse 1") < whole.index("Boom: early") < whole.index("Please reimburse 2")


def test_conversation_pages_take_a_constant_number_of_queries(demo):
    s = services.session_create(app_name="reimbursement_agent", user_id="requester")
    for n in range(1, 5):
        add_round(s, n)
    c = _client(demo["requester"])
    c.get(f"/sessions/{s.pk}/")
    n1, html = queries(c, f"/sessions/{s.pk}/")
    e1, _ = queries(c, earlier_url(html))
    for n in range(5, 40):
        add_round(s, n)
    n2, html = queries(c, f"/sessions/{s.pk}/")
    e2, _ = queries(c, earlier_url(html))
    assert (n2, e2) == (n1, e1)


def test_the_ticket_page_shows_its_own_part_of_the_conversation(demo):
    s = services.session_create(app_name="reimbursement_agent", user_id="requester")
    tickets = [add_round(s, n) for n in range(1, 30)]
    c = _client(demo["approver"])
    c.get(f"/tickets/{tickets[0].pk}/")
    q1, html = queries(c, f"/tickets/{tickets[4].pk}/")
    assert texts(html) == [5] and "the whole conversation" in html
    last = StoredEvent.objects.filter(session=s).order_by("-pk").first()
    assert f"?after={last.pk}" in html  # live events after the page still come
    # Its answer's turn belongs to it too, once the agent has run it.
    approvals.ticket_approve(ticket=tickets[4], actor=demo["approver"])
    turn = Turn.objects.filter(session=s).latest("pk")
    Turn.objects.filter(pk=turn.pk).update(invocation_id="inv-answer", status="done")
    reply = types.Content(role="model", parts=[types.Part(text="Reimbursed 5")])
    store(s, Event(author="reimbursement_agent", invocation_id="inv-answer", content=reply))
    q2, html = queries(c, f"/tickets/{tickets[4].pk}/")
    assert texts(html) == [5] and "Reimbursed 5" in html
    for n in range(30, 60):
        add_round(s, n)
    q3, _ = queries(c, f"/tickets/{tickets[6].pk}/")
    assert q1 == q3 and q2 <= q1 + 1  # + its response's grant/turn rows at most


def test_conversation_lists_take_a_constant_number_of_queries(demo):
    c = _client(demo["approver"])
    for _ in range(3):
        add_round(services.session_create(app_name="reimbursement_agent", user_id="requester"), 1)
    c.get("/sessions/")
    before = [queries(c, url)[0] for url in ("/sessions/", "/sessions/?status=waiting", "/sessions/?status=idle")]
    for _ in range(30):
        add_round(services.session_create(app_name="reimbursement_agent", user_id="requester"), 1)
        services.session_create(app_name="stock_agent", user_id="someone")
    after = [queries(c, url)[0] for url in ("/sessions/", "/sessions/?status=waiting", "/sessions/?status=idle")]
    assert after == before and len(set(after)) == 1
    html = c.get("/sessions/?status=waiting").content.decode()
    assert html.count('id="session-row-') == 25 and "Page 1 of 2" in html
    nxt = re.search(r'href="(\?[^"]*after=[^"]+)" rel="next"', html).group(1).replace("&amp;", "&")
    page2 = c.get("/sessions/" + nxt).content.decode()
    assert page2.count('id="session-row-') == 8 and "Page 2 of 2" in page2 and "act-waiting" in page2
