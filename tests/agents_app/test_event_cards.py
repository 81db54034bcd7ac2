"""Event cards are rendered once per process and reused (agents_app.cards): what a page shows is
what the template renders now, whatever is cached: a ticket that closes, another time zone, an
event row whose JSON is not the one cached, hostile text (escaped either way)."""

from __future__ import annotations

import re

import pytest
from django.template.loader import render_to_string
from django.test import Client
from django.utils import timezone
from google.adk.events.event import Event
from google.genai import types

from agents_app import cards, selectors, services
from agents_app.models import StoredEvent
from agents_app.session_service import event_to_json
from approvals import services as approvals
from approvals.models import PendingCall

HOSTILE = "<script>alert(1)</script>"


@pytest.fixture(autouse=True)
def empty_cache():
    cards.clear()
    yield
    cards.clear()


def _store(session, event: Event) -> StoredEvent:
    return StoredEvent.objects.create(
        session=session, event_id=event.id, author=event.author, timestamp=event.timestamp, data=event_to_json(event)
    )


def _conversation(demo):
    s = services.session_create(app_name="reimbursement_agent", user_id="requester")
    _store(s, Event(author="user", content=types.Content(role="user", parts=[types.Part(text=HOSTILE)])))
    call = types.FunctionCall(id="call-1", name="ask_for_approval", args={"purpose": HOSTILE, "amount": 5})
    _store(
        s,
        Event(
            author="reimbursement_agent",
            long_running_tool_ids={"call-1"},
            content=types.Content(role="model", parts=[types.Part(function_call=call)]),
        ),
    )
    ticket = PendingCall.objects.create(
        session=s,
        app_name=s.app_name,
        requester="requester",
        kind="long_running",
        call_id="call-1",
        call_name="ask_for_approval",
        tool_name="ask_for_approval",
        args={"purpose": HOSTILE, "amount": 5},
    )
    return s, ticket


def _events_html(html: str) -> str:
    return html[html.index('id="conversation-events"') : html.index('id="conversation-artifacts"')]


def _uncached(session) -> str:
    """The cards as the template alone renders them."""
    return "".join(
        render_to_string("agents_app/partials/event.html", {"event": e, "oob": ""})
        for e in selectors.session_timeline(session)
    )


def test_a_cached_card_is_the_card_the_template_renders(demo):
    s, _ = _conversation(demo)
    c = Client()
    c.force_login(demo["requester"])
    first = c.get(f"/sessions/{s.pk}/").content.decode()
    assert len(cards._cards) == 2  # both events' cards kept
    second = c.get(f"/sessions/{s.pk}/").content.decode()
    assert _events_html(first) == _events_html(second)
    assert _uncached(s) in _events_html(second)
    assert "<script>alert" not in second and "&lt;script&gt;alert(1)&lt;/script&gt;" in second


def test_a_ticket_that_changes_changes_its_card(demo):
    s, ticket = _conversation(demo)
    c = Client()
    c.force_login(demo["approver"])
    html = c.get(f"/tickets/{ticket.pk}/").content.decode()
    assert "waiting for a human" in html
    approvals.ticket_approve(ticket=ticket, actor=demo["approver"])
    for url in (f"/tickets/{ticket.pk}/", f"/sessions/{s.pk}/"):
        html = c.get(url).content.decode()
        card = re.search(rf'<div id="conv-ticket-{ticket.pk}".*?</div>', html, re.S).group(0)
        assert "ticket-closed" in card and "by approver" in card and "waiting for a human" not in card, url


def test_each_time_zone_and_each_stored_json_has_its_own_card(demo):
    s, _ = _conversation(demo)
    c = Client()
    c.force_login(demo["requester"])
    utc = c.get(f"/sessions/{s.pk}/").content.decode()
    with timezone.override("Asia/Kolkata"):
        kolkata = c.get(f"/sessions/{s.pk}/").content.decode()
        assert _uncached(s) in _events_html(kolkata)
    assert "+05:30" in kolkata and "+05:30" not in utc
    # The same row (same pk, same event id) with other JSON: another card, not the cached one.
    first = StoredEvent.objects.filter(session=s).order_by("pk").first()
    data = dict(first.data, content={"role": "user", "parts": [{"text": "rewritten"}]})
    StoredEvent.objects.filter(pk=first.pk).update(data=data)
    html = c.get(f"/sessions/{s.pk}/").content.decode()
    assert "rewritten" in html and _uncached(s) in _events_html(html)


def test_the_cache_keeps_within_its_bounds(monkeypatch):
    monkeypatch.setattr(cards, "MAX_CARDS", 3)
    monkeypatch.setattr(cards, "MAX_CHARS", 10)
    monkeypatch.setattr(cards, "MAX_CARD_CHARS", 5)
    cards.put(("big",), "x" * 6)  # bigger than a card may be: not kept
    assert cards.get(("big",)) is None
    for n in range(4):
        cards.put((n,), "abcd")
    assert [k for k in cards._cards] == [(2,), (3,)] and cards._chars == 8  # 10 chars at most: the oldest go
    cards.put((3,), "ab")
    assert cards._chars == 6 and cards.get((3,)) == "ab"
