"""agents_app.turn_sql, the drain's one-round-trip lease, claim and finish on PostgreSQL: what each
statement decides, and the windows it must not open on real row locks (a turn queued, or a decision
made, while the finish waits for the session row or holds it): the turn is claimed or the lease is
free for its drain, and the stored status is what status_expression computes."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from agents_app import pooler, turn_sql
from agents_app.models import AdkSession, AgentConfigVersion, Turn
from agents_app.session_service import DjangoSessionService
from agents_app.session_status import status_expression
from approvals.models import PendingCall
from tests.integration.test_session_status_races import _call, _race  # the same row-lock races

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_connections")]
APP = "my_app"


@pytest.fixture(autouse=True)
def _only_the_approvals_hook(monkeypatch: pytest.MonkeyPatch) -> None:
    from agents_app import session_hooks
    from approvals.services import tickets_record_event

    monkeypatch.setattr(session_hooks, "_event_hooks", [tickets_record_event])
    monkeypatch.setattr("agents_app.enqueue.session_enqueue", lambda *, session_pk: True)  # no worker here


def _session(sid: str = "s") -> AdkSession:
    DjangoSessionService().create_session_sync(app_name=APP, user_id="u", session_id=sid)
    return AdkSession.objects.get(session_id=sid)


def _turn(row: AdkSession, status: str = Turn.Status.QUEUED) -> Turn:
    return Turn.objects.create(session=row, kind="message", content={"parts": [{"text": "hi"}]}, status=status)


def _start(row: AdkSession, owner: str = "me") -> turn_sql.Started:
    now = timezone.now()
    return turn_sql.start(session_pk=row.pk, owner=owner, until=now + timedelta(seconds=30), now=now)


def _done_next(turn: Turn, owner: str = "me", version: int | None = None) -> turn_sql.DoneNext:
    now = timezone.now()
    until = now + timedelta(seconds=30)
    return turn_sql.done_next(
        turn_id=turn.pk, session_pk=turn.session_id, owner=owner, until=until, now=now, config_version=version
    )


def _consistent(row: AdkSession) -> str:
    stored, now = (
        AdkSession.objects.filter(pk=row.pk)
        .annotate(now=status_expression(Turn, PendingCall))
        .values_list("status", "now")
        .get()
    )
    assert stored == now
    return stored


def _lease(row: AdkSession) -> str:
    return AdkSession.objects.values_list("lease_owner", flat=True).get(pk=row.pk)


def test_start_takes_the_lease_and_claims_the_oldest_queued_turn():
    row = _session()
    first, second = _turn(row), _turn(row)
    started = _start(row)
    assert started.leased and not started.orphan
    assert started.turn is not None and started.turn.pk == first.pk
    assert (started.turn.status, started.turn.attempts, started.turn.content) == ("running", 1, first.content)
    assert started.turn.started_at is not None
    assert Turn.objects.get(pk=second.pk).status == "queued" and _lease(row) == "me"
    assert _consistent(row) == "running"
    connection.close()


def test_start_takes_no_lease_when_nothing_is_owed_or_another_worker_holds_it():
    row = _session()
    assert _start(row) == turn_sql.Started(False, False, None)
    assert _lease(row) == ""
    queued = _turn(row)
    AdkSession.objects.filter(pk=row.pk).update(lease_owner="other", lease_expires_at=timezone.now() + timedelta(60))
    assert _start(row) == turn_sql.Started(False, False, None)
    assert Turn.objects.get(pk=queued.pk).status == "queued" and _lease(row) == "other"
    # Expired: it is ours now.
    AdkSession.objects.filter(pk=row.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    started = _start(row)
    assert started.leased and started.turn is not None and started.turn.pk == queued.pk
    connection.close()


def test_start_leaves_a_turn_still_running_to_the_checked_path():
    """A turn still marked running (its worker died): the lease is taken, nothing is claimed."""
    row = _session()
    orphan, queued = _turn(row, Turn.Status.RUNNING), _turn(row)
    started = _start(row)
    assert started.leased and started.orphan and started.turn is None
    assert dict(Turn.objects.values_list("pk", "status")) == {orphan.pk: "running", queued.pk: "queued"}
    connection.close()


def test_done_next_claims_the_next_turn_and_keeps_the_lease():
    row = _session()
    first, second = _turn(row), _turn(row)
    _start(row)
    version = AgentConfigVersion.objects.create(agent_name=APP, version=1, config={})
    done = _done_next(first, version=version.pk)  # the configuration version it ran with, in the same write
    assert Turn.objects.get(pk=first.pk).config_version_id == version.pk
    assert done.leased and done.finished and not done.released and done.status == "running"
    assert done.turn is not None and done.turn.pk == second.pk and done.turn.status == "running"
    assert Turn.objects.get(pk=first.pk).status == "done" and Turn.objects.get(pk=first.pk).finished_at
    assert _lease(row) == "me" and _consistent(row) == "running"
    last = _done_next(done.turn)
    assert last.released and last.turn is None and last.status == "idle"
    assert _lease(row) == "" and _consistent(row) == "idle"
    connection.close()


def test_done_next_status_from_tickets_and_failed_turns():
    """Waiting (a ticket open) wins over idle; a failed older turn does not make it failed."""
    service = DjangoSessionService()
    row = _session()
    _turn(row, Turn.Status.FAILED)
    turn = _turn(row)
    _start(row)
    session = service.get_session_sync(app_name=APP, user_id="u", session_id="s")
    service._store_event(session, _call("c1"), turn.pk)
    done = _done_next(turn)
    assert done.status == "waiting" and _consistent(row) == "waiting" and done.released
    PendingCall.objects.update(status="approved")  # bulk: no status sync; done_next computes anew
    again = _turn(row)
    _start(row)
    assert _done_next(again).status == "idle" and _consistent(row) == "idle"
    connection.close()


def test_done_next_changes_nothing_once_the_lease_is_lost():
    row = _session()
    turn = _turn(row)
    _start(row)
    AdkSession.objects.filter(pk=row.pk).update(lease_owner="other")
    done = _done_next(turn)
    assert not done.leased and not done.finished and done.turn is None and not done.released
    assert Turn.objects.get(pk=turn.pk).status == "running" and _lease(row) == "other"
    connection.close()


def test_done_next_of_a_turn_not_running_changes_nothing():
    row = _session()
    turn, queued = _turn(row), _turn(row)
    _start(row)
    Turn.objects.filter(pk=turn.pk).update(status="failed")
    done = _done_next(turn)
    assert done.leased and not done.finished and done.turn is None and not done.released
    assert Turn.objects.get(pk=queued.pk).status == "queued" and _lease(row) == "me"
    connection.close()


def test_a_statement_that_fails_leaves_nothing_half_done(monkeypatch):
    """Both statements are one transaction: the lock and a failing second statement roll back together."""
    row = _session()
    turn = _turn(row)
    _start(row)
    monkeypatch.setattr(
        turn_sql,
        "_DONE_NEXT",
        turn_sql._DONE_NEXT.replace("SELECT (SELECT count(*) FROM s)", "SELECT 1/0, (SELECT count(*) FROM s)"),
    )
    with pytest.raises(Exception, match="division by zero"):
        _done_next(turn)
    assert Turn.objects.get(pk=turn.pk).status == "running" and _lease(row) == "me"
    assert connection.connection.info.transaction_status == 0  # idle: nothing left open
    connection.close()


# -- races on the session row ------------------------------------------------------------------


def test_a_turn_queued_while_the_finish_waits_is_claimed():
    """A message's transaction holds the row (its turn inserted) while the finish waits for it: the
    finish then sees the new turn, claims it and keeps the lease (nobody else would run it: its
    drain message finds the lease taken)."""
    from agents_app import services
    from agents_app.content import text_content

    row = _session()
    turn = _turn(row)
    _start(row)
    got: list[turn_sql.DoneNext] = []
    _race(
        holder=lambda: services.turn_add(session=row, content=text_content("more")),
        waiter=lambda: got.append(_done_next(turn)),
    )
    (done,) = got
    assert done.turn is not None and done.turn.content["parts"][0]["text"] == "more"
    assert not done.released and done.status == "running" and _lease(row) == "me" and _consistent(row) == "running"
    connection.close()


def test_a_turn_queued_while_the_finish_holds_the_row_finds_the_lease_free():
    """The finish (inside a transaction, as a test can hold it) releases the lease while a message
    waits for the row: once both commit the new turn is queued, the session running, the lease free
    for the drain its commit enqueues."""
    from agents_app import services
    from agents_app.content import text_content

    row = _session()
    turn = _turn(row)
    _start(row)
    got: list[turn_sql.DoneNext] = []
    _race(
        holder=lambda: got.append(_done_next(turn)),
        waiter=lambda: transaction.atomic(services.turn_add)(session=row, content=text_content("more")),
    )
    assert got[0].released and got[0].turn is None
    assert _lease(row) == "" and _consistent(row) == "running"
    assert sorted(Turn.objects.values_list("status", flat=True)) == ["done", "queued"]
    started = _start(row)
    assert started.leased and started.turn is not None
    connection.close()


@pytest.mark.parametrize("order", ["decision holds", "finish holds"])
def test_a_decision_racing_the_finish(order):
    """A decision (it locks the session row, closes the ticket and queues its turn) races the turn
    finishing with done_next, in both orders: the stored status is what status_expression says, the
    decision's turn is claimed or left queued with the lease free, never stranded."""
    from approvals.decisions import Answer, answers_submit
    from approvals.models import Response

    service = DjangoSessionService()
    row = _session()
    turn = _turn(row)
    _start(row)
    session = service.get_session_sync(app_name=APP, user_id="u", session_id="s")
    with transaction.atomic():
        service._store_event(session, _call("c1"), turn.pk)
    ticket = PendingCall.objects.get(call_id="c1")

    def decide() -> None:
        answer = Answer(ticket, {"status": "approved"}, True)
        answers_submit(session=row, answers=[answer], actor=None, source=Response.Source.POLICY)

    got: list[turn_sql.DoneNext] = []
    if order == "decision holds":
        _race(holder=decide, waiter=lambda: got.append(_done_next(turn)))
        assert got[0].turn is not None and _lease(row) == "me"  # the decision's turn, claimed
        assert sorted(Turn.objects.values_list("status", flat=True)) == ["done", "running"]
    else:
        _race(holder=lambda: got.append(_done_next(turn)), waiter=decide)
        assert got[0].status == "waiting" and got[0].released and _lease(row) == ""
        assert sorted(Turn.objects.values_list("status", flat=True)) == ["done", "queued"]
    assert _consistent(row) == "running"
    assert Response.objects.filter(pending_call=ticket, final=True).count() == 1
    connection.close()


