"""A ticket escalates at its escalation time, not when the deadline sweep next runs. A policy that opens
a ticket to its escalation groups after N minutes let them neither see nor decide it until the sweep
(Celery beat, or the embedded sweeper; never while beat is down) recorded the escalation: the policy's
"then the escalation groups see and may decide it too" was the sweeper's timing. Now, from the
escalation time on, the escalation groups see the ticket (inbox, API, its page) and may decide it (API,
page, bulk) whether or not the sweep ran; before it they may not; and a ticket decided before its
escalation time never reaches them."""

from __future__ import annotations

import json
from datetime import timedelta

from django.test import Client
from django.urls import reverse
from django.utils import timezone

from approvals import deadlines, fanout, selectors, services
from approvals.models import PendingCall
from notifications import bulk
from tests.approvals.inbox_helpers import inbox_ids
from tests.approvals.policy_helpers import open_ticket, person, policy, team

SMALL = {"purpose": "meals", "amount": 200.0}


def _escalating(demo):
    """A policy routing to finance that escalates to ops after 30 minutes; olga is in ops only."""
    finance, ops = team("fin-team"), team("ops")
    olga = person("olga", ops)
    policy("slow", tool="ask_for_approval", groups=(finance,), escalation=(ops,), escalate_after_seconds=1800)
    return olga


def _escalation_time_passed(ticket: PendingCall) -> None:
    """Its escalation time came five seconds ago; the sweep has not run since."""
    PendingCall.objects.filter(pk=ticket.pk).update(escalate_at=timezone.now() - timedelta(seconds=5))
    ticket.refresh_from_db()
    assert ticket.escalated_at is None


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _approve(user, ticket: PendingCall):
    body = json.dumps({"argsHash": ticket.args_hash})
    return _client(user).post(f"/api/pending-calls/{ticket.pk}/approve", body, content_type="application/json")


def _sees(user, ticket: PendingCall) -> dict[str, bool]:
    client = _client(user)
    listed = [t["id"] for t in client.get("/api/pending-calls?status=all").json()["results"]]
    return {
        "api": client.get(f"/api/pending-calls/{ticket.pk}").status_code == 200,
        "list": ticket.pk in listed,
        "inbox": ticket.pk in inbox_ids(client.get(reverse("approvals:inbox") + "?status=all").content.decode()),
        "page": client.get(reverse("approvals:ticket", args=[ticket.pk])).status_code == 200,
    }


NONE = {"api": False, "list": False, "inbox": False, "page": False}
ALL = {"api": True, "list": True, "inbox": True, "page": True}


def test_before_the_escalation_time_the_escalation_group_neither_sees_nor_decides(demo):
    olga = _escalating(demo)
    ticket = open_ticket(args=SMALL)
    assert ticket.escalate_at > timezone.now()
    assert _sees(olga, ticket) == NONE
    assert _approve(olga, ticket).status_code in (403, 404)
    ticket.refresh_from_db()
    assert ticket.is_open


def test_from_the_escalation_time_the_escalation_group_sees_it_before_the_sweep_runs(demo):
    olga = _escalating(demo)
    ticket = open_ticket(args=SMALL)
    _escalation_time_passed(ticket)
    assert _sees(olga, ticket) == ALL
    assert olga in selectors.ticket_deciders(ticket=ticket)
    assert "ops" in selectors.ticket_approver_groups(ticket=ticket)


def test_from_the_escalation_time_the_escalation_group_decides_it_by_the_api(demo):
    olga = _escalating(demo)
    ticket = open_ticket(args=SMALL)
    _escalation_time_passed(ticket)
    r = _approve(olga, ticket)
    assert r.status_code == 201, r.content
    ticket.refresh_from_db()
    assert ticket.status == "approved" and ticket.closed_by == olga
    assert _sees(olga, ticket) == ALL  # the ticket they decided stays theirs to read
    assert deadlines.deadlines_sweep()["escalated"] == 0  # nothing left to escalate


def test_from_the_escalation_time_the_escalation_group_decides_it_on_the_page_and_in_bulk(demo):
    olga = _escalating(demo)
    on_page, in_bulk = open_ticket(args=SMALL), open_ticket(args=SMALL)
    _escalation_time_passed(on_page)
    _escalation_time_passed(in_bulk)
    page = _client(olga).post(reverse("approvals:ticket-act", args=[on_page.pk, "approve"]), {})
    assert page.status_code == 302, page.content
    on_page.refresh_from_db()
    assert on_page.status == "approved"
    (result,) = bulk.tickets_decide(ticket_ids=[in_bulk.pk], actor=olga, action="approve")
    assert result.ok, result.message
    in_bulk.refresh_from_db()
    assert in_bulk.status == "approved"


def test_a_ticket_decided_before_its_escalation_time_never_reaches_the_escalation_group(demo):
    olga = _escalating(demo)
    fiona = person("fiona", team("fin-team"))
    ticket = open_ticket(args=SMALL)
    services.ticket_approve(ticket=ticket, actor=fiona, args_hash=ticket.args_hash)
    PendingCall.objects.filter(pk=ticket.pk).update(closed_at=timezone.now() - timedelta(seconds=10))
    _escalation_time_passed(ticket)  # five seconds ago: after it was approved
    assert _sees(olga, ticket) == NONE


def test_the_sweep_still_records_the_escalation_once(demo):
    olga = _escalating(demo)
    ticket = open_ticket(args=SMALL)
    _escalation_time_passed(ticket)
    assert deadlines.deadlines_sweep()["escalated"] == 1
    ticket.refresh_from_db()
    assert ticket.escalated_at is not None
    assert _sees(olga, ticket) == ALL


def test_an_inbox_socket_counts_it_for_the_escalation_group_from_the_escalation_time(demo):
    olga = _escalating(demo)
    ticket = open_ticket(args=SMALL)
    viewer = fanout.Viewer.of(olga)
    assert not viewer.sees(fanout._facts(ticket))
    _escalation_time_passed(ticket)
    assert viewer.sees(fanout._facts(ticket))
    assert fanout.counts_open(fanout._facts(ticket), viewer)


def test_an_escalation_groups_held_approval_counts_toward_a_quorum_before_the_sweep(demo):
    finance, ops = team("fin-team"), team("ops")
    olga, fiona = person("olga", ops), person("fiona", finance)
    policy(
        "two",
        tool="ask_for_approval",
        groups=(finance,),
        escalation=(ops,),
        escalate_after_seconds=60,
        required_approvals=2,
    )
    ticket = open_ticket(args=SMALL)
    _escalation_time_passed(ticket)
    assert _approve(olga, ticket).json()["final"] is False
    r = _approve(fiona, ticket)
    assert r.status_code == 201 and r.json()["final"] is True, r.content
    ticket.refresh_from_db()
    assert ticket.status == "approved"
