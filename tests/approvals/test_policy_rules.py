"""Service tests, one rule at a time: which policy applies, who sees and decides, M of N, one
rejection, four-eyes, automatic decisions, arguments bound by hash, edit before approve."""

from __future__ import annotations

import pytest

from agents_app.models import Turn
from approvals import rules, selectors, services
from approvals.edits import InvalidEdit
from approvals.models import PendingCall, Response, TicketActivity
from approvals.permissions import can_decide_ticket, can_view_ticket, works_inbox
from tests.approvals.policy_helpers import open_ticket, person, policy

BIG = {"purpose": "laptop", "amount": 2500.0}


@pytest.fixture
def finance(demo):
    """The demo's finance team (approver, approver2) and someone outside it."""
    from django.contrib.auth.models import Group

    return Group.objects.get(name="finance")


def _fr(turn: Turn) -> dict:
    return turn.content["parts"][0]["function_response"]


def test_most_specific_policy_wins_by_priority_then_specificity(demo):
    policy("any tool")
    policy("the tool", tool="ask_for_approval")
    cond = policy("big ones", tool="ask_for_approval", condition="amount > 1000")
    assert open_ticket(args=BIG).policy_name == "Large reimbursements"  # the demo's: agent + tool + condition
    assert open_ticket(args={"purpose": "x", "amount": 50}).policy_name == "the tool"
    urgent = policy("urgent", priority=5)
    assert open_ticket(args=BIG).policy == urgent  # priority beats specificity
    urgent.enabled = False
    urgent.save()
    cond.agent = "reimbursement_agent"
    cond.save()
    ticket = open_ticket(args=BIG)  # same specificity as the demo's: the older one wins
    assert ticket.policy_name == "Large reimbursements" and ticket.policy_version == 1
    assert ticket.policy_rules["requiredApprovals"] == 2 and ticket.policy_rules["approverGroups"] == ["finance"]


def test_a_ticket_no_policy_matches_keeps_the_default_rule(demo):
    ticket = open_ticket(args={"purpose": "meals", "amount": 200})
    assert ticket.policy is None and not ticket.routed and ticket.required_approvals == 1 and ticket.due_at is None
    assert can_decide_ticket(demo["approver"], ticket) and can_decide_ticket(demo["approver2"], ticket)
    assert not TicketActivity.objects.filter(ticket=ticket).exists()


def test_approver_groups_decide_who_sees_and_answers(demo, finance):
    outsider = person("olga", approver=True)  # an approver, not in finance
    ticket = open_ticket(args=BIG)
    assert ticket.routed and list(ticket.approver_groups.all()) == [finance]
    for user in (demo["approver"], demo["approver2"], demo["admin"]):
        assert can_view_ticket(user, ticket) and can_decide_ticket(user, ticket)
    assert not can_view_ticket(outsider, ticket) and not can_decide_ticket(outsider, ticket)
    assert can_view_ticket(demo["observer"], ticket) and not can_decide_ticket(demo["observer"], ticket)
    assert can_view_ticket(demo["requester"], ticket) and not can_decide_ticket(demo["requester"], ticket)
    everything = selectors.InboxFilters(status="all")
    assert ticket in selectors.ticket_queryset(filters=everything, user=demo["approver2"])
    assert ticket not in selectors.ticket_queryset(filters=everything, user=outsider)
    assert selectors.open_ticket_count(user=outsider) == 0 and selectors.open_ticket_count(user=demo["approver2"]) == 1
    with pytest.raises(services.NotAllowed, match="only members of finance"):
        services.ticket_approve(ticket=ticket, actor=outsider)
    member = person("fred", finance)  # in finance only: no approver role, still works the inbox
    assert works_inbox(member) and can_decide_ticket(member, ticket) and not works_inbox(person("nobody"))
    assert [u.username for u in selectors.ticket_deciders(ticket=ticket)] == ["admin", "approver", "approver2", "fred"]
    assert selectors.ticket_approver_groups(ticket=ticket) == ["finance"]


