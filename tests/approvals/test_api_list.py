"""The approvals API's ticket list (`GET /api/pending-calls`) reads as the inbox does: keyset pages
whose `next`/`previous` links carry their edge, a capped count, "mine" and search, and a constant
number of queries whatever the page or the filters. A value the inbox would quietly ignore is a 400."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from adkweb import paging
from adkweb.roles import APPROVERS
from approvals.models import PendingCall, Response
from tests.approvals_factories import session_for, ticket


def _tickets(n: int, **fields) -> list[PendingCall]:  # noqa: ANN003
    session = session_for()
    return [ticket(session=session, **fields) for _ in range(n)]


def _newest_first(made: list[PendingCall]) -> list[int]:
    return [t.pk for t in sorted(made, key=lambda t: (t.created_at, t.pk), reverse=True)]


def _ids(body: dict) -> list[int]:
    return [t["id"] for t in body["results"]]


def test_next_and_previous_links_walk_every_ticket_once_and_new_ones_do_not_shift_them(api, demo):
    made = _tickets(7)
    order = _newest_first(made)
    c = api(demo["approver"])
    first = c.get("/api/pending-calls?page_size=3").json()
    assert _ids(first) == order[:3] and first["count"] == 7 and first["count_exact"] and first["previous"] is None
    assert "after=" in first["next"] and "page=2" in first["next"]
    _tickets(2)  # newer tickets: an offset would show page 1's last rows again on page 2
    second = c.get(first["next"]).json()
    assert _ids(second) == order[3:6] and second["page"] == 2
    third = c.get(second["next"]).json()
    assert _ids(third) == order[6:] and third["next"] is None
    back = c.get(third["previous"]).json()
    assert _ids(back) == order[3:6] and "before=" in third["previous"]
    # A bare page number (an old client) still pages, by offset, among the 9 now.
    assert len(_ids(c.get("/api/pending-calls?page_size=3&page=3").json())) == 3
    oldest = c.get("/api/pending-calls?page_size=3&sort=oldest").json()
    assert _ids(oldest) == order[::-1][:3]
    assert _ids(c.get(oldest["next"]).json()) == order[::-1][3:6]


def test_mine_is_what_i_was_assigned_closed_or_answered_and_search_finds_by_arguments(api, demo):
    me, other = demo["approver"], demo["approver2"]
    assigned = ticket(assigned_to=me)
    closed = ticket(status="approved", closed_by=me, closed_at=timezone.now())
    answered = ticket()
    Response.objects.create(pending_call=answered, action="update", payload={}, final=False, actor=me)
    theirs = ticket(assigned_to=other)
    taxi = ticket(args={"purpose": "taxi to the airport", "amount": 40})
    c = api(me)
    assert set(_ids(c.get("/api/pending-calls?mine=true&status=all").json())) == {assigned.pk, closed.pk, answered.pk}
    assert set(_ids(c.get("/api/pending-calls?mine=1").json())) == {assigned.pk, answered.pk}  # open ones
    assert _ids(c.get("/api/pending-calls?mine=false&q=airport").json()) == [taxi.pk]
    assert _ids(api(other).get("/api/pending-calls?mine=true&status=all").json()) == [theirs.pk]


def test_counts_are_capped_and_say_so(api, demo, monkeypatch):
    monkeypatch.setattr(paging, "COUNT_CAP", 4)
    _tickets(6)
    body = api(demo["approver"]).get("/api/pending-calls?page_size=2").json()
    assert body["count"] == 4 and body["count_exact"] is False and len(body["results"]) == 2
    few = api(demo["approver"]).get("/api/pending-calls?q=nothing-like-this").json()
    assert few["count"] == 0 and few["count_exact"] is True


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("mine=maybe", "'mine' must be true or false"),
        ("sort=sideways", "Unknown sort 'sideways'"),
        ("after=nonsense", "'after' is not a cursor"),
        ("before=1_0", "'before' is not a cursor"),
        ("q=" + "x" * 201, "'q' is at most 200 characters"),
        ("status=bogus", "Unknown status 'bogus'"),
        ("kind=bogus", "Unknown kind 'bogus'"),
        ("page=0", "'page' must be between"),
    ],
)
def test_bad_list_parameters_are_400_with_a_message(api, demo, query, says):
    _tickets(1)
    r = api(demo["approver"]).get(f"/api/pending-calls?{query}")
    assert r.status_code == 400 and says in r.json()["detail"], r.content


def _queries(client: Client, url: str) -> tuple[int, dict]:
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    assert response.status_code == 200, response.content
    return len(ctx.captured_queries), response.json()


URLS = ["/api/pending-calls", "/api/pending-calls?status=all", "/api/pending-calls?mine=1&status=all"]


def test_the_list_takes_a_constant_number_of_queries(api, demo):
    c = api(demo["approver"])
    for n, t in enumerate(_tickets(4)):
        t.assigned_to = demo["approver"] if n % 2 else None
        t.save()
    c.get("/api/pending-calls")  # warm per-process caches
    before = {url: _queries(c, url)[0] for url in URLS}
    made = _tickets(30, assigned_to=demo["approver"], routed=True, escalated_at=timezone.now())
    approvers = Group.objects.get(name=APPROVERS)
    escalated_to = Group.objects.create(name="escalated-to")
    for t in made:  # routed and escalated: each row shows its groups, read for the page at once
        t.approver_groups.add(approvers)
        t.escalation_groups.add(escalated_to)
    after = {url: _queries(c, url)[0] for url in URLS}
    assert after == before
    deep, body = _queries(c, "/api/pending-calls?status=all&page_size=5")
    for _ in range(3):
        deep, body = _queries(c, body["next"])
    assert deep == before["/api/pending-calls?status=all"]  # a keyset page costs what the first does
    mine_deep, body = _queries(c, "/api/pending-calls?mine=1&status=all&page_size=5")
    mine_deep, body = _queries(c, body["next"])
    assert mine_deep == before["/api/pending-calls?mine=1&status=all"]
    # What each row shows needs no query per row: who decides it, its conversation, its policy.
    assert (
        body["results"][0]["approverGroups"] == ["approvers", "escalated-to"]
        and body["results"][0]["session"]["user_id"]
    )
    assert {t["id"] for t in body["results"]} <= {t.pk for t in made}
