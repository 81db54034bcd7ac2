"""Wake-ups (agents_app.wake, ADKWEB_WAKE_LIST, on in services mode): after a turn's commit the web
pushes the session's id to a Redis list and a drainer thread in each real `celery worker` process pops
it and runs the drain at once on its own loop. What a deployment relies on, with real processes on a
Redis of the test's own and default engine settings: the turn runs without Celery's message; a wake-up waits for
a worker started later (a list nobody pops keeps only its newest wake-ups, and loses no turn); a
worker killed after popping one loses no turn (the sweeper brings it back through Celery's task);
several wake-ups for one session run its turn once; a busy worker leaves wake-ups to an idle one
(never more drains than its concurrency); a warm shutdown waits for the running turn and leaves later
wake-ups to the next worker; a worker's drainers reconnect after Redis restarts. (Decisions during
an outage: test_redis_outage.py, whose web server wakes workers this way.)"""

from __future__ import annotations

import time

import psycopg
import pytest
import redis

from agents_app import services, wake
from agents_app.models import AdkSession, StoredEvent, Turn
from tests.conftest import wait_for
from tests.engine_scenarios import crashy

from . import processes

pytestmark = pytest.mark.django_db(transaction=True)
KEY = "adkweb:wake:agents"
SLOW = 4.0  # seconds a `slow` turn's tool sleeps


@pytest.fixture
def stack(tmp_path, settings, monkeypatch, demo):
    """Own Redis (this process's wake-ups go there), workers and beat started on demand."""
    with processes.crashy_services(tmp_path, settings, monkeypatch, SLOW) as (env, server, started):

        def start(kind: str, concurrency: int = 8) -> processes.Service:
            service = processes.worker(env, concurrency) if kind == "worker" else processes.beat(env)
            started.append(service.start())
            return service

        start.redis = redis.Redis.from_url(server.url)  # type: ignore[attr-defined]
        start.server = server  # type: ignore[attr-defined]
        yield start


def _send(demo, text: str) -> tuple[AdkSession, Turn]:
    session = services.session_create(app_name=crashy.APP_NAME, user_id="requester")
    return session, services.message_send(session=session, text=text, actor=demo["requester"], streaming=False)


def _status(turn: Turn) -> str:
    return Turn.objects.values_list("status", flat=True).get(pk=turn.pk)


def _ran_once(session: AdkSession, turn: Turn, tool: str, label: str) -> None:
    turn.refresh_from_db()
    assert turn.status == "done", (turn.status, turn.error)
    assert [e[:2] for e in crashy.executions() if e[1] == label] == [(tool, label)]
    ids = list(StoredEvent.objects.filter(session=session).values_list("event_id", flat=True))
    assert len(ids) == len(set(ids))


def test_a_turn_runs_on_its_wake_up_without_celerys_message(demo, stack):
    worker = stack("worker")
    stack.redis.rpush(KEY, "not-a-session")  # not ours: dropped, the drainers go on
    session, turn = _send(demo, "work a")
    wait_for(lambda: _status(turn) == "done", timeout=20, what="the turn to run")
    _ran_once(session, turn, "side_effect", "a")
    assert stack.redis.llen(KEY) == 0
    assert "session_drain[" not in worker.text()  # Celery logs every task it receives: none was sent
    assert f"Wake-up drainers on {KEY}" in worker.text()


def test_a_worker_started_after_the_wake_up_runs_the_turn(demo, stack):
    session, turn = _send(demo, "work late")
    assert stack.redis.lrange(KEY, 0, -1) == [str(session.pk).encode()]
    time.sleep(1)
    assert _status(turn) == "queued"
    stack("worker")
    wait_for(lambda: _status(turn) == "done", timeout=20, what="the new worker to run the waiting turn")
    _ran_once(session, turn, "side_effect", "late")


def test_a_list_nobody_pops_keeps_its_newest_wake_ups_and_loses_no_turn(demo, stack, monkeypatch):
    """No worker listens (e.g. a pool other than threads): the list keeps only the newest `KEEP`
    wake-ups instead of growing by one a turn; the turns whose wake-ups were dropped are still
    owed, and run once through the sweeper when workers come."""
    monkeypatch.setattr(wake, "KEEP", 2)
    sent = [_send(demo, f"work kept{i}") for i in range(4)]
    assert stack.redis.lrange(KEY, 0, -1) == [str(s.pk).encode() for s, _ in sent[2:]]
    stack("worker")
    stack("beat")
    for i, (session, turn) in enumerate(sent):
        wait_for(lambda t=turn: _status(t) == "done", timeout=100, what=f"turn {i} to run")
        _ran_once(session, turn, "side_effect", f"kept{i}")


