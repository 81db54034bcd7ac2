"""agents_app.turn_sqlite, the drain's lease, claim and finish on SQLite (embedded mode): what each
decides (as agents_app.turn_sql does on PostgreSQL, tests/integration/test_drain_sql.py), each in one
write transaction of a constant list of statements, and the drain takes this path on SQLite."""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from google.adk.events.event import Event

from agents_app import leases, runner, turn_exec, turn_sqlite
from agents_app.models import AdkSession, AgentConfigVersion, Turn
from agents_app.session_orm import loaded_session
from agents_app.session_service import DjangoSessionService
from agents_app.session_status import status_expression
from approvals.models import PendingCall
from tests.agents_app.drains import drains_at_once
from tests.approvals_factories import ticket

pytestmark = pytest.mark.django_db(transaction=True)
APP = "my_app"


@pytest.fixture(autouse=True)
def _sqlite(monkeypatch: pytest.MonkeyPatch) -> None:
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's drain statements (PostgreSQL: tests/integration/test_drain_sql.py)")
    monkeypatch.setattr("agents_app.enqueue.session_enqueue", lambda *, session_pk: True)  # no worker here


def _session(sid: str = "s") -> AdkSession:
    DjangoSessionService().create_session_sync(app_name=APP, user_id="u", session_id=sid)
    return AdkSession.objects.get(session_id=sid)


def _turn(row: AdkSession, status: str = Turn.Status.QUEUED) -> Turn:
    return Turn.objects.create(session=row, kind="message", content={"parts": [{"text": "hi"}]}, status=status)


def _start(row: AdkSession, owner: str = "me") -> turn_sqlite.Started:
    now = timezone.now()
    return turn_sqlite.start(session_pk=row.pk, owner=owner, until=now + timedelta(seconds=30), now=now)


