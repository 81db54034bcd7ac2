"""A policy's condition does not fail open on arguments it cannot read. The demo's "Large reimbursements"
(amount > 1000: two approvals from finance, four-eyes) let a reimbursement whose amount the model wrote
"$2,500" (or "2,500", "2500 USD"), or left out, open under the default rule (one approval from anyone):
an ordering comparison with a value that did not read as a number was false. Now money-like strings read
as numbers where unambiguous, and a condition that cannot be decided on the arguments (an operand missing
or unreadable) makes its policy apply, saying why, unless that policy would approve at once: then it is
passed over (a person decides). No standing grant approves such a ticket at once. The same choice governs
an approver's edit (edits.rules_refusal), the dry run and the hook's fast paths."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.utils.html import escape

from agents_app.models import Turn
from approvals import grants, services
from approvals.models import Response, StandingGrant, TicketActivity
from tests.approvals.policy_helpers import open_ticket, policy
from tests.approvals_factories import session_for

LARGE = "Large reimbursements"


def _policy_note(ticket) -> str:
    return TicketActivity.objects.get(ticket=ticket, kind=TicketActivity.Kind.POLICY).message


@pytest.mark.parametrize("amount", ["$2,500", "2,500", "2500 USD", "USD 2500", "2,500.00", "$ 2500", "2500.00 usd"])
def test_an_amount_written_as_money_falls_under_its_policy(demo, amount):
    ticket = open_ticket(args={"purpose": "laptop", "amount": amount})
    assert ticket.policy_name == LARGE, amount
    assert ticket.required_approvals == 2 and ticket.four_eyes and ticket.routed
    assert "could not be" not in _policy_note(ticket)


@pytest.mark.parametrize("amount", ["$200", "200 USD", "1,000.00"])
def test_a_readable_small_amount_keeps_the_default_rule(demo, amount):
    ticket = open_ticket(args={"purpose": "meals", "amount": amount})
    assert ticket.policy is None and ticket.required_approvals == 1
    assert not TicketActivity.objects.filter(ticket=ticket).exists()


@pytest.mark.parametrize(
    "args, why",
    [
        ({"purpose": "laptop", "amount": "2.500,00"}, "amount '2.500,00' could not be read as a number"),
        ({"purpose": "laptop", "amount": "1.800"}, "amount '1.800' could not be read as a number"),
        ({"purpose": "laptop", "amount": "lots"}, "amount 'lots' could not be read as a number"),
        ({"purpose": "laptop", "amount": None}, "amount null could not be read as a number"),
        ({"purpose": "laptop"}, "amount is missing"),
    ],
)
def test_an_amount_that_cannot_be_read_gets_the_policy_and_says_why(demo, args, why):
    ticket = open_ticket(args=args)
    assert ticket.policy_name == LARGE and ticket.required_approvals == 2 and ticket.four_eyes
    note = _policy_note(ticket)
    assert f"{why}; the policy '{LARGE}' applies" in note, note
    assert ticket.policy_rules["undecided"] == f"{why}; the policy '{LARGE}' applies"
    # The API and the ticket page say so too.
    client = Client()
    client.force_login(demo["approver"])
    body = client.get(f"/api/pending-calls/{ticket.pk}").json()
    assert body["policy"]["undecided"] == ticket.policy_rules["undecided"]
    page = client.get(f"/tickets/{ticket.pk}/").content.decode()
    assert 'id="policy-undecided"' in page and escape(why) in page, page


def test_a_readable_ticket_says_nothing_undecided(demo):
    client = Client()
    client.force_login(demo["approver"])
    ticket = open_ticket(args={"purpose": "laptop", "amount": 2500})
    assert client.get(f"/api/pending-calls/{ticket.pk}").json()["policy"]["undecided"] is None


def test_a_policy_that_approves_at_once_needs_a_readable_amount(demo):
    """Applying an auto-approving policy on an unreadable amount would loosen the rules: it is passed over."""
    policy("petty cash", tool="ask_for_approval", condition="amount < 50", auto_decision="approve", priority=5)
    assert open_ticket(args={"purpose": "coffee", "amount": "$12"}).status == "approved"  # readable: as before
    ticket = open_ticket(args={"purpose": "coffee", "amount": "12,00"})
    assert ticket.is_open and ticket.policy_name == LARGE  # the next policy that may apply
    assert not Response.objects.filter(pending_call=ticket).exists()
    note = _policy_note(ticket)
    assert "'petty cash' does not approve it at once: amount '12,00' could not be read as a number" in note, note
    # Where no other policy applies it keeps the default rule (a person decides), and the history says why.
    other = open_ticket(args={"purpose": "coffee", "amount": "12,00"}, session=session_for(app_name="transfer_agent"))
    assert other.is_open and other.policy is None
    (activity,) = TicketActivity.objects.filter(ticket=other)
    assert "'petty cash' does not approve it at once" in activity.message and "default rule" in activity.message


def test_a_policy_that_rejects_at_once_rejects_an_unreadable_amount_saying_why(demo):
    policy(
        "no huge",
        tool="ask_for_approval",
        condition="amount > 100000",
        auto_decision="reject",
        auto_reason="Over the limit.",
        priority=5,
    )
    ticket = open_ticket(args={"purpose": "yacht", "amount": "1.000.000"})
    assert ticket.status == "rejected"
    response = Response.objects.get(pending_call=ticket)
    reason = response.turn.content["parts"][0]["function_response"]["response"]["reason"]
    assert reason.startswith("Over the limit.") and "amount '1.000.000' could not be read as a number" in reason


def test_no_standing_grant_approves_a_ticket_its_policy_got_undecided(demo):
    policy("mid", tool="ask_for_approval", condition="amount > 100", priority=5)
    session = session_for()
    first = open_ticket(session=session, args={"purpose": "taxi", "amount": 300})
    services.ticket_approve(ticket=first, actor=demo["approver"], grant=grants.GrantSpec("session", 60))
    assert StandingGrant.objects.get().policy.name == "mid"
    assert open_ticket(session=session, args={"purpose": "taxi", "amount": "$400"}).status == "approved"
    unread = open_ticket(session=session, args={"purpose": "taxi", "amount": "4OO"})
    assert unread.is_open and unread.policy_name == "mid"


def test_a_policy_naming_no_tool_is_not_applied_for_an_argument_another_tool_lacks(demo):
    """A missing argument is undecided only where the policy names its tool (its condition was checked
    against that tool's arguments); a policy for any tool does not take every other tool's tickets."""
    policy("big anything", condition="amount > 1000")
    weather = open_ticket(args={"city": "Paris"}, tool_name="get_weather", call_name="get_weather")
    assert weather.policy is None and not TicketActivity.objects.filter(ticket=weather).exists()
    named = policy("big ones", tool="ask_for_approval", condition="amount > 1000", priority=5)
    assert open_ticket(args={"purpose": "laptop"}).policy == named


def _approve(user, ticket, edited: dict):
    client = Client()
    client.force_login(user)
    body = json.dumps({"editedArgs": edited, "argsHash": ticket.args_hash})
    return client.post(f"/api/pending-calls/{ticket.pk}/approve", body, content_type="application/json")


def test_an_edit_reads_the_asked_amount_the_same_way(demo):
    """Asked "$2,500" (Large reimbursements), edited to the number 2500: the same rules, so it is taken."""
    ticket = open_ticket(args={"purpose": "laptop", "amount": "$2,500"})
    r = _approve(demo["approver"], ticket, {"purpose": "laptop", "amount": 2500.0})
    assert r.status_code == 201, r.content
    ticket.refresh_from_db()
    assert ticket.is_open and ticket.edited_args == {"purpose": "laptop", "amount": 2500.0}  # 1 of 2 approvals


def test_an_edit_of_an_unreadable_amount_out_of_its_policy_is_refused_saying_why(demo):
    ticket = open_ticket(args={"purpose": "laptop", "amount": "2.500,00"})
    r = _approve(demo["approver"], ticket, {"purpose": "laptop", "amount": 200.0})
    assert r.status_code == 409, r.content
    detail = r.json()["detail"]
    assert f"'{LARGE}'" in detail and "amount '2.500,00' could not be read as a number" in detail, detail
    assert not Response.objects.filter(pending_call=ticket).exists() and not Turn.objects.exists()


def test_the_dry_run_counts_an_unreadable_amount_as_its_policy_would(demo):
    from approvals import dry_run
    from approvals.models import Policy

    ticket = open_ticket(args={"purpose": "laptop", "amount": "2.500,00"})
    services.ticket_reject(ticket=ticket, actor=demo["approver"], reason="no")
    result = dry_run.policy_dry_run(policy=Policy.objects.get(name=LARGE))
    assert (result.matched, result.applied) == (1, 1)


@pytest.mark.parametrize(
    "amount, why",
    [
        ("$2,500", ""),
        ("2.500,00", "amount '2.500,00' could not be read as a number; the policy 'Large reimbursements' applies"),
    ],
)
def test_a_real_turn_opens_the_ticket_under_the_policy(demo, worker, wait, amount, why):
    """Through the agent (the demo model's tool playground calls the tool with the amount as written) and
    the hook's plain-SQL path on SQLite (approvals.ticket_sqlite), which took "$2,500" for rule-free."""
    from agents_app import services as agent_services
    from approvals.models import PendingCall

    session = agent_services.session_create(app_name="reimbursement_agent", user_id="requester")
    args = json.dumps({"purpose": "laptop", "amount": amount})
    agent_services.message_send(session=session, text=f"/call ask_for_approval {args}", streaming=False)
    ticket = wait(lambda: PendingCall.objects.filter(session=session).first(), what="a ticket")
    wait(lambda: not Turn.objects.filter(session=session, status__in=["queued", "running"]).exists(), what="the turn")
    ticket.refresh_from_db()
    assert ticket.tool_args["amount"] == amount
    assert ticket.policy_name == LARGE and ticket.required_approvals == 2 and ticket.four_eyes
    assert (ticket.policy_rules or {}).get("undecided", "") == why


def test_the_ticket_page_does_not_say_the_applied_policys_condition_was_undecided_when_it_was_read(demo):
    """A policy that would approve at once passed over on an unreadable amount, then a policy whose own
    condition was read applies: the page says what was undecided and what came of it, not that the
    applied policy's condition could not be decided."""
    policy("petty cash", tool="ask_for_approval", condition="amount < 50", auto_decision="approve", priority=5)
    coffee = policy("coffee runs", tool="ask_for_approval", condition="purpose == 'coffee'", priority=4)
    ticket = open_ticket(args={"purpose": "coffee", "amount": "12,00"})
    assert ticket.policy == coffee
    client = Client()
    client.force_login(demo["approver"])
    page = client.get(f"/tickets/{ticket.pk}/").content.decode()
    assert 'id="policy-undecided"' in page, page
    assert "so it applies" not in page
    assert escape("the policy 'petty cash' does not approve it at once: amount '12,00' could not be read") in page