def test_two_of_n_each_approval_recorded_and_the_second_closes(demo):
    ticket = open_ticket(args=BIG)
    first = services.ticket_approve(ticket=ticket, actor=demo["approver"], comment="ok by me")
    ticket.refresh_from_db()
    assert (first.final, first.turn, first.action) == (False, None, "approve")
    assert ticket.status == "pending" and not Turn.objects.filter(session=ticket.session).exists()
    assert [r.actor for r in selectors.ticket_approvals(ticket=ticket)] == [demo["approver"]]
    with pytest.raises(services.AlreadyCounted, match=r"already counts \(1 of 2\)"):
        services.ticket_approve(ticket=ticket, actor=demo["approver"])
    assert [u.username for u in selectors.ticket_deciders(ticket=ticket)] == ["admin", "approver2"]
    second = services.ticket_approve(ticket=ticket, actor=demo["approver2"])
    ticket.refresh_from_db()
    assert second.final and second.turn is not None
    assert (ticket.status, ticket.closed_by) == ("approved", demo["approver2"])
    assert Turn.objects.filter(session=ticket.session).count() == 1
    assert _fr(second.turn) == {"id": ticket.call_id, "name": "ask_for_approval", "response": {"status": "approved"}}
    with pytest.raises(services.TicketClosed):
        services.ticket_approve(ticket=ticket, actor=demo["admin"])


def test_one_rejection_closes_a_quorum_ticket_rejected(demo):
    ticket = open_ticket(args=BIG)
    services.ticket_approve(ticket=ticket, actor=demo["approver"])
    rejected = services.ticket_reject(ticket=ticket, actor=demo["approver2"], reason="Over budget")
    ticket.refresh_from_db()
    assert ticket.status == "rejected" and rejected.final
    assert _fr(rejected.turn)["response"] == {"status": "rejected", "reason": "Over budget"}


def test_a_custom_final_answer_on_a_quorum_ticket_must_approve_or_reject(demo):
    ticket = open_ticket(args=BIG)
    with pytest.raises(services.InvalidResponse, match="needs 2 approvals"):
        services.response_submit(ticket=ticket, actor=demo["approver"], payload={"status": "filed"}, final=True)
    held = services.response_submit(ticket=ticket, actor=demo["approver"], payload={"status": "approved"}, final=True)
    assert not held.final and held.turn is None  # counts as an approval, held for the second


def test_a_custom_approval_on_a_quorum_ticket_counts_toward_it(demo):
    """An approval sent as a custom response (`{"status": "approved"}`, the API's /responses or a /run
    FunctionResponse) is one of the approvals: its sender's next approval is refused as already counted,
    and the next approver's closes the ticket (it was recorded as a custom row no count read)."""
    ticket = open_ticket(args=BIG)
    held = services.response_submit(ticket=ticket, actor=demo["approver"], payload={"status": "approved"}, final=True)
    assert (held.final, held.action) == (False, "approve")
    assert [r.actor for r in selectors.ticket_approvals(ticket=ticket)] == [demo["approver"]]
    with pytest.raises(services.AlreadyCounted, match=r"already counts \(1 of 2\)"):
        services.ticket_approve(ticket=ticket, actor=demo["approver"])
    second = services.ticket_approve(ticket=ticket, actor=demo["approver2"])
    ticket.refresh_from_db()
    assert second.final and second.turn is not None and ticket.status == "approved"


def test_four_eyes_keeps_the_requester_off_their_own_ticket(demo, finance):
    session = services.PendingCall  # noqa: F841  (readability: the requester is a finance member here)
    from tests.approvals_factories import session_for

    own = open_ticket(session=session_for(user_id="approver"), args=BIG)
    assert own.four_eyes and can_view_ticket(demo["approver"], own)
    with pytest.raises(services.NotAllowed, match="four-eyes"):
        services.ticket_approve(ticket=own, actor=demo["approver"])
    with pytest.raises(services.NotAllowed, match="four-eyes"):
        services.ticket_reject(ticket=own, actor=demo["approver"])
    assert "approver" not in [u.username for u in selectors.ticket_deciders(ticket=own)]
    assert not Response.objects.filter(pending_call=own).exists()


