"""Pages right after a bulk load, before autovacuum's ANALYZE (a restore with pg_restore, an import, a fresh
database filling fast): with no statistics PostgreSQL takes `archived_at IS NULL` for 0.5% of the sessions,
and an approver's conversation list read every live session through the partial unique index and sorted
them, rather than the newest from the recency index (5,000 sessions: 11 ms against 0.3 after ANALYZE,
growing with the table; the inbox's status=all sorted every ticket: 19 ms against 0.7). A partial index on
the live sessions' recency, tried, was planned the same way. Now the sweeper ANALYZEs the tables that hold
rows but no statistics (adkweb.postgresql.statistics, from agents_app.tasks.turns_requeue_owed)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from adkweb.postgresql.statistics import analyze_missing
from agents_app import selectors, tasks
from agents_app.models import AdkSession
from approvals.models import PendingCall

pytestmark = pytest.mark.django_db

N = 3000
TABLES = [AdkSession._meta.db_table, PendingCall._meta.db_table]


def _bulk_load(n: int) -> None:
    """Sessions and tickets written as a restore or an import writes them: rows, no saves."""
    now = timezone.now()
    sessions = AdkSession.all_objects.bulk_create(
        [
            AdkSession(
                app_name="reimbursement_agent",
                user_id=f"user-{i % 50}",
                session_id=f"bulk-{i}",
                state={},
                create_time=(now - timedelta(minutes=n - i)).timestamp(),
                update_time=(now - timedelta(minutes=n - i)).timestamp(),
                archived_at=now if i % 10 == 0 else None,
            )
            for i in range(n)
        ],
        batch_size=1000,
    )
    PendingCall.objects.bulk_create(
        [
            PendingCall(
                session=s,
                app_name=s.app_name,
                requester=s.user_id,
                kind="long_running",
                call_id=f"c{s.pk}",
                call_name="ask_for_approval",
                tool_name="ask_for_approval",
                args={"purpose": "meals", "amount": 200.0},
                status="approved",
            )
            for s in sessions[::2]
        ],
        batch_size=1000,
    )


def _no_statistics() -> None:
    """The tables as a bulk load leaves them: an earlier test's data may have been analyzed (autovacuum, in
    this database that the whole run shares). Rolled back with the test."""
    with connection.cursor() as cur:
        cur.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
        if not cur.fetchone()[0]:
            pytest.skip("clearing a table's statistics needs a superuser (the tests' postgres)")
        cur.execute("DELETE FROM pg_statistic WHERE starelid = ANY(%s::regclass[])", [TABLES])


def _plan(qs) -> str:  # noqa: ANN001
    sql, params = qs.query.sql_with_params()
    with connection.cursor() as cur:
        cur.execute("EXPLAIN " + sql, params)
        return "\n".join(row[0] for row in cur.fetchall())


def _stats(table: str) -> int:
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM pg_stats WHERE tablename = %s", [table])
        return cur.fetchone()[0]


def test_the_sweeper_analyzes_a_bulk_loaded_table_and_the_conversation_list_reads_the_newest_in_order(demo):
    _bulk_load(N)
    _no_statistics()
    page = selectors.session_list(user=demo["approver"])[:26]
    before = _plan(page)
    assert "unique_live_adk_session" in before and "Index Scan Backward" not in before, before  # all, then sorted
    tasks.turns_requeue_owed()  # beat's sweep, every 15 s
    assert _stats(AdkSession._meta.db_table) and _stats(PendingCall._meta.db_table)
    after = _plan(page)
    assert "Index Scan Backward" in after and "unique_live_adk_session" not in after, after
    assert analyze_missing() == []  # analyzed once: an established database costs the sweep one catalog read


def test_a_table_is_analyzed_once_and_one_not_made_yet_is_no_error(demo):
    analyze_missing(TABLES)  # whatever earlier tests left (rolled-back rows: pages, no live row)
    assert analyze_missing(TABLES) == []  # not again at every sweep, not even a table with no live row
    assert analyze_missing(["no_such_table"]) == []  # a table a later migration makes: nothing, no error
