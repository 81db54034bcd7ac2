"""A ticket escalates by the clock (approvals.permissions.escalated): from its escalation time its escalation
groups see and decide it whether or not the deadline sweep has run. A member of the escalation group who
decided it before the sweep ran left no "Escalated" entry in its history and no escalated_at (the sweep
only looks at open tickets), and the ticket page said "Escalated ... ago" only once the sweep had written
the column: the record of who could decide it, and why, was incomplete. Now the decision's own transaction
records the escalation (escalated_at = its escalation time, the sweep's history entry) exactly once, and
the page says "Escalated" from the clock."""

from __future__ import annotations

import json
from datetime import timedelta

from django.urls import reverse
from django.utils import timezone

from approvals import deadlines
from approvals.models import PendingCall, TicketActivity
from tests.approvals import test_deadlines_and_grants
from tests.approvals.policy_helpers import open_ticket, person, policy, team
from tests.approvals.test_escalation_by_time import _approve, _client

SMALL = {"purpose": "meals", "amount": 200.0}
heard = test_deadlines_and_grants.heard  # what the notifications app was told (a fixture)


def _escalating(required_approvals: int = 1):
    finance, ops = team("fin-team"), team("ops")
    policy(
        "slow",
        tool="ask_for_approval",
        groups=(finance,),
        escalation=(ops,),
        escalate_after_seconds=1800,
        required_approvals=required_approvals,
    )
    return person("olga", ops), person("fiona", finance)


def _escalated_a_minute_ago() -> PendingCall:
    ticket = open_ticket(args=SMALL)
    at = timezone.now() - timedelta(minutes=1)
    PendingCall.objects.filter(pk=ticket.pk).update(escalate_at=at)
    ticket.refresh_from_db()
    assert ticket.escalated_at is None  # the sweep has not run since
    return ticket


def _escalations(ticket: PendingCall) -> list[str]:
    return list(
        TicketActivity.objects.filter(ticket=ticket, kind=TicketActivity.Kind.ESCALATED).values_list(
            "message", flat=True
        )
    )


def test_a_decision_by_the_escalation_group_before_the_sweep_records_the_escalation_once(demo):
    olga, _ = _escalating()
    ticket = _escalated_a_minute_ago()
    r = _approve(olga, ticket)
    assert r.status_code == 201, r.content
    ticket.refresh_from_db()
    assert ticket.status == "approved"
    assert ticket.escalated_at == ticket.escalate_at  # when it escalated, not when it was written down
    assert _escalations(ticket) == ["Escalated to ops: no decision yet."]  # the sweep's own entry
    assert deadlines.deadlines_sweep()["escalated"] == 0
    assert deadlines.ticket_escalate(ticket_id=ticket.pk) is False
    assert _escalations(ticket) == ["Escalated to ops: no decision yet."]  # once


def test_a_held_approval_records_it_and_the_sweep_adds_nothing(demo, heard):
    olga, fiona = _escalating(required_approvals=2)
    ticket = _escalated_a_minute_ago()
    r = _approve(olga, ticket)
    assert r.status_code == 201 and r.json()["final"] is False, r.content
    ticket.refresh_from_db()
    assert ticket.is_open and ticket.escalated_at == ticket.escalate_at
    assert _escalations(ticket) == ["Escalated to ops: no decision yet."]
    assert heard("ticket.escalated") == [("ticket.escalated", ticket.pk)]  # still open: ops are told, once
    assert deadlines.deadlines_sweep()["escalated"] == 0
    assert _approve(fiona, ticket).status_code == 201
    assert _escalations(ticket) == ["Escalated to ops: no decision yet."]
    assert heard("ticket.escalated") == [("ticket.escalated", ticket.pk)]


def test_a_decision_that_closes_it_records_the_escalation_without_telling_anyone_to_act(demo, heard):
    olga, _ = _escalating()
    ticket = _escalated_a_minute_ago()
    assert _approve(olga, ticket).status_code == 201
    assert heard("ticket.escalated") == []  # "escalated to you: nobody has decided it yet" would be false


def test_a_refused_decision_records_nothing(demo):
    olga, _ = _escalating()
    ticket = _escalated_a_minute_ago()
    body = json.dumps({"argsHash": "0" * 64})
    r = _client(olga).post(f"/api/pending-calls/{ticket.pk}/approve", body, content_type="application/json")
    assert r.status_code == 409, r.content
    ticket.refresh_from_db()
    assert ticket.escalated_at is None and _escalations(ticket) == []


def test_a_decision_before_the_escalation_time_records_no_escalation(demo):
    _, fiona = _escalating()
    ticket = open_ticket(args=SMALL)
    assert _approve(fiona, ticket).status_code == 201
    ticket.refresh_from_db()
    assert ticket.escalated_at is None and _escalations(ticket) == []


def test_the_ticket_page_says_escalated_from_the_clock(demo):
    olga, fiona = _escalating()
    ticket = _escalated_a_minute_ago()
    page = _client(fiona).get(reverse("approvals:ticket", args=[ticket.pk])).content.decode()
    assert 'class="escalated">Escalated' in page and "<strong>ops</strong>" in page
    assert "minute ago</time> to <strong>ops</strong>" in page  # when it escalated: a minute ago

    early = open_ticket(args=SMALL)  # escalates in half an hour
    page = _client(fiona).get(reverse("approvals:ticket", args=[early.pk])).content.decode()
    assert 'class="escalated"' not in page
