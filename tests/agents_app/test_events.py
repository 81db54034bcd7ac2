"""Each conversation event, sent by its `notify_*` helper in agents_app/events.py as the services and
the runner send it, renders on the sockets that show it what the page expects (no hand-built
group messages here: those are the consumer tests')."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from google.adk.events.event import Event
from google.genai import types

from agents_app import events, services
from agents_app.models import StoredEvent, Turn
from agents_app.session_service import event_to_json, parse_marker
from tests.sockets import connect

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def session(demo):
    return services.session_create(app_name="reimbursement_agent", user_id="requester")


def _stored_text(session, text: str) -> StoredEvent:
    ev = Event(author="reimbursement_agent", content=types.Content(role="model", parts=[types.Part(text=text)]))
    return StoredEvent.objects.create(
        session=session, event_id=ev.id, author=ev.author, timestamp=ev.timestamp, data=event_to_json(ev)
    )


def _failed_turn(session) -> Turn:
    return Turn.objects.create(
        session=session, kind=Turn.Kind.MESSAGE, content={"role": "user", "parts": [{"text": "hi"}]}, status="failed"
    )


async def test_notify_session_event_appends_the_stored_event(demo, session):
    comm = await connect(f"/ws/sessions/{session.pk}/?after=0", demo["requester"])
    await comm.receive_from()  # the status on connect
    stored = await sync_to_async(_stored_text)(session, "Hi <there>")
    await sync_to_async(events.notify_session_event)(session_pk=session.pk, event_pk=stored.pk)
    html = await comm.receive_from()
    assert html.startswith('<div hx-swap-oob="beforeend:#conversation-events">')
    assert f'id="event-{stored.event_id}"' in html and "Hi &lt;there&gt;" in html
    await comm.disconnect()


async def test_anotify_partial_streams_text_into_one_card(demo, session):
    comm = await connect(f"/ws/sessions/{session.pk}/?after=0", demo["observer"])
    await comm.receive_from()

    def chunk(text: str) -> dict:
        return {"id": "ev-1", "author": "reimbursement_agent", "content": {"role": "model", "parts": [{"text": text}]}}

    await events.anotify_partial(session_pk=session.pk, event=chunk("Hel"), turn_id=1)
    card = await comm.receive_from()
    assert card.startswith('<div hx-swap-oob="beforeend:#conversation-events">')
    assert 'id="event-ev-1"' in card and "typing…" in card and "Hel" in card
    await events.anotify_partial(session_pk=session.pk, event=chunk("lo <b>"), turn_id=1)
    assert (await comm.receive_from()).strip() == '<span hx-swap-oob="beforeend:#event-ev-1-stream">lo &lt;b&gt;</span>'
    await comm.disconnect()


async def test_notify_session_status_updates_the_conversation_and_the_list(demo, session):
    conversation = await connect(f"/ws/sessions/{session.pk}/?after=0", demo["requester"])
    await conversation.receive_from()
    listing = await connect("/ws/sessions/", demo["requester"])
    await sync_to_async(_failed_turn)(session)
    await sync_to_async(events.notify_session_status)(session_pk=session.pk)
    status = await conversation.receive_from()
    assert status.startswith('<span id="session-status" class="chip act-failed"') and 'hx-swap-oob="true"' in status
    row = await listing.receive_from()
    assert f'id="session-row-{session.pk}"' in row and 'hx-swap-oob="true"' in row and "failed" in row
    await conversation.disconnect()
    await listing.disconnect()


async def test_notify_turn_finished_failed_shows_the_error_line(demo, session):
    comm = await connect(f"/ws/sessions/{session.pk}/?after=0", demo["requester"])
    await comm.receive_from()
    turn = await sync_to_async(_failed_turn)(session)
    await sync_to_async(events.notify_turn_finished)(session_pk=session.pk, turn_id=turn.pk, status="failed")
    html = await comm.receive_from()
    assert html.startswith('<div hx-swap-oob="beforeend:#conversation-events">')
    assert f'id="turn-{turn.pk}-error"' in html and "Turn failed" in html and "Retry" in html
    await comm.disconnect()


async def test_notify_turn_retried_removes_the_error_line(demo, session):
    comm = await connect(f"/ws/sessions/{session.pk}/?after=0", demo["requester"])
    await comm.receive_from()
    await sync_to_async(events.notify_turn_retried)(session_pk=session.pk, turn_id=7)
    assert await comm.receive_from() == '<div id="turn-7-error" hx-swap-oob="delete"></div>'
    await comm.disconnect()


async def test_an_append_through_the_session_store_reaches_open_pages_once(demo, session):
    """DjangoSessionService.append_event publishes from the event loop once the event is committed:
    the page's fragment once, and the session.event message (revision after the event, turn, author;
    no data outside a turn) on the session's group."""
    from channels.layers import get_channel_layer

    from agents_app.session_service import DjangoSessionService

    layer = get_channel_layer()
    ids_only = await layer.new_channel()
    await layer.group_add(events.session_group(session.pk), ids_only)
    comm = await connect(f"/ws/sessions/{session.pk}/?after=0", demo["requester"])
    await comm.receive_from()  # the status on connect
    service = DjangoSessionService()
    copy = await service.get_session(app_name=session.app_name, user_id=session.user_id, session_id=session.session_id)
    event = Event(author="reimbursement_agent", content=types.Content(role="model", parts=[types.Part(text="Hi")]))
    await service.append_event(copy, event)
    html = await comm.receive_from()
    assert f'id="event-{event.id}"' in html
    assert await comm.receive_nothing(timeout=0.3)
    stored = await StoredEvent.objects.aget(event_id=event.id)
    message = await layer.receive(ids_only)
    assert message == {
        "type": "session.event",
        "session_pk": session.pk,
        "event_pk": stored.pk,
        "revision": parse_marker(copy._storage_update_marker)[1],
        "turn_id": None,
        "author": "reimbursement_agent",
    }
    await comm.disconnect()


