"""Publishing after commit (PostgreSQL, real Redis): a stored event's messages (the ids-only one for
API followers, the page fragment per watching audience) and the question "who watches" leave in
two round trips (adkweb.live.abatched, adkweb.channel_layers.publish), in order, or in one when this
process last heard that a page of the conversation is open (adkweb.watch_hints.seen_watched), then to every
audience; a rolled-back event publishes nothing."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from django.db import transaction
from google.adk.events.event import Event
from google.genai import types

from adkweb import watch_hints
from agents_app import events
from agents_app.events import session_group
from agents_app.fanout import audience_group
from agents_app.session_service import DjangoSessionService

from .test_channel_layer_local import _recorded
from .test_fanout_processes import _layer

pytestmark = pytest.mark.django_db(transaction=True)
APP = "my_app"


@pytest.fixture
def publisher():
    """The layer publishers get (`get_channel_layer`): this test's own instance."""
    from channels.layers import channel_layers

    shared = channel_layers.backends.get("default")
    channel_layers.backends["default"] = layer = _layer()
    yield layer
    if shared is None:
        channel_layers.backends.pop("default", None)
    else:
        channel_layers.backends["default"] = shared


@pytest.fixture(autouse=True)
def _nothing_seen():
    """What this process heard of watched groups before (adkweb.watch_hints._seen) is not this test's."""
    watch_hints._seen.clear()
    yield
    watch_hints._seen.clear()


@pytest.fixture(autouse=True)
async def _close_the_threads_connection():
    """The database connection these tests' sync_to_async thread opened, closed (the test database is
    dropped at the end of the run)."""
    from django.db import connections

    yield
    await sync_to_async(connections.close_all)()


def _text(text: str) -> Event:
    content = types.Content(role="model", parts=[types.Part(text=text)])
    return Event(author="agent", invocation_id="inv", content=content)


async def _watching(session_pk: int) -> tuple[object, str, str]:
    """Another process (a web process) with an API follower on the session's group and an owner's page
    on its audience group."""
    web = _layer()
    follower, page = await web.new_channel(), await web.new_channel()
    await web.group_add(session_group(session_pk), follower)
    await web.group_add(audience_group(session_pk, "owner"), page)
    return web, follower, page


async def _received(layer, channel: str, quiet: float = 0.5) -> list[dict]:
    got = []
    while True:
        try:
            got.append(await asyncio.wait_for(layer.receive(channel), quiet))
        except TimeoutError:
            return got


async def test_a_stored_events_messages_and_its_question_leave_in_two_round_trips(publisher):
    service = DjangoSessionService()
    session = await sync_to_async(service.create_session_sync)(app_name=APP, user_id="u")
    web, follower, page = await _watching(await sync_to_async(_session_pk)(session))
    await publisher.group_send_many([], ["warm-up"])  # the script loaded (EVALSHA, SCRIPT LOAD)
    commands = _recorded(publisher)
    stored = [await service.append_event(session, _text(f"hello {n}")) for n in range(3)]
    ids = [e.id for e in stored]
    followed, shown = await _received(web, follower), await _received(web, page)
    # The first event: the follower's message with the question (are the audiences watched?), then
    # the page fragment for the one audience that is. The next ones: this process heard with that
    # send that the page is open, so the follower's message and the fragment leave together.
    # channels_redis: 4 round trips per message + 3 ZCARDs.
    assert commands == ["EVALSHA", "EVALSHA"] + ["EVALSHA"] * 2, commands
    assert [m["type"] for m in followed] == ["session.event"] * 3
    assert [m["type"] for m in shown] == ["live.event"] * 3
    assert [m["event_id"] for m in shown] == ids  # in the order stored
    assert [m["event_pk"] for m in followed] == [m["event_pk"] for m in shown]
    del publisher.connection(0).execute_command


async def test_a_page_known_open_gets_its_fragment_with_no_question_and_so_does_one_that_just_opened(publisher):
    await publisher.flush()  # no member left in Redis by an earlier test's session of the same pk
    service = DjangoSessionService()
    session = await sync_to_async(service.create_session_sync)(app_name=APP, user_id="u")
    session_pk = await sync_to_async(_session_pk)(session)
    web, _follower, owners = await _watching(session_pk)
    await publisher.group_send_many([], ["warm-up"])
    commands = _recorded(publisher)
    await events.anotify_session_status(session_pk=session_pk, status="running")  # a turn starts
    assert commands == ["EVALSHA"], commands  # its status to every audience, no question first
    approvers = await web.new_channel()  # an approver opens the conversation after that answer
    await web.group_add(audience_group(session_pk, "approver"), approvers)
    first = await service.append_event(session, _text("hello"))
    assert commands == ["EVALSHA"] * 2, commands  # the event: no question, one round trip
    shown = await _received(web, owners)
    assert [m["type"] for m in shown] == ["live.status", "live.event"]
    assert shown[1]["event_id"] == first.id
    # Not in the audience the last answer counted, and still sent its fragment: whoever trusts an
    # answer "watched" sends to every audience.
    assert [m["event_id"] for m in await _received(web, approvers)] == [first.id]
    del publisher.connection(0).execute_command


