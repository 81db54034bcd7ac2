"""The inbox's search on PostgreSQL reads the trigram indexes of every text it searches (the arguments,
the arguments as edited, the tool, the requester: a bitmap of the four), never the whole table."""

from __future__ import annotations

import pytest
from django.db import connection

from approvals.selectors import InboxFilters, ticket_queryset
from tests.approvals.test_inbox_edited_search import (  # noqa: F401 - run here on PostgreSQL
    test_the_inbox_finds_a_ticket_by_its_edited_and_its_original_arguments,
)
from tests.approvals_factories import ticket

pytestmark = pytest.mark.django_db


def test_a_search_reads_the_four_trigram_indexes(demo):
    for n in range(5):
        ticket(args={"purpose": f"meals {n}", "amount": 200.0 + n})
    qs = ticket_queryset(filters=InboxFilters(status="all", q="docking"), user=demo["approver"])
    sql, params = qs.query.sql_with_params()
    with connection.cursor() as cur:
        cur.execute("ANALYZE")
        # Tables this small are read whole otherwise, or walked whole through any index (a plain index scan
        # needs no condition: which one depends on the statistics earlier tests left). A bitmap scan needs
        # a condition it can use: the search's, through the trigram indexes, is the one there is.
        for plan_kind in ("seqscan", "indexscan", "indexonlyscan"):
            cur.execute(f"SET LOCAL enable_{plan_kind} = off")
        cur.execute("EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in cur.fetchall())
    for index in ("ticket_args_trgm", "ticket_edited_args_trgm", "ticket_tool_trgm", "ticket_requester_trgm"):
        assert index in plan, plan
    assert "Seq Scan on approvals_pendingcall" not in plan, plan
