"""Conversation websockets: who may connect, and what each group message renders."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from google.adk.events.event import Event
from google.genai import types

from agents_app import events, services
from agents_app.events import SESSIONS_GROUP
from agents_app.models import StoredEvent, Turn
from agents_app.routing import websocket_urlpatterns
from agents_app.session_service import event_to_json
from approvals import events as approval_events
from approvals.models import PendingCall

pytestmark = pytest.mark.django_db(transaction=True)
app = URLRouter(websocket_urlpatterns)


async def _connect(path: str, user=None) -> tuple[WebsocketCommunicator, bool]:
    comm = WebsocketCommunicator(app, path)
    if user is not None:
        comm.scope["user"] = user
    connected, _ = await comm.connect()
    return comm, connected


def _text_event(session, text: str = "Hello", author: str = "reimbursement_agent", event_id: str | None = None):
    ev = Event(author=author, content=types.Content(role="model", parts=[types.Part(text=text)]))
    if event_id:
        ev.id = event_id
    return StoredEvent.objects.create(
        session=session, event_id=ev.id, author=ev.author, timestamp=ev.timestamp, data=event_to_json(ev)
    )


async def _send(group: str, **message) -> None:
    await get_channel_layer().group_send(group, message)


async def _publish(**message) -> None:
    """What the worker or a view publishes after commit (agents_app.events): ids to `session-<pk>`,
    the fragments rendered once per audience to the audience groups."""
    kind = message.pop("type")
    if kind == "session.partial":
        event = {
            "id": message["event_id"],
            "author": message["author"],
            "content": {"parts": [{"text": message["text"]}]},
        }
        await events.anotify_partial(session_pk=message["session_pk"], event=event, turn_id=message["turn_id"])
        return
    publish = {
        "session.event": events.notify_session_event,
        "session.status": events.notify_session_status,
        "turn.finished": events.notify_turn_finished,
        "ticket.changed": approval_events.notify_ticket_changed,
    }[kind]
    await sync_to_async(publish)(**message)


@pytest.fixture
def session(demo):
    return services.session_create(app_name="reimbursement_agent", user_id="requester")


async def test_anonymous_sockets_are_refused(session):
    from django.contrib.auth.models import AnonymousUser

    for path in ("/ws/sessions/", f"/ws/sessions/{session.pk}/"):
        comm, connected = await _connect(path, AnonymousUser())
        assert not connected, path
        comm, connected = await _connect(path)  # no user in scope at all
        assert not connected, path


async def test_stranger_is_refused_owner_and_observer_accepted(demo, session, django_user_model):
    stranger = await sync_to_async(django_user_model.objects.create_user)("stranger", password="x")
    _, connected = await _connect(f"/ws/sessions/{session.pk}/", stranger)
    assert not connected
    _, connected = await _connect("/ws/sessions/999999/", demo["requester"])
    assert not connected
    for who in ("requester", "observer", "approver"):
        comm, connected = await _connect(f"/ws/sessions/{session.pk}/", demo[who])
        assert connected, who
        first = await comm.receive_from()
        assert 'id="session-status"' in first and 'hx-swap-oob="true"' in first and "idle" in first
        await comm.disconnect()


async def test_stored_event_is_appended_once(demo, session):
    comm, _ = await _connect(f"/ws/sessions/{session.pk}/?after=0", demo["observer"])
    await comm.receive_from()  # status
    stored = await sync_to_async(_text_event)(session, "Hi <there>")
    await _publish(type="session.event", session_pk=session.pk, event_pk=stored.pk)
    html = await comm.receive_from()
    assert html.startswith('<div hx-swap-oob="beforeend:#conversation-events">')
    assert f'id="event-{stored.event_id}"' in html and "Hi &lt;there&gt;" in html
    await _publish(type="session.event", session_pk=session.pk, event_pk=stored.pk)
    assert await comm.receive_nothing(timeout=0.2)
    await comm.disconnect()


async def test_page_that_missed_events_gets_the_list_again_on_connect(demo, session):
    stored = await sync_to_async(_text_event)(session, "stored before the socket connected")
    comm, _ = await _connect(f"/ws/sessions/{session.pk}/?after=0", demo["requester"])
    html = await comm.receive_from()
    assert 'id="session-status"' in html
    assert '<div id="conversation-events" class="events" aria-live="polite" hx-swap-oob="true">' in html
    assert "stored before the socket connected" in html
    await comm.disconnect()
    comm, _ = await _connect(f"/ws/sessions/{session.pk}/?after={stored.pk}", demo["requester"])
    html = await comm.receive_from()
    assert "conversation-events" not in html
    await comm.disconnect()


async def test_streaming_chunks_then_final_event_replaces_them(demo, session):
    comm, _ = await _connect(f"/ws/sessions/{session.pk}/", demo["requester"])
    await comm.receive_from()
    await _publish(
        type="session.partial",
        session_pk=session.pk,
        event_id="ev-1",
        author="reimbursement_agent",
        text="Hello <b>",
        turn_id=1,
    )
    first = await comm.receive_from()
    assert first.startswith('<div hx-swap-oob="beforeend:#conversation-events">')
    assert 'id="event-ev-1"' in first and 'id="event-ev-1-stream"' in first and "Hello &lt;b&gt;" in first
    await _publish(
        type="session.partial",
        session_pk=session.pk,
        event_id="ev-1",
        author="reimbursement_agent",
        text="world ",
        turn_id=1,
    )
    assert (await comm.receive_from()).strip() == '<span hx-swap-oob="beforeend:#event-ev-1-stream">world </span>'
    stored = await sync_to_async(_text_event)(session, "Hello <b>world", event_id="ev-1")
    await _publish(type="session.event", session_pk=session.pk, event_pk=stored.pk)
    final = (await comm.receive_from()).strip()
    assert final.startswith('<article id="event-ev-1"') and 'hx-swap-oob="true"' in final
    assert "event-streaming" not in final and "Hello &lt;b&gt;world" in final
    # a late chunk of a finished event is ignored
    await _publish(type="session.partial", session_pk=session.pk, event_id="ev-1", author="x", text="late", turn_id=1)
    assert await comm.receive_nothing(timeout=0.2)
    await comm.disconnect()


async def test_status_and_failed_turn_and_stale_stream(demo, session):
    comm, _ = await _connect(f"/ws/sessions/{session.pk}/", demo["requester"])
    await comm.receive_from()
    turn = await sync_to_async(Turn.objects.create)(session=session, kind="message", content={}, status="running")
    await _publish(type="session.status", session_pk=session.pk)
    # "running" waits for the turn's next frame and goes with it (the event is not queued behind it)
    assert await comm.receive_nothing(timeout=0.2)
    await _publish(
        type="session.partial", session_pk=session.pk, event_id="ev-9", author="a", text="par", turn_id=turn.pk
    )
    html = await comm.receive_from()
    assert html.index('id="event-ev-9"') < html.index("running")
    turn.status, turn.error = "failed", "RuntimeError: the model <exploded>"
    await sync_to_async(turn.save)()
    await _publish(type="turn.finished", session_pk=session.pk, turn_id=turn.pk, status="failed")
    html = await comm.receive_from()
    assert '<div id="event-ev-9" hx-swap-oob="delete"></div>' in html
    assert f'id="turn-{turn.pk}-error"' in html and "RuntimeError: the model &lt;exploded&gt;" in html
    await _publish(type="turn.finished", session_pk=session.pk, turn_id=turn.pk + 1, status="done")
    assert await comm.receive_nothing(timeout=0.2)
    await comm.disconnect()


async def test_a_held_running_status_goes_alone_after_the_hold_or_gives_way_to_the_next(demo, session, monkeypatch):
    from agents_app import consumers

    monkeypatch.setattr(consumers, "RUNNING_HOLD", 0.2)
    comm, _ = await _connect(f"/ws/sessions/{session.pk}/", demo["requester"])
    assert "idle" in await comm.receive_from()
    turn = await sync_to_async(Turn.objects.create)(session=session, kind="message", content={}, status="running")
    await _publish(type="session.status", session_pk=session.pk)
    assert await comm.receive_nothing(timeout=0.05)
    html = await comm.receive_from(timeout=2)  # no frame came: the status alone, after the hold
    assert 'id="session-status"' in html and "running" in html
    await _publish(type="session.status", session_pk=session.pk)
    assert await comm.receive_nothing(timeout=0.4)  # the same status again: nothing
    turn.status = "done"
    await sync_to_async(turn.save)()
    await _publish(type="session.status", session_pk=session.pk)
    assert "idle" in await comm.receive_from()  # any other status at once
    turn.status = "running"
    await sync_to_async(turn.save)()
    await _publish(type="session.status", session_pk=session.pk)
    turn.status = "done"
    await sync_to_async(turn.save)()
    await _publish(type="session.status", session_pk=session.pk)  # back to what the page shows
    assert await comm.receive_nothing(timeout=0.4)  # the held "running" was dropped, "idle" is shown
    await comm.disconnect()


def _ticket_event(session):
    call = types.FunctionCall(id="call-7", name="ask_for_approval", args={"purpose": "meals", "amount": 200.0})
    ev = Event(
        author="reimbursement_agent",
        content=types.Content(role="model", parts=[types.Part(function_call=call)]),
        long_running_tool_ids={"call-7"},
    )
    stored = StoredEvent.objects.create(
        session=session,
        event_id=ev.id,
        author=ev.author,
        timestamp=ev.timestamp,
        data=event_to_json(ev),
        interrupt_ids=["call-7"],
    )
    ticket = PendingCall.objects.create(
        session=session,
        app_name=session.app_name,
        requester="requester",
        kind="long_running",
        call_id="call-7",
        call_name="ask_for_approval",
        event=stored,
    )
    return stored, ticket


async def test_ticket_card_is_updated_when_the_ticket_changes(demo, session):
    comm, _ = await _connect(f"/ws/sessions/{session.pk}/", demo["requester"])
    await comm.receive_from()
    stored, ticket = await sync_to_async(_ticket_event)(session)
    await _publish(type="ticket.changed", ticket_id=ticket.pk, session_pk=session.pk)
    assert await comm.receive_nothing(timeout=0.2)  # its event is not on the page yet: it brings the card
    await _publish(type="session.event", session_pk=session.pk, event_pk=stored.pk)
    html = await comm.receive_from()
    assert f'href="/tickets/{ticket.pk}/"' in html and "waiting for a human" in html
    ticket.status = "approved"
    ticket.closed_by = demo["approver"]
    await sync_to_async(ticket.save)()
    await _publish(type="ticket.changed", ticket_id=ticket.pk, session_pk=session.pk)
    html = (await comm.receive_from()).strip()
    assert html.startswith(f'<div id="conv-ticket-{ticket.pk}"') and 'hx-swap-oob="true"' in html
    assert "approved" in html and "by approver" in html
    await comm.disconnect()


# -- the conversation list -----------------------------------------------------------------------
async def test_list_socket_sends_only_rows_the_user_may_see(demo, session):
    other = await sync_to_async(services.session_create)(app_name="stock_agent", user_id="someone_else")
    requester, _ = await _connect("/ws/sessions/", demo["requester"])
    observer, _ = await _connect("/ws/sessions/", demo["observer"])
    await _send(SESSIONS_GROUP, type="session.status", session_pk=other.pk)
    assert await requester.receive_nothing(timeout=0.2)
    html = await observer.receive_from()
    assert f'id="session-row-{other.pk}"' in html and 'hx-swap-oob="true"' in html
    await sync_to_async(Turn.objects.create)(session=session, kind="message", content={}, status="running")
    await _send(SESSIONS_GROUP, type="session.status", session_pk=session.pk)
    html = await requester.receive_from()
    assert f'id="session-row-{session.pk}"' in html and "running" in html
    await observer.receive_from()
    await requester.disconnect()
    await observer.disconnect()


async def test_list_socket_respects_filters_and_adds_new_rows_on_page_one(demo, session):
    comm, _ = await _connect("/ws/sessions/?status=idle&agent=", demo["requester"])
    turn = await sync_to_async(Turn.objects.create)(session=session, kind="message", content={}, status="running")
    await _send(SESSIONS_GROUP, type="session.status", session_pk=session.pk)
    assert (await comm.receive_from()) == f'<tr id="session-row-{session.pk}" hx-swap-oob="delete"></tr>'
    turn.status = "done"
    await sync_to_async(turn.save)()
    await _send(SESSIONS_GROUP, type="session.status", session_pk=session.pk)
    html = await comm.receive_from()
    assert html.startswith('<tbody hx-swap-oob="afterbegin:#session-rows">') and f"session-row-{session.pk}" in html
    await comm.disconnect()


async def test_full_asgi_stack_uses_the_login_session_cookie(demo, session):
    from django.test import Client

    from adkweb.asgi import application

    client = Client()
    await sync_to_async(client.force_login)(demo["requester"])
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
    headers = [(b"origin", b"http://testserver"), (b"cookie", cookie)]
    comm = WebsocketCommunicator(application, f"/ws/sessions/{session.pk}/", headers=headers)
    connected, _ = await comm.connect()
    assert connected and "session-status" in await comm.receive_from()
    await comm.disconnect()
    comm = WebsocketCommunicator(
        application, f"/ws/sessions/{session.pk}/", headers=[(b"origin", b"http://testserver")]
    )
    connected, _ = await comm.connect()
    assert not connected


async def test_an_event_that_saved_an_artifact_refreshes_the_artifact_list(demo, session):
    from google.adk.events.event_actions import EventActions

    from agents_app import artifacts

    scope = {"app_name": session.app_name, "user_id": session.user_id, "session_id": session.session_id}
    part = types.Part(inline_data=types.Blob(mime_type="image/png", data=b"\x89PNG"))
    await sync_to_async(artifacts.save)(scope={**scope, "filename": "chart.png"}, part=part, custom_metadata=None)
    comm, _ = await _connect(f"/ws/sessions/{session.pk}/", demo["requester"])
    await comm.receive_from()
    ev = Event(author="reimbursement_agent", actions=EventActions(artifact_delta={"chart.png": 0}))
    stored = await sync_to_async(StoredEvent.objects.create)(
        session=session, event_id=ev.id, author=ev.author, timestamp=ev.timestamp, data=event_to_json(ev)
    )
    await _publish(type="session.event", session_pk=session.pk, event_pk=stored.pk)
    html = await comm.receive_from()
    assert '<section id="conversation-artifacts"' in html and 'hx-swap-oob="true"' in html
    assert f"/sessions/{session.pk}/artifacts/chart.png?inline=1" in html
    await comm.disconnect()
