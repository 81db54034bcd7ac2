"""Query plans of the pages at scale on PostgreSQL (bench/pages.py measures them with 100,000 tickets):
an approver's conversation list reads the routed tickets once, from their partial index, rather than
every ticket of every conversation it walks (a hashed scan of all 100,000 tickets: ~500 ms); a page number
typed into the inbox's URL seeks its first row along an index, testing first what is true of most tickets
for an approver (no policy routes them)."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents_app import selectors
from approvals.models import PendingCall
from tests.approvals.conftest import approver  # noqa: F401 - the fixture, for the test below
from tests.approvals_factories import session_for, ticket

pytestmark = pytest.mark.django_db


def _plan(qs) -> str:  # noqa: ANN001
    sql, params = qs.query.sql_with_params()
    with connection.cursor() as cur:
        cur.execute("ANALYZE")
        cur.execute("SET LOCAL enable_seqscan = off")  # tables this small are read whole otherwise
        cur.execute("EXPLAIN " + sql, params)
        return "\n".join(row[0] for row in cur.fetchall())


def test_an_approvers_conversation_list_reads_routed_tickets_from_their_index(demo):
    for _ in range(3):
        ticket()
    routed = ticket()
    PendingCall.objects.filter(pk=routed.pk).update(routed=True)  # to a policy's groups, none of the approver's
    session_for("approver", "stock_agent")
    page = selectors.session_list(user=demo["approver"])
    assert routed.session_id not in {s.pk for s in page}  # its ticket is hidden: so is the conversation
    plan = _plan(selectors.session_list(user=demo["approver"])[:26])
    assert "ticket_routed_session" in plan, plan
    assert "approvals_pendingcall_approver_groups" in plan  # the routing rules still apply, to routed tickets


def test_a_typed_page_seeks_its_first_row_in_the_index_testing_the_approvers_common_case_first(approver):  # noqa: F811
    """`?page=2000` walks 50,000 keys of ticket_newest (adkweb.paging._from_row): an index scan whose
    filter is each person's visibility; PostgreSQL evaluates an OR's arms in the order written, so the
    arm true of most tickets for an approver (not routed) comes first: written last, each key paid the
    escalation arm's clock and group probe first (half the seek's time at the bench's size)."""
    session = session_for()
    for _ in range(27):  # two pages of 25
        ticket(session=session)
    with CaptureQueriesContext(connection) as ctx:
        assert approver.get("/?status=all&page=2").status_code == 200
    rows = [q["sql"] for q in ctx.captured_queries if "OFFSET" in q["sql"] and "approvals_pendingcall" in q["sql"]]
    assert len(rows) == 1, ctx.captured_queries
    with connection.cursor() as cur:
        cur.execute("ANALYZE")
        cur.execute("SET LOCAL enable_seqscan = off")  # tables this small are read whole otherwise
        cur.execute("EXPLAIN " + rows[0])
        plan = "\n".join(row[0] for row in cur.fetchall())
    seek = plan.partition("InitPlan")[2]
    # Which index (ticket_newest's keys alone where the visibility map says all-visible, as on the bench's
    # vacuumed seed; created_at's otherwise, as in a test's fresh tables) is the planner's: the order is ours.
    assert re.search(r"Index (Only )?Scan", seek), plan
    assert re.search(r"Filter: \(\(NOT \(hashed SubPlan \d+\)\) AND \(\(NOT routed\) OR ", seek), plan
