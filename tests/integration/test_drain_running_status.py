"""The drain's "running" status at a claim leaves without holding up the turn and without a round
trip of its own (agents_app.events.anotify_session_status_soon, publish_order.publish_soon): it rides
in the batch of the turn's first event while the turn goes on, leaves alone when no event comes soon,
and the turn's end is
still published after it, also when the turn fails at once. PostgreSQL (the drain's statements) and
the Redis channel layer, drains run in this process."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from adkweb import live, watch_hints
from agents_app import runner, services, turn_exec
from agents_app.models import Turn
from tests.agents_app.test_worker_loop import drained  # noqa: F401 - the fixture, used by `sent`

pytestmark = pytest.mark.django_db(transaction=True)
DELAY = 0.3  # the "running" status's round trip, made slow


@pytest.fixture
def sent(demo, drained, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, float, int]]:  # noqa: F811
    """(message type, when its batch left, the batch's number) of every publish, in the order they left,
    after a first turn that builds the agent's runner; the first batch with a `session.status` then
    (the claim's "running") is held DELAY seconds first."""
    warm = services.session_create(app_name="stock_agent", user_id="requester")
    services.message_send(session=warm, text="What is the price of GOOG?", streaming=False)
    assert runner.session_turns_run(warm.pk) == 1
    log: list[tuple[str, float, int]] = []
    held = {"done": False}
    send_async, send_sync = live._agroup_send_many, live._send_many

    async def slow_first_status(layer: Any, pairs: list, ask: list | None = None, **kwargs: Any) -> set[str]:
        types, left = [m.get("type") for _, m in pairs], time.monotonic()
        if "session.status" in types and not held["done"]:
            held["done"] = True
            await asyncio.sleep(DELAY)
        batch = len({b for _, _, b in log})
        log.extend((str(t), left, batch) for t in types)
        return await send_async(layer, pairs, ask, **kwargs)

    def logged(pairs: list) -> None:
        batch = len({b for _, _, b in log})
        log.extend((str(m.get("type")), time.monotonic(), batch) for _, m in pairs)
        send_sync(pairs)

    monkeypatch.setattr(live, "_agroup_send_many", slow_first_status)
    monkeypatch.setattr(live, "_send_many", logged)
    return log


def _first(log: list[tuple[str, float, int]], kind: str) -> tuple[int, float, int]:
    return next((i, at, batch) for i, (t, at, batch) in enumerate(log) if t == kind)


def test_the_running_status_rides_with_the_first_event_while_the_turn_runs(demo, sent, monkeypatch):
    from agents_app import publish_order
    from agents_app.models import StoredEvent

    monkeypatch.setattr(publish_order, "LEAD_WAIT", 5.0)  # however slow this machine is now
    session = services.session_create(app_name="stock_agent", user_id="requester")
    turn = services.message_send(session=session, text="What is the price of GOOG?", streaming=False)
    assert runner.session_turns_run(session.pk) == 1
    turn.refresh_from_db()
    assert turn.status == "done", turn.error
    status_at, _, status_batch = _first(sent, "session.status")
    event_at, _, event_batch = _first(sent, "session.event")
    assert status_batch == event_batch and status_at < event_at  # one round trip, the status first
    stamps = list(StoredEvent.objects.filter(turn=turn).values_list("timestamp", flat=True))
    assert len(stamps) >= 3 and max(stamps) - min(stamps) < DELAY  # the turn went on while it was held
    ends = [i for i, (t, _, _) in enumerate(sent) if t == "turn.finished"]
    assert ends and min(ends) > status_at  # ... and its end after it


def test_with_no_event_soon_the_running_status_leaves_alone(demo, sent, monkeypatch):
    """A turn whose first event is late (here: its run starts 0.2 s after its claim): the status does
    not wait for it longer than LEAD_WAIT."""
    from agents_app import publish_order

    monkeypatch.setattr(publish_order, "LEAD_WAIT", 0.05)
    run = turn_exec.turn_run

    async def late(turn: Turn, **kwargs: Any) -> None:
        await asyncio.sleep(0.2)
        await run(turn, **kwargs)

    monkeypatch.setattr(turn_exec, "turn_run", late)
    session = services.session_create(app_name="stock_agent", user_id="requester")
    services.message_send(session=session, text="What is the price of GOOG?", streaming=False)
    assert runner.session_turns_run(session.pk) == 1
    status_at, status_left, status_batch = _first(sent, "session.status")
    _, event_left, event_batch = _first(sent, "session.event")
    assert status_batch != event_batch and status_left < event_left  # alone, not held until the event


def test_a_turn_that_fails_at_once_still_publishes_running_before_its_end(demo, sent, monkeypatch):
    async def fails(turn: Turn, **kwargs: Any) -> None:
        raise RuntimeError("the model is down")

    monkeypatch.setattr(turn_exec, "turn_run", fails)
    session = services.session_create(app_name="stock_agent", user_id="requester")
    turn = services.message_send(session=session, text="What is the price of GOOG?", streaming=False)
    runner.session_turns_run(session.pk)
    turn.refresh_from_db()
    assert turn.status == "failed" and "the model is down" in turn.error
    status_at, _, _ = _first(sent, "session.status")
    end_at, _, _ = _first(sent, "turn.finished")
    assert status_at < end_at  # "running" first, then the failed turn's end and status


def test_a_watched_conversations_first_event_leaves_with_its_fragment_in_the_statuss_batch(demo, sent, monkeypatch):
    """A page of the conversation is open (in another process) and this process has not heard of it:
    the claim asks who watches while the turn starts, so the first event's page fragment leaves in the
    batch of the "running" status and the event's message (one round trip before the page gets it),
    not in a second batch after the question's answer."""
    from asgiref.sync import async_to_sync

    from agents_app import publish_order
    from agents_app.fanout import audience_group

    from .test_fanout_processes import _layer

    monkeypatch.setattr(publish_order, "LEAD_WAIT", 5.0)  # the status rides with the first event
    session = services.session_create(app_name="stock_agent", user_id="requester")
    web = _layer()

    async def page_opens() -> None:
        await web.group_add(audience_group(session.pk, "owner"), await web.new_channel())

    async_to_sync(page_opens)()
    watch_hints._seen.clear()  # nothing heard of this conversation's pages
    turn = services.message_send(session=session, text="What is the price of GOOG?", streaming=False)
    assert runner.session_turns_run(session.pk) == 1
    turn.refresh_from_db()
    assert turn.status == "done", turn.error
    _, _, status_batch = _first(sent, "session.status")
    _, _, event_batch = _first(sent, "session.event")
    _, _, fragment_batch = _first(sent, "live.event")
    assert status_batch == event_batch == fragment_batch, sent
    async_to_sync(web.flush)()


def test_the_claims_question_who_watches_is_on_its_way_while_the_claim_is(demo, sent, monkeypatch):
    """The drain asks whether a page of the conversation is open as it sends its claim's statement (held
    here 50 ms), not once it has the turn: the question's work on the loop is done while the statement
    is out, off the turn's way."""
    from agents_app import turn_sql

    asked: list[float] = []
    claimed: list[float] = []
    awatched, astart = live._awatched, turn_sql.astart

    async def watched(layer: Any, groups: list[str]) -> set[str]:
        asked.append(time.monotonic())
        return await awatched(layer, groups)

    async def slow_claim(**kwargs: Any) -> Any:
        await asyncio.sleep(0.05)
        started = await astart(**kwargs)
        claimed.append(time.monotonic())
        return started

    monkeypatch.setattr(live, "_awatched", watched)
    monkeypatch.setattr(turn_sql, "astart", slow_claim)
    watch_hints._seen.clear()  # nothing heard of this conversation's pages: the drain asks
    session = services.session_create(app_name="stock_agent", user_id="requester")
    turn = services.message_send(session=session, text="What is the price of GOOG?", streaming=False)
    assert runner.session_turns_run(session.pk) == 1
    turn.refresh_from_db()
    assert turn.status == "done", turn.error
    assert asked and claimed and asked[0] < claimed[0]


def test_the_claims_question_is_asked_once_the_claim_is_on_its_way(demo, sent, monkeypatch):
    """The question's own work (which groups, whether this process heard of a page lately) runs at the
    loop's next turn, once the claim's statement has left, not before it leaves."""
    from agents_app import events, turn_sql

    order: list[str] = []
    seen, astart = events.seen_watched, turn_sql.astart

    def asked(groups: list[str]) -> bool:
        order.append("asked")
        return seen(groups)

    async def claim(**kwargs: Any) -> Any:
        order.append("claim")
        return await astart(**kwargs)

    monkeypatch.setattr(events, "seen_watched", asked)
    monkeypatch.setattr(turn_sql, "astart", claim)
    watch_hints._seen.clear()
    session = services.session_create(app_name="stock_agent", user_id="requester")
    services.message_send(session=session, text="What is the price of GOOG?", streaming=False)
    assert runner.session_turns_run(session.pk) == 1
    assert order[:2] == ["claim", "asked"]