async def test_a_page_closed_since_the_last_answer_costs_one_render_then_the_question_again(publisher, monkeypatch):
    await publisher.flush()  # no member left in Redis by an earlier test's session of the same pk
    from agents_app import selectors

    service = DjangoSessionService()
    session = await sync_to_async(service.create_session_sync)(app_name=APP, user_id="u")
    session_pk = await sync_to_async(_session_pk)(session)
    web, _follower, page = await _watching(session_pk)
    await service.append_event(session, _text("seen"))  # the answer: the owner's page is open
    await web.group_discard(audience_group(session_pk, "owner"), page)  # closed
    rendered, view = [], selectors.session_event_view
    monkeypatch.setattr(selectors, "session_event_view", lambda **kw: rendered.append(kw) or view(**kw))
    await publisher.group_send_many([], ["warm-up"])
    commands = _recorded(publisher)
    for n in range(3):
        await service.append_event(session, _text(f"after {n}"))
    # The first after the close: rendered (for nobody) on the last answer, whose send counts the
    # page gone; the next ones ask again and render nothing.
    assert commands == ["EVALSHA"] * 3, commands
    assert len(rendered) == 1
    del publisher.connection(0).execute_command


async def test_an_event_nobody_watches_a_page_of_is_published_in_one_round_trip(publisher):
    service = DjangoSessionService()
    session = await sync_to_async(service.create_session_sync)(app_name=APP, user_id="u")
    await publisher.group_send_many([], ["warm-up"])
    commands = _recorded(publisher)
    await service.append_event(session, _text("hello"))
    assert commands == ["EVALSHA"], commands  # nothing rendered, nothing more sent
    del publisher.connection(0).execute_command


async def test_an_event_rolled_back_publishes_nothing(publisher):
    service = DjangoSessionService()
    session = await sync_to_async(service.create_session_sync)(app_name=APP, user_id="u")
    web, follower, page = await _watching(await sync_to_async(_session_pk)(session))

    class Undone(Exception):
        pass

    def store_then_fail() -> None:
        with transaction.atomic():
            service._store_event(session, _text("undone"), None)
            raise Undone

    with pytest.raises(Undone):
        await sync_to_async(store_then_fail)()
    assert await _received(web, follower) == [] and await _received(web, page) == []

    session = await service.get_session(app_name=APP, user_id="u", session_id=session.id)  # as stored

    def store_in_a_transaction() -> None:
        with transaction.atomic():
            service._store_event(session, _text("kept"), None)

    await sync_to_async(store_in_a_transaction)()  # published on its commit
    assert [m["type"] for m in await _received(web, follower)] == ["session.event"]
    assert [m["type"] for m in await _received(web, page)] == ["live.event"]


def _session_pk(session) -> int:
    from agents_app.models import AdkSession

    return AdkSession.objects.only("pk").get(session_id=session.id).pk


async def test_a_turns_events_are_shown_as_stored_without_reading_them_back(publisher, monkeypatch):
    from agents_app import fanout, selectors
    from agents_app.models import AdkSession, Turn
    from agents_app.session_service import current_turn_id, current_turn_invocations

    await publisher.flush()
    service = DjangoSessionService()
    session = await sync_to_async(service.create_session_sync)(app_name=APP, user_id="u")
    row = await AdkSession.objects.aget(session_id=session.id)
    web, _follower, page = await _watching(row.pk)
    turn = await Turn.objects.acreate(session=row, kind="message", content={})
    read_back, view = [], selectors.session_event_view
    monkeypatch.setattr(selectors, "session_event_view", lambda **kw: read_back.append(kw) or view(**kw))
    user = Event(author="user", invocation_id="inv", content=types.Content(role="user", parts=[types.Part(text="hi")]))
    tokens = current_turn_id.set(turn.pk), current_turn_invocations.set(set())
    try:
        stored = [await service.append_event(session, e) for e in (user, _text("hello"))]
    finally:
        current_turn_id.reset(tokens[0])
        current_turn_invocations.reset(tokens[1])
    shown = await _received(web, page)
    assert [m["event_id"] for m in shown] == [e.id for e in stored] and read_back == []  # the user's too
    monkeypatch.setattr(selectors, "session_event_view", view)
    for message in shown:  # the same fragments as from the rows read back
        again = []
        monkeypatch.setattr(fanout, "group_send_each", lambda groups, m, again=again: again.append(m))
        owners = {audience_group(row.pk, "owner")}
        await sync_to_async(fanout.publish_event)(session_pk=row.pk, event_pk=message["event_pk"], watched=owners)
        assert message["append"] and message["append"] == again[0]["append"]
        assert message["replace"] == again[0]["replace"]
