"""The drain's claim reads the session as the Runner's get_session would (agents_app.turn_sql, on
PostgreSQL): the Runner's first get_session is answered from it (session_service.read_ahead), so a
turn starts with no read of its own; a copy gone stale before the turn's first append is caught
there, as any stale copy is, and the turn runs again on a fresh one, its message stored once."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.utils import timezone
from google.adk.events.event import Event, EventActions

from agents_app import runner, services, session_async, session_sql, turn_sql, worker_loop
from agents_app.models import AdkSession, StoredEvent
from agents_app.session_service import DjangoSessionService, read_ahead
from tests.agents_app.test_worker_loop import _turn, drained  # noqa: F401 - the fixture, used below
from tests.integration.test_drain_from_loop import _adone_next, _astart, _queued
from tests.integration.test_drain_sql import _consistent, _lease

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_connections", "demo", "drained")]


def _session() -> AdkSession:
    state = {"app:plan": "gold", "user:name": "Ann", "topic": "stocks"}
    made = DjangoSessionService().create_session_sync(app_name="stock_agent", user_id="requester", state=state)
    return AdkSession.objects.get(app_name="stock_agent", user_id="requester", session_id=made.id)


def _got(row: AdkSession) -> session_sql.Loaded | None:
    """What get_session reads of it now (every event)."""
    return session_sql.get(
        app_name=row.app_name, user_id=row.user_id, session_id=row.session_id, events=True, after=None, limit=None
    )


def _reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The session ids get_session reads from the database from now on (the loop's path and the thread's)."""
    seen: list[str] = []
    fetchone, get = session_async.fetchone, session_sql.get

    async def loop_path(sql: str, params: list[Any], *, again_if_lost: bool) -> tuple | None:
        if sql == session_sql.GET:
            seen.append(params[-1])
        return await fetchone(sql, params, again_if_lost=again_if_lost)

    def thread_path(**kwargs: Any) -> session_sql.Loaded | None:
        seen.append(kwargs["session_id"])
        return get(**kwargs)

    monkeypatch.setattr(session_async, "fetchone", loop_path)
    monkeypatch.setattr(session_sql, "get", thread_path)
    return seen


def test_the_claim_reads_the_session_as_get_session_does():
    """Its state (app, user, session), revision, update time and every event, in order; on the claim
    of the next turn too (the finished turn's events in it); nothing read when nothing is claimed."""
    row = _session()
    _turn(row)  # a few events stored
    first, second = _queued(row), _queued(row, "more")
    started = _astart(row)
    assert started.turn is not None and started.turn.pk == first.pk and started.claim is not None
    read = started.claim.session
    assert read is not None and read == _got(row) and len(read.events) >= 4
    assert read.app_state == {"plan": "gold"} and read.user_state == {"name": "Ann"} and read.state["topic"] == "stocks"
    event = Event(author="user", invocation_id="e-1", actions=EventActions(state_delta={"topic": "bonds"}))
    async_to_sync(DjangoSessionService().append_event)(_loaded(row), event)
    done = _adone_next(started.turn)
    assert done.turn is not None and done.turn.pk == second.pk and done.claim is not None
    assert done.claim.session == _got(row) and done.claim.session.state["topic"] == "bonds"
    assert done.claim.session.revision == read.revision + 1
    last = _adone_next(done.turn)
    assert last.released and last.claim is None and _consistent(row) == "idle"


def _loaded(row: AdkSession) -> Any:
    return DjangoSessionService().get_session_sync(
        app_name=row.app_name, user_id=row.user_id, session_id=row.session_id
    )


def test_the_claim_reads_no_archived_session():
    """Nor claims its turn: the checked path closes it (tests/integration/test_turn_archived_claim.py)."""
    row = _session()
    _queued(row)
    AdkSession.objects.filter(pk=row.pk).update(archived_at=timezone.now())
    started = _astart(row)
    assert started.leased and started.orphan and started.turn is None and started.claim is None


