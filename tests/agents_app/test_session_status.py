"""A session's stored status (agents_app.session_status) after every transition of its turns and
tickets: queued, claimed, finished, failed, retried; a ticket opened, updated, approved (also 1 of 2),
rejected, expired (sent or closed unsent), cancelled, deleted; the session deleted. Every test of the
suite also checks it at teardown (tests/conftest.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db.models import ProtectedError
from django.utils import timezone
from google.genai import types

from agents_app import runner, selectors, services
from agents_app.models import AdkSession, Turn
from agents_app.session_status import session_status_sync, sessions_status_refresh, status_expression
from approvals import deadlines
from approvals import services as approvals
from approvals.models import PendingCall
from tests.approvals_factories import session_for, ticket


def stored(session: AdkSession) -> str:
    row = (
        AdkSession.objects.filter(pk=session.pk)
        .annotate(now=status_expression(Turn, PendingCall))
        .values_list("status", "now")
        .get()
    )
    assert row[0] == row[1], f"stored {row[0]!r}, its turns and tickets say {row[1]!r}"
    return row[0]


def run_turn(session: AdkSession, status: str = "done", error: str = "") -> Turn:
    """Claim the session's next owed turn and finish it, as a worker does (without an agent)."""
    turn = runner.turn_claim_next(session.pk)
    assert turn is not None and stored(session) == "running"
    runner.turn_finish(turn.pk, status, error)
    return turn


def test_a_conversation_runs_waits_and_goes_idle(demo):
    session = session_for()
    assert stored(session) == "idle"
    services.message_send(session=session, text="Please reimburse 200$ for meals")
    assert stored(session) == "running"
    turn = runner.turn_claim_next(session.pk)
    open_one = ticket(session=session)  # the run pauses on a person: still running while it runs
    assert stored(session) == "running"
    runner.turn_finish(turn.pk, Turn.Status.DONE)
    assert stored(session) == "waiting"
    approvals.ticket_update(ticket=open_one, actor=demo["approver"], message="Looking at it")
    assert stored(session) == "running"  # the update is a turn for the agent
    run_turn(session)
    assert stored(session) == "waiting"  # an update leaves the ticket open
    approvals.ticket_approve(ticket=PendingCall.objects.get(pk=open_one.pk), actor=demo["approver"])
    assert stored(session) == "running"
    run_turn(session)
    assert stored(session) == "idle"


def test_rejection_and_a_failed_turn_then_its_retry(demo):
    session = session_for()
    t = ticket(session=session)
    assert stored(session) == "waiting"
    approvals.ticket_reject(ticket=t, actor=demo["approver"], reason="no")
    assert stored(session) == "running"
    failed = run_turn(session, Turn.Status.FAILED, "Boom")
    assert stored(session) == "failed"
    services.turn_retry(turn=failed)
    assert stored(session) == "running"
    run_turn(session)
    assert stored(session) == "idle"


def test_a_worker_that_died_gives_up_and_the_session_fails(demo, settings):
    settings.ADKWEB_MAX_TURN_ATTEMPTS = 1
    session = session_for()
    services.message_send(session=session, text="hello")
    runner.turn_claim_next(session.pk)  # its worker dies: the turn stays running
    assert stored(session) == "running"
    assert runner.turn_claim_next(session.pk) is None  # claimed again: out of attempts, failed
    assert stored(session) == "failed"


def test_one_of_two_approvals_keeps_it_waiting(demo):
    session = session_for()
    t = ticket(session=session, required_approvals=2)
    approvals.ticket_approve(ticket=t, actor=demo["approver"])
    assert stored(session) == "waiting"
    approvals.ticket_approve(ticket=PendingCall.objects.get(pk=t.pk), actor=demo["admin"])
    assert stored(session) == "running"


