"""A turn's stored events are published while it goes on (agents_app.publish_order.TurnPublisher): ADK's
next step does not wait for the previous event's round trip to the channel layer, and the order
watchers rely on holds: the turn's events in the order stored, a ticket hook's synchronous publishes
after the events stored before its event, the turn's end (`turn.finished`, the status) after every
event. PostgreSQL (the drain's statements) and the Redis channel layer, drains run in this process,
the first event's publish held DELAY seconds."""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from adkweb import live
from agents_app import events as agents_events
from agents_app import publish_order, runner, services, turn_exec
from agents_app.events import session_group
from agents_app.models import StoredEvent, Turn
from tests.agents_app.test_worker_loop import drained  # noqa: F401 - the fixture, used by `sent`

pytestmark = pytest.mark.django_db(transaction=True)
DELAY = 0.3  # the first `session.event` publish, made slow
EACH = 0.0  # or each one (a test sets it)


@pytest.fixture
def sent(demo, drained, monkeypatch: pytest.MonkeyPatch) -> list[dict]:  # noqa: F811
    """Every message published, in the order they left, after warm-up turns (runners built); the
    first batch with a `session.event` then is held DELAY seconds first."""
    for app, text in (("stock_agent", "What is the price of GOOG?"), ("reimbursement_agent", "Please reimburse 5$")):
        warm = services.session_create(app_name=app, user_id="requester")
        services.message_send(session=warm, text=text, streaming=False)
        assert runner.session_turns_run(warm.pk) == 1
    log: list[dict] = []
    held = {"done": False}
    send_async = live._agroup_send_many

    async def slow_first_event(layer: Any, pairs: list, ask: list | None = None, **kwargs: Any) -> set[str]:
        if any(m.get("type") == "session.event" for _, m in pairs) and (EACH or not held["done"]):
            held["done"] = True
            await asyncio.sleep(EACH or DELAY)
        log.extend({**m, "left_at": time.time()} for _, m in pairs)
        return await send_async(layer, pairs, ask, **kwargs)

    monkeypatch.setattr(live, "_agroup_send_many", slow_first_event)
    return log


def _run(app: str, text: str, status: str = "done", *, follower: bool = False) -> tuple[Turn, list[StoredEvent]]:
    """One turn drained; with `follower`, a channel in the session's group from before the turn is
    queued, as an API follower joins it (agents_app.api.run)."""
    session = services.session_create(app_name=app, user_id="requester")
    layer, channel = get_channel_layer(), ""
    if follower:
        channel = async_to_sync(layer.new_channel)()
        async_to_sync(layer.group_add)(session_group(session.pk), channel)
    turn = services.message_send(session=session, text=text, streaming=False)
    assert runner.session_turns_run(session.pk) == 1
    if follower:  # left, as the API's follower leaves (its member lived on in Redis for a day)
        async_to_sync(layer.group_discard)(session_group(session.pk), channel)
    turn.refresh_from_db()
    assert turn.status == status, turn.error
    return turn, list(StoredEvent.objects.filter(session_id=session.pk).order_by("id"))


def _of(log: list[dict], session_pk: int, kind: str) -> list[int]:
    """Positions in the log of the messages of this kind to the session's group."""
    return [i for i, m in enumerate(log) if m.get("type") == kind and m.get("session_pk") == session_pk]


def test_a_turn_goes_on_while_its_events_are_published_in_order_before_its_end(demo, sent):
    turn, stored = _run("stock_agent", "What is the price of GOOG?", follower=True)
    assert len(stored) >= 3
    assert stored[-1].timestamp - stored[0].timestamp < DELAY  # not held up by its first event's publish
    events = _of(sent, turn.session_id, "session.event")
    assert [sent[i]["event_pk"] for i in events] == [e.pk for e in stored]  # each once, in the order stored
    assert [sent[i]["revision"] for i in events] == sorted(sent[i]["revision"] for i in events)
    ahead, end = _of(sent, turn.session_id, "turn.finished")  # for API followers, then the DONE's
    assert sent[ahead].get("ahead") and not sent[end].get("ahead")
    assert ahead > max(events)  # the end after every event
    assert sent[ahead]["revision"] == sent[end]["revision"] == sent[events[-1]]["revision"]
    assert min(_of(sent, turn.session_id, "session.status")[-1:]) > max(events)  # and the status it left


def test_a_turn_nobody_follows_sends_no_end_ahead_of_its_done(demo, sent):
    """Its events' batches counted the session's group empty (they asked who watches): no API
    follower of the turn (one joins before the turn is queued), so only the DONE's end is sent."""
    turn, stored = _run("stock_agent", "What is the price of GOOG?")
    events = _of(sent, turn.session_id, "session.event")
    (end,) = _of(sent, turn.session_id, "turn.finished")
    assert not sent[end].get("ahead") and end > max(events)
    assert sent[end]["revision"] == sent[events[-1]]["revision"]


