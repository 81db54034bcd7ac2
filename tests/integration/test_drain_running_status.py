"""The drain's "running" status at a claim leaves without holding up the turn (agents_app.events.
anotify_session_status_soon): the turn's first event is stored and published while the status is
still on its way, and the turn's end is still published after it, also when the turn fails at once.
PostgreSQL (the drain's statements) and the Redis channel layer, drains run in this process."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from adkweb import live
from agents_app import runner, services, turn_exec
from agents_app.models import Turn
from tests.agents_app.test_worker_loop import drained  # noqa: F401 - the fixture, used by `sent`

pytestmark = pytest.mark.django_db(transaction=True)
DELAY = 0.3  # the "running" status's round trip, made slow


@pytest.fixture
def sent(demo, drained, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, float]]:  # noqa: F811
    """(message type, when it left) of every publish, in the order they left, after a first turn that
    builds the agent's runner; the first batch with a `session.status` then (the claim's "running")
    is held DELAY seconds first."""
    warm = services.session_create(app_name="stock_agent", user_id="requester")
    services.message_send(session=warm, text="What is the price of GOOG?", streaming=False)
    assert runner.session_turns_run(warm.pk) == 1
    log: list[tuple[str, float]] = []
    held = {"done": False}
    send_async, send_sync = live._agroup_send_many, live._send_many

    async def slow_first_status(layer: Any, pairs: list, ask: list | None = None) -> set[str]:
        types = [m.get("type") for _, m in pairs]
        if "session.status" in types and not held["done"]:
            held["done"] = True
            await asyncio.sleep(DELAY)
        log.extend((str(t), time.monotonic()) for t in types)
        return await send_async(layer, pairs, ask)

    def logged(pairs: list) -> None:
        log.extend((str(m.get("type")), time.monotonic()) for _, m in pairs)
        send_sync(pairs)

    monkeypatch.setattr(live, "_agroup_send_many", slow_first_status)
    monkeypatch.setattr(live, "_send_many", logged)
    return log


def _first(log: list[tuple[str, float]], kind: str) -> tuple[int, float]:
    return next((i, at) for i, (t, at) in enumerate(log) if t == kind)


def test_the_turn_runs_while_its_running_status_is_on_its_way(demo, sent):
    session = services.session_create(app_name="stock_agent", user_id="requester")
    turn = services.message_send(session=session, text="What is the price of GOOG?", streaming=False)
    assert runner.session_turns_run(session.pk) == 1
    turn.refresh_from_db()
    assert turn.status == "done", turn.error
    status_at, status_left = _first(sent, "session.status")
    event_at, event_left = _first(sent, "session.event")
    assert event_left < status_left  # the turn's events went out while the status was held
    ends = [i for i, (t, _) in enumerate(sent) if t == "turn.finished"]
    assert ends and min(ends) > status_at  # ... and its end after it


def test_a_turn_that_fails_at_once_still_publishes_running_before_its_end(demo, sent, monkeypatch):
    async def fails(turn: Turn, **kwargs: Any) -> None:
        raise RuntimeError("the model is down")

    monkeypatch.setattr(turn_exec, "turn_run", fails)
    session = services.session_create(app_name="stock_agent", user_id="requester")
    turn = services.message_send(session=session, text="What is the price of GOOG?", streaming=False)
    runner.session_turns_run(session.pk)
    turn.refresh_from_db()
    assert turn.status == "failed" and "the model is down" in turn.error
    status_at, _ = _first(sent, "session.status")
    end_at, _ = _first(sent, "turn.finished")
    assert status_at < end_at  # "running" first, then the failed turn's end and status
