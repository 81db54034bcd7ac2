"""A turn owed in a deleted (archived) conversation on SQLite (embedded mode): the drain closes it failed at
once, with the reason, once, running nothing of the agent, the lease free after; on agents_app.turn_sqlite's
statements, and on the ORM path (other databases). Where it was claimed, met ADK's SessionNotFoundError and
its close raised LeaseLost, the turn left running for the sweeper to queue again. PostgreSQL:
tests/integration/test_turn_archived_claim.py."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from agents_app import runner, turn_sqlite
from agents_app.leases import Lease
from agents_app.models import AdkSession, Turn
from agents_app.turn_close import DELETED_BEFORE_IT_FINISHED, DELETED_BEFORE_IT_RAN, turn_finish
from tests.agents_app.drains import agent_given, claims_nothing, closed, deleted

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("demo")]


@pytest.fixture(autouse=True)
def _sqlite() -> None:
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's drain (PostgreSQL: tests/integration/test_turn_archived_claim.py)")


def test_queued_and_left_running_turns_of_a_deleted_conversation_fail_at_once(monkeypatch):
    given = agent_given(monkeypatch)
    session, turns = deleted("gone", Turn.Status.RUNNING, Turn.Status.QUEUED, Turn.Status.QUEUED)
    assert runner.session_turns_run(session.pk) == 0
    assert given == []  # the agent was given nothing
    reasons = [DELETED_BEFORE_IT_FINISHED, DELETED_BEFORE_IT_RAN, DELETED_BEFORE_IT_RAN]
    closed(session, turns, reasons, [1, 0, 0])
    assert runner.session_turns_run(session.pk) == 0  # nothing owed any more: nothing closed twice
    closed(session, turns, reasons, [1, 0, 0])


def test_the_statements_claim_nothing_in_a_deleted_conversation():
    """`start` and `done_next` on SQLite."""
    session, (turn,) = deleted("stmt", Turn.Status.QUEUED)
    claims_nothing(turn_sqlite, session, turn)


def test_the_orm_path_closes_them_too(monkeypatch):
    """A database with no drain statements of its own (runner._drain_orm): the lease is taken on the
    archived row, the turns closed, the lease given back."""
    given = agent_given(monkeypatch)
    monkeypatch.setattr(runner, "_statements", lambda: None)
    session, turns = deleted("orm", Turn.Status.QUEUED)
    assert runner.session_turns_run(session.pk) == 0
    assert given == []
    closed(session, turns, [DELETED_BEFORE_IT_RAN], [0])


def test_a_turn_closed_under_the_lease_of_a_deleted_conversation_is_closed_not_lease_lost():
    """A run that met the delete some other way (ADK's SessionNotFoundError) is failed by its own drain,
    which holds the lease, with its error, at once: not LeaseLost, left running for the sweeper."""
    session, (turn,) = deleted("held", Turn.Status.QUEUED)
    until = timezone.now() + timedelta(seconds=30)
    AdkSession.all_objects.filter(pk=session.pk).update(lease_owner="me", lease_expires_at=until)
    turn_finish(turn.pk, Turn.Status.FAILED, "SessionNotFoundError: Session not found: held", Lease(session.pk, "me"))
    assert Turn.objects.values_list("status", "error").get(pk=turn.pk) == (
        "failed",
        "SessionNotFoundError: Session not found: held",
    )
