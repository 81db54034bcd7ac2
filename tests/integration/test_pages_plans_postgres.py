"""Query plans of the pages at scale on PostgreSQL (bench/pages.py measures them with 100,000 tickets):
an approver's conversation list reads the routed tickets once, from their partial index, rather than
every ticket of every conversation it walks (a hashed scan of all 100,000 tickets: ~500 ms)."""

from __future__ import annotations

import pytest
from django.db import connection

from agents_app import selectors
from approvals.models import PendingCall
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