def test_the_claims_asynchronous_commit_ends_with_it():
    """`start` commits without waiting for the WAL flush (its own transaction only): the writes that
    follow on the same connection (a turn's events, its end) are synchronous again."""
    row = _session()
    _turn(row)
    assert _start(row).turn is not None
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        assert cursor.fetchone() == ("on",)
    connection.close()


def test_the_finishs_asynchronous_commit_ends_with_it():
    """`done_next` commits without waiting for the WAL flush too (its own transaction only): the next
    turn's events on the same connection are synchronous commits again."""
    row = _session()
    first, _second = _turn(row), _turn(row)
    started = _start(row)
    assert started.turn is not None and started.turn.pk == first.pk
    done = _done_next(started.turn)
    assert done.finished and done.turn is not None
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        assert cursor.fetchone() == ("on",)
    connection.close()


def _prepared_here() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM pg_prepared_statements WHERE name LIKE 'adkweb_turn_%%' ORDER BY name")
        return [name for (name,) in cursor.fetchall()]


def test_the_claim_and_the_finish_are_prepared_once_per_connection():
    """`start` and `done_next` run both their statements as prepared ones (planned once per
    connection, not every turn): their two and the lock's prepared on this connection, however many
    turns."""
    row = _session()
    for _ in range(3):
        _turn(row)
    started = _start(row)
    assert started.turn is not None
    done = _done_next(started.turn)
    assert done.finished and done.turn is not None
    assert _done_next(done.turn).turn is not None
    names = {turn_sql._prepared(sql).name for sql in (turn_sql._START, turn_sql._DONE_NEXT)} | {turn_sql._LOCK_NAME}
    assert names == set(_prepared_here())  # on a connection of its own (fresh_connections)
    connection.close()


