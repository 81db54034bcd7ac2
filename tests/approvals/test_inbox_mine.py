"""The inbox's "mine" (`?mine=1`): the tickets assigned to me, closed by me, or that I sent a response
to (an update, a decision), among those I may see; other people's are not mine. It pages by keyset
like every inbox list, alone or with other filters, in a constant number of queries."""

from __future__ import annotations

import re
from datetime import timedelta
from html import unescape

from django.contrib.auth.models import Group
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from adkweb import paging
from agents_app.models import AdkSession
from approvals.models import PendingCall, Response
from approvals.selectors import InboxFilters, ticket_queryset
from tests.approvals.inbox_helpers import inbox_ids
from tests.approvals_factories import session_for, ticket


def _responded(t: PendingCall, who) -> PendingCall:  # noqa: ANN001 - a User
    Response.objects.create(pending_call=t, action="update", payload={}, final=False, actor=who)
    return t


def _closed(who, **fields) -> PendingCall:  # noqa: ANN001, ANN003
    return ticket(status="approved", closed_by=who, closed_at=timezone.now(), **fields)


def _get(client: Client, url: str) -> tuple[str, int]:
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    assert response.status_code == 200
    return response.content.decode(), len(ctx.captured_queries)


def _link(html: str, rel: str) -> str:
    found = re.search(rf'<a href="([^"]+)"[^>]*rel="{rel}"', html)
    return unescape(found.group(1)) if found else ""


def test_mine_is_what_i_was_assigned_closed_or_answered_and_only_what_i_may_see(approver, demo):
    me, other = demo["approver"], demo["approver2"]
    assigned = ticket(assigned_to=me)
    closed = _closed(me)
    responded = _responded(ticket(), me)
    # Decided by someone else after my update: mine by the response alone (my update is on it).
    decided_after_me = _responded(_closed(other), me)
    theirs = [ticket(assigned_to=other), _closed(other), _responded(ticket(), other), ticket()]
    # Mine three ways, but not for me to see: routed to a team I am not in; a deleted conversation's.
    legal = Group.objects.create(name="legal")
    routed = _responded(_closed(me, assigned_to=me, routed=True), me)
    routed.approver_groups.add(legal)
    gone = session_for()
    archived = [_responded(_closed(me, session=gone, assigned_to=me), me)]
    AdkSession.all_objects.filter(pk=gone.pk).update(archived_at=timezone.now())

    everything, _ = _get(approver, "/?mine=1&status=all")
    mine = [decided_after_me.pk, responded.pk, closed.pk, assigned.pk]  # newest first
    assert inbox_ids(everything) == mine and "4 tickets" in everything
    hidden = [t.pk for t in [*theirs, routed, *archived]]
    assert set(hidden).isdisjoint(inbox_ids(approver.get("/?mine=1&status=all").content.decode()))
    assert set(hidden[:4]) <= set(inbox_ids(approver.get("/?status=all").content.decode()))  # just not mine
    # With the other filters: the open ones (the default status), closed ones, one agent's.
    assert inbox_ids(_get(approver, "/?mine=1")[0]) == [responded.pk, assigned.pk]
    assert inbox_ids(_get(approver, "/?mine=1&status=closed")[0]) == [decided_after_me.pk, closed.pk]
    other_agent = ticket(session=session_for(app_name="transfer_agent"), assigned_to=me)
    html, _ = _get(approver, "/?mine=1&status=all&agent=transfer_agent")
    assert inbox_ids(html) == [other_agent.pk]
    # Someone else's "mine" is theirs.
    approver.force_login(other)
    theirs_newest_first = [theirs[2].pk, theirs[1].pk, theirs[0].pk, decided_after_me.pk]  # they closed that one
    assert inbox_ids(_get(approver, "/?mine=1&status=all")[0]) == theirs_newest_first