def test_auto_approve_decides_at_once_and_queues_the_agent(demo):
    policy("petty cash", tool="ask_for_approval", condition="amount < 50", auto_decision="approve")
    ticket = open_ticket(args={"purpose": "coffee", "amount": 12})
    (response,) = Response.objects.filter(pending_call=ticket)
    assert ticket.status == "approved" and ticket.closed_by is None
    assert (response.source, response.final, response.actor) == ("policy", True, None)
    assert response.comment == "Approved by policy 'petty cash'."
    assert _fr(response.turn)["response"] == {"status": "approved", "comment": "Approved by policy 'petty cash'."}


def test_auto_reject_sends_the_reason(demo):
    policy(
        "no crypto",
        tool="ask_for_approval",
        condition='purpose == "crypto"',
        auto_decision="reject",
        auto_reason="We do not reimburse crypto.",
    )
    ticket = open_ticket(args={"purpose": "crypto", "amount": 20})
    assert ticket.status == "rejected"
    response = Response.objects.get(pending_call=ticket)
    assert _fr(response.turn)["response"] == {"status": "rejected", "reason": "We do not reimburse crypto."}


def test_auto_decisions_never_confirm_a_tool_unless_the_policy_allows_it(demo):
    auto = policy("auto transfers", tool="transfer_money", auto_decision="approve", priority=10)
    ticket = open_ticket(kind="confirmation")
    assert ticket.is_open and ticket.policy == auto
    auto.auto_confirmations = True
    auto.save()
    confirmed = open_ticket(kind="confirmation")
    assert confirmed.status == "approved"
    assert _fr(Response.objects.get(pending_call=confirmed).turn)["response"] == {"confirmed": True}


def test_a_stale_arguments_hash_is_refused_and_the_current_one_accepted(demo):
    ticket = open_ticket(args={"purpose": "meals", "amount": 200})
    assert ticket.args_hash == selectors.args_hash({"purpose": "meals", "amount": 200})
    with pytest.raises(services.StaleArguments, match="changed since you saw them"):
        services.ticket_approve(ticket=ticket, actor=demo["approver"], args_hash="0" * 64)
    assert not Response.objects.filter(pending_call=ticket).exists()
    ok = services.ticket_approve(ticket=ticket, actor=demo["approver"], args_hash=ticket.args_hash)
    assert ok.final and ok.args_hash == ticket.args_hash


def test_edit_before_approve_sends_the_approved_values_and_keeps_both(demo):
    ticket = open_ticket(args={"purpose": "meals", "amount": 200.0})
    response = services.ticket_approve(
        ticket=ticket, actor=demo["approver"], edited_args={"purpose": "meals", "amount": 150}
    )
    ticket.refresh_from_db()
    assert _fr(response.turn)["response"] == {"status": "approved", "amount": 150}
    assert ticket.args == {"purpose": "meals", "amount": 200.0} and ticket.edited_args == {
        "purpose": "meals",
        "amount": 150,
    }
    assert ticket.edited_by == demo["approver"] and response.edited_args == {"purpose": "meals", "amount": 150}
    (edit,) = TicketActivity.objects.filter(ticket=ticket, kind="edited")
    assert edit.message == "Arguments edited: amount $200.00 → $150.00" and edit.actor == demo["approver"]


@pytest.mark.parametrize(
    "edited, message",
    [
        ({"purpose": "meals", "amount": "lots"}, "amount must be a number"),
        ({"purpose": "meals"}, "amount is required"),
        ({"purpose": "meals", "amount": 1, "iban": "x"}, "no argument named iban"),
        ({"purpose": 7, "amount": 1}, "purpose must be a string"),
    ],
)
def test_edits_are_checked_against_the_tools_declaration(demo, edited, message):
    ticket = open_ticket(args={"purpose": "meals", "amount": 200.0})
    with pytest.raises(InvalidEdit, match=message):
        services.ticket_approve(ticket=ticket, actor=demo["approver"], edited_args=edited)
    ticket.refresh_from_db()
    assert ticket.is_open and ticket.edited_args is None and not Response.objects.filter(pending_call=ticket).exists()


