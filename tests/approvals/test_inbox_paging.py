"""The inbox at scale: keyset pages, capped counts, filter menus from the configuration, and a
constant number of queries whatever the page, the filters or the number of tickets."""

from __future__ import annotations

import re
from html import unescape

from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from adkweb import paging
from agents_app.models import AgentConfig
from approvals.models import PendingCall
from tests.approvals.inbox_helpers import inbox_ids
from tests.approvals_factories import session_for, ticket


def _link(html: str, rel: str) -> str:
    found = re.search(rf'<a href="([^"]+)"[^>]*rel="{rel}"', html)
    assert found, f"no {rel} link"
    return unescape(found.group(1))


def _tickets(n: int) -> list[PendingCall]:
    session = session_for()
    return [ticket(session=session) for _ in range(n)]


def test_next_and_previous_links_walk_the_list_by_keyset(approver):
    made = _tickets(60)
    newest_first = [t.pk for t in sorted(made, key=lambda t: (t.created_at, t.pk), reverse=True)]
    page1 = approver.get("/").content.decode()
    assert inbox_ids(page1) == newest_first[:25] and "Page 1 of 3" in page1 and "60 tickets" in page1
    nxt = _link(page1, "next")
    assert "after=" in nxt and "page=2" in nxt
    page2 = approver.get(nxt).content.decode()
    assert inbox_ids(page2) == newest_first[25:50] and "Page 2 of 3" in page2
    page3 = approver.get(_link(page2, "next")).content.decode()
    assert inbox_ids(page3) == newest_first[50:] and 'rel="next"' not in page3
    back = approver.get(_link(page3, "prev")).content.decode()
    assert inbox_ids(back) == newest_first[25:50] and "Page 2 of 3" in back
    first = approver.get(_link(back, "prev")).content.decode()
    assert inbox_ids(first) == newest_first[:25] and 'rel="prev"' not in first
    # A bare page number (an old link) still works, by offset, and so does a bad cursor.
    assert inbox_ids(approver.get("/?page=2").content.decode()) == newest_first[25:50]
    assert inbox_ids(approver.get("/?page=2&after=nonsense").content.decode()) == newest_first[25:50]


def test_keyset_pages_keep_their_rows_when_new_tickets_arrive(approver):
    made = _tickets(30)
    page1 = approver.get("/").content.decode()
    nxt = _link(page1, "next")
    _tickets(3)  # newer tickets push the offsets, not the keyset
    oldest = sorted(made, key=lambda t: (t.created_at, t.pk))[:5]
    assert inbox_ids(approver.get(nxt).content.decode()) == [t.pk for t in reversed(oldest)]


def test_oldest_first_pages_by_keyset_too(approver):
    made = _tickets(30)
    oldest_first = [t.pk for t in sorted(made, key=lambda t: (t.created_at, t.pk))]
    page1 = approver.get("/?sort=oldest").content.decode()
    assert inbox_ids(page1) == oldest_first[:25]
    assert inbox_ids(approver.get(_link(page1, "next")).content.decode()) == oldest_first[25:]


def test_counts_are_capped(approver, monkeypatch):
    monkeypatch.setattr(paging, "COUNT_CAP", 4)
    _tickets(30)
    html = approver.get("/").content.decode()
    assert "4+ tickets" in html and 'id="nav-open-count" class="badge" title="open tickets">4+<' in html
    assert "Page 1</span>" in html  # no "of N": the count is capped
    assert "0 tickets" in approver.get("/?q=nothing-like-this").content.decode()  # under the cap: exact


def test_filter_menus_come_from_the_configuration_not_the_tickets(approver):
    AgentConfig.objects.create(name="menu_agent", tools=["a_configured_tool"])
    with CaptureQueriesContext(connection) as ctx:
        html = approver.get("/").content.decode()
    assert '<option value="menu_agent"' in html and '<option value="a_configured_tool"' in html
    assert '<option value="ask_for_approval"' in html  # a registry tool, with no ticket at all
    scans = [q["sql"] for q in ctx.captured_queries if "DISTINCT" in q["sql"] and "pendingcall" in q["sql"]]
    assert scans == []
    # A filter in use stays in its menu (e.g. a tool no agent has any more).
    assert '<option value="gone_tool" selected' in approver.get("/?tool=gone_tool").content.decode()


URLS = ["/", "/?status=all", "/?q=meals&status=all", "/?mine=1&status=all", "/?agent=reimbursement_agent&status=closed"]


def _queries(client: Client, url: str) -> int:
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(url).status_code == 200
    return len(ctx.captured_queries)


def test_inbox_pages_take_a_constant_number_of_queries(approver):
    _tickets(30)
    approver.get("/")  # warm per-process caches
    before = {url: _queries(approver, url) for url in URLS}
    deep = _link(approver.get("/?status=all").content.decode(), "next")
    _tickets(40)
    for n in range(5):
        ticket(status="approved", args={"purpose": f"taxi {n}", "amount": 10})
    after = {url: _queries(approver, url) for url in URLS}
    assert after == before
    # Filters, search and "mine" cost no extra query; the default inbox one fewer (its count is the badge's).
    assert {url: n - after["/?status=all"] for url, n in after.items()} == {url: -(url == "/") for url in URLS}
    assert _queries(approver, deep) == before["/?status=all"]  # a keyset page costs what the first does


def test_the_nav_count_is_each_persons_and_follows_changes(demo):
    """The badge's count is compiled once per process per way of seeing tickets
    (approvals.selectors.open_ticket_count): each person still gets their own count, and it follows
    new tickets, closed ones and a change of role."""
    from django.contrib.auth.models import Group, User

    from adkweb.roles import APPROVERS
    from approvals import selectors

    mine = session_for(user_id="requester")
    others = session_for(user_id="someone")
    made = [ticket(session=mine) for _ in range(2)] + [ticket(session=others) for _ in range(3)]
    newcomer = User.objects.create_user("newcomer")

    def counts() -> dict[str, int]:
        names = ("approver", "requester", "newcomer")
        return {u: selectors.open_ticket_count(user=User.objects.get(username=u)) for u in names}

    assert counts() == {"approver": 5, "requester": 2, "newcomer": 0}
    PendingCall.objects.filter(pk=made[0].pk).update(status="approved")
    ticket(session=others)
    assert counts() == {"approver": 5, "requester": 1, "newcomer": 0}
    newcomer.groups.add(Group.objects.get(name=APPROVERS))
    assert counts() == {"approver": 5, "requester": 1, "newcomer": 5}
