"""The policy rules again on PostgreSQL, where a new ticket's policies come from the per-process
cache (approvals.policy_cache, kept per version of the policy tables) and a standing grant is looked
for only when one may apply; and an edit of any kind takes effect for the next ticket."""

from __future__ import annotations

from django.contrib.auth.models import Group
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents_app import services as agent_services
from approvals import policies
from approvals.models import PendingCall, Policy
from tests.approvals.policy_helpers import open_ticket, policy, team
from tests.approvals.test_deadlines_and_grants import *  # noqa: F403
from tests.approvals.test_policy_rules import *  # noqa: F403
from tests.conftest import wait_for

SMALL = {"purpose": "meals", "amount": 20.0}


def _rules_queries(**fields) -> tuple[object, list[str]]:
    """A ticket opened with its rules, and the queries its rules took (policies and grants)."""
    with CaptureQueriesContext(connection) as ctx:
        ticket = open_ticket(**fields)
    sent = [q["sql"] for q in ctx.captured_queries]
    return ticket, [sql for sql in sent if "approvals_policy" in sql or "approvals_standinggrant" in sql]


def test_an_edit_takes_effect_for_the_next_ticket(demo):
    admin = demo["admin"]
    Policy.objects.all().delete()
    first, _ = _rules_queries(args=SMALL)
    assert first.policy is None and not first.routed
    _, sent = _rules_queries(args=SMALL)
    assert len(sent) == 1, sent  # the cached version: one query for policies and grants

    finance, legal = team("finance-x"), team("legal-x")
    made = policies.policy_save(
        policy=None,
        values={"name": "small", "tool": "ask_for_approval"},
        approver_groups=[finance],
        escalation_groups=[],
        actor=admin,
    )
    ticket = open_ticket(args=SMALL)
    assert ticket.policy == made and sorted(g.name for g in ticket.approver_groups.all()) == ["finance-x"]

    policies.policy_save(
        policy=made,
        values={"name": "small", "tool": "ask_for_approval", "required_approvals": 2},
        approver_groups=[finance],
        escalation_groups=[],
        actor=admin,
    )
    ticket = open_ticket(args=SMALL)
    assert ticket.required_approvals == 2 and ticket.policy_version == 2

    made.approver_groups.set([legal])  # only the links change (no version bump)
    ticket = open_ticket(args=SMALL)
    assert [g.name for g in ticket.approver_groups.all()] == ["legal-x"]

    Group.objects.filter(pk=legal.pk).update(name="legal-y")  # a rename: the rules record names
    ticket = open_ticket(args=SMALL)
    assert ticket.policy_rules["approverGroups"] == ["legal-y"]

    Policy.objects.filter(pk=made.pk).update(enabled=False)  # even a bulk update, no signal
    ticket = open_ticket(args=SMALL)
    assert ticket.policy is None and not ticket.routed


def test_a_grant_is_looked_for_only_when_one_may_apply(demo):
    Policy.objects.all().delete()
    policy("any")
    open_ticket(args=SMALL)
    _, sent = _rules_queries(args=SMALL)
    assert len(sent) == 1 and "approvals_standinggrant" in sent[0], sent


def _worker_ticket(text: str) -> PendingCall:
    """A ticket opened by the worker process (its own policy cache), for a new conversation."""
    session = agent_services.session_create(app_name="reimbursement_agent", user_id="requester")
    agent_services.message_send(session=session, text=text)
    return wait_for(lambda: PendingCall.objects.filter(session=session).first(), timeout=30, what="the worker's ticket")


def test_an_edit_in_this_process_takes_effect_in_the_worker_processs_next_ticket(demo, worker):
    """The cache is per process: the worker's, warmed by its first ticket, must see an edit made by
    another process (here the test's, as the policy pages in a web process would) at its next ticket."""
    Policy.objects.all().delete()
    finance, legal = team("finance-w"), team("legal-w")
    made = policies.policy_save(
        policy=None,
        values={"name": "meals", "tool": "ask_for_approval"},
        approver_groups=[finance],
        escalation_groups=[],
        actor=demo["admin"],
    )
    first = _worker_ticket("Please reimburse 200$ for meals")
    assert first.policy == made and [g.name for g in first.approver_groups.all()] == ["finance-w"]

    made.approver_groups.set([legal])
    second = _worker_ticket("Please reimburse 300$ for meals")
    assert [g.name for g in second.approver_groups.all()] == ["legal-w"]

    Policy.objects.filter(pk=made.pk).update(required_approvals=3)  # a bulk update: no signal, no version bump
    third = _worker_ticket("Please reimburse 400$ for meals")
    assert third.required_approvals == 3

    Policy.objects.filter(pk=made.pk).update(enabled=False)
    fourth = _worker_ticket("Please reimburse 500$ for meals")
    assert fourth.policy is None and not fourth.routed
