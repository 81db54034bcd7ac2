"""A page number typed into the inbox's URL (`?page=N`, no cursor: an old link, a bookmark) shows the
rows the offset would, with ties on the sort key, in both orders, with filters and past the end; it is
read as a keyset page from its first row's key, which a subquery seeks over the keys alone (no OFFSET
over the page's joined rows), in the same number of queries as the first page."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from approvals.models import PendingCall, Response
from tests.approvals.inbox_helpers import inbox_ids
from tests.approvals_factories import session_for, ticket

URLS = ["/?status=all", "/?status=all&sort=oldest", "/?q=meals&status=all", "/?mine=1&status=all"]


def _tickets(n: int, demo) -> list[PendingCall]:
    """n tickets, in runs of three that share a creation instant (ties broken by pk), some "mine"."""
    session = session_for()
    made = [ticket(session=session) for _ in range(n)]
    base = timezone.now() - timedelta(days=1)
    for i, t in enumerate(made):
        t.created_at = base + timedelta(seconds=i // 3)
        PendingCall.objects.filter(pk=t.pk).update(created_at=t.created_at)
        if i % 4 == 0:
            Response.objects.create(pending_call=t, action="update", payload={}, final=False, actor=demo["approver"])
    return made


def _expected(url: str, made: list[PendingCall], demo) -> list[int]:
    mine = set(Response.objects.filter(actor=demo["approver"]).values_list("pending_call_id", flat=True))
    rows = [t for t in made if "mine" not in url or t.pk in mine]
    return [t.pk for t in sorted(rows, key=lambda t: (t.created_at, t.pk), reverse="oldest" not in url)]


def _get(client: Client, url: str) -> tuple[list[int], list[str]]:
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    assert response.status_code == 200
    return inbox_ids(response.content.decode()), [q["sql"] for q in ctx.captured_queries]


@pytest.mark.parametrize("url", URLS)
def test_a_typed_page_number_shows_the_rows_the_offset_would(approver, demo, url):
    made = _tickets(80, demo)
    expected = _expected(url, made, demo)
    pages = -(-len(expected) // 25)
    for page in range(1, pages + 1):
        ids, _ = _get(approver, f"{url}&page={page}")
        assert ids == expected[(page - 1) * 25 : page * 25], page
    last, _ = _get(approver, f"{url}&page={pages + 5}")  # past the end: the last page, as before
    assert last == expected[(pages - 1) * 25 :]


def test_a_typed_page_seeks_its_first_key_and_costs_the_queries_of_the_first_page(approver, demo):
    _tickets(80, demo)
    approver.get("/?status=all")  # warm per-process caches
    first, first_sql = _get(approver, "/?status=all")
    deep, deep_sql = _get(approver, "/?status=all&page=3")
    assert len(deep_sql) == len(first_sql) and first and deep and set(first).isdisjoint(deep)
    rows = [s for s in deep_sql if "LIMIT 26" in s and "approvals_pendingcall" in s]
    assert len(rows) == 1, deep_sql
    # The page's rows by keyset from the key of its first row; the offset only in the subquery over the
    # keys, which reads no related row (the page's select_related joins are in the outer query only).
    outer, _, seek = rows[0].partition(") <= (SELECT")
    assert seek and "OFFSET 50" in seek and "OFFSET" not in outer
    assert 'JOIN "auth_user" ' not in seek and 'JOIN "auth_user" ' in outer
