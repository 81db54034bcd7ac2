"""Exactly once, in process: a run stopped at each point of a turn is resumed, not re-run, and a
lease is held (renewed) while its run lives and given up at once when lost.

The crash is simulated with the scripted agent's gates (tests/engine_scenarios/crashy.py), which
raise a BaseException nothing in the engine catches; then the next drain (what the sweeper
triggers once the dead worker's lease has run out) must finish the turn. The same points are
hit with SIGKILL on a real worker in tests/integration/test_worker_crash.py.
"""

from __future__ import annotations

import threading
import time

import pytest

from agents_app import enqueue, runner, services
from agents_app.models import AdkSession, StoredEvent, Turn
from approvals import services as approvals
from approvals.models import PendingCall
from tests.engine_scenarios import agent_texts, calls, crashy, dialogue, responses


@pytest.fixture
def crashy_app(settings, tmp_path, monkeypatch, transactional_db):
    settings.ADKWEB_CODE_AGENTS = {**settings.ADKWEB_CODE_AGENTS, crashy.APP_NAME: crashy.DOTTED}
    monkeypatch.setenv("ADKWEB_TEST_GATE_DIR", str(tmp_path))
    monkeypatch.delenv("ADKWEB_TEST_GATE_MODE", raising=False)
    # Drains are driven by the test itself (no worker): enqueues go nowhere.
    monkeypatch.setattr("agents_app.enqueue.session_enqueue", lambda **kw: True)
    return tmp_path


def _start(text: str, demo) -> AdkSession:
    session = services.session_create(app_name=crashy.APP_NAME, user_id="requester")
    services.message_send(session=session, text=text, actor=demo["requester"], streaming=False)
    return session


def _crash(session: AdkSession) -> None:
    with pytest.raises(crashy.SimulatedCrash):
        runner.session_turns_run(session.pk)
    assert Turn.objects.get(session=session, status="running")  # left as a dead worker leaves it


def _event_ids_unique(session: AdkSession) -> None:
    ids = list(StoredEvent.objects.filter(session=session).values_list("event_id", flat=True))
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("gate", ["after_call", "after_response", "in_model"])
def test_a_turn_stopped_mid_way_is_resumed_and_repeats_nothing(demo, crashy_app, gate):
    session = _start(f"work a-{gate} gate={gate}", demo)
    _crash(session)
    assert runner.session_turns_run(session.pk) == 1
    turn = Turn.objects.get(session=session)
    assert (turn.status, turn.attempts, turn.error) == ("done", 2, "")
    assert dialogue(session) == [("user", f"work a-{gate} gate={gate}"), (crashy.APP_NAME, f"done a-{gate}")]
    assert [c["id"] for c in calls(session)] == [f"call-a-{gate}"]
    assert [r["id"] for _, r in responses(session)] == [f"call-a-{gate}"]
    assert [e[:2] for e in crashy.executions()] == [("side_effect", f"a-{gate}")]
    _event_ids_unique(session)
    # The model is asked for the call once, and for the reply once (a call in flight at the
    # crash is asked again: its answer was never stored).
    expected = {"after_call": 2, "after_response": 2, "in_model": 3}[gate]
    assert len(crashy.model_calls()) == expected


def test_a_tool_interrupted_after_its_side_effect_runs_again_with_the_same_idempotency_key(demo, crashy_app):
    session = _start("work b gate=in_tool", demo)
    _crash(session)
    runner.session_turns_run(session.pk)
    assert agent_texts(session) == ["done b"]
    (first, second) = crashy.executions()  # at least once: the key lets the downstream system dedupe
    assert first == second and first[2].startswith("adkweb-")
    assert [r["id"] for _, r in responses(session)] == ["call-b"]


def test_a_reply_stored_before_the_crash_is_not_asked_for_again(demo, crashy_app):
    session = _start("work c gate=after_reply", demo)
    _crash(session)
    calls_before = len(crashy.model_calls())
    runner.session_turns_run(session.pk)
    assert len(crashy.model_calls()) == calls_before  # resuming would call the model again
    assert Turn.objects.get(session=session).status == "done"
    assert agent_texts(session) == ["done c"]