@pytest.mark.parametrize("unsent", [False, True])
def test_expiry(demo, unsent):
    session = session_for()
    kind = "input" if unsent else "long_running"
    # A question whose schema cannot say "expired" is closed unsent; others tell the agent.
    args = {
        "message": "Which?",
        "response_schema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    }
    t = ticket(session=session, kind=kind, **({"args": args} if unsent else {}))
    PendingCall.objects.filter(pk=t.pk).update(due_at=timezone.now() - timedelta(seconds=1))
    assert stored(session) == "waiting"
    assert deadlines.ticket_expire(ticket_id=t.pk)
    assert PendingCall.objects.get(pk=t.pk).status == "expired"
    assert stored(session) == ("idle" if unsent else "running")


def test_cancelled_and_deleted_tickets(demo):
    session = session_for()
    t = ticket(session=session)
    assert stored(session) == "waiting"
    t.status, t.closed_at = PendingCall.Status.CANCELLED, timezone.now()
    t.save()  # as the session store's hook cancels an aborted call
    assert stored(session) == "idle"
    again = ticket(session=session)
    assert stored(session) == "waiting"
    again.delete()
    assert stored(session) == "idle"
    services.message_send(session=session, text="hi")
    with pytest.raises(ProtectedError):  # the record: a session is archived, never deleted (issue 8)
        session.delete()
    assert stored(session) == "running"


def test_assignment_and_edits_do_not_recompute(demo, django_assert_num_queries):
    session = session_for()
    t = ticket(session=session)
    t.assigned_to = demo["approver"]
    with django_assert_num_queries(1):  # the UPDATE alone
        t.save()
    assert stored(session) == "waiting"


def test_sync_and_refresh_repair_a_wrong_status(demo):
    session = session_for()
    ticket(session=session)
    AdkSession.objects.filter(pk=session.pk).update(status="idle")  # e.g. rows loaded in bulk
    assert session_status_sync(session.pk) == "waiting" and stored(session) == "waiting"
    AdkSession.objects.filter(pk=session.pk).update(status="failed")
    assert sessions_status_refresh(AdkSession, Turn, PendingCall) == 1 and stored(session) == "waiting"
    assert session_status_sync(10**9) is None  # no such session


def test_lists_filter_on_the_stored_status(demo):
    waiting, idle = session_for(), session_for()
    ticket(session=waiting)
    page = selectors.session_page(user=demo["approver"], status="waiting")
    assert [s.pk for s in page] == [waiting.pk] and idle.pk not in [s.pk for s in page]
    assert selectors.session_status(session_pk=waiting.pk) == "waiting"


def test_turn_create_queues_with_content(demo):
    session = session_for()
    content = types.Content(role="user", parts=[types.Part(text="hi")])
    services.turn_create(session=session, content=content)
    assert stored(session) == "running"


def test_a_new_turn_makes_its_session_running_in_one_statement(demo):
    """A queued turn makes a session running whatever else it has: the save writes the status in
    one UPDATE (which takes the row lock a recompute takes), no lock-compute-write round (on
    PostgreSQL the UPDATE is in the turn's INSERT statement: agents_app.turn_insert)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    session = session_for()
    ticket(session=session)
    assert stored(session) == "waiting"
    with CaptureQueriesContext(connection) as queries:
        services.message_send(session=session, text="more", actor=None)
    touching = [q["sql"] for q in queries.captured_queries if "agents_app_adksession" in q["sql"]]
    writes = "UPDATE agents_app_adksession SET status = 'running' WHERE"
    assert len(touching) == 1 and (touching[0].startswith("UPDATE") or writes in touching[0]), touching
    assert stored(session) == "running"
    run_turn(session)
    assert stored(session) == "waiting"


@pytest.mark.parametrize("held", [False, True], ids=["sync", "held-lock sync"])
def test_the_sql_syncs_compute_what_status_expression_computes(demo, held):
    """Each status (running, waiting, failed, idle; a failed turn followed by a done one is idle),
    stored wrong, then synced by session_status_sync, or the one-statement way of a transaction that
    holds the row (the session store's append): the SQL gives what status_expression gives."""
    from django.db import transaction

    from agents_app.session_status import _sync, row_lock_held

    rows = {sid: session_for() for sid in ("running", "waiting", "failed", "idle")}
    Turn.objects.create(session=rows["running"], kind="message", content={}, status=Turn.Status.QUEUED)
    Turn.objects.create(session=rows["failed"], kind="message", content={}, status=Turn.Status.DONE)
    Turn.objects.create(session=rows["failed"], kind="message", content={}, status=Turn.Status.FAILED)
    Turn.objects.create(session=rows["idle"], kind="message", content={}, status=Turn.Status.FAILED)
    Turn.objects.create(session=rows["idle"], kind="message", content={}, status=Turn.Status.DONE)
    ticket(session=rows["waiting"])
    ticket(session=rows["idle"], status=PendingCall.Status.APPROVED)
    AdkSession.objects.update(status="wrong")
    for sid, row in rows.items():
        if held:
            with transaction.atomic(), row_lock_held(row.pk):
                _sync(row.pk)
        else:
            assert session_status_sync(row.pk) == sid
        assert stored(row) == sid
        assert AdkSession.objects.get(pk=row.pk).status == sid
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        assert session_status_sync(rows["idle"].pk) == "idle"
    assert not [q for q in queries.captured_queries if q["sql"].startswith("UPDATE")]  # unchanged: not written
