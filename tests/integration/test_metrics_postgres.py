"""/metrics' turn durations on PostgreSQL: one range of the turn_finished_at index (the turns that
finished within ADKWEB_METRICS_TURN_WINDOW_SECONDS), not a scan of every turn ever run."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from agents_app.metrics import duration_rows
from agents_app.models import Turn
from tests.approvals_factories import session_for

pytestmark = pytest.mark.django_db


def test_turn_durations_read_a_range_of_the_finished_at_index(demo):
    session = session_for("requester", "stock_agent")
    now = timezone.now()
    Turn.objects.bulk_create(  # a day of turns, one every 10 minutes, each of 3 s: 6 in the last hour
        Turn(
            session=session,
            kind="message",
            content={},
            status="done",
            started_at=at - timedelta(seconds=3),
            finished_at=at,
        )
        for at in (now - timedelta(minutes=10 * i + 5) for i in range(144))
    )
    assert [(r["status"], r["n"]) for r in duration_rows()] == [("done", 6)]  # the last hour's only
    sql, params = duration_rows().query.sql_with_params()
    with connection.cursor() as cur:
        cur.execute("ANALYZE agents_app_turn")
        cur.execute("SET LOCAL enable_seqscan = off")  # a table this small is read whole otherwise
        cur.execute("EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in cur.fetchall())
    assert "turn_finished_at" in plan and "Index Cond: (finished_at >=" in plan, plan