def test_a_worker_killed_after_popping_a_wake_up_loses_no_turn(demo, stack, monkeypatch):
    """The worker pops the wake-up, its claim waits on the turn's row (held here), it is killed
    there: the wake-up is gone with it; the sweeper (beat) has a new worker run the turn, once."""
    first = stack("worker")
    stack("beat")
    session = services.session_create(app_name=crashy.APP_NAME, user_id="requester")
    with monkeypatch.context() as m:
        m.setattr("agents_app.enqueue.session_enqueue", lambda *, session_pk: True)  # woken below, the row held
        turn = services.message_send(session=session, text="work popped", actor=demo["requester"], streaming=False)
    holder = psycopg.connect(processes.database_url())
    holder.execute("SELECT id FROM agents_app_turn WHERE id = %s FOR UPDATE", [turn.pk])
    try:
        wake.wake(session.pk)  # what session_enqueue does
        wait_for(lambda: stack.redis.llen(KEY) == 0, timeout=20, what="the worker to pop the wake-up")
        wait_for(lambda: _waiting_on_a_lock() >= 1, timeout=20, what="the claim to wait")
        first.kill()
    finally:
        holder.rollback()
        holder.close()
    killed_at = time.time()
    stack("worker")
    wait_for(lambda: _status(turn) == "done", timeout=100, what="the sweeper to get the turn run")
    print(f"the turn finished {time.time() - killed_at:.1f} s after the kill")
    _ran_once(session, turn, "side_effect", "popped")


def _waiting_on_a_lock() -> int:
    sql = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
    with psycopg.connect(processes.database_url(), autocommit=True) as conn:
        row = conn.execute(sql).fetchone()
    return row[0] if row else 0


def test_several_wake_ups_for_one_session_run_its_turn_once(demo, stack):
    stack("worker", concurrency=2)
    stack("worker", concurrency=2)
    session, turn = _send(demo, "slow twice")
    stack.redis.rpush(KEY, session.pk, session.pk, session.pk)  # e.g. the sweeper's and retries
    wait_for(lambda: stack.redis.llen(KEY) == 0, timeout=20, what="every wake-up to be popped")
    wait_for(lambda: _status(turn) == "done", timeout=30, what="the turn to run")
    time.sleep(1)
    _ran_once(session, turn, "slow_tool", "twice")
    assert Turn.objects.get(pk=turn.pk).attempts == 1


def test_a_busy_worker_leaves_wake_ups_to_an_idle_one(demo, stack):
    """A worker pops no more wake-ups than it has free slots (its concurrency): the rest wait in
    the list for another worker, which runs them at once."""
    stack("worker", concurrency=1)
    sent = [_send(demo, f"slow busy{i}") for i in range(3)]
    turns = [t for _, t in sent]
    wait_for(lambda: sum(_status(t) == "running" for t in turns) == 1, timeout=20, what="one turn to start")
    for _ in range(10):  # for a while: one runs, two wait in the list
        assert sum(_status(t) == "running" for t in turns) == 1
        assert stack.redis.llen(KEY) == 2
        time.sleep(0.2)
    started = time.monotonic()
    stack("worker", concurrency=2)
    wait_for(lambda: all(_status(t) == "done" for t in turns), timeout=60, what="every turn to run")
    took = time.monotonic() - started
    assert took < 2 * SLOW + 15, f"the idle worker did not take the waiting turns at once ({took:.1f} s)"
    for i, (session, turn) in enumerate(sent):
        _ran_once(session, turn, "slow_tool", f"busy{i}")


def test_a_warm_shutdown_waits_for_the_running_turn_and_leaves_later_wake_ups(demo, stack):
    worker = stack("worker")
    session, turn = _send(demo, "slow stop")
    wait_for(lambda: _status(turn) == "running", timeout=20, what="the turn to start")
    assert worker.proc is not None
    worker.proc.terminate()  # SIGTERM: Celery's warm shutdown
    time.sleep(0.5)
    later, later_turn = _send(demo, "work after")
    code = worker.proc.wait(timeout=60)
    assert code == 0, worker.text()[-3000:]
    _ran_once(session, turn, "slow_tool", "stop")  # finished, not cut short
    assert _status(later_turn) == "queued", worker.text()[-5000:]
    assert stack.redis.lrange(KEY, 0, -1) == [str(later.pk).encode()]  # left for the next worker
    stack("worker")
    wait_for(lambda: _status(later_turn) == "done", timeout=20, what="the next worker to run it")
    _ran_once(later, later_turn, "side_effect", "after")


def test_the_drainers_reconnect_after_redis_restarts(demo, stack):
    """Redis goes away under an idle worker and comes back: the next wake-up is heard (no beat here:
    nothing else would run the turn)."""
    worker = stack("worker")
    stack.server.stop()
    wait_for(lambda: "Redis unreachable" in worker.text(), timeout=20, what="the drainers to notice")
    time.sleep(1.5)
    stack.server.start()
    session, turn = _send(demo, "work back")
    wait_for(lambda: _status(turn) == "done", timeout=20, what="the turn to run after Redis came back")
    _ran_once(session, turn, "side_effect", "back")