def _many(me, other) -> list[int]:  # noqa: ANN001
    """70 tickets over 70 seconds, each mine one way (or two) or someone else's; ids of mine, newest first."""
    session, start, mine = session_for(), timezone.now() - timedelta(hours=1), []
    for n in range(70):
        way = n % 5
        if way == 0:
            t = ticket(session=session, assigned_to=me)
        elif way == 1:
            t = _closed(me, session=session)
        elif way == 2:
            t = _responded(_closed(me, session=session), me)  # mine twice over: listed once
        elif way == 3:
            t = _responded(ticket(session=session), me)
        else:
            t = _responded(ticket(session=session, assigned_to=other), other)
        PendingCall.objects.filter(pk=t.pk).update(created_at=start + timedelta(seconds=n // 2))  # ties
        if way != 4:
            mine.append((start + timedelta(seconds=n // 2), t.pk))
    return [pk for _, pk in sorted(mine, reverse=True)]


def test_mine_pages_by_its_next_links_in_a_constant_number_of_queries(approver, demo):
    mine = _many(demo["approver"], demo["approver2"])
    approver.get("/?mine=1&status=all")  # warm per-process caches
    url, seen, counts = "/?mine=1&status=all", [], []
    while url:
        html, queries = _get(approver, url)
        seen += inbox_ids(html)
        counts.append(queries)
        last, url = html, _link(html, "next")
        assert not url or "after=" in url
    assert seen == mine and len(counts) == 3 and "56 tickets" in html
    back, queries = _get(approver, _link(last, "prev"))  # and back by the Previous link
    assert inbox_ids(back) == mine[25:50] and queries == counts[0]
    assert inbox_ids(_get(approver, "/?mine=1&status=all&page=3")[0]) == mine[50:]  # a typed page number
    _, plain = _get(approver, "/?status=all")
    assert set(counts) == {plain}  # "mine" costs no query more than the unfiltered list, on any page
    # More tickets, of every kind: the same number of queries.
    _many(demo["approver"], demo["approver2"])
    assert _get(approver, "/?mine=1&status=all")[1] == plain
    assert _get(approver, "/?mine=1&status=all&agent=reimbursement_agent")[1] == plain


def test_mine_counts_each_ticket_once_up_to_the_cap(approver, demo, monkeypatch):
    """A ticket mine two ways counts once, under the cap and past it."""
    monkeypatch.setattr(paging, "COUNT_CAP", 10)
    me = demo["approver"]
    both = [_responded(ticket(assigned_to=me), me) for _ in range(8)]  # assigned and answered
    assert "8 tickets" in _get(approver, "/?mine=1&status=all")[0]
    [_responded(ticket(), me) for _ in range(2)]
    assert "10 tickets" in _get(approver, "/?mine=1&status=all")[0]
    [_responded(ticket(), me) for _ in range(3)]
    html, _ = _get(approver, "/?mine=1&status=all")
    assert "10+ tickets" in html and inbox_ids(html)[-8:] == [t.pk for t in reversed(both)]


def test_mine_shows_what_its_definition_selects_for_every_status_sort_and_page(approver, demo):
    """Page after page by the Next links, for each status filter, both orders and with an agent: the
    tickets the definition selects (assigned to me, closed by me or answered by me: `mine_arms`, one OR
    over the tickets), after some of mine closed, some reopened to another status and some of another
    agent, and a typed page number the same as the Next link's page."""
    me, other = demo["approver"], demo["approver2"]
    _many(me, other)
    _many(me, other)  # the same created_at again: ties across the two
    for n, t in enumerate(PendingCall.objects.filter(status="pending").order_by("pk")):
        if n % 4 == 0:  # decided by someone else: mine still (assigned or answered), closed now
            PendingCall.objects.filter(pk=t.pk).update(status="rejected", closed_by=other, closed_at=timezone.now())
        elif n % 4 == 1:
            PendingCall.objects.filter(pk=t.pk).update(status="in_progress")
    ticket(session=session_for(app_name="transfer_agent"), assigned_to=me)
    for status in ("open", "closed", "all", "pending", "in_progress", "approved", "rejected"):
        for sort in ("newest", "oldest"):
            for agent in ("", "transfer_agent"):
                filters = InboxFilters(mine=True, status=status, sort=sort, agent=agent)
                want = list(ticket_queryset(filters=filters, user=me).values_list("pk", flat=True))
                url, seen = f"/?mine=1&status={status}&sort={sort}&agent={agent}", []
                while url:
                    html, _ = _get(approver, url)
                    seen += inbox_ids(html)
                    url = _link(html, "next")
                assert seen == want, (status, sort, agent)
                if len(want) > 25:
                    page2 = inbox_ids(_get(approver, f"/?mine=1&status={status}&sort={sort}&agent={agent}&page=2")[0])
                    assert page2 == want[25:50], (status, sort, agent)
