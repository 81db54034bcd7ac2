"""The inbox's "mine" on PostgreSQL (approvals.selectors.mine.mine_narrow: read from who takes part in which
ticket): the same tests as on SQLite (tests/approvals/test_inbox_mine.py: what is mine and what is not,
visibility, every status and order page by page against the definition, query counts, typed page
numbers), and the plan: "mine, open" is a range of the participants' open index in the inbox's order."""

from __future__ import annotations

import re
from html import unescape

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from approvals.models import PendingCall, Response
from tests.approvals.conftest import approver  # noqa: F401 - the fixture, for the tests below
from tests.approvals.test_inbox_mine import (  # noqa: F401 - run here on PostgreSQL
    test_mine_counts_each_ticket_once_up_to_the_cap,
    test_mine_is_what_i_was_assigned_closed_or_answered_and_only_what_i_may_see,
    test_mine_pages_by_its_next_links_in_a_constant_number_of_queries,
    test_mine_shows_what_its_definition_selects_for_every_status_sort_and_page,
)
from tests.approvals.test_inbox_typed_page import test_a_typed_page_number_shows_the_rows_the_offset_would  # noqa: F401
from tests.approvals_factories import session_for, ticket

pytestmark = pytest.mark.django_db


def _plans(client, url: str) -> list[str]:  # noqa: ANN001 - a Client
    """EXPLAIN of each query of the page that reads who takes part in which ticket."""
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(url).status_code == 200
    out = []
    with connection.cursor() as cur:
        for q in ctx.captured_queries:
            if "approvals_ticketparticipant" in q["sql"]:
                cur.execute("EXPLAIN " + q["sql"])
                out.append("\n".join(row[0] for row in cur.fetchall()))
    return out


def test_mine_open_is_a_range_of_the_participants_index_in_the_inbox_order(approver, demo):  # noqa: F811
    """ "Mine" (open, the default status): the count and the rows read the person's range of
    `participant_open_newest`, the rows in its order (no sort of the person's tickets before the
    page's LIMIT) and from the Next link's key on (an index condition, not a filter); no ticket is
    probed for a response of theirs (as when the open tickets were walked)."""
    me, other = demo["approver"], demo["approver2"]
    session = session_for()
    for n in range(300):
        t = ticket(session=session, assigned_to=me if n % 4 == 0 else other if n % 4 == 1 else None)
        if n % 3 == 0:
            Response.objects.create(pending_call=t, action="update", payload={}, final=False, actor=me)
        if n % 5 == 0:
            PendingCall.objects.filter(pk=t.pk).update(status="approved", closed_by=other)
    # Someone else's many tickets: the table's size where a scan of it costs more than the index.
    theirs = [ticket(session=session, assigned_to=other)]
    fields = {f.attname: getattr(theirs[0], f.attname) for f in PendingCall._meta.concrete_fields if not f.primary_key}
    PendingCall.objects.bulk_create([PendingCall(**{**fields, "call_id": f"theirs-{n}"}) for n in range(4000)])
    with connection.cursor() as cur:
        cur.execute("ANALYZE")
    html = approver.get("/?mine=1").content.decode()
    count, rows = _plans(approver, "/?mine=1")
    for plan in (count, rows):
        assert "participant_open_newest" in plan and "approvals_response" not in plan, plan
    inner = rows.split("participant_open_newest")[0]
    assert "Sort Key: p.created_at" not in inner and "top-N" not in inner, rows
    after = re.search(r'href="([^"]+)"[^>]*rel="next"', html)
    assert after is not None
    _, nxt = _plans(approver, unescape(after.group(1)))
    assert re.search(r"participant_open_newest[^\n]*\n\s+Index Cond: \(\(person_id = \d+\) AND \(created_at <=", nxt), (
        nxt
    )