def test_a_connection_that_lost_its_prepared_statements_still_claims_once():
    """A connection whose prepared statements the server dropped (DISCARD ALL, a pooler) gets the
    plain statement instead: the turn is claimed, once, and its end written."""
    row = _session()
    first, second, third = _turn(row), _turn(row), _turn(row)
    started = _start(row)
    assert started.turn is not None and started.turn.pk == first.pk
    done = _done_next(started.turn)  # both statements prepared on this connection now
    names = {turn_sql._prepared(sql).name for sql in (turn_sql._START, turn_sql._DONE_NEXT)} | {turn_sql._LOCK_NAME}
    assert done.turn is not None and done.turn.pk == second.pk and _prepared_here() == sorted(names)
    with connection.cursor() as cursor:
        cursor.execute("DEALLOCATE ALL")
    done = _done_next(done.turn)
    assert done.finished and done.turn is not None and done.turn.pk == third.pk
    assert [t.status for t in Turn.objects.order_by("id")] == ["done", "done", "running"]
    assert Turn.objects.get(pk=third.pk).attempts == 1
    assert _done_next(done.turn).released and _lease(row) == "" and _consistent(row) == "idle"
    # prepared again on this connection (not plain SQL for good, as one DEALLOCATE ALL made it)
    assert _prepared_here() == sorted({turn_sql._prepared(turn_sql._DONE_NEXT).name, turn_sql._LOCK_NAME})
    connection.close()