def test_a_ticket_hooks_publishes_do_not_overtake_the_events_stored_before(demo, sent):
    turn, stored = _run("reimbursement_agent", "Please reimburse 200$ for meals")
    events = _of(sent, turn.session_id, "session.event")
    ticket = _of(sent, turn.session_id, "ticket.changed")
    assert events and ticket
    ticket_event = next(e for e in stored if e.data.get("longRunningToolIds") or e.data.get("long_running_tool_ids"))
    before = [i for i in events if sent[i]["event_pk"] < ticket_event.pk]
    assert before and min(ticket) > max(before)  # the first event's publish was held: the ticket waited
    assert [sent[i]["event_pk"] for i in events] == [e.pk for e in stored]
    assert _of(sent, turn.session_id, "turn.finished")[0] > max(events + ticket)


def test_a_turns_end_is_written_while_its_last_events_are_on_their_way(demo, sent, monkeypatch):
    """The drain's DONE (turn_sql.done_next) does not wait for the turn's publishes: its `turn.finished`
    is queued behind them (each event's publish held here)."""
    monkeypatch.setattr(sys.modules[__name__], "EACH", 0.1)
    turn, stored = _run("stock_agent", "What is the price of GOOG?")
    events = _of(sent, turn.session_id, "session.event")
    assert turn.finished_at.timestamp() < sent[events[-1]]["left_at"]  # done before its last event left
    assert [sent[i]["event_pk"] for i in events] == [e.pk for e in stored]
    assert _of(sent, turn.session_id, "turn.finished")[0] > max(events)


@pytest.fixture
def queued(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the publishes queued on a drain's publisher (`TurnPublisher.put`), in order."""
    names: list[str] = []
    put = publish_order.TurnPublisher.put

    def recorded(self: publish_order.TurnPublisher, publish: Any, kwargs: dict) -> None:
        names.append(publish.__name__)
        put(self, publish, kwargs)

    monkeypatch.setattr(publish_order.TurnPublisher, "put", recorded)
    return names


def _events_answered_before_its_end(monkeypatch: pytest.MonkeyPatch) -> None:
    """A drained turn's end (its ahead `turn.finished`, its DONE) waits until every publish of the turn has
    left and been answered (made sure of, where a test needs it): runner.turn_execute waits for them."""
    execute = runner.turn_execute

    async def then_its_publishes(*args: Any, **kwargs: Any) -> str:
        outcome = await execute(*args, **kwargs)
        await agents_events.publishes_sent()
        return outcome

    monkeypatch.setattr(runner, "turn_execute", then_its_publishes)


def test_a_drains_last_end_leaves_without_the_publishers_task_once_its_events_have_left(
    demo, sent, queued, monkeypatch
):
    """Every event of the turn out when its DONE's reply comes (made sure of here), the drain's last end is
    published there and then (publish_order.apublish_now_or_in_order), not queued on the publisher's task
    the drain would then wait for; still after every event. Its events still on their way, it is queued:
    `test_a_turns_end_is_written_while_its_last_events_are_on_their_way`."""
    _run("stock_agent", "What is the price of GOOG?")  # the fixture's held first event is this turn's
    _events_answered_before_its_end(monkeypatch)
    queued.clear()
    turn, stored = _run("stock_agent", "What is the price of GOOG?")
    assert "anotify_session_event" in queued and "anotify_turn_done" not in queued
    events = _of(sent, turn.session_id, "session.event")
    assert [sent[i]["event_pk"] for i in events] == [e.pk for e in stored]
    (end,) = _of(sent, turn.session_id, "turn.finished")
    assert end > max(events) and sent[end]["revision"] == sent[events[-1]]["revision"]
    assert _of(sent, turn.session_id, "session.status")[-1] > end


def test_a_turn_nobody_follows_queues_no_end_ahead(demo, sent, queued, monkeypatch):
    """Its events' batches counted the session's group empty before it ran to its end (made sure of
    here): the drain does not queue `anotify_turn_ended`, which would send nothing (a task of the
    publisher's for nothing); with a follower it does (`test_a_turn_goes_on_while_...`)."""
    _run("stock_agent", "What is the price of GOOG?")
    _events_answered_before_its_end(monkeypatch)
    queued.clear()
    turn, _ = _run("stock_agent", "What is the price of GOOG?")
    assert "anotify_session_event" in queued and "anotify_turn_ended" not in queued
    (end,) = _of(sent, turn.session_id, "turn.finished")
    assert not sent[end].get("ahead")


def test_a_failed_turns_end_leaves_after_its_events(demo, sent, monkeypatch):
    """A turn that fails once its events are stored: its end goes through the database thread
    (turn_exec.turn_finish, published synchronously), after the events still on their way."""
    run = turn_exec.turn_run

    async def fails_at_its_end(turn: Turn, **kwargs: Any) -> None:
        await run(turn, **kwargs)
        raise RuntimeError("the model went away")

    monkeypatch.setattr(turn_exec, "turn_run", fails_at_its_end)
    turn, stored = _run("stock_agent", "What is the price of GOOG?", status="failed")
    events = _of(sent, turn.session_id, "session.event")
    assert [sent[i]["event_pk"] for i in events] == [e.pk for e in stored]
    (end,) = _of(sent, turn.session_id, "turn.finished")
    assert end > max(events) and sent[end]["status"] == "failed"
