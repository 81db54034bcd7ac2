"""Drains driven by tests: several at once (`drains_at_once`), and turns owed in a deleted (archived)
conversation, written as an old row was (queued behind the delete before f7fcb7e refused it, or left
running by a worker that died), with what their close must leave (tests/agents_app/test_turn_archived_sqlite.py,
tests/integration/test_turn_archived_claim.py)."""

from __future__ import annotations

import threading
from datetime import timedelta
from types import ModuleType

import pytest
from django.db import connection
from django.utils import timezone

from agents_app import runner, services
from agents_app.models import AdkSession, StoredEvent, Turn
from approvals.models import PendingCall
from notifications.models import NotificationEvent

APP = "stock_agent"
TEXT = {"role": "user", "parts": [{"text": "What is the price of GOOG?"}]}


def agent_given(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Drains driven by the test from now on (enqueues go nowhere); the ids of the turns the agent is given."""
    seen: list[int] = []
    execute = runner.turn_execute

    async def spied(turn, lease, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(turn.pk)
        return await execute(turn, lease, **kwargs)

    monkeypatch.setattr("agents_app.enqueue.session_enqueue", lambda **kw: True)
    monkeypatch.setattr(runner, "turn_execute", spied)
    return seen


def drains_at_once(session_pk: int, drains: int) -> list[BaseException]:
    """`drains` drains of one session started together, each on a thread (and connection) of its own;
    what they raised."""
    barrier, errors = threading.Barrier(drains), []

    def drain() -> None:
        try:
            barrier.wait()
            runner.session_turns_run(session_pk)
        except BaseException as exc:  # reported by the caller
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=drain) for _ in range(drains)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return errors


def deleted(sid: str, *statuses: str) -> tuple[AdkSession, list[Turn]]:
    """A conversation deleted (its real delete), then turns written behind it as an old row was."""
    session = services.session_create(app_name=APP, user_id="requester", session_id=sid)
    services.session_archive(session=session)
    turns = []
    for status in statuses:
        running = status == Turn.Status.RUNNING
        turns.append(
            Turn.objects.create(
                session_id=session.pk,
                kind=Turn.Kind.MESSAGE,
                content=TEXT,
                status=status,
                attempts=1 if running else 0,
                started_at=timezone.now() if running else None,
            )
        )
    if Turn.Status.RUNNING in statuses:  # its worker died: its lease ran out
        gone = timezone.now() - timedelta(seconds=1)
        AdkSession.all_objects.filter(pk=session.pk).update(lease_owner="dead", lease_expires_at=gone)
    return session, turns


def closed(session: AdkSession, turns: list[Turn], reasons: list[str], attempts: list[int]) -> None:
    """Each turn failed with its reason, once; nothing of the agent stored; the lease free."""
    got = {t.pk: t for t in Turn.objects.filter(session_id=session.pk)}
    for turn, reason, tries in zip(turns, reasons, attempts, strict=True):
        row = got[turn.pk]
        now = (row.status, row.error, row.attempts)
        assert now == ("failed", reason, tries), now
        assert row.finished_at is not None
        told = NotificationEvent.objects.filter(name="turn.failed", turn_id=turn.pk).count()
        assert told == 1, told  # closed once
    assert not StoredEvent.objects.filter(session_id=session.pk).exists()
    assert not PendingCall.objects.filter(session_id=session.pk).exists()
    lease = AdkSession.all_objects.values_list("lease_owner", "lease_expires_at").get(pk=session.pk)
    assert lease == ("", None), lease


def claims_nothing(statements: ModuleType, session: AdkSession, queued: Turn) -> None:
    """The drain's `start` and `done_next` (agents_app.turn_sql or turn_sqlite) in the deleted session:
    the lease taken, nothing claimed (`queued` stays queued, no attempt counted), the turns left to the
    checked path (`orphan`), which closes them."""
    now = timezone.now()
    until = now + timedelta(seconds=30)
    started = statements.start(session_pk=session.pk, owner="me", until=until, now=now)
    assert (started.leased, started.orphan, started.turn) == (True, True, None), started
    assert Turn.objects.values_list("status", "attempts").get(pk=queued.pk) == ("queued", 0)
    # A turn that ran while it was archived (none can: the delete is refused while one is owed): its end
    # is written, the next one is not claimed.
    ran = Turn.objects.create(session_id=session.pk, kind=Turn.Kind.MESSAGE, content=TEXT, status="running")
    done = statements.done_next(turn_id=ran.pk, session_pk=session.pk, owner="me", until=until, now=now)
    assert (done.leased, done.finished, done.orphan, done.turn, done.released) == (True, True, True, None, False)
    assert Turn.objects.values_list("status", "attempts").get(pk=queued.pk) == ("queued", 0)
