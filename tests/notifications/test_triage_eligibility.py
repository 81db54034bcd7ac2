"""Bulk and keyboard triage (the same /inbox/bulk/ endpoint) decide a ticket only where its page
would let this person: its policy's approver groups (escalation groups once escalated), four-eyes,
no one counting twice toward M of N. Anything else is refused per ticket, with the reason, and
never decided; members of a policy's groups triage without the approvers role."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from approvals import deadlines
from approvals.models import PendingCall, Response
from tests.approvals.policy_helpers import open_ticket, person, policy, team
from tests.approvals_factories import session_for

BIG = {"purpose": "conference", "amount": 2500.0}  # the demo's "Large reimbursements": finance, 2 of N


def _bulk(client, user, ids: list[int], action: str = "approve", **extra) -> str:
    client.force_login(user)
    r = client.post("/inbox/bulk/", {"action": action, "ticket": ids, "confirm": "1", **extra})
    assert r.status_code == 200, r.content
    return r.content.decode()


def test_a_group_member_without_the_approvers_role_triages_the_groups_tickets(demo, client):
    frank = person("frank", team("finance"))  # finance only, not the approvers role
    big = open_ticket(args=BIG)
    html = _bulk(client, frank, [big.pk])
    assert "1 of 2 approvals recorded" in html
    assert list(Response.objects.values_list("pending_call", "actor__username")) == [(big.pk, "frank")]


def test_an_approver_outside_the_policy_groups_is_refused_that_ticket_only(demo, client):
    olga = person("olga", approver=True)
    big, small = open_ticket(args=BIG), open_ticket(args={"purpose": "taxi", "amount": 30.0})
    html = _bulk(client, olga, [big.pk, small.pk])
    assert "1 of 2 approved" in html and f"Ticket #{big.pk} was not found." in html
    assert "conference" not in html, "not even its arguments"
    assert not Response.objects.filter(pending_call=big).exists()
    assert PendingCall.objects.get(pk=small.pk).status == "approved"


def test_four_eyes_refuses_the_requester_on_the_confirmation_and_in_the_results(demo, client):
    fin_req = person("fin_req", team("finance"), approver=True)
    own = open_ticket(session=session_for("fin_req"), requester="fin_req", args=BIG)
    client.force_login(fin_req)
    confirm = client.post("/inbox/bulk/", {"action": "approve", "ticket": [own.pk]}).content.decode()
    assert f'id="bulk-refusal-{own.pk}"' in confirm and "four-eyes: you requested this" in confirm
    for action, extra in (("approve", {}), ("reject", {"reason": "no"})):
        html = _bulk(client, fin_req, [own.pk], action, **extra)
        assert f"Ticket #{own.pk}: you may not decide it: four-eyes: you requested this" in html
    assert not Response.objects.exists() and PendingCall.objects.get(pk=own.pk).status == "pending"


def test_no_one_counts_twice_toward_the_required_approvals(demo, client):
    big = open_ticket(args=BIG)
    _bulk(client, demo["approver"], [big.pk])
    client.force_login(demo["approver"])
    confirm = client.post("/inbox/bulk/", {"action": "approve", "ticket": [big.pk]}).content.decode()
    assert "will be refused: you may not decide it: your approval already counts (1 of 2)" in confirm
    html = _bulk(client, demo["approver"], [big.pk])
    assert "0 of 1 approved" in html and "your approval already counts (1 of 2)" in html
    assert Response.objects.filter(pending_call=big).count() == 1
    assert PendingCall.objects.get(pk=big.pk).is_open
    html = _bulk(client, demo["approver"], [big.pk], "reject", reason="changed my mind")
    assert "1 of 1 rejected" in html, "a counted approver may still reject it, as on the ticket page"


def test_the_escalation_group_triages_a_ticket_only_after_it_escalated(demo, client):
    finance, managers = team("finance-2"), team("managers")
    mike = person("mike", managers)
    policy("slow", groups=(finance,), escalation=(managers,), tool="ask_for_approval", escalate_after_seconds=60)
    ticket = open_ticket(args={"purpose": "taxi", "amount": 30.0})
    assert ticket.routed and ticket.escalate_at
    html = _bulk(client, mike, [ticket.pk])
    assert f"Ticket #{ticket.pk} was not found." in html and not Response.objects.exists()
    PendingCall.objects.filter(pk=ticket.pk).update(escalate_at=timezone.now() - timedelta(seconds=1))
    assert deadlines.ticket_escalate(ticket_id=ticket.pk)
    html = _bulk(client, mike, [ticket.pk])
    assert "1 of 1 approved" in html and PendingCall.objects.get(pk=ticket.pk).closed_by == mike
