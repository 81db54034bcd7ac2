"""The claim's UPDATE (agents_app.turn_sql's `_CLAIM`, in `start` and `done_next`) reaches the turn its
statement chose by the primary key, whatever else is queued. Its generic plan (prepared once per
connection) had walked every queued turn's entry in the status index and filtered them by id when the
turns table was small or its statistics stale (a fresh database; a backlog queued faster than
autovacuum analyzes): each claim then cost O(queued turns), and a backlog drained in O(n^2)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from agents_app import turn_sql
from agents_app.models import Turn
from tests.integration.test_drain_sql import _only_the_approvals_hook, _session, _turn  # noqa: F401 - its fixture

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_connections")]


def _plan(sql: str, params: dict) -> str:
    """The generic plan of the statement's prepared claim (as the drain runs it)."""
    statement = turn_sql._prepared(sql)
    execute = statement.execute.split("; ", 1)[1]
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        cursor.execute(statement.prepare.replace(statement.name, statement.name + "_plan", 1))
        cursor.execute("EXPLAIN " + execute.replace(statement.name, statement.name + "_plan", 1), params)
        text = "\n".join(r[0] for r in cursor.fetchall())
        cursor.execute(f"DEALLOCATE {statement.name}_plan")
    return text


def _claims_update(plan: str) -> str:
    """The scan under the claim's UPDATE of the turns table (`Update on agents_app_turn t`)."""
    lines = plan.splitlines()
    at = next(i for i, line in enumerate(lines) if f"Update on {Turn._meta.db_table} t" in line)
    table = f" on {Turn._meta.db_table} t "
    return next(line for line in lines[at + 1 :] if "Scan" in line and table in line + " ")


def test_the_claim_reaches_its_turn_by_id_with_many_queued():
    backlog = _session("backlog")
    Turn.objects.bulk_create(
        [Turn(session=backlog, kind="message", content={}, status=Turn.Status.QUEUED) for _ in range(300)]
    )
    row = _session()
    turn = _turn(row)
    now = timezone.now()
    params = {"pk": row.pk, "owner": "me", "until": now + timedelta(seconds=30), "now": now}
    scan = _claims_update(_plan(turn_sql._START, params))
    assert "_pkey" in scan and "status" not in scan, scan
    params.update(tid=turn.pk, status="done", version=None)
    scan = _claims_update(_plan(turn_sql._DONE_NEXT, params))
    assert "_pkey" in scan and "status" not in scan, scan
