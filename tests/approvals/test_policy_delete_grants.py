"""A deleted policy's standing grants end with it, however it is deleted. Deleted in the Django admin (its
delete page, or "Delete selected policies"), a policy's grants stayed in force with their policy set to
NULL, and so approved at once the tickets of the default rule (no policy) they were never given for: a
grant given under 'strict' (amount > 100) approved the requester's next $30 taxi, which no policy
matched. Deleted on the Policies page, a policy with a grant that had ended (still holding its place
among like grants) and a like policy-less grant in force failed with a 500 (the grants' one-current
constraint, as the delete set the ended grant's policy to NULL) and stayed."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from approvals import grants, services
from approvals.models import PendingCall, Policy, StandingGrant
from tests.approvals.policy_helpers import open_ticket, policy

MEALS = {"purpose": "meals", "amount": 200.0}
TAXI = {"purpose": "taxi", "amount": 30.0}


def _strict_with_a_grant(demo) -> tuple[Policy, StandingGrant]:
    strict = policy("strict", tool="ask_for_approval", condition="amount > 100", priority=5)
    first = open_ticket(args=MEALS)
    assert first.policy_name == "strict"
    services.ticket_approve(ticket=first, actor=demo["approver"], grant=grants.GrantSpec("user", 60))
    return strict, StandingGrant.objects.get(policy=strict)


def _admin(demo) -> Client:
    client = Client()
    client.force_login(demo["admin"])
    return client


def _ended_with_its_policy(grant: StandingGrant) -> None:
    grant.refresh_from_db()
    assert grant.revoked_at is not None and not grant.current
    assert grant.revoked_reason == "Ended with its policy 'strict', deleted by admin."


@pytest.mark.parametrize("how", ["delete page", "delete selected"])
def test_a_policy_deleted_in_the_admin_ends_its_grants(demo, how):
    strict, grant = _strict_with_a_grant(demo)
    admin = _admin(demo)
    if how == "delete page":
        r = admin.post(f"/admin/approvals/policy/{strict.pk}/delete/", {"post": "yes"})
    else:
        body = {"action": "delete_selected", "_selected_action": [strict.pk], "post": "yes"}
        r = admin.post("/admin/approvals/policy/", body)
    assert r.status_code == 302 and not Policy.objects.filter(pk=strict.pk).exists(), r.content[:300]
    _ended_with_its_policy(grant)
    nxt = open_ticket(args=TAXI)  # the default rule: a person decides it
    assert (nxt.policy_name, nxt.status) == ("", PendingCall.Status.PENDING)


def test_a_policy_with_an_ended_grant_and_a_like_policy_less_one_is_deleted_on_its_page(demo):
    strict, grant = _strict_with_a_grant(demo)
    StandingGrant.objects.filter(pk=grant.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    plain = open_ticket(args=TAXI)
    services.ticket_approve(ticket=plain, actor=demo["approver"], grant=grants.GrantSpec("user", 60))
    policy_less = StandingGrant.objects.get(policy=None)
    r = _admin(demo).post(f"/policies/{strict.pk}/delete/")
    assert r.status_code == 302 and not Policy.objects.filter(pk=strict.pk).exists()
    grant.refresh_from_db()
    assert (grant.policy, grant.current, grant.revoked_at) == (None, False, None)  # ended by time, not revoked
    policy_less.refresh_from_db()
    assert policy_less.current and policy_less.revoked_at is None  # still in force
    assert open_ticket(args={"purpose": "bus", "amount": 5.0}).status == PendingCall.Status.APPROVED
