"""Deadlines from the database (reminder, escalation, expiry: each exactly once, however often or late
the sweep runs) and standing grants (approve the next matching ticket at once, until revoked)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from adkweb.errors import Conflict, Forbidden, Invalid
from agents_app.models import Turn
from approvals import deadlines, events, grants, selectors, services
from approvals.models import Response, StandingGrant, TicketActivity
from approvals.permissions import can_decide_ticket, can_view_ticket
from tests.approvals.policy_helpers import open_ticket, person, policy, team
from tests.approvals_factories import session_for


def _past(ticket, **fields):
    """Move a ticket's deadlines into the past (as if its due time had come)."""
    ago = timezone.now() - timedelta(seconds=1)
    type(ticket).objects.filter(pk=ticket.pk).update(**{f: ago for f in fields})
    ticket.refresh_from_db()


@pytest.fixture
def heard():
    """What the notifications app was told (adkweb.notify records an event row per call)."""
    from notifications.models import NotificationEvent

    def told(*names: str) -> list[tuple[str, int]]:
        rows = NotificationEvent.objects.filter(name__in=names or events.DEADLINE_EVENTS)
        return sorted(rows.values_list("name", "ticket_id"))

    return told


def test_rules_set_the_deadlines_from_when_the_ticket_opened(demo):
    ops = team("ops")
    policy(
        "slow",
        tool="ask_for_approval",
        due_in_seconds=3600,
        remind_before_seconds=600,
        escalation=(ops,),
        escalate_after_seconds=1800,
    )
    ticket = open_ticket()
    assert ticket.due_at - ticket.created_at == timedelta(hours=1)
    assert ticket.due_at - ticket.remind_at == timedelta(minutes=10)
    assert ticket.escalate_at - ticket.created_at == timedelta(minutes=30)
    assert deadlines.deadlines_sweep() == {"reminded": 0, "escalated": 0, "expired": 0}


def test_reminder_and_escalation_are_recorded_once_and_heard(demo, heard):
    ops = team("ops")
    olga = person("olga", ops)
    policy(
        "slow",
        tool="ask_for_approval",
        groups=(team("finance"),),
        due_in_seconds=3600,
        remind_before_seconds=600,
        escalation=(ops,),
        escalate_after_seconds=1800,
    )
    ticket = open_ticket()
    assert not can_view_ticket(olga, ticket)
    _past(ticket, remind_at=True, escalate_at=True)
    assert deadlines.deadlines_sweep() == {"reminded": 1, "escalated": 1, "expired": 0}
    assert deadlines.deadlines_sweep() == {"reminded": 0, "escalated": 0, "expired": 0}
    ticket.refresh_from_db()
    assert ticket.reminded_at and ticket.escalated_at and ticket.is_open
    assert can_view_ticket(olga, ticket) and can_decide_ticket(olga, ticket)
    assert olga in selectors.ticket_deciders(ticket=ticket)
    kinds = list(TicketActivity.objects.filter(ticket=ticket).values_list("kind", "message"))
    assert kinds[1:] == [("reminded", kinds[1][1]), ("escalated", "Escalated to ops: no decision yet.")]
    assert heard() == [("ticket.escalated", ticket.pk), ("ticket.reminder", ticket.pk)]


def test_expiry_sends_the_agent_a_final_expired_answer_and_later_answers_get_409(demo, heard):
    policy("quick", tool="ask_for_approval", due_in_seconds=60)
    ticket = open_ticket()
    _past(ticket, due_at=True)
    assert deadlines.deadlines_sweep()["expired"] == 1
    assert deadlines.deadlines_sweep()["expired"] == 0
    ticket.refresh_from_db()
    assert ticket.status == "expired" and ticket.closed_by is None
    (response,) = Response.objects.filter(pending_call=ticket)
    assert (response.action, response.source, response.final) == ("expire", "expiry", True)
    fr = Turn.objects.get(session=ticket.session).content["parts"][0]["function_response"]
    assert fr["id"] == ticket.call_id and fr["response"]["status"] == "expired"
    with pytest.raises(services.TicketClosed, match="already closed"):
        services.ticket_approve(ticket=ticket, actor=demo["approver"])
    assert heard() == [("ticket.expired", ticket.pk)]
    assert heard("ticket.decided") == []  # an expiry is told once, as an expiry


