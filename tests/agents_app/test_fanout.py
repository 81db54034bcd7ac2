"""Conversation fan-out (agents_app.fanout): fragments rendered once per event per audience, carried
in the group message, forwarded by the sockets without a database query; each audience's group
gets only its own render."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.db.backends.utils import CursorWrapper
from google.adk.events.event import Event
from google.genai import types

from adkweb.roles import can_retry_turns
from agents_app import events, fanout, services
from agents_app.models import StoredEvent, Turn
from agents_app.routing import websocket_urlpatterns
from agents_app.session_service import event_to_json

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("transport")]
app = URLRouter(websocket_urlpatterns)


@pytest.fixture
def session(demo):
    return services.session_create(app_name="reimbursement_agent", user_id="requester")


async def _socket(session, user) -> WebsocketCommunicator:
    comm = WebsocketCommunicator(app, f"/ws/sessions/{session.pk}/?after=0")
    comm.scope["user"] = user
    assert (await comm.connect())[0]
    assert 'id="session-status"' in await comm.receive_from()
    return comm


def _stored(session, text: str) -> StoredEvent:
    ev = Event(author="reimbursement_agent", content=types.Content(role="model", parts=[types.Part(text=text)]))
    return StoredEvent.objects.create(
        session=session, event_id=ev.id, author=ev.author, timestamp=ev.timestamp, data=event_to_json(ev)
    )


def test_audiences_follow_the_roles(demo, session, django_user_model):
    stranger = django_user_model.objects.create_user("stranger", password="x")
    assert fanout.audience_of(stranger, session) is None
    expected = {"requester": "owner", "approver": "approver", "observer": "observer", "admin": "approver"}
    for name, audience in expected.items():
        user = demo[name]
        assert fanout.audience_of(user, session) == audience, name
        # What an audience is rendered with agrees with the permission checked on the POST.
        assert fanout.AUDIENCES[audience]["can_retry"] == can_retry_turns(user, session), name


async def test_each_audience_gets_its_own_render_and_no_socket_queries_the_database(demo, session, monkeypatch):
    sockets = {name: await _socket(session, demo[name]) for name in ("requester", "approver", "observer")}
    first = await sync_to_async(_stored)(session, "Hello <all>")
    turn = await sync_to_async(Turn.objects.create)(
        session=session, kind="message", content={}, status="failed", error="boom"
    )
    second = await sync_to_async(_stored)(session, "After the failure")

    queries: list[str] = []
    real_execute = CursorWrapper.execute

    def counting(self, sql, params=None):
        queries.append(sql)
        return real_execute(self, sql, params)

    # Publishing reads and renders (once); then the sockets only forward.
    await sync_to_async(events.notify_session_event)(session_pk=session.pk, event_pk=first.pk)
    await sync_to_async(events.notify_turn_finished)(session_pk=session.pk, turn_id=turn.pk, status="failed")
    await sync_to_async(events.notify_session_event)(session_pk=session.pk, event_pk=second.pk)
    monkeypatch.setattr(CursorWrapper, "execute", counting)
    frames = {}
    for name, comm in sockets.items():
        got = [await comm.receive_from() for _ in range(3)]
        assert await comm.receive_nothing(timeout=0.2), name
        frames[name] = got
        await comm.disconnect()
    assert queries == [], queries

    for name, got in frames.items():
        assert f'id="event-{first.event_id}"' in got[0] and "Hello &lt;all&gt;" in got[0], name
        assert f'id="turn-{turn.pk}-error"' in got[1] and "boom" in got[1], name
        assert f'id="event-{second.event_id}"' in got[2], name
    # The failed turn stored nothing: the owner and approvers may run it again, observers may not.
    assert "Retry" in frames["requester"][1] and "Retry" in frames["approver"][1]
    assert "Retry" not in frames["observer"][1]


def test_an_event_is_rendered_once_for_every_audience(demo, session, monkeypatch):
    stored = _stored(session, "one render")
    sent: list[tuple[str, dict]] = []
    renders: list[str] = []
    real_render = fanout.render_to_string

    def render(name, context=None):
        renders.append(name)
        return real_render(name, context)

    monkeypatch.setattr(fanout, "render_to_string", render)
    monkeypatch.setattr(fanout, "group_send_each", lambda groups, message: sent.extend((g, message) for g in groups))
    fanout.publish_event(session_pk=session.pk, event_pk=stored.pk)
    assert renders == [] and sent == []  # no page of this conversation is open: nothing rendered or sent
    monkeypatch.setattr(fanout, "groups_watched", lambda groups: set(groups))  # a page of every audience
    fanout.publish_event(session_pk=session.pk, event_pk=stored.pk)
    assert len(renders) == 2  # the appended card and the in-place replacement, for every audience
    assert sorted(g for g, _ in sent) == sorted(fanout.audience_group(session.pk, a) for a in fanout.AUDIENCES)
    assert all(m["type"] == "live.event" and m["event_pk"] == stored.pk for _, m in sent)


async def test_forwarding_a_fragment_makes_no_thread_hop(demo, session, monkeypatch):
    """Channels' own dispatch hops to Django's one sync thread before every message (to close stale
    connections): with 1,000 sockets, 1,000 hops per fragment on the thread views need. The live
    consumers forward without it (adkweb.live_socket.LiveConsumer)."""
    import channels.consumer

    sockets = [await _socket(session, demo[name]) for name in ("requester", "approver", "observer")]
    hops: list[str] = []

    async def counted() -> None:
        hops.append("close_old_connections")

    monkeypatch.setattr(channels.consumer, "aclose_old_connections", counted)
    stored = await sync_to_async(_stored)(session, "no hop")
    await sync_to_async(events.notify_session_event)(session_pk=session.pk, event_pk=stored.pk)
    for comm in sockets:
        assert f'id="event-{stored.event_id}"' in await comm.receive_from()
        await comm.disconnect()
    assert hops == []


def _live_event(pk: int, ticket_ids: tuple[int, ...] = ()) -> dict:
    return {
        "type": "live.event",
        "event_pk": pk,
        "event_id": f"e{pk}",
        "ticket_ids": list(ticket_ids),
        "append": f"<div>event {pk}</div>",
        "replace": "",
    }


async def test_a_message_behind_one_that_awaits_the_database_waits_for_it(demo, session, monkeypatch, transport):
    """Under daphne a socket takes a fragment as the layer receives it (no task per message), but
    never ahead of a message still queued or being handled: an event that brings a ticket the page
    has not seen waits for the database (may this person still watch?), and what comes meanwhile
    follows it, in order."""
    from channels.layers import get_channel_layer

    from agents_app.consumers import SessionConsumer

    comm = await _socket(session, demo["approver"])
    gate, asked = asyncio.Event(), asyncio.Event()
    checked = SessionConsumer._still_visible

    async def slow_check(self) -> bool:
        asked.set()
        await gate.wait()
        return await checked(self)

    monkeypatch.setattr(SessionConsumer, "_still_visible", slow_check)
    layer, group = get_channel_layer(), fanout.audience_group(session.pk, "approver")
    await layer.group_send(group, _live_event(1_000_001, ticket_ids=(424242,)))  # a ticket not on the page
    await asyncio.wait_for(asked.wait(), 5)  # being handled: awaiting the database
    await layer.group_send(group, _live_event(1_000_002))
    await layer.group_send(group, _live_event(1_000_003))
    assert await comm.receive_nothing(timeout=0.2)  # nothing overtook it
    gate.set()
    got = [await comm.receive_from() for _ in range(3)]
    assert [g.split("event ")[1].split("<")[0] for g in got] == ["1000001", "1000002", "1000003"]
    assert await comm.receive_nothing(timeout=0.2)
    await comm.disconnect()


async def test_under_daphne_a_forwarded_fragment_is_written_in_the_call_that_delivers_it(demo, session, transport):
    """The direct way: the frame is written before the layer's send returns (no task, no queue);
    through ASGI it waits for the consumer's task."""
    from channels.layers import get_channel_layer

    comm = await _socket(session, demo["approver"])
    writer = comm.scope.get("adkweb.frame_writer")
    await get_channel_layer().group_send(fanout.audience_group(session.pk, "approver"), _live_event(1_000_001))
    if transport == "direct":
        assert writer.frames == ["<div>event 1000001</div>"]  # already written
    assert "event 1000001" in await comm.receive_from()
    await comm.disconnect()
