"""The turns table's indexes on PostgreSQL. Each is written by every turn's insert and by both its status
updates (queued -> running -> done), so none stays that no query needs: the session's own index was a
prefix of (session, status, id), which serves every read by session, and status's varchar_pattern_ops
copy served LIKE, which nothing asks of a status (agents_app migration 0014)."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.db.models import Min
from django.utils import timezone

from agents_app.models import Turn
from approvals.permissions import asking_turns
from tests.approvals_factories import session_for

pytestmark = pytest.mark.django_db


def _indexes() -> dict[str, str]:
    with connection.cursor() as cur:
        cur.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s", [Turn._meta.db_table])
        return dict(cur.fetchall())


def _plan(qs) -> str:
    sql, params = qs.query.sql_with_params()
    with connection.cursor() as cur:
        cur.execute("ANALYZE agents_app_turn")
        cur.execute("SET LOCAL enable_seqscan = off")  # a table this small is read whole otherwise
        cur.execute("EXPLAIN " + sql, params)
        return "\n".join(row[0] for row in cur.fetchall())


def test_no_index_of_the_turns_table_is_a_prefix_of_another_or_serves_like():
    keys = {name: tuple(re.search(r"\((.*)\)", d).group(1).split(", ")) for name, d in _indexes().items()}
    prefixes = [(a, b) for a, ka in keys.items() for b, kb in keys.items() if a != b and kb[: len(ka)] == ka]
    assert prefixes == []
    assert [name for name, key in keys.items() if any("pattern_ops" in k for k in key)] == []


def test_reads_by_session_and_by_status_still_have_an_index(demo):
    """Which index serves a read is the planner's choice (on a table this small it may walk created_at
    or status): that one serves it, and none is read whole."""
    sessions = [session_for("requester", "stock_agent") for _ in range(20)]
    Turn.objects.bulk_create(  # 20 conversations of 20 turns each
        Turn(session=s, kind="message", content={}, status="done", created_by=demo["requester"])
        for _ in range(20)
        for s in sessions
    )
    session = sessions[0]
    last = Turn.objects.filter(session=session).latest("id")  # the turn a ticket's event would name
    by_session = {
        "the session's last turn (session_status)": Turn.objects.filter(session=session)
        .order_by("-created_at", "-id")
        .values("status")[:1],
        "its askers (four-eyes)": asking_turns(session, timezone.now(), last.pk).filter(created_by=demo["requester"]),
        "its failed turns (the timeline)": Turn.objects.filter(session_id=session.pk, status=Turn.Status.FAILED),
        "its queued turn (the claim, Turn.owed)": Turn.objects.filter(session_id=session.pk, status="queued")
        .order_by("id")
        .values("id")[:1],
    }
    for what, qs in by_session.items():  # seq scans are off: a plan without one is a plan with an index
        plan = _plan(qs)
        assert "Seq Scan" not in plan, (what, plan)
    oldest = Turn.objects.filter(status=Turn.Status.QUEUED).values("status").annotate(at=Min("created_at"))
    plan = _plan(oldest)  # /metrics' oldest queued turn, the sweeper's owed turns
    assert "turn_status" in plan and "Seq Scan" not in plan, plan