def test_a_decided_ticket_never_expires(demo):
    policy("quick", tool="ask_for_approval", due_in_seconds=60, remind_before_seconds=30)
    ticket = open_ticket()
    services.ticket_approve(ticket=ticket, actor=demo["approver"])
    _past(ticket, due_at=True, remind_at=True)
    assert deadlines.deadlines_sweep() == {"reminded": 0, "escalated": 0, "expired": 0}


def test_a_standing_grant_approves_the_next_matching_ticket_at_once(demo):
    session = session_for()
    first = open_ticket(session=session)
    services.ticket_approve(ticket=first, actor=demo["approver"], grant=grants.GrantSpec("session", 60))
    grant = StandingGrant.objects.get()
    assert (grant.created_by, grant.session, grant.tool_name) == (demo["approver"], session, "ask_for_approval")
    assert grant.expires_at - grant.created_at == pytest.approx(timedelta(minutes=60), abs=timedelta(seconds=5))
    nxt = open_ticket(session=session, args={"purpose": "taxi", "amount": 300.0})
    assert nxt.status == "approved"
    response = Response.objects.get(pending_call=nxt)
    assert (response.source, response.grant, response.actor) == ("grant", grant, None)
    assert response.comment == f"Approved by standing grant #{grant.pk} from approver."
    elsewhere = open_ticket(session=session_for())  # another conversation: not covered
    assert elsewhere.is_open
    grants.grant_revoke(grant=grant, actor=demo["approver"])
    assert open_ticket(session=session).is_open
    with pytest.raises(Conflict, match="already revoked"):
        grants.grant_revoke(grant=grant, actor=demo["approver"])


def test_a_user_grant_covers_the_requesters_other_conversations_until_it_ends(demo):
    first = open_ticket()
    services.ticket_approve(ticket=first, actor=demo["approver"], grant=grants.GrantSpec("user", 5))
    assert open_ticket(session=session_for()).status == "approved"
    assert open_ticket(session=session_for(user_id="someone")).is_open
    StandingGrant.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert open_ticket(session=session_for()).is_open


def test_grants_are_refused_where_the_rules_forbid_them(demo):
    big = open_ticket(args={"purpose": "laptop", "amount": 2500.0})  # demo policy: 2 approvals, no grants
    with pytest.raises(Conflict, match="forbids standing grants"):
        services.ticket_approve(ticket=big, actor=demo["approver"], grant=grants.GrantSpec("session", 60))
    assert not Response.objects.filter(pending_call=big).exists()
    small = open_ticket()
    with pytest.raises(Invalid, match="1 to 43200 minutes"):
        services.ticket_approve(ticket=small, actor=demo["approver"], grant=grants.GrantSpec("session", 0))
    reject = services.Answer(small, {"status": "rejected"}, True, action="reject", grant=grants.GrantSpec("user", 5))
    with pytest.raises(services.InvalidResponse, match="approval only"):
        services.answers_submit(session=small.session, answers=[reject], actor=demo["approver"])


def test_a_grant_does_not_carry_across_policies(demo):
    first = open_ticket()  # no policy
    services.ticket_approve(ticket=first, actor=demo["approver"], grant=grants.GrantSpec("user", 60))
    policy("strict", tool="ask_for_approval", condition="amount > 500")
    assert open_ticket(args={"purpose": "tv", "amount": 900.0}).is_open  # another policy's rules
    assert open_ticket().status == "approved"


def test_only_the_giver_or_a_policy_admin_revokes_a_grant(demo):
    first = open_ticket()
    services.ticket_approve(ticket=first, actor=demo["approver"], grant=grants.GrantSpec("user", 60))
    grant = StandingGrant.objects.get()
    with pytest.raises(Forbidden):
        grants.grant_revoke(grant=grant, actor=demo["approver2"])
    grants.grant_revoke(grant=grant, actor=demo["agentadmin"])
