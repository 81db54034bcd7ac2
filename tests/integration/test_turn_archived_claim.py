"""A turn left queued (or running) behind a conversation that was deleted (archived), as a row queued
before f7fcb7e, or left running by a worker that died, is: the drain that finds it closes it failed at
once, with a reason the person reads, exactly once, without running anything of the agent (no event
stored, no ticket opened), and the lease is free after. Where it was claimed, run, met ADK's
SessionNotFoundError, whose close found no lease on the archived row (LeaseLost), the turn left running
under a lease nobody renewed, the sweeper's drain queueing it again, three times over minutes.
PostgreSQL and Redis: the drain in this process (its statements as a worker sends them), racing drains
on their own connections, and a real `celery worker` handed the session by the sweeper."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from agents_app import runner, turn_sql
from agents_app.enqueue import owed_sessions_enqueue
from agents_app.models import Turn
from agents_app.turn_close import DELETED_BEFORE_IT_FINISHED, DELETED_BEFORE_IT_RAN
from tests.agents_app.drains import agent_given, claims_nothing, closed, deleted, drains_at_once
from tests.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_queued_turn_of_a_deleted_conversation_fails_at_once_with_the_reason(demo, monkeypatch):
    given = agent_given(monkeypatch)
    session, turns = deleted("gone", Turn.Status.QUEUED, Turn.Status.QUEUED)
    assert runner.session_turns_run(session.pk) == 0
    assert given == []  # the agent was given nothing
    closed(session, turns, [DELETED_BEFORE_IT_RAN] * 2, [0, 0])
    assert runner.session_turns_run(session.pk) == 0  # the sweeper's next drain finds nothing owed
    closed(session, turns, [DELETED_BEFORE_IT_RAN] * 2, [0, 0])
    assert owed_sessions_enqueue() == 0


def test_a_turn_left_running_in_a_deleted_conversation_fails_at_once_not_requeued(demo, monkeypatch):
    """Its worker died (its lease ran out): not queued again for another attempt, closed."""
    given = agent_given(monkeypatch)
    session, turns = deleted("orphan", Turn.Status.RUNNING, Turn.Status.QUEUED)
    assert runner.session_turns_run(session.pk) == 0
    assert given == []
    closed(session, turns, [DELETED_BEFORE_IT_FINISHED, DELETED_BEFORE_IT_RAN], [1, 0])


def test_the_drains_statements_claim_nothing_in_a_deleted_conversation(demo):
    """`start` and `done_next` on PostgreSQL."""
    session, (turn,) = deleted("stmt", Turn.Status.QUEUED)
    claims_nothing(turn_sql, session, turn)
    connection.close()


def test_racing_drains_close_each_turn_once(demo, monkeypatch):
    """Six drains of the deleted conversation at once (a wake-up, the sweeper's task, another worker's),
    each on its own connection: each turn is closed once, nobody raises."""
    given = agent_given(monkeypatch)
    session, turns = deleted("race", Turn.Status.QUEUED, Turn.Status.QUEUED, Turn.Status.QUEUED)
    errors = drains_at_once(session.pk, 6)
    assert errors == [] and given == []
    closed(session, turns, [DELETED_BEFORE_IT_RAN] * 3, [0, 0, 0])


def test_a_worker_handed_it_by_the_sweeper_fails_it_at_once(demo, worker):
    """A real `celery worker` process: the sweeper (its re-enqueue of owed work) sends the session, the
    worker's drain closes the turn within seconds; the lease is free (no wait for it to run out)."""
    session, (turn,) = deleted("swept", Turn.Status.QUEUED)
    Turn.objects.filter(pk=turn.pk).update(created_at=timezone.now() - timedelta(minutes=5))
    assert owed_sessions_enqueue() == 1
    wait_for(lambda: Turn.objects.get(pk=turn.pk).status == "failed", timeout=20, what="the turn to be closed")
    closed(session, [turn], [DELETED_BEFORE_IT_RAN], [0])
