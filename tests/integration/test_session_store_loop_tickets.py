"""The session store's statements from the event loop (agents_app.session_async, PostgreSQL) for the
events the ticket hook wants: the rider's writes (a ticket opened, its outbox row) go in the append's
statement, from the loop too, and nothing the contract requires changes: a ticket is announced after
its event, once; a failure after the event's insert stores neither and announces nothing; a stale copy
or a lost lease opens no ticket; an outbox task whose enqueue failed is sent by the sweeper; a policy
added since the loop read them stores nothing and the hook applies it; inside a caller's transaction,
the hook's event is stored in it. The store's own statements from the loop: test_session_store_loop.py."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.db import connection, transaction
from django.utils import timezone
from google.adk.errors._stale_session_error import StaleSessionError

from agents_app.models import AdkSession, StoredEvent
from agents_app.session_service import DjangoSessionService
from tests.conftest import wait_for

from .test_session_store_loop import _append_after_a_takeover, _events, _no_hooks, _text, batches_seen, sent
from .test_ticket_rider import APP as TICKET_APP
from .test_ticket_rider import USER, _call, _response, _warm

pytestmark = pytest.mark.django_db(transaction=True)
__all__ = ["_no_hooks"]  # its autouse fixture: no event hook but the one a test sets


def _committed(ticket_id: int) -> bool:
    """Whether the ticket is there for another connection (committed)."""
    from approvals.models import PendingCall

    db = connection.settings_dict["NAME"]
    with psycopg.connect(f"dbname={db} user=postgres host=127.0.0.1", autocommit=True) as other:
        sql = f"SELECT 1 FROM {PendingCall._meta.db_table} WHERE id = %s"
        return other.execute(sql, [ticket_id]).fetchone() is not None


@pytest.fixture
def tickets(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, tuple]]:
    """The approvals hook (its filter and rider) and this process's policies read; the broker's sends,
    recorded instead of sent (the outbox's task)."""
    from adkweb.celery import app
    from agents_app import session_hooks
    from approvals.services import tickets_record_event

    monkeypatch.setattr(session_hooks, "_event_hooks", [tickets_record_event])
    _warm(DjangoSessionService())
    connection.close()
    sends: list[tuple[str, tuple]] = []
    monkeypatch.setattr(app, "send_task", lambda name, args=(), **kwargs: sends.append((name, tuple(args))))
    return sends


def _pk(session: Any) -> int:
    return int(session._storage_update_marker.split(":")[0])


async def _watch(monkeypatch: pytest.MonkeyPatch, session_pk: int) -> tuple[str, list[bool]]:
    """A watcher of the conversation's group (as a page or an API follower is), and, for each
    ticket.changed the process publishes, whether its ticket was committed at that moment."""
    from channels.layers import get_channel_layer

    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(f"session-{session_pk}", channel)
    committed: list[bool] = []

    def check(pairs: Any) -> None:
        for _, message in pairs:
            if message["type"] == "ticket.changed":
                committed.append(_committed(message["ticket_id"]))

    batches_seen(monkeypatch, check)
    return channel, committed


async def _until_finished(channel: str) -> list[tuple[str, Any]]:
    """What the watcher receives up to a turn's end, and nothing after it."""
    from channels.layers import get_channel_layer

    layer, got = get_channel_layer(), []
    while not got or got[-1][0] != "turn.finished":
        message = await asyncio.wait_for(layer.receive(channel), 5)
        got.append((message["type"], message.get("ticket_id", message.get("event_pk"))))
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(layer.receive(channel), 0.3)
    return got


async def test_a_ticket_opens_with_its_event_from_the_loop_and_is_announced_after_it_once(
    service, tickets, monkeypatch
):
    from adkweb.live import abatched, agroup_send
    from approvals.models import PendingCall
    from notifications.models import NotificationEvent

    session = await service.create_session(app_name=TICKET_APP, user_id=USER)
    channel, committed = await _watch(monkeypatch, _pk(session))
    threads: list[Any] = []
    monkeypatch.setattr(service, "_store_event", lambda *args, **kwargs: threads.append(args))
    with sent(monkeypatch) as seen:
        call = await service.append_event(session, _call("c1"))
        await service.append_event(session, _response("c1", {"status": "pending"}))
    assert threads == [] and [sql.split()[:3] for sql in seen["loop"]] == [["WITH", "u", "AS"]] * 2, seen
    # What the turn's end publishes next (agents_app.events.anotify_turn_finished, a batch) comes after it all.
    async with abatched():
        await agroup_send(f"session-{_pk(session)}", {"type": "turn.finished"})
    ticket = await PendingCall.objects.select_related("event").aget(call_id="c1")
    events = [pk async for pk in StoredEvent.objects.filter(session_id=_pk(session)).values_list("pk", flat=True)]
    assert await _until_finished(channel) == [
        ("session.event", events[0]),
        ("ticket.changed", ticket.pk),
        ("session.event", events[1]),
        ("ticket.changed", ticket.pk),  # its initial response
        ("turn.finished", None),
    ]
    assert committed == [True, True]
    assert ticket.event.event_id == call.id and ticket.initial_response == {"status": "pending"}
    assert (await AdkSession.objects.aget(pk=_pk(session))).status == "waiting"
    outbox = [pk async for pk in NotificationEvent.objects.filter(ticket=ticket).values_list("pk", flat=True)]
    await sync_to_async(wait_for)(lambda: tickets, timeout=5, what="the outbox's task")
    await asyncio.sleep(0.2)
    assert tickets == [("notifications.tasks.event_fan_out", (outbox[0],))]  # once


async def test_a_ticket_opened_from_the_loop_asks_about_the_inbox_with_its_events_question(service, tickets):
    """Nobody watches: the event's message with the questions (its pages, and the inbox the ticket's
    announcement asks about: `Rider.asks`, adkweb.live.ask_also), then the ticket's message: two
    batches, where the inbox's question took a round trip of its own."""
    from channels.layers import get_channel_layer

    from adkweb import watch_hints

    from .test_channel_layer_local import _recorded

    watch_hints._seen.clear()
    session = await service.create_session(app_name=TICKET_APP, user_id=USER)
    asked: list[list[str]] = []
    layer = get_channel_layer()
    real = layer.group_send_many

    async def send_many(pairs: Any, ask: Any = ()) -> Any:
        asked.append(list(ask))
        return await real(pairs, ask)

    layer.group_send_many = send_many
    commands = _recorded(layer)
    try:
        await service.append_event(session, _call("c1"))
    finally:
        del layer.group_send_many, layer._run_script, layer.connection(0).execute_command
    assert commands == ["EVALSHA", "EVALSHA"], commands
    assert len(asked) == 1 and "approvals" in asked[0], asked


async def test_a_ticket_opened_unwatched_has_its_outbox_task_started_first_and_its_facts_written_with_the_batches(
    service, tickets, monkeypatch
):
    """Nobody watches the inbox: once the statement has committed the outbox's task is started (on a
    thread) before the event's batch leaves, and the ticket's facts are written on the layer's own
    connection after its batches, not through redis.asyncio's client and not waited for: in Redis
    once what the loop wrote has been answered (`apublished`)."""
    import json

    import redis
    from channels.layers import get_channel_layer
    from django.conf import settings

    from adkweb import live, notify, watch_hints
    from approvals import fanout
    from approvals.models import PendingCall

    watch_hints._seen.clear()
    session = await service.create_session(app_name=TICKET_APP, user_id=USER)
    order: list[str] = []
    layer = get_channel_layer()
    real_committed = notify.committed_soon

    async def command_soon(*args: Any) -> bool:
        order.append(str(args[0]))
        return await type(layer).command_soon(layer, *args)

    def committed_soon(outbox: Any, row_id: int) -> None:
        order.append("outbox")
        real_committed(outbox, row_id)

    def no_client() -> Any:
        raise AssertionError("redis.asyncio's client")

    batches_seen(monkeypatch, lambda pairs: order.append("batch"))
    monkeypatch.setattr(layer, "command_soon", command_soon, raising=False)
    monkeypatch.setattr(notify, "committed_soon", committed_soon)
    monkeypatch.setattr(fanout, "_aredis", no_client)
    await service.append_event(session, _call("c1"))
    await live.apublished()
    assert order == ["outbox", "batch", "SET", "batch"], order
    ticket = await PendingCall.objects.aget(call_id="c1")
    stored = redis.Redis.from_url(settings.REDIS_URL).get(fanout._key(ticket))
    assert stored is not None and json.loads(stored) == fanout._opened_facts(ticket)
    await sync_to_async(wait_for)(lambda: tickets, timeout=5, what="the outbox's task")


async def test_a_failure_after_the_event_insert_stores_neither_and_announces_nothing(service, tickets, monkeypatch):
    """The ticket's INSERT fails after the event's, in the same statement: neither is stored, the copy
    stays current, nothing is published or enqueued."""
    from django.db import IntegrityError

    from approvals.models import PendingCall

    session = await service.create_session(app_name=TICKET_APP, user_id=USER)
    channel, _ = await _watch(monkeypatch, _pk(session))
    check = f"ALTER TABLE {PendingCall._meta.db_table} ADD CONSTRAINT no_boom CHECK (call_id <> 'boom')"
    await sync_to_async(_execute)(check)
    try:
        with pytest.raises(IntegrityError):
            await service.append_event(session, _call("boom"))
    finally:
        await sync_to_async(_execute)(f"ALTER TABLE {PendingCall._meta.db_table} DROP CONSTRAINT no_boom")
    assert await _events(session.id) == [] and not await PendingCall.objects.filter(call_id="boom").aexists()
    from adkweb.live import abatched, agroup_send

    async with abatched():  # as the turn's end publishes
        await agroup_send(f"session-{_pk(session)}", {"type": "turn.finished"})
    assert await _until_finished(channel) == [("turn.finished", None)]
    await service.append_event(session, _text("the copy is still current"))
    assert tickets == []


def _execute(sql: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(sql)
    connection.close()


async def test_a_stale_copy_or_a_lost_lease_opens_no_ticket_from_the_loop(service, tickets):
    from approvals.models import PendingCall

    session = await service.create_session(app_name=TICKET_APP, user_id=USER, session_id="s")
    stale = await service.get_session(app_name=TICKET_APP, user_id=USER, session_id="s")
    await service.append_event(session, _text("first"))
    with pytest.raises(StaleSessionError):
        await service.append_event(stale, _call("from-stale"))
    await _append_after_a_takeover(service, session, _call("after-the-takeover"))
    assert len(await _events("s")) == 1
    assert not await PendingCall.objects.filter(session_id=_pk(session)).aexists()
    assert tickets == []


async def test_an_outbox_task_whose_enqueue_failed_is_sent_by_the_sweeper(service, tickets, monkeypatch):
    """The outbox row is committed with the ticket and stays owed until its task runs: an enqueue that
    fails (or a process that dies before it) leaves it to the sweeper (beat, every 15 s)."""
    from adkweb.celery import app
    from notifications.models import NotificationEvent
    from notifications.services import SWEEP_GRACE, notifications_sweep

    tried: list[tuple] = []

    def broker_down(name: str, args: Any = (), **kwargs: Any) -> None:
        tried.append(tuple(args))
        raise ConnectionError("the broker is down")

    monkeypatch.setattr(app, "send_task", broker_down)
    session = await service.create_session(app_name=TICKET_APP, user_id=USER)
    await service.append_event(session, _call("c1"))
    await sync_to_async(wait_for)(lambda: tried, timeout=5, what="the outbox's enqueue")
    owed = NotificationEvent.objects.filter(ticket__call_id="c1", fanned_out_at__isnull=True)
    assert [pk async for pk in owed.values_list("pk", flat=True)] == [tried[0][0]]
    await owed.aupdate(created_at=timezone.now() - SWEEP_GRACE * 2)  # older than the sweeper's grace
    monkeypatch.setattr(app, "send_task", lambda name, args=(), **kwargs: tickets.append((name, tuple(args))))
    await sync_to_async(notifications_sweep)()
    assert ("notifications.tasks.event_fan_out", tried[0]) in tickets


async def test_a_policy_added_since_they_were_read_stores_nothing_from_the_loop_and_the_hook_applies_it(
    service, tickets
):
    from approvals.models import PendingCall, Policy

    await Policy.objects.acreate(name="two", tool="ask_for_approval", required_approvals=2)  # not in the cache
    session = await service.create_session(app_name=TICKET_APP, user_id=USER)
    await service.append_event(session, _call("c1"))
    ticket = await PendingCall.objects.aget(call_id="c1")
    assert (ticket.policy_name, ticket.required_approvals) == ("two", 2)
    assert len(await _events(session.id)) == 1


def test_a_hook_event_inside_a_callers_transaction_is_stored_in_it(tickets):
    """Through async_to_sync inside the caller's transaction, the ticket opens in that transaction
    (the thread path, on the caller's connection) and is rolled back with it."""
    from approvals.models import PendingCall

    service = DjangoSessionService()

    class Rollback(Exception):
        pass

    service.create_session_sync(app_name=TICKET_APP, user_id=USER, session_id="inside")  # committed
    with pytest.raises(Rollback), transaction.atomic():
        session = async_to_sync(service.get_session)(app_name=TICKET_APP, user_id=USER, session_id="inside")
        async_to_sync(service.append_event)(session, _call("in-the-transaction"))
        assert PendingCall.objects.filter(call_id="in-the-transaction").exists()
        raise Rollback
    assert not PendingCall.objects.filter(call_id="in-the-transaction").exists()
    assert not StoredEvent.objects.filter(session__session_id="inside").exists()
    connection.close()