def test_a_drain_reads_its_session_once_in_its_claim(monkeypatch):
    """A turn whose runner is cached: no get_session read of its own, and it ran as before (its message
    and its reply stored once, after what was there)."""
    row = _session()
    _turn(row)
    before = StoredEvent.objects.filter(session=row).count()
    reads = _reads(monkeypatch)
    turn = services.message_send(session=row, text="And MSFT?", streaming=False)
    assert runner.session_turns_run(row.pk) == 1
    assert reads == []
    turn.refresh_from_db()
    assert (turn.status, turn.attempts, turn.error) == ("done", 1, "")
    authors = list(StoredEvent.objects.filter(turn=turn).order_by("id").values_list("author", flat=True))
    assert authors[0] == "user" and authors.count("user") == 1 and len(authors) >= 4
    assert StoredEvent.objects.filter(session=row).count() == before + len(authors)
    assert _lease(row) == "" and _consistent(row) == "idle"


def test_only_the_first_get_session_of_that_session_is_answered_from_the_claim(monkeypatch):
    """With no config, of that session, once: another session, a get with a config, a second get, all read."""
    from google.adk.sessions.base_session_service import GetSessionConfig

    row, other = _session(), _session()
    _turn(row)
    store = DjangoSessionService()
    ahead = session_sql.Loaded(row.pk, 1, 0.0, {"mark": "ahead"}, {}, {}, [])
    reads = _reads(monkeypatch)

    async def gets() -> list[Any]:
        token = read_ahead.set([(row.app_name, row.user_id, row.session_id, ahead)])
        try:
            ids = {"app_name": row.app_name, "user_id": row.user_id}
            return [
                await store.get_session(**ids, session_id=other.session_id),
                await store.get_session(**ids, session_id=row.session_id, config=GetSessionConfig(num_recent_events=1)),
                await store.get_session(**ids, session_id=row.session_id),
                await store.get_session(**ids, session_id=row.session_id),
            ]
        finally:
            read_ahead.reset(token)

    another, recent, first, second = worker_loop.run(gets())
    assert another.id == other.session_id and recent.state.get("mark") is None and len(recent.events) == 1
    assert first.state == {"mark": "ahead"} and first.events == []
    assert second.state.get("mark") is None and len(second.events) >= 4
    assert reads == [other.session_id, row.session_id, row.session_id]


def test_a_session_changed_after_the_claim_runs_its_turn_on_a_fresh_copy(monkeypatch):
    """Another writer appends to the session between the claim and the turn's run: the copy the claim
    read is stale, the turn's first append finds it so and stores nothing, and the turn runs again
    (its second attempt) on a fresh read: the other event kept, the message stored once, after it."""
    row = _session()
    _turn(row)
    astart = runner._astart

    async def then_another_writer(session_pk: int, owner: str) -> tuple[turn_sql.Started, bool]:
        got = await astart(session_pk, owner)
        if got[0].turn is not None:
            store = DjangoSessionService()
            copy = await store.get_session(app_name=row.app_name, user_id=row.user_id, session_id=row.session_id)
            await store.append_event(copy, Event(author="user", invocation_id="elsewhere"))
        return got

    monkeypatch.setattr(runner, "_astart", then_another_writer)
    reads = _reads(monkeypatch)
    turn = services.message_send(session=row, text="And MSFT?", streaming=False)
    assert runner.session_turns_run(row.pk) == 2  # the attempt that found its copy stale, and the next
    turn.refresh_from_db()
    assert (turn.status, turn.attempts, turn.error) == ("done", 2, "")
    stored = list(StoredEvent.objects.filter(session=row).order_by("id").values_list("invocation_id", "turn_id"))
    other = [i for i, (invocation, _) in enumerate(stored) if invocation == "elsewhere"]
    mine = [i for i, (_, turn_id) in enumerate(stored) if turn_id == turn.pk]
    assert len(other) == 1 and mine and other[0] < mine[0]
    authors = list(StoredEvent.objects.filter(turn=turn).order_by("id").values_list("author", flat=True))
    assert authors[0] == "user" and authors.count("user") == 1 and len(authors) >= 4
    assert len(reads) >= 2  # the other writer's, and the second attempt's own
    assert _lease(row) == "" and _consistent(row) == "idle"
