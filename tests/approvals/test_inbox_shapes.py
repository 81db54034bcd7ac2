"""The inbox's count and rows compiled once per shape (adkweb.shapes, adkweb.paging.keyset_page_of): a page
whose filters differ only in their values builds and compiles no query again, and shows what the ORM
would: the same tickets, counts and links for searches with LIKE's special characters, a ticket's number,
agents, tools, kinds, statuses, both orders, "mine", and pages by their Next and Previous links (on
PostgreSQL; SQLite binds a datetime as text, so its cursor pages are the ORM's). Run again on PostgreSQL by
tests/integration/test_inbox_shapes_postgres.py."""

from __future__ import annotations

from dataclasses import replace
from unittest import mock

import pytest
from django.db import connection
from django.db.models.sql.compiler import SQLCompiler
from django.utils import timezone

from adkweb import paging, shapes
from approvals import selectors
from approvals.models import PendingCall, Response
from approvals.selectors import InboxFilters
from tests.approvals_factories import session_for, ticket

pytestmark = pytest.mark.django_db


def _orm_page(filters: InboxFilters, user, per_page: int = 4) -> paging.KeysetPage:  # noqa: ANN001 - a User
    """The page as the ORM reads it (no shape kept): the reference."""
    with mock.patch.object(shapes, "_kept", return_value=None):
        return selectors.inbox_page(filters=filters, user=user, per_page=per_page)


def _seen(page: paging.KeysetPage) -> tuple:
    return ([t.pk for t in page], page.total, page.number, page.more_after, page.more_before)


def _related(page: paging.KeysetPage) -> list:
    return [(t.closed_by and t.closed_by.username, t.assigned_to and t.assigned_to.username) for t in page]


def _tickets(demo) -> list[PendingCall]:  # noqa: ANN001 - the demo users
    me, other = demo["approver"], demo["admin"]
    made = []
    for n, (purpose, tool) in enumerate(
        [("hotel", "ask_for_approval"), ("100% hotel", "refund"), ("a_b hotel", "ask_for_approval"), ("c\\d", "refund")]
        * 4
    ):
        session = session_for(app_name="reimbursement_agent" if n % 3 else "ticket_agent")
        closed = {"status": "approved", "closed_by": other, "closed_at": timezone.now()} if n % 5 == 0 else {}
        t = ticket(
            session=session,
            tool_name=tool,
            args={"purpose": purpose, "amount": n},
            assigned_to=me if n % 4 else None,
            **closed,
        )
        if n % 3 == 0:
            Response.objects.create(pending_call=t, action="update", payload={}, final=False, actor=me)
        made.append(t)
    return made


FILTERS = [
    InboxFilters(),
    InboxFilters(status="all"),
    InboxFilters(status="all", sort="oldest"),
    InboxFilters(status="closed", agent="ticket_agent"),
    InboxFilters(status="all", q="hotel"),
    InboxFilters(status="all", q="%"),
    InboxFilters(status="all", q="a_b"),
    InboxFilters(status="all", q="_"),
    InboxFilters(status="all", q="c\\d"),
    InboxFilters(status="all", q="100% h"),
    InboxFilters(status="all", tool="refund", kind="long_running"),
    InboxFilters(status="approved", sort="oldest"),
    InboxFilters(mine=True),
    InboxFilters(mine=True, status="all"),
    InboxFilters(mine=True, status="all", q="hotel", sort="oldest"),
    InboxFilters(mine=True, status="all", agent="reimbursement_agent"),
]


@pytest.mark.parametrize("filters", FILTERS, ids=lambda f: ",".join(f"{k}={v}" for k, v in vars(f).items() if v))
def test_compiled_pages_show_what_the_orm_shows_page_by_page(demo, filters):
    """Every page of the list, by its Next links and back by its Previous links, twice (the second time from
    the kept shapes): the same tickets, count, number, links and joined people as the ORM's."""
    me = demo["approver"]
    _tickets(demo)
    for _round in range(2):
        f = filters
        pages = []
        while True:
            page = selectors.inbox_page(filters=f, user=me, per_page=4)
            reference = _orm_page(f, me)
            assert _seen(page) == _seen(reference), f
            assert _related(page) == _related(reference)
            pages.append(_seen(page))
            if not page.has_next():
                break
            f = replace(filters, page=page.next_page_number(), after=page.next_cursor, before="")
        for number in range(len(pages) - 1, 0, -1):  # back, by each page's Previous link
            f = replace(filters, page=page.previous_page_number(), before=page.previous_cursor, after="")
            page = selectors.inbox_page(filters=f, user=me, per_page=4)
            assert _seen(page) == _seen(_orm_page(f, me)) == pages[number - 1]


def test_a_search_for_a_tickets_number_finds_it_and_what_mentions_it(demo):
    me = demo["approver"]
    made = _tickets(demo)
    target = made[5]
    for q in (f"#{target.pk}", str(target.pk), f"#{made[7].pk}"):
        filters = InboxFilters(status="all", q=q)
        assert _seen(selectors.inbox_page(filters=filters, user=me, per_page=4)) == _seen(_orm_page(filters, me))
    assert target.pk in [
        t.pk for t in selectors.inbox_page(filters=InboxFilters(status="all", q=f"#{target.pk}"), user=me)
    ]


def test_an_inbox_page_with_other_values_builds_and_compiles_no_query_again(demo):
    """The second page of a shape (other agent, tool, search, ticket number, or the Next link's cursor on
    PostgreSQL) makes the same queries without the ORM compiling them: only the values change."""
    me = demo["approver"]
    made = _tickets(demo)
    first = InboxFilters(status="all", agent="ticket_agent", q="hotel")
    page = selectors.inbox_page(filters=first, user=me, per_page=4)  # keeps the shapes
    others = [
        InboxFilters(status="all", agent="reimbursement_agent", q="a_b"),
        InboxFilters(status="all", agent="other", q="%"),
    ]
    if connection.vendor == "postgresql":  # SQLite binds the cursor's datetime as text: the ORM's
        selectors.inbox_page(filters=replace(first, page=2, after=page.next_cursor), user=me, per_page=4)
        others.append(replace(first, agent="reimbursement_agent", page=2, after=page.next_cursor))
    selectors.inbox_page(filters=InboxFilters(status="all", q=f"#{made[0].pk}"), user=me, per_page=4)
    others.append(InboxFilters(status="all", q=f"#{made[1].pk}"))
    for filters in others:
        with mock.patch.object(SQLCompiler, "as_sql", autospec=True, side_effect=SQLCompiler.as_sql) as compiling:
            page = selectors.inbox_page(filters=filters, user=me, per_page=4)
        assert compiling.call_count == 0, filters
        assert _seen(page) == _seen(_orm_page(filters, me))


def test_an_argument_the_query_transforms_is_not_substituted(demo):
    """A shape whose argument does not reach the parameters as given (here upper-cased) is not kept:
    the ORM answers each call, with that call's value."""
    ticket(tool_name="REFUND")
    ticket(tool_name="OTHER")

    def build(name: str):  # noqa: ANN202
        return PendingCall.objects.filter(tool_name=name.upper()).values("pk")

    assert shapes.count("test_shapes_upper", (), build, "refund") == 1
    assert shapes.count("test_shapes_upper", (), build, "other") == 1
    assert shapes.count("test_shapes_upper", (), build, "none") == 0
    assert (
        shapes.instances(
            "test_shapes_upper_rows", (), lambda n: PendingCall.objects.filter(tool_name=n.upper()), "other"
        )[0].tool_name
        == "OTHER"
    )
