"""The drain's claim and finish from the loop (agents_app.turn_sql via agents_app.loop_prepared) leave
with their literals written in by `loop_prepared.literal` (psycopg's client-side binding was ~80 us of
the claim's way after an idle gap), where every parameter is a plain one; the server reads the same
values as from psycopg's binding; anything else is bound by psycopg as before."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import psycopg
import pytest
from django.db import connection

from agents_app import loop_prepared, loop_raw
from agents_app.models import Turn
from tests.agents_app.test_worker_loop import drained  # noqa: F401 - the fixture, used below
from tests.integration.test_drain_from_loop import _adone_next, _astart, _queued, _session

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_connections", "demo", "drained")]


def _sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    """What the loop's cursors are given to send (its text and parameters), and the complete texts
    agents_app.loop_raw sends without one (parameters None), from now on."""
    seen: list[tuple[str, Any]] = []
    execute, sent = psycopg.AsyncClientCursor.execute, loop_raw._sent

    async def recorded(self: psycopg.AsyncClientCursor, query: Any, params: Any = None, **kwargs: Any) -> Any:
        seen.append((str(query), params))
        return await execute(self, query, params, **kwargs)

    async def recorded_raw(conn: Any, text: str) -> Any:
        seen.append((text, None))
        return await sent(conn, text)

    monkeypatch.setattr(psycopg.AsyncClientCursor, "execute", recorded)
    monkeypatch.setattr(loop_raw, "_sent", recorded_raw)
    return seen


def test_the_claim_and_the_finish_leave_with_their_literals_written_in(monkeypatch: pytest.MonkeyPatch):
    row = _session()
    queued = _queued(row)
    _astart(row)  # the loop's connection opened and its statements prepared
    Turn.objects.filter(pk=queued.pk).update(status=Turn.Status.QUEUED)
    sent = _sent(monkeypatch)
    started = _astart(row, owner="me")
    assert started.turn is not None and started.turn.pk == queued.pk
    claims = [(text, params) for text, params in sent if text.startswith("EXECUTE adkweb_turn_lock_")]
    assert len(claims) == 1 and claims[0][1] is None, sent
    assert f"({row.pk})" in claims[0][0] and "'me'" in claims[0][0] and "::timestamptz" in claims[0][0]
    done = _adone_next(started.turn, owner="me", version=None)
    assert done.finished and done.released
    assert sent[-1][1] is None and "NULL" in sent[-1][0] and "'done'" in sent[-1][0], sent[-1]


@pytest.mark.parametrize(
    "value",
    [
        datetime(2026, 12, 6, 0, 0, tzinfo=UTC),
        datetime(2026, 12, 6, 0, 41, 7, 123456, tzinfo=UTC),
        datetime(2026, 3, 29, 1, 30, 5, 1, tzinfo=timezone(timedelta(hours=5, minutes=30))),
        datetime(1999, 12, 31, 23, 59, 59, 999999, tzinfo=timezone(-timedelta(hours=8))),
    ],
)
def test_the_server_reads_a_written_in_time_as_psycopg_binds_it(value: datetime):
    written = loop_prepared.literal("SELECT %(at)s::timestamptz", {"at": value})
    assert written is not None
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT %s::timestamptz, {written.removeprefix('SELECT ')}", [value])
        bound, ours = cursor.fetchone()
    assert bound == ours == value


@pytest.mark.parametrize(
    "value", ["it's", "a\\b", "é", 1.5, True, datetime(2026, 12, 6), [1], b"x", {"a": 1}], ids=repr
)
def test_anything_else_is_left_to_psycopg(value: Any):
    assert loop_prepared.literal("EXECUTE x(%(pk)s, %(v)s)", {"pk": 1, "v": value}) is None
    assert loop_prepared.literal("EXECUTE x(%s)", [1]) is None  # positional: the session store's
    assert loop_prepared.literal("EXECUTE x(%(pk)s, %(v)s)", {"pk": 1, "v": None}) == "EXECUTE x(1, NULL)"
