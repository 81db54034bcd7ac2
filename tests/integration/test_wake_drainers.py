"""The worker's wake-up drainers (agents_app.wake_drainers, started by the bootstep
agents_app.wake_worker.WakeStep): a woken drain runs on the drainer thread that popped its wake-up,
on that drainer's loop, with nothing handed to Celery's pool; a stop waits for the drain running and
leaves a wake-up pushed meanwhile in the list; a drainer whose loop fails, or whose drain ends
cancelled, goes on popping. The bootstep runs here in-process, on a worker double with a threads pool
(PostgreSQL, Redis: a list of the test's own). A real worker's: test_wake.py."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any

import pytest
from celery import signals

from agents_app import runner, services, wake, worker_loop
from agents_app.models import Turn
from agents_app.wake_worker import WakeStep
from tests.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)
QUEUE = "test-drainers"
KEY = wake.KEY_PREFIX + QUEUE


class _Pool:
    """Celery's threads pool as the bootstep sees it: its executor (counting what it is given), its limit."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.submitted: list[Any] = []
        self._executor = ThreadPoolExecutor(limit)
        self.executor = SimpleNamespace(submit=self._submit)

    def _submit(self, fn: Any, *args: Any) -> Any:
        self.submitted.append(fn)
        return self._executor.submit(fn, *args)


@pytest.fixture
def step(settings, monkeypatch, demo):
    """Start the bootstep on a worker double of `limit` threads; drains record their thread; stopped
    (and the list emptied) at the end."""
    settings.ADKWEB_WAKE_LIST = True
    monkeypatch.setattr("agents_app.enqueue.session_enqueue", lambda **kw: True)  # woken by the test
    r = wake.client()
    r.delete(KEY)
    ran_on: list[str] = []
    drain = runner._drain

    async def recorded(session_pk: int) -> int:
        ran_on.append(threading.current_thread().name)
        return await drain(session_pk)

    monkeypatch.setattr(runner, "_drain", recorded)
    started: list[tuple[WakeStep, Any]] = []

    def start(limit: int = 2) -> tuple[WakeStep, Any]:
        queues = SimpleNamespace(consume_from={QUEUE: None})
        worker = SimpleNamespace(app=SimpleNamespace(amqp=SimpleNamespace(queues=queues)), pool=_Pool(limit))
        wake_step = WakeStep(worker)
        wake_step.start(worker)
        started.append((wake_step, worker))
        return wake_step, worker

    start.ran_on = ran_on  # type: ignore[attr-defined]
    start.redis = r  # type: ignore[attr-defined]
    yield start
    for wake_step, worker in started:
        wake_step.stop(worker)
        worker.pool._executor.shutdown(wait=True)
    r.delete(KEY)


def _queued(text: str = "What is the price of GOOG?") -> Turn:
    session = services.session_create(app_name="stock_agent", user_id="requester")
    return services.message_send(session=session, text=text, streaming=False)


def _status(turn: Turn) -> str:
    return Turn.objects.values_list("status", flat=True).get(pk=turn.pk)


def _failed_then_next_runs(step: Any, failed: list[int]) -> Turn:
    """A turn's wake-up pushed and popped, its drain failing (`failed` filled), then another turn's pushed,
    which runs (the drainer went on); the first turn."""
    first, turn = _queued(), _queued()
    step.redis.rpush(KEY, first.session_id)
    wait_for(lambda: failed and step.redis.llen(KEY) == 0, timeout=20, what="the failing pop")
    step.redis.rpush(KEY, turn.session_id)
    wait_for(lambda: _status(turn) == "done", timeout=20, what="the next wake-up's turn to run")
    return first


def test_a_woken_drain_runs_on_the_drainer_that_popped_it_not_on_celerys_pool(step):
    _, worker = step()
    turns = [_queued() for _ in range(3)]
    for turn in turns:
        step.redis.rpush(KEY, turn.session_id)
        wait_for(lambda t=turn: _status(t) == "done", timeout=20, what="the woken turn to run")
    assert worker.pool.submitted == []  # nothing handed to Celery's pool
    assert len(step.ran_on) == 3
    assert all(name.startswith("adkweb-drain-") for name in step.ran_on), step.ran_on
    assert step.redis.llen(KEY) == 0


def test_a_stop_waits_for_the_running_drain_and_leaves_a_later_wake_up(step, monkeypatch):
    wake_step, worker = step()
    gate = threading.Event()
    drain = runner._drain

    async def held(session_pk: int) -> int:
        gate.set()
        await asyncio.sleep(1.0)  # the drain's loop is free meanwhile, the drain is not done
        return await drain(session_pk)

    monkeypatch.setattr(runner, "_drain", held)
    running, later = _queued(), _queued()
    step.redis.rpush(KEY, running.session_id)
    assert gate.wait(20), "the drain did not start"
    signals.worker_shutting_down.send(sender=None, sig="SIGTERM", how="Warm", exitcode=0)  # the shutdown's start
    step.redis.rpush(KEY, later.session_id)
    time.sleep(0.2)
    stop_started = time.monotonic()
    wake_step.stop(worker)
    assert _status(running) == "done", "the stop returned before the running drain ended"
    assert time.monotonic() - stop_started < 10
    assert _status(later) == "queued"
    assert step.redis.lrange(KEY, 0, -1) == [str(later.session_id).encode()]  # left for another worker


def test_a_drainer_whose_loop_fails_goes_on(step, monkeypatch, caplog):
    """One drainer (limit 1): its loop raises once, after its pop (that wake-up is lost: the sweeper
    brings such turns back); it logs that and pops the next wake-up."""
    run_here = worker_loop.run_here
    failed: list[int] = []

    def failing_once(coro: Any, then: Any = None) -> Any:
        if not failed:
            failed.append(1)
            coro.close()
            raise RuntimeError("a drainer's loop failed")
        return run_here(coro, then)

    monkeypatch.setattr(worker_loop, "run_here", failing_once)
    _, worker = step(limit=1)
    lost = _failed_then_next_runs(step, failed)
    assert "A wake-up drainer failed; it goes on." in caplog.text
    assert _status(lost) == "queued"  # its wake-up gone with the failure: the sweeper's
    assert worker.pool.submitted == []


def test_a_drain_that_ends_cancelled_is_logged_and_its_drainer_goes_on(step, monkeypatch, caplog):
    """One drainer (limit 1): a drain whose task ends in asyncio.CancelledError (a BaseException: a
    library's cancel scope, a future someone cancelled) is logged as a failed drain, as any other
    exception of a drain is; the drainer pops the next wake-up. Red before: the CancelledError went
    through the drainer's loop and ended its thread (`_live` catches Exception only): no drainer left."""
    drain = runner._drain
    cancelled: list[int] = []

    async def cancelled_once(session_pk: int) -> int:
        if not cancelled:
            cancelled.append(session_pk)
            raise asyncio.CancelledError
        return await drain(session_pk)

    monkeypatch.setattr(runner, "_drain", cancelled_once)
    _, worker = step(limit=1)
    first = _failed_then_next_runs(step, cancelled)
    assert f"Drain of session {first.session_id} (woken) failed" in caplog.text
    assert worker.pool.submitted == []
