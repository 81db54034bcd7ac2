"""The stored status (agents_app.session_status) when an append that opens a ticket races a turn
finishing, on PostgreSQL's real row locks, in both orders. The append's hooks sync the status in one
statement, without taking the row's lock again (the append's UPDATE holds it): the statement must
still see what the other transaction committed while the append waited for the lock."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from django.db import connection, transaction
from google.adk.events.event import Event
from google.genai import types

from agents_app import runner
from agents_app.models import AdkSession, Turn
from agents_app.session_service import DjangoSessionService
from agents_app.session_status import status_expression
from approvals.models import PendingCall

pytestmark = pytest.mark.django_db(transaction=True)
APP = "my_app"


@pytest.fixture(autouse=True)
def _only_the_approvals_hook(monkeypatch: pytest.MonkeyPatch) -> None:
    from agents_app import session_hooks
    from approvals.services import tickets_record_event

    monkeypatch.setattr(session_hooks, "_event_hooks", [tickets_record_event])


def _call(call_id: str) -> Event:
    call = types.Part(function_call=types.FunctionCall(id=call_id, name="ask_for_approval", args={"amount": 2}))
    return Event(
        author="agent", invocation_id="inv", long_running_tool_ids={call_id}, content=types.Content(parts=[call])
    )


def _in_thread(work: Callable[[], None], errors: list[BaseException]) -> threading.Thread:
    def run() -> None:
        try:
            work()
        except BaseException as exc:  # reported by the test
            errors.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def _setup() -> tuple[DjangoSessionService, object, Turn]:
    service = DjangoSessionService()
    session = service.create_session_sync(app_name=APP, user_id="u", session_id="s")
    row = AdkSession.objects.get(session_id="s")
    turn = Turn.objects.create(session=row, kind="message", content={}, status=Turn.Status.RUNNING)
    assert AdkSession.objects.get(pk=row.pk).status == "running"
    return service, session, turn


def _status() -> tuple[str, int]:
    row = AdkSession.objects.get(session_id="s")
    return row.status, PendingCall.objects.filter(session=row, status="pending").count()


def _race(holder: Callable[[], None], waiter: Callable[[], None]) -> None:
    """`holder` runs in a transaction that stays open (holding what it locked) until `waiter`, in
    another thread, has had time to block on the session row; then both finish."""
    held, release, errors = threading.Event(), threading.Event(), []

    def hold() -> None:
        with transaction.atomic():
            holder()
            held.set()
            release.wait(10)

    a = _in_thread(hold, errors)
    assert held.wait(10)
    b = _in_thread(waiter, errors)
    time.sleep(0.3)  # the waiter waits for the row's lock
    release.set()
    a.join(10), b.join(10)
    assert not errors, errors


def test_a_turn_finishing_while_the_append_holds_the_row():
    """The append holds the row (its ticket inserted, status computed: still running) while the
    turn finishes and waits for the row; then the finish sees the ticket: waiting."""
    service, session, turn = _setup()
    _race(
        holder=lambda: service._store_event(session, _call("c1"), None),
        waiter=lambda: runner.turn_finish(turn.pk, Turn.Status.DONE),
    )
    assert _status() == ("waiting", 1)
    connection.close()


def test_an_append_waiting_for_the_row_while_a_turn_finishes():
    """The finish holds the row (status computed: idle) while the append waits for it in its
    UPDATE; its hook's one-statement sync then sees the turn finished and the ticket: waiting."""
    service, session, turn = _setup()
    _race(
        holder=lambda: runner.turn_finish(turn.pk, Turn.Status.DONE),
        waiter=lambda: service._store_event(session, _call("c1"), None),
    )
    assert _status() == ("waiting", 1)
    connection.close()


def test_the_one_statement_sync_computes_what_status_expression_computes():
    """Each status (running, waiting, failed, idle), stored wrong, then synced the held-lock way."""
    from agents_app.session_status import _sync, row_lock_held, status_expression

    service = DjangoSessionService()
    rows = {}
    for sid in ("running", "waiting", "failed", "idle"):
        service.create_session_sync(app_name=APP, user_id="u", session_id=sid)
        rows[sid] = AdkSession.objects.get(session_id=sid)
    Turn.objects.create(session=rows["running"], kind="message", content={}, status=Turn.Status.QUEUED)
    Turn.objects.create(session=rows["failed"], kind="message", content={}, status=Turn.Status.DONE)
    Turn.objects.create(session=rows["failed"], kind="message", content={}, status=Turn.Status.FAILED)
    Turn.objects.create(session=rows["idle"], kind="message", content={}, status=Turn.Status.FAILED)
    Turn.objects.create(session=rows["idle"], kind="message", content={}, status=Turn.Status.DONE)
    service._store_event(service.get_session_sync(app_name=APP, user_id="u", session_id="waiting"), _call("c"), None)
    AdkSession.objects.update(status="wrong")
    for sid, row in rows.items():
        with transaction.atomic(), row_lock_held(row.pk):
            AdkSession.objects.select_for_update().get(pk=row.pk)
            _sync(row.pk)
        stored, now = (
            AdkSession.objects.filter(pk=row.pk)
            .annotate(now=status_expression(Turn, PendingCall))
            .values_list("status", "now")
            .get()
        )
        assert stored == now == sid
    connection.close()


def _decision_race(order: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A decision (answers_submit: it locks the session row, then syncs the status in one statement
    as its saves go) races the session's running turn finishing."""
    from approvals.decisions import Answer, answers_submit
    from approvals.models import Response

    monkeypatch.setattr("agents_app.enqueue.session_enqueue", lambda *, session_pk: True)  # no worker here
    service, session, turn = _setup()
    with transaction.atomic():
        service._store_event(session, _call("c1"), None)
    ticket = PendingCall.objects.get(call_id="c1")
    row = AdkSession.objects.get(pk=ticket.session_id)

    def decide() -> None:
        answer = Answer(ticket, {"status": "approved"}, True)
        answers_submit(session=row, answers=[answer], actor=None, source=Response.Source.POLICY)

    def finish() -> None:
        runner.turn_finish(turn.pk, Turn.Status.DONE)

    if order == "decision holds":
        _race(holder=decide, waiter=finish)
    else:
        _race(holder=finish, waiter=decide)
    assert _status() == ("running", 0)  # the decision's turn is queued; its ticket closed
    assert sorted(Turn.objects.values_list("status", flat=True)) == ["done", "queued"]
    assert Response.objects.filter(pending_call=ticket, final=True).count() == 1
    stored, now = (
        AdkSession.objects.filter(pk=row.pk)
        .annotate(now=status_expression(Turn, PendingCall))
        .values_list("status", "now")
        .get()
    )
    assert stored == now
    connection.close()


def test_a_decision_holding_the_row_while_the_turn_finishes(monkeypatch):
    """The decision holds the row (its turn queued, its ticket closed: running) while the old turn
    finishes and waits; the finish then sees the new turn: still running."""
    _decision_race("decision holds", monkeypatch)


def test_a_decision_waiting_for_the_row_while_the_turn_finishes(monkeypatch):
    """The finish holds the row (status computed: waiting) while the decision waits for it; the
    decision's one-statement syncs then see the finish and the new turn: running."""
    _decision_race("finish holds", monkeypatch)
