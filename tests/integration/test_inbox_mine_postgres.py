"""The inbox's "mine" on PostgreSQL, where it is read arm by arm (approvals.selectors._mine_narrow: each
arm's first rows, then the union's): the same tests as on SQLite, where it is one OR
(tests/approvals/test_inbox_mine.py: what is mine and what is not, visibility, paging, query counts;
typed page numbers), and the plan: no hashed subplan over the person's responses."""

from __future__ import annotations

import re

import pytest
from django.db import connection

from approvals.models import Response
from approvals.selectors import InboxFilters, _inbox_source
from tests.approvals.conftest import approver  # noqa: F401 - the fixture, for the tests below
from tests.approvals.test_inbox_mine import (  # noqa: F401 - run here on PostgreSQL
    test_mine_counts_each_ticket_once_up_to_the_cap,
    test_mine_is_what_i_was_assigned_closed_or_answered_and_only_what_i_may_see,
    test_mine_pages_by_its_next_links_in_a_constant_number_of_queries,
)
from tests.approvals.test_inbox_typed_page import test_a_typed_page_number_shows_the_rows_the_offset_would  # noqa: F401
from tests.approvals_factories import ticket

pytestmark = pytest.mark.django_db


def test_mine_is_read_arm_by_arm_without_hashing_every_response(demo):
    me = demo["approver"]
    for n in range(40):
        t = ticket(closed_by=me if n % 3 == 0 else None, assigned_to=me if n % 5 == 0 else None)
        if n % 2:
            Response.objects.create(pending_call=t, action="update", payload={}, final=False, actor=me)
    qs, narrow = _inbox_source(InboxFilters(mine=True, status="all"), me)
    assert narrow is not None
    rows = narrow(qs, 26, ("-created_at", "-pk")).order_by("-created_at", "-pk")[:26]
    sql, params = rows.query.sql_with_params()
    assert sql.count("LIMIT 26") == 3 and "UNION ALL" in sql  # each arm bounded, and the page
    with connection.cursor() as cur:
        cur.execute("ANALYZE")
        cur.execute("EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in cur.fetchall())
    # The responses are a semi-join's inner side, never a subplan's (as one OR: "hashed SubPlan", built
    # from every response the person sent before the first row).
    over_responses = re.findall(r"SubPlan (\d+)\n\s*->[^\n]*(?:\n\s+->[^\n]*)*approvals_response", plan)
    assert not over_responses and "approvals_response" in plan and "Semi Join" in plan, plan
