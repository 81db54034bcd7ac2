"""The run lease kept by one thread per worker process (agents_app.leases: `_Keeper`), with a real
`celery worker` on PostgreSQL and a Redis of the test's own, short leases (2 s, renewed every
0.4 s) and a tool that sleeps longer than that. The test process plays the other worker: it tries
to drain the same sessions meanwhile (as the sweeper's redelivered drains would).

- a live worker keeps each lease across several drains, one after another in the same process:
  the other worker never gets one, every tool runs once;
- a stopped worker (SIGSTOP: a paused VM, a process stuck in the kernel) renews nothing: its lease
  runs out, the other worker resumes the turn, and the stopped one, continued, stores nothing more;
- a turn past its hard time limit (its loop blocked by a tool) is renewed no more: the other worker
  takes the session once the lease runs out.
"""

from __future__ import annotations

import signal
import time
from datetime import datetime

import pytest
from django.utils import timezone

from agents_app import runner, services
from agents_app.models import AdkSession, StoredEvent, Turn
from tests.conftest import wait_for
from tests.engine_scenarios import agent_texts, calls, crashy, responses

from . import processes

pytestmark = pytest.mark.django_db(transaction=True)

LEASE = {"ADKWEB_SESSION_LEASE_SECONDS": "2", "ADKWEB_LEASE_RENEW_SECONDS": "0.4"}
SLOW = 6.0  # seconds the worker's slow tool sleeps: three leases


@pytest.fixture
def services_env(tmp_path, settings, monkeypatch, demo):
    monkeypatch.setenv("ADKWEB_TEST_SLOW_SECONDS", "0.5")  # the test process's own takeovers
    with processes.crashy_services(tmp_path, settings, monkeypatch, SLOW) as (env, server, started):

        def worker(**extra: str) -> processes.Service:
            service = processes.worker({**env, **LEASE, **extra}, concurrency=1)
            started.append(service.start())
            return service

        yield worker


def _send(demo, text: str) -> tuple[AdkSession, Turn]:
    session = services.session_create(app_name=crashy.APP_NAME, user_id="requester")
    return session, services.message_send(session=session, text=text, actor=demo["requester"], streaming=False)


def _lease(session: AdkSession) -> tuple[str, datetime | None]:
    return AdkSession.objects.values_list("lease_owner", "lease_expires_at").get(pk=session.pk)


def _status(turn: Turn) -> str:
    return Turn.objects.values_list("status", flat=True).get(pk=turn.pk)


def test_a_live_worker_keeps_each_lease_across_several_drains(demo, services_env):
    services_env()  # one pool thread: the three sessions are three drains, one after another
    sent = [_send(demo, f"slow keep{i}") for i in range(3)]
    expiries: dict[int, set[datetime]] = {s.pk: set() for s, _ in sent}
    taken = 0
    deadline = time.monotonic() + 60
    while not all(_status(t) == "done" for _, t in sent):
        assert time.monotonic() < deadline, [_status(t) for _, t in sent]
        for session, _ in sent:
            owner, until = _lease(session)
            if owner:  # held: the other worker tries it (a queued turn not yet claimed is the worker's)
                expiries[session.pk].add(until)
                taken += runner.session_turns_run(session.pk)
        time.sleep(0.1)
    assert taken == 0
    for i, (session, _) in enumerate(sent):
        label = f"keep{i}"
        assert [e[:2] for e in crashy.executions() if e[1] == label] == [("slow_tool", label)]
        assert agent_texts(session) == [f"done {label}"]
        assert len(expiries[session.pk]) >= 6, expiries  # renewed while its tool slept (6 s, leases of 2)
        assert _lease(session) == ("", None)


def test_a_stopped_worker_loses_its_lease_and_stores_nothing_after(demo, services_env):
    worker = services_env()
    session, turn = _send(demo, "slow paused")
    wait_for(lambda: calls(session), timeout=20, what="the slow tool's call")
    owner, until = _lease(session)
    assert owner
    wait_for(lambda: _lease(session) > (owner, until), timeout=5, what="a renewal while the tool sleeps")
    worker.proc.send_signal(signal.SIGSTOP)
    try:
        wait_for(lambda: _lease(session)[1] < timezone.now(), timeout=5, what="the stopped worker's lease to run out")
        assert runner.session_turns_run(session.pk) == 1  # the other worker resumes the turn
    finally:
        worker.proc.send_signal(signal.SIGCONT)
    assert _status(turn) == "done" and agent_texts(session) == ["done paused"]
    stored = list(StoredEvent.objects.filter(session=session).values_list("event_id", flat=True))
    wait_for(lambda: len(crashy.executions()) == 2, timeout=20, what="the continued worker's tool to return")
    time.sleep(1)  # what the continued worker would store, it would have stored by now
    assert list(StoredEvent.objects.filter(session=session).values_list("event_id", flat=True)) == stored
    assert len(responses(session)) == 1
    (first_run, second_run) = crashy.executions()
    assert first_run == second_run  # the same call, the same idempotency key
    wait_for(lambda: "lease lost" in worker.text(), timeout=10, what="the continued worker to see its lease lost")


def test_a_turn_past_its_hard_time_limit_is_renewed_no_more(demo, services_env):
    services_env(ADKWEB_TURN_HARD_TIME_LIMIT="1")
    session, turn = _send(demo, "slow stuck")
    wait_for(lambda: calls(session), timeout=20, what="the slow tool's call")
    started = time.monotonic()
    while runner.session_turns_run(session.pk) == 0:  # the other worker, until the lease runs out
        assert time.monotonic() - started < SLOW - 0.5, "the stuck turn's lease was kept alive"  # ~3.4 s
        time.sleep(0.1)
    assert _status(turn) == "done" and agent_texts(session) == ["done stuck"]
    wait_for(lambda: len(crashy.executions()) == 2, timeout=20, what="the stuck worker's tool to return")
