"""The drain's claim and finish from the loop by libpq's own calls (agents_app.loop_raw) once their statements
are prepared on the connection: no psycopg cursor on their way, the same rows, and the plain text again where
the connection lost what it prepared (a failing one raises as the cursor did: test_drain_from_loop)."""

from __future__ import annotations

import pytest

from agents_app import turn_sql
from agents_app.models import Turn
from tests.agents_app.test_worker_loop import drained  # noqa: F401 - the fixture, used below
from tests.integration.test_drain_from_loop import (
    _adone_next,
    _astart,
    _cursors,
    _on_the_loops_connection,
    _queued,
    _session,
)
from tests.integration.test_drain_sql import _consistent, _lease

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_connections", "demo", "drained")]


def test_once_prepared_the_claim_and_the_finish_go_without_a_cursor(monkeypatch: pytest.MonkeyPatch):
    row = _session()
    first, second = _queued(row), _queued(row, "more")
    cursors = _cursors(monkeypatch)
    started = _astart(row)  # the loop's connection opened and the claim's statements prepared: by a cursor
    assert started.turn is not None and started.turn.pk == first.pk and any("PREPARE" in t for t in cursors)
    done = _adone_next(started.turn)  # the finish's prepared here: by a cursor
    assert done.finished and done.turn is not None and done.turn.pk == second.pk
    cursors.clear()
    last = _adone_next(done.turn)
    assert cursors == []
    assert last.leased and last.finished and last.released and last.turn is None and last.status == "idle"
    assert isinstance(last.revision, int) and _lease(row) == "" and _consistent(row) == "idle"
    Turn.objects.filter(pk=second.pk).update(status=Turn.Status.QUEUED)
    again = _astart(row, owner="other")
    assert cursors == []
    assert again.leased and not again.orphan and again.turn is not None and again.turn.pk == second.pk
    assert (again.turn.status, again.turn.attempts, again.turn.content) == ("running", 2, {"parts": [{"text": "more"}]})
    assert again.turn.started_at is not None and again.turn.started_at.tzinfo is not None
    assert again.claim is not None and again.claim.app_name == "stock_agent" and again.claim.session is not None
    assert _adone_next(again.turn, owner="other").released and cursors == [] and _consistent(row) == "idle"


def test_a_connection_that_lost_its_statements_gets_the_plain_text(monkeypatch: pytest.MonkeyPatch):
    row = _session()
    first, second = _queued(row), _queued(row)
    started = _astart(row)
    assert started.turn is not None
    done = _adone_next(started.turn)
    assert done.turn is not None and done.turn.pk == second.pk
    _on_the_loops_connection("DEALLOCATE ALL")
    cursors = _cursors(monkeypatch)
    last = _adone_next(done.turn)
    assert last.released and [t.status for t in Turn.objects.order_by("id")] == ["done", "done"]
    assert cursors == [turn_sql._DONE_NEXT]  # sent again as the plain text, by a cursor, once
    assert Turn.objects.get(pk=first.pk).attempts == 1
    third = _queued(row, "again")
    cursors.clear()
    again = _astart(row)  # prepared again on this connection (not the plain text for good): by a cursor
    assert again.turn is not None and again.turn.pk == third.pk and any("PREPARE" in t for t in cursors), cursors
    assert _adone_next(again.turn).released and _consistent(row) == "idle"
