"""A new turn's session status write (agents_app.turn_insert's `_running`, in the message's statement and in
an answer's riding CTEs) reaches its session row by the primary key, however many sessions there are.
Written `id = ... AND archived_at IS NULL`, the planner could take `archived_at IS NULL` for the index
condition and filter every live session by id (the archived_at index): whenever the sessions table was
small or its statistics stale (a fresh database; sessions created faster than autovacuum analyzes), each
message's statement then walked every live session, custom plan or generic (bench/README.md, phase 26
(queue)). A decision's session lock (approvals.ticket_locks) was written the same way."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.utils import timezone

from agents_app import turn_insert
from agents_app.models import AdkSession, Turn
from approvals import ticket_locks

pytestmark = pytest.mark.django_db(transaction=True)


def _sessions(n: int) -> list[AdkSession]:
    now = timezone.now().timestamp()
    return AdkSession.objects.bulk_create(
        [
            AdkSession(app_name="a", user_id="u", session_id=f"s{i}", state={}, create_time=now, update_time=now)
            for i in range(n)
        ]
    )


def _session_scan(plan: str) -> str:
    """The scan under the status write's `Update on agents_app_adksession`."""
    lines = plan.splitlines()
    at = next(i for i, line in enumerate(lines) if f"Update on {AdkSession._meta.db_table}" in line)
    return next(line for line in lines[at + 1 :] if "Scan" in line)


def _params(session: AdkSession) -> dict:
    return dict(
        session=session.pk, kind="message", content="{}", state=None, streaming=False, invocation="e", user=None
    ) | {"now": timezone.now(), "cap": 0}


def test_a_messages_status_write_reaches_its_session_by_id_with_many_sessions():
    sessions = _sessions(300)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + turn_insert._sql("plain"), _params(sessions[150]))
        scan = _session_scan("\n".join(r[0] for r in cursor.fetchall()))
        transaction.set_rollback(True)
    assert "_pkey" in scan and "archived" not in scan, scan


def test_an_answers_riding_status_write_reaches_its_session_by_id_with_many_sessions():
    sessions = _sessions(300)
    riding = turn_insert.turn_insert_riding(
        wait=None,
        session=sessions[150],
        kind="message",
        content={},
        state_delta=None,
        streaming=False,
        created_by=None,
        invocation_id="e",
    )
    sql = f"EXPLAIN WITH {riding.sql} SELECT id FROM tn"
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, riding.params)
        scan = _session_scan("\n".join(r[0] for r in cursor.fetchall()))
        transaction.set_rollback(True)
    assert "_pkey" in scan and "archived" not in scan, scan
    assert not Turn.objects.exists()


def test_a_decisions_session_lock_reaches_its_session_by_id_with_many_sessions():
    sessions = _sessions(300)
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + ticket_locks._SESSION_LOCK, [sessions[150].pk])
        plan = "\n".join(r[0] for r in cursor.fetchall())
    scan = next(line for line in plan.splitlines() if "Scan" in line)
    assert "_pkey" in scan and "archived" not in scan, plan