def _done_next(turn: Turn, owner: str = "me", version: int | None = None) -> turn_sqlite.DoneNext:
    now = timezone.now()
    until = now + timedelta(seconds=30)
    return turn_sqlite.done_next(
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


def _ids(claim: turn_sqlite.Claim | None) -> tuple:
    """A claim's ids and configuration row (not the session it read: tested below)."""
    assert claim is not None
    return claim.app_name, claim.user_id, claim.session_id, claim.stamp_row


def _lease(row: AdkSession) -> tuple[str, object]:
    return AdkSession.objects.values_list("lease_owner", "lease_expires_at").get(pk=row.pk)


def test_start_takes_the_lease_and_claims_the_oldest_queued_turn():
    row = _session()
    first, second = _turn(row), _turn(row)
    before = timezone.now()
    started = _start(row)
    assert started.leased and not started.orphan
    assert started.turn is not None and started.turn.pk == first.pk
    assert (started.turn.status, started.turn.attempts, started.turn.content) == ("running", 1, first.content)
    assert started.turn.started_at is not None and started.turn.started_at >= before
    assert started.turn.streaming is False and started.turn._loaded_status == "running"  # as the ORM reads it
    assert started.claim is not None and _ids(started.claim) == (APP, "u", "s", None)  # no configuration row
    assert Turn.objects.get(pk=second.pk).status == "queued"
    owner, until = _lease(row)
    assert owner == "me" and until is not None and until > timezone.now()
    assert _consistent(row) == "running"


def test_start_takes_no_lease_when_nothing_is_owed_or_another_worker_holds_it():
    row = _session()
    assert _start(row) == turn_sqlite.Started(False, False, None)
    assert _lease(row) == ("", None)
    queued = _turn(row)
    AdkSession.objects.filter(pk=row.pk).update(lease_owner="other", lease_expires_at=timezone.now() + timedelta(60))
    assert _start(row) == turn_sqlite.Started(False, False, None)
    assert Turn.objects.get(pk=queued.pk).status == "queued" and _lease(row)[0] == "other"
    # Expired: it is ours now.
    AdkSession.objects.filter(pk=row.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    started = _start(row)
    assert started.leased and started.turn is not None and started.turn.pk == queued.pk
    assert _lease(row)[0] == "me"


def test_start_leaves_a_turn_still_running_to_the_checked_path():
    """A turn still marked running (its worker died): the lease is taken, nothing is claimed."""
    row = _session()
    orphan, queued = _turn(row, Turn.Status.RUNNING), _turn(row)
    started = _start(row)
    assert started.leased and started.orphan and started.turn is None
    assert dict(Turn.objects.values_list("pk", "status")) == {orphan.pk: "running", queued.pk: "queued"}


def test_done_next_claims_the_next_turn_and_keeps_the_lease():
    row = _session()
    first, second = _turn(row), _turn(row)
    _start(row)
    version = AgentConfigVersion.objects.create(agent_name=APP, version=1, config={})
    done = _done_next(first, version=version.pk)  # the configuration version it ran with, in the same write
    assert Turn.objects.get(pk=first.pk).config_version_id == version.pk
    assert done.leased and done.finished and not done.released and done.status == "running"
    assert done.turn is not None and done.turn.pk == second.pk and done.turn.status == "running"
    assert _ids(done.claim) == (APP, "u", "s", None)
    assert Turn.objects.get(pk=first.pk).status == "done" and Turn.objects.get(pk=first.pk).finished_at
    assert _lease(row)[0] == "me" and _consistent(row) == "running"
    assert done.revision == AdkSession.objects.get(pk=row.pk).revision  # after the turn's last event
    AdkSession.objects.filter(pk=row.pk).update(revision=row.revision + 5)  # events of the next turn
    last = _done_next(done.turn)
    assert last.revision == row.revision + 5
    assert last.released and last.turn is None and last.status == "idle"
    assert _lease(row) == ("", None) and _consistent(row) == "idle"


def test_done_next_status_from_tickets_and_failed_turns():
    """Waiting (a ticket open) wins over idle; a failed older turn does not make it failed."""
    row = _session()
    _turn(row, Turn.Status.FAILED)
    turn = _turn(row)
    _start(row)
    ticket(session=row)
    done = _done_next(turn)
    assert done.status == "waiting" and _consistent(row) == "waiting" and done.released
    PendingCall.objects.update(status="approved")  # bulk: no status sync; done_next computes anew
    again = _turn(row)
    _start(row)
    assert _done_next(again).status == "idle" and _consistent(row) == "idle"


def test_done_next_changes_nothing_once_the_lease_is_lost():
    row = _session()
    turn = _turn(row)
    _start(row)
    AdkSession.objects.filter(pk=row.pk).update(lease_owner="other")
    done = _done_next(turn)
    assert not done.leased and not done.finished and done.turn is None and not done.released
    assert Turn.objects.get(pk=turn.pk).status == "running" and _lease(row)[0] == "other"


def test_done_next_of_a_turn_not_running_changes_nothing():
    row = _session()
    turn, queued = _turn(row), _turn(row)
    _start(row)
    Turn.objects.filter(pk=turn.pk).update(status="failed")
    done = _done_next(turn)
    assert done.leased and not done.finished and done.turn is None and not done.released
    assert Turn.objects.get(pk=queued.pk).status == "queued" and _lease(row)[0] == "me"


def test_done_next_keeps_the_lease_while_another_turn_is_still_running():
    row = _session()
    turn = _turn(row)
    _start(row)
    orphan = _turn(row, Turn.Status.RUNNING)  # another worker's, found running: the checked path's
    done = _done_next(turn)
    assert done.finished and done.orphan and done.turn is None and not done.released
    assert _lease(row)[0] == "me" and Turn.objects.get(pk=orphan.pk).status == "running"


def test_a_statement_that_fails_leaves_nothing_half_done(monkeypatch):
    """One transaction each: a failure after the turn's DONE rolls the DONE back with it."""
    row = _session()
    turn, queued = _turn(row), _turn(row)
    _start(row)

    def broken(*args, **kwargs):
        raise RuntimeError("after the DONE")

    monkeypatch.setattr(turn_sqlite, "_claim", broken)
    with pytest.raises(RuntimeError, match="after the DONE"):
        _done_next(turn)
    assert Turn.objects.get(pk=turn.pk).status == "running" and Turn.objects.get(pk=queued.pk).status == "queued"
    assert _lease(row)[0] == "me" and not connection.in_atomic_block


def _words(sql: str) -> str:
    return sql if sql.startswith("PRAGMA") else " ".join(sql.split()[:2])


def test_each_is_one_write_transaction_of_a_constant_list_of_statements():
    row = _session()
    first, _ = _turn(row), _turn(row)
    with CaptureQueriesContext(connection) as start:
        _start(row)
    with CaptureQueriesContext(connection) as done:
        _done_next(first)
    words = [[_words(q["sql"]) for q in captured] for captured in (start, done)]
    # The claim, the stamp of its agent's configuration, the session as get_session reads it (row, events).
    claim = ["UPDATE agents_app_turn", "SELECT a.id,", "SELECT s.id,", "SELECT data"]
    lax, synced = "PRAGMA synchronous = NORMAL", "PRAGMA synchronous = FULL"  # the commit unsynced, then FULL
    lease = ["UPDATE agents_app_adksession", "SELECT EXISTS"]
    assert words[0] == [lax, "BEGIN IMMEDIATE", *lease, *claim, "COMMIT", synced]
    done_ = ["SELECT app_name,", "UPDATE agents_app_turn", "SELECT EXISTS", *claim, "SELECT status,"]
    assert words[1] == [lax, "BEGIN IMMEDIATE", *done_, "UPDATE agents_app_adksession", "COMMIT", synced]


def test_the_drain_on_sqlite_runs_on_these_statements(monkeypatch):
    """Two turns drained: claimed, run and finished without the ORM path's lease, claim and finish."""

    def orm_path(*args, **kwargs):
        raise AssertionError("the ORM path ran")

    for module, name in (
        (runner, "_drain_orm"),
        (runner, "lease_acquire"),
        (runner, "turn_claim_next"),
        (runner, "turn_finish"),
        (leases, "lease_acquire"),
        (turn_exec, "turn_finish"),
    ):
        monkeypatch.setattr(module, name, orm_path)

    async def ran(turn, lease, *, finish_done=True, claim=None):
        assert not finish_done and claim is not None and claim.session_id == "s"
        return turn_exec.RAN

    monkeypatch.setattr(runner, "turn_execute", ran)
    row = _session()
    first, second = _turn(row), _turn(row)
    assert runner.session_turns_run(row.pk) == 2
    assert dict(Turn.objects.values_list("pk", "status")) == {first.pk: "done", second.pk: "done"}
    assert _lease(row) == ("", None) and _consistent(row) == "idle"


def test_concurrent_drains_claim_each_turn_once(monkeypatch):
    """Six drains of one session at once, each on a thread (and connection) of its own: every turn is
    run once, by whoever holds the lease, with one attempt; the lease is free at the end."""
    runs: list[int] = []

    async def ran(turn, lease, *, finish_done=True, claim=None):
        runs.append(turn.pk)
        await asyncio.sleep(0.01)  # others try meanwhile
        return turn_exec.RAN

    monkeypatch.setattr(runner, "turn_execute", ran)
    row = _session()
    turns = [_turn(row) for _ in range(5)]
    errors = drains_at_once(row.pk, 6)
    assert errors == []
    assert sorted(runs) == [t.pk for t in turns]  # each once
    assert set(Turn.objects.values_list("status", "attempts")) == {("done", 1)}
    assert _lease(row) == ("", None) and _consistent(row) == "idle"


def test_the_claim_reads_the_session_as_get_session_does():
    """Its state (app, user, session), revision, update time and every event, in order, read in the
    claim's transaction, on the next turn's claim too (the finished turn's events in it): the Runner's
    first get_session is answered from it (session_service.read_ahead, as on PostgreSQL)."""
    service = DjangoSessionService()
    service.create_session_sync(app_name=APP, user_id="u", session_id="s", state={"k": 1, "app:a": 2, "user:b": 3})
    row = AdkSession.objects.get(session_id="s")
    first, second = _turn(row), _turn(row)

    def as_read() -> tuple:
        got = service.get_session_sync(app_name=APP, user_id="u", session_id="s")
        assert got is not None
        return got.state, got.last_update_time, [e.model_dump() for e in got.events], got._storage_update_marker

    def as_claimed(claim: turn_sqlite.Claim | None) -> tuple:
        assert claim is not None and claim.session is not None
        got = loaded_session(APP, "u", "s", claim.session)
        assert got is not None
        return got.state, got.last_update_time, [e.model_dump() for e in got.events], got._storage_update_marker

    started = _start(row)
    assert as_claimed(started.claim) == as_read()
    copy = service.get_session_sync(app_name=APP, user_id="u", session_id="s")
    assert copy is not None
    service._store_event(copy, Event(author="agent", invocation_id="inv"), first.pk)
    done = _done_next(first)
    assert done.turn is not None and done.turn.pk == second.pk
    claimed = as_claimed(done.claim)
    assert claimed == as_read() and len(claimed[2]) == 1 and claimed[0] == {"k": 1, "app:a": 2, "user:b": 3}


def test_on_a_file_the_drain_runs_start_and_done_next_on_its_loops_thread(monkeypatch):
    """No hop to the drain's database thread for them (agents_app.session_sqlite_loop.inline): each runs on
    the thread that runs the turn, with Django's connection of that thread; the turns drained as before."""
    from agents_app import session_sqlite_loop

    assert session_sqlite_loop._on_file_sqlite()  # the tests' database is a file (tests/settings.py)
    threads: dict[str, list[str]] = {"start": [], "done_next": [], "turn": []}
    for name in ("start", "done_next"):
        real = getattr(turn_sqlite, name)

        def on(*args, _real=real, _name=name, **kwargs):
            threads[_name].append(threading.current_thread().name)
            return _real(*args, **kwargs)

        monkeypatch.setattr(turn_sqlite, name, on)

    async def ran(turn, lease, *, finish_done=True, claim=None):
        threads["turn"].append(threading.current_thread().name)
        return turn_exec.RAN

    monkeypatch.setattr(runner, "turn_execute", ran)
    row = _session()
    first, second = _turn(row), _turn(row)
    assert runner.session_turns_run(row.pk) == 2
    assert dict(Turn.objects.values_list("pk", "status")) == {first.pk: "done", second.pk: "done"}
    assert _lease(row) == ("", None) and _consistent(row) == "idle"
    loop_thread = threads["turn"][0]
    assert threads == {"start": [loop_thread], "done_next": [loop_thread] * 2, "turn": [loop_thread] * 2}
