"""Inbox fan-out (approvals.fanout): a ticket's row rendered once per change and carried with its facts
and the facts it had at its previous publish; inbox sockets move their counts by the difference and
place the row without a database query, and keep tickets from people who may not see them."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async
from django.db.backends.utils import CursorWrapper

from approvals import fanout, inbox_due
from approvals.events import notify_ticket_changed
from approvals.forms import InboxFilterForm
from approvals.models import PendingCall
from tests.approvals.policy_helpers import open_ticket, person, policy, team
from tests.approvals.test_consumers import connect

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("transport")]


def _publish(ticket, opened: bool = False) -> None:
    notify_ticket_changed(ticket_id=ticket.pk, session_pk=ticket.session_id, opened=opened)


def _decide(ticket, user) -> None:
    ticket.status, ticket.closed_by = "approved", user
    ticket.save()


async def _frames(comm) -> list[str]:
    got = [await comm.receive_from(timeout=5)]
    while not await comm.receive_nothing(timeout=0.2):
        got.append(await comm.receive_from(timeout=1))
    return got


async def test_counts_move_by_the_published_facts_without_a_query(demo, monkeypatch):
    monkeypatch.setattr(fanout, "RECOUNT_SECONDS", 0.0)  # no recount just after connecting
    inbox, _ = await connect("/ws/approvals/", demo["approver"])
    nav, _ = await connect("/ws/approvals/?nav=1", demo["approver"])
    first = await database_sync_to_async(open_ticket)()
    second = await database_sync_to_async(open_ticket)()
    # Published as the session store does when it opens them, then one is decided.
    await database_sync_to_async(_publish)(first, opened=True)
    await database_sync_to_async(_publish)(second, opened=True)
    await database_sync_to_async(_decide)(first, demo["approver"])
    await database_sync_to_async(_publish)(first)

    queries: list[str] = []
    real_execute = CursorWrapper.execute
    monkeypatch.setattr(
        CursorWrapper, "execute", lambda self, sql, params=None: queries.append(sql) or real_execute(self, sql, params)
    )
    frames = await _frames(inbox)
    navs = await _frames(nav)
    assert queries == [], queries

    counts = [f for f in frames if "nav-open-count" in f]
    assert [c.split(">")[1].split("<")[0] for c in counts] == ["1", "2", "1"]
    totals = [f for f in frames if 'id="inbox-total"' in f]
    assert ["1 ticket" in totals[0], "2 tickets" in totals[1], "1 ticket" in totals[2]] == [True] * 3
    assert any(
        f.startswith('<tbody id="inbox-rows" hx-swap-oob="afterbegin">') and f"pending-call-{second.pk}" in f
        for f in frames
    )
    decided = [f for f in frames if f.startswith(f'<tr id="pending-call-{first.pk}" class="row-approved closed"')]
    assert decided and "by approver" in decided[0]
    assert [n.split(">")[1].split("<")[0] for n in navs] == ["1", "2", "1"]
    for comm in (inbox, nav):
        await comm.disconnect()


async def test_unknown_previous_facts_count_again_from_the_database(demo):
    ticket = await database_sync_to_async(open_ticket)()  # opened before anything was published
    inbox, _ = await connect("/ws/approvals/", demo["approver"])
    await database_sync_to_async(_decide)(ticket, demo["approver"])
    await database_sync_to_async(_publish)(ticket)
    frames = await _frames(inbox)
    assert ">0<" in frames[-1] and "0 tickets" in frames[-1]  # the row first, then the counts
    await inbox.disconnect()


def _routed(demo):
    finance = team("finance", demo["approver2"])
    policy("finance", groups=(finance,), condition="amount > 100")
    olga = person("olga", approver=True)
    return olga, open_ticket(args={"purpose": "laptop", "amount": 900.0})


async def test_a_routed_ticket_reaches_its_group_only(demo):
    olga, ticket = await database_sync_to_async(_routed)(demo)
    assert ticket.routed
    outsider, _ = await connect("/ws/approvals/", olga)
    insider, _ = await connect("/ws/approvals/", demo["approver2"])
    await database_sync_to_async(_publish)(ticket, opened=True)
    seen = "".join(await _frames(insider))
    told = await _frames(outsider)
    assert f"pending-call-{ticket.pk}" in seen and ">1<" in seen
    assert ">0<" in told[0] and "0 tickets" in "".join(told)
    assert not any(f"pending-call-{ticket.pk}" in f or "laptop" in f for f in told)
    for comm in (outsider, insider):
        await comm.disconnect()


def test_python_matching_agrees_with_the_inbox_query(demo):
    """The facts' matching (every filter but a search) gives what the database's inbox query gives."""
    from approvals import selectors

    approver = demo["approver"]
    tickets = [open_ticket() for _ in range(3)]
    _decide(tickets[0], approver)
    tickets[1].assigned_to = approver
    tickets[1].save()
    viewer = fanout.Viewer.of(approver)
    queries = ["", "status=closed", "status=all", "status=approved", "agent=transfer_agent", "mine=on&status=all"]
    queries += ["kind=long_running", "tool=ask_for_approval&status=all", "tool=other"]
    for query in queries:
        from django.http import QueryDict

        filters = InboxFilterForm(QueryDict(query)).filters()
        for t in PendingCall.objects.all():
            fanout.publish_ticket(ticket_id=t.pk)  # a swap: facts now known
            ticket = selectors.ticket_get(ticket_id=t.pk)
            facts = fanout.ticket_facts(ticket, [], [], [])
            expected = selectors.ticket_matches(ticket_id=t.pk, filters=filters, user=approver)
            assert fanout.matches(facts, filters, viewer) == expected, (query, t.pk)


@pytest.fixture
def small_cap(monkeypatch):
    from adkweb import paging
    from approvals import consumers

    monkeypatch.setattr(paging, "COUNT_CAP", 2)
    monkeypatch.setattr(consumers, "COUNT_CAP", 2)
    fanout.nav_count_html.cache_clear()  # rendered with the cap
    yield
    fanout.nav_count_html.cache_clear()


async def test_a_capped_count_going_down_is_counted_again(demo, monkeypatch, small_cap):
    monkeypatch.setattr(fanout, "RECOUNT_SECONDS", 0.0)
    tickets = [await database_sync_to_async(open_ticket)() for _ in range(4)]
    for t in tickets:
        await database_sync_to_async(_publish)(t, opened=True)  # facts known
    nav, _ = await connect("/ws/approvals/?nav=1", demo["approver"])
    await database_sync_to_async(_decide)(tickets[0], demo["approver"])
    await database_sync_to_async(_publish)(tickets[0])
    frames = await _frames(nav)
    # 4 open, counted as 3 (the cap + 1: "2+"), less one: counted again (3: "2+"), not 3 - 1 = "2".
    assert frames[-1].split(">")[1].split("<")[0] == "2+"
    await nav.disconnect()


async def test_with_no_inbox_open_nothing_is_rendered_and_a_later_socket_counts_right(demo, monkeypatch):
    """A change nobody watches is not rendered (nor sent) but its facts are kept: a socket opened
    later counts from the database, then moves by the next change's facts without a query, and
    gets that change's row."""
    from channels.layers import get_channel_layer

    await get_channel_layer().flush()  # no inbox socket left open by another test
    monkeypatch.setattr(fanout, "RECOUNT_SECONDS", 0.0)
    renders: list[str] = []
    real_render = fanout.render_to_string
    for module in (fanout, inbox_due):  # the row's render is inbox_due's (pushed_row)
        monkeypatch.setattr(
            module, "render_to_string", lambda name, *a, **k: renders.append(name) or real_render(name, *a, **k)
        )
    first = await database_sync_to_async(open_ticket)()
    second = await database_sync_to_async(open_ticket)()
    await database_sync_to_async(_publish)(first, opened=True)
    await database_sync_to_async(_publish)(second, opened=True)
    assert renders == []

    inbox, _ = await connect("/ws/approvals/", demo["approver"])  # counts 2 open from the database
    await database_sync_to_async(_decide)(first, demo["approver"])
    await database_sync_to_async(_publish)(first)
    assert "approvals/inbox.html#row" in renders
    queries: list[str] = []
    real_execute = CursorWrapper.execute
    monkeypatch.setattr(
        CursorWrapper, "execute", lambda self, sql, params=None: queries.append(sql) or real_execute(self, sql, params)
    )
    frames = await _frames(inbox)
    assert queries == [], queries  # the facts before the change were known: no recount
    assert [f.split(">")[1].split("<")[0] for f in frames if "nav-open-count" in f] == ["1"]
    assert any(f.startswith(f'<tr id="pending-call-{first.pk}" class="row-approved closed"') for f in frames)
    await inbox.disconnect()