def test_an_edit_restarts_the_count_of_approvals(demo):
    ticket = open_ticket(args=BIG)
    services.ticket_approve(ticket=ticket, actor=demo["approver"])
    services.ticket_approve(ticket=ticket, actor=demo["approver2"], edited_args={**BIG, "amount": 1800.0})
    ticket.refresh_from_db()
    assert ticket.is_open and [r.actor for r in selectors.ticket_approvals(ticket=ticket)] == [demo["approver2"]]
    with pytest.raises(services.StaleArguments):  # approver's page still shows 2500
        services.ticket_approve(ticket=ticket, actor=demo["approver"], args_hash=selectors.args_hash(BIG))
    final = services.ticket_approve(ticket=ticket, actor=demo["approver"], args_hash=ticket.args_hash)
    assert final.final and _fr(final.turn)["response"] == {"status": "approved", "amount": 1800.0}


def test_confirmation_edits_reach_the_tool_in_the_payload(demo):
    policy("transfers open", tool="transfer_money", priority=10)  # no groups: approvers decide
    ticket = open_ticket(kind="confirmation")
    response = services.ticket_approve(
        ticket=ticket, actor=demo["approver"], edited_args={"amount": 450.0, "recipient": "Bob"}
    )
    assert _fr(response.turn)["response"] == {"confirmed": True, "payload": {"amount": 450.0}}


def test_dry_json_of_a_policy_is_the_issue_shape(demo):
    p = rules.policy_for(open_ticket(args=BIG))
    assert set(rules.policy_json(p)) >= {
        "id",
        "name",
        "agent",
        "tool",
        "condition",
        "priority",
        "approverGroups",
        "escalationGroups",
        "requiredApprovals",
        "fourEyes",
        "autoDecision",
        "autoReason",
        "dueInSeconds",
        "remindBeforeSeconds",
        "escalateAfterSeconds",
        "allowGrants",
        "enabled",
        "version",
    }
    assert PendingCall.objects.filter(policy=p).count() == 1


def test_deciders_of_each_routing_asked_one_after_another(demo, finance):
    """ticket_deciders is compiled once per shape and run with each ticket's groups and counted
    approvals: tickets of different routings asked in turn each get their own people."""
    from django.contrib.auth.models import Group
    from django.utils import timezone

    legal = Group.objects.create(name="legal")
    lena = person("lena", legal)
    fred = person("fred", finance)
    policy("legal only", tool="ask_for_approval", condition="amount == 20", groups=(legal,), priority=9)
    policy("both", tool="ask_for_approval", condition="amount == 30", groups=(legal, finance), priority=9)
    policy("escalates", tool="ask_for_approval", condition="amount == 40", escalation=(legal,), priority=9)
    names = lambda ticket: [u.username for u in selectors.ticket_deciders(ticket=ticket)]  # noqa: E731
    anyone = open_ticket(args={"purpose": "meals", "amount": 200})
    to_finance = open_ticket(args=BIG)
    to_legal = open_ticket(args={"purpose": "stamps", "amount": 20})
    to_both = open_ticket(args={"purpose": "books", "amount": 30})
    escalated = open_ticket(args={"purpose": "taxi", "amount": 40})
    escalated.escalated_at = timezone.now()
    escalated.save()
    assert not escalated.routed and list(escalated.escalation_groups.all()) == [legal]
    assert names(to_legal) == ["admin", "lena"]  # routed, one group
    assert names(escalated) == ["admin", "approver", "approver2", "lena"]  # not routed, one group
    assert names(to_both) == ["admin", "approver", "approver2", "lena", "fred"]  # routed, two groups
    assert names(to_finance) == ["admin", "approver", "approver2", "fred"]
    assert names(anyone) == ["admin", "approver", "approver2"]
    services.ticket_approve(ticket=to_finance, actor=fred)  # 1 of 2: fred's approval counts now
    assert names(to_finance) == ["admin", "approver", "approver2"]
    lena.is_active = False
    lena.save()
    assert names(to_legal) == ["admin"]
