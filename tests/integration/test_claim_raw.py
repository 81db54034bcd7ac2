"""The drain's claim and finish from the loop by libpq's own calls (agents_app.loop_raw) once their statements
are prepared on the connection: no psycopg cursor on their way, the same rows, the same errors as the cursor
raised, and the plain text again where the connection lost what it prepared."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from django.db import DataError

from agents_app import loop_raw, turn_sql
from agents_app.models import Turn
from tests.agents_app.test_worker_loop import drained  # noqa: F401 - the fixture, used below
from tests.integration.test_drain_from_loop import (
    _adone_next,
    _astart,
    _on_the_loops_connection,
    _queued,
    _session,
    plain_after,  # noqa: F401 - the fixture, used below
)
from tests.integration.test_drain_sql import _consistent, _lease

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("demo", "drained")]


def _cursors(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The texts the loop's psycopg cursors execute from now on."""
    seen: list[str] = []
    execute = psycopg.AsyncClientCursor.execute

    async def recorded(self: psycopg.AsyncClientCursor, query: Any, params: Any = None, **kwargs: Any) -> Any:
        seen.append(str(query))
        return await execute(self, query, params, **kwargs)

    monkeypatch.setattr(psycopg.AsyncClientCursor, "execute", recorded)
    return seen


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


def test_a_statement_that_fails_raises_as_from_the_cursor(monkeypatch: pytest.MonkeyPatch):
    """The second call of a failing finish (prepared by the first) goes without a cursor and raises Django's
    error all the same; nothing half done, the connection idle and used again."""
    row = _session()
    turn = _queued(row)
    _astart(row)
    failing = turn_sql._DONE_NEXT.replace("SELECT (SELECT count(*) FROM s)", "SELECT 1/0, (SELECT count(*) FROM s)")
    monkeypatch.setattr(turn_sql, "_DONE_NEXT", failing)
    with pytest.raises(DataError, match="division by zero"):
        _adone_next(turn)  # prepared, then its EXECUTE fails: by a cursor
    cursors = _cursors(monkeypatch)
    with pytest.raises(DataError, match="division by zero") as raised:
        _adone_next(turn)
    assert cursors == [] and getattr(raised.value.__cause__, "sqlstate", None) == "22012"
    assert Turn.objects.get(pk=turn.pk).status == "running" and _lease(row) == "me"
    monkeypatch.undo()
    assert _on_the_loops_connection("SELECT 1")[1] == 0
    assert _adone_next(turn).released and Turn.objects.get(pk=turn.pk).status == "done"


@pytest.mark.usefixtures("plain_after")
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
    assert loop_raw.loop_prepared._plain and Turn.objects.get(pk=first.pk).attempts == 1