def test_a_statement_already_prepared_on_the_connection_is_used():
    """A server connection that already has the statement under its name (another client prepared
    it through a pooler, or this process lost count of it): PREPARE says so, and the claim goes on."""
    row = _session()
    queued = _turn(row)
    with connection.cursor() as cursor:
        cursor.execute(turn_sql._prepared(turn_sql._START).prepare)  # not by turn_sql: it does not know
    started = _start(row)
    assert started.leased and started.turn is not None and started.turn.pk == queued.pk
    assert len(_prepared_here()) == 2  # and the lock's, prepared by the claim
    connection.close()


# A statement sent as the claim and the finish are (the lock's statement first), that says what its
# transaction's commit and plan modes are once the lock is held.
_MODES = (
    turn_sql._ASYNC
    + turn_sql._LOCK
    + ("SELECT current_setting('synchronous_commit'), current_setting('plan_cache_mode'), %(pk)s::bigint")
)


@pytest.mark.parametrize("plain", [False, True])
def test_the_statement_after_the_lock_commits_asynchronously_with_a_generic_plan(monkeypatch, plain):
    """What the claim's and the finish's first statement sets holds for the one that follows it in
    their transaction (its commit without waiting for the WAL flush: turn_sql's "Both commit
    asynchronously"; the generic plan of a prepared one), prepared or plain, and ends with it."""
    monkeypatch.setattr(pooler, "text_only", plain)
    row = _session()
    plan = "auto" if plain else "force_generic_plan"  # (plain SQL: planned as it is sent)
    assert turn_sql._run(_MODES, {"pk": row.pk}) == ("off", plan, row.pk)
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('synchronous_commit'), current_setting('plan_cache_mode')")
        assert cursor.fetchone() == ("on", "auto")
    connection.close()