def test_a_tool_that_raised_before_the_crash_fails_the_turn_with_its_error(demo, crashy_app):
    session = _start("boom d gate=after_error", demo)
    _crash(session)
    stored = StoredEvent.objects.filter(session=session).count()
    runner.session_turns_run(session.pk)
    turn = Turn.objects.get(session=session)
    assert (turn.status, turn.error) == ("failed", "RuntimeError: broken d")
    assert [e[:2] for e in crashy.executions()] == [("broken_tool", "d")]
    assert StoredEvent.objects.filter(session=session).count() == stored  # nothing added by a silent resume


def test_a_turn_stopped_after_its_ticket_opened_waits_then_resumes_once_on_approval(demo, crashy_app):
    session = _start("signoff e gate=after_ticket", demo)
    _crash(session)
    runner.session_turns_run(session.pk)
    assert agent_texts(session) == ["waiting e"]
    ticket = PendingCall.objects.get(session=session)
    assert ticket.is_open and ticket.initial_response["status"] == "pending"
    approvals.ticket_approve(ticket=ticket, actor=demo["approver"])
    runner.session_turns_run(session.pk)
    assert agent_texts(session) == ["waiting e", "signed e"]
    assert [e[:2] for e in crashy.executions()] == [("request_signoff", "e")]
    assert list(Turn.objects.filter(session=session).values_list("status", flat=True)) == ["done", "done"]
    _event_ids_unique(session)


# -- the lease --------------------------------------------------------------------------------------
@pytest.fixture
def short_lease(settings, monkeypatch):
    settings.ADKWEB_SESSION_LEASE_SECONDS = 2
    settings.ADKWEB_LEASE_RENEW_SECONDS = 0.5
    monkeypatch.setenv("ADKWEB_TEST_SLOW_SECONDS", "4")


def _drain_in_thread(session: AdkSession) -> threading.Thread:
    thread = threading.Thread(target=runner.session_turns_run, args=(session.pk,))
    thread.start()
    return thread


def test_a_tool_slower_than_the_lease_runs_once(demo, crashy_app, short_lease, wait):
    """Issue 8: lease 2 s, a tool sleeping 4 s ran 4 times (sweeper + second drains)."""
    session = _start("slow f", demo)
    first = _drain_in_thread(session)
    wait(lambda: calls(session), what="the slow tool's call")
    others = 0
    while first.is_alive():  # what the sweeper and redelivered tasks would do meanwhile
        enqueue.owed_sessions_enqueue()
        others += runner.session_turns_run(session.pk)
        time.sleep(0.3)
    first.join()
    assert others == 0
    assert [e[:2] for e in crashy.executions()] == [("slow_tool", "f")]
    assert agent_texts(session) == ["done f"]


def test_a_worker_that_lost_its_lease_stores_nothing_more_and_stops(demo, crashy_app, short_lease, wait):
    session = _start("slow g", demo)
    first = _drain_in_thread(session)
    wait(lambda: calls(session), what="the slow tool's call")
    AdkSession.objects.filter(pk=session.pk).update(lease_owner="another-worker")  # the paused worker's lease is gone
    first.join(timeout=10)
    assert not first.is_alive()
    assert responses(session) == []  # the tool's response was not stored by the worker that lost the lease
    assert Turn.objects.get(session=session).status == "running"  # the new owner's to finish
    AdkSession.objects.filter(pk=session.pk).update(lease_owner="")  # the new owner died too
    runner.session_turns_run(session.pk)
    assert agent_texts(session) == ["done g"]
    (first_run, second_run) = crashy.executions()
    assert first_run == second_run  # same call, same idempotency key


def test_a_turn_past_its_soft_time_limit_is_stopped_and_failed(demo, crashy_app, settings, monkeypatch):
    settings.ADKWEB_TURN_SOFT_TIME_LIMIT = 1
    monkeypatch.setenv("ADKWEB_TEST_SLOW_SECONDS", "2")
    session = _start("slow h", demo)
    runner.session_turns_run(session.pk)
    turn = Turn.objects.get(session=session)
    assert (turn.status, turn.error) == ("failed", "The turn ran longer than its time limit (1 s).")
    assert agent_texts(session) == []  # stopped before the model was asked for a reply
    assert AdkSession.objects.get(pk=session.pk).lease_owner == ""