async def test_a_turn_event_is_carried_as_stored_without_being_serialized_again(demo, session, monkeypatch):
    """A turn's stored event goes to API followers in its message whole, as the JSON text its writer
    stored and sized (session_orm.NewEvent.message checks its length against EVENT_DATA_MAX): nothing
    parses it or serializes it again on its way (once per event of every turn, in a worker); the
    follower that takes it parses it (agents_app.api.watch)."""
    import json

    from channels.layers import get_channel_layer

    layer = get_channel_layer()
    ids_only = await layer.new_channel()
    await layer.group_add(events.session_group(session.pk), ids_only)
    text = json.dumps({"id": "e-1", "author": "reimbursement_agent", "content": {"parts": [{"text": "x" * 2000}]}})
    used: list[object] = []
    dumps, loads = json.dumps, json.loads
    monkeypatch.setattr(json, "dumps", lambda obj, *a, **k: used.append(obj) or dumps(obj, *a, **k))
    monkeypatch.setattr(json, "loads", lambda obj, *a, **k: used.append(obj) or loads(obj, *a, **k))
    await events.anotify_session_event(
        session_pk=session.pk, event_pk=41, revision=3, turn_id=7, author="reimbursement_agent", data_json=text
    )
    message = await layer.receive(ids_only)
    assert message["data_json"] == text and (message["revision"], message["turn_id"]) == (3, 7)
    assert "data" not in message
    assert used == []


def test_a_turn_events_message_is_made_without_parsing_what_was_stored(monkeypatch):
    """The session store's message for a turn's event (session_orm.NewEvent.message, on both of its
    paths) carries the JSON text it stores, not that text parsed again (a worker did it for every
    event of every turn: ~0.3 M instructions a turn, bench/README.md phase 22 (drain)); outside a
    turn, or past EVENT_DATA_MAX, none."""
    import json

    from agents_app import session_orm
    from agents_app.event_json import event_json_text

    event = Event(author="reimbursement_agent", content=types.Content(role="model", parts=[types.Part(text="Hi")]))
    parsed: list[object] = []
    loads = json.loads
    monkeypatch.setattr(json, "loads", lambda obj, *a, **k: parsed.append(obj) or loads(obj, *a, **k))
    message = session_orm.NewEvent.of(event, 7, set()).message(1, 2, 3)
    assert message["data_json"] == event_json_text(event) and "data" not in message
    assert parsed == []
    assert session_orm.NewEvent.of(event, None, None).message(1, 2, 3)["data_json"] is None
    monkeypatch.setattr(session_orm, "EVENT_DATA_MAX", 10)
    assert session_orm.NewEvent.of(event, 7, set()).message(1, 2, 3)["data_json"] is None


async def test_conversations_left_waiting_on_a_ticket_are_remembered_up_to_the_bound(demo, monkeypatch):
    """The drain notes which conversations' last turn left a ticket open (their next claim asks who
    watches: events.ask_ahead); the oldest is forgotten past WAITING_MAX, and a turn that ends
    otherwise forgets its conversation."""
    monkeypatch.setattr(events, "_waiting", {})
    monkeypatch.setattr(events, "WAITING_MAX", 2)
    for pk in (101, 102, 103):
        await events.anotify_turn_done(session_pk=pk, turn_id=pk, status="waiting", revision=1)
    assert list(events._waiting) == [102, 103]
    await events.anotify_turn_done(session_pk=103, turn_id=104, status="idle", revision=2)
    assert list(events._waiting) == [102]
