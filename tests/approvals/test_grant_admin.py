"""Django's admin shows standing grants as a record: read only, never deleted. It revokes them only through
`grants.grant_revoke` (an action), which records who revoked and retires the grant's place among like grants.
Before, a superuser could edit `revoked_at` (no revoker recorded) or clear it on an ended grant, bringing it
back into force beside the grant that replaced it, and could delete a grant with the approvals it made."""

from __future__ import annotations

import pytest
from django.test import Client

from approvals import grants, policies, services
from approvals.models import PendingCall, StandingGrant
from tests.approvals.policy_helpers import open_ticket, policy


@pytest.fixture
def decided(demo) -> PendingCall:
    ticket = open_ticket()
    services.ticket_approve(ticket=ticket, actor=demo["approver"])
    return ticket


@pytest.fixture
def admin_client(demo) -> Client:
    client = Client()
    client.force_login(demo["admin"])
    return client


def test_a_grant_cannot_be_edited_or_deleted_in_the_admin(demo, decided, admin_client):
    grant = grants.grant_create(ticket=decided, actor=demo["approver"], spec=grants.GrantSpec("user", 60))
    grants.grant_revoke(grant=grant, actor=demo["approver"])
    base = f"/admin/approvals/standinggrant/{grant.pk}"
    page = admin_client.get(f"{base}/change/")
    assert page.status_code == 200 and b'name="_save"' not in page.content  # a read-only view
    assert admin_client.post(f"{base}/change/", {"revoked_at_0": "", "revoked_at_1": ""}).status_code == 403
    assert admin_client.post(f"{base}/delete/", {"post": "yes"}).status_code == 403
    listing = admin_client.get("/admin/approvals/standinggrant/").content.decode()
    assert "delete_selected" not in listing and "revoke_selected" in listing
    grant.refresh_from_db()
    assert grant.revoked_at is not None and grant.revoked_by == demo["approver"] and not grant.current
    # so the grant that replaces it is the only one in force: what the admin could undo before
    renewed = grants.grant_create(ticket=decided, actor=demo["approver"], spec=grants.GrantSpec("user", 60))
    assert list(StandingGrant.objects.filter(revoked_at__isnull=True).values_list("pk", flat=True)) == [renewed.pk]


def test_the_admins_revoke_action_records_who_and_refuses_an_ended_one(demo, decided, admin_client):
    live = grants.grant_create(ticket=decided, actor=demo["approver"], spec=grants.GrantSpec("user", 60))
    ended = grants.grant_create(ticket=decided, actor=demo["approver"], spec=grants.GrantSpec("session", 60))
    grants.grant_revoke(grant=ended, actor=demo["approver"])
    form = {"action": "revoke_selected", "_selected_action": [live.pk, ended.pk]}
    r = admin_client.post("/admin/approvals/standinggrant/", form, follow=True)
    assert r.status_code == 200
    text = r.content.decode()
    assert f"Revoked standing grant(s) #{live.pk}." in text
    assert f"Standing grant #{ended.pk} was already revoked." in text
    live.refresh_from_db()
    ended.refresh_from_db()
    assert live.revoked_by == demo["admin"] and live.revoked_at is not None and not live.current
    assert ended.revoked_by == demo["approver"]  # its record unchanged
    assert open_ticket().is_open  # nothing approves any more


def test_a_deleted_policys_grants_end_with_the_reason(demo, admin_client):
    strict = policy("strict", tool="ask_for_approval", condition="amount > 10")
    ticket = open_ticket()
    assert ticket.policy_id == strict.pk, "the policy's own ticket"
    services.ticket_approve(ticket=ticket, actor=demo["approver"])
    grant = grants.grant_create(ticket=ticket, actor=demo["approver"], spec=grants.GrantSpec("user", 60))
    policies.policy_delete(policy=strict, actor=demo["admin"])
    grant.refresh_from_db()
    assert grant.revoked_by == demo["admin"] and not grant.current
    assert grant.revoked_reason == "Ended with its policy 'strict', deleted by admin."
    page = admin_client.get("/grants/").content.decode()
    assert "Ended with its policy &#x27;strict&#x27;, deleted by admin." in page
