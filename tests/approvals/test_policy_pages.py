"""Pages and sockets under policies: a routed ticket is out of sight for approvers outside its groups
(inbox, ticket page, its actions, both sockets); the ticket page shows the rules, "1 of 2 approvals",
four-eyes, the edit diff; the Policies page (agent admins) and the Grants page."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async
from django.test import Client

from approvals import services
from approvals.consumers import REFUSED
from approvals.events import notify_ticket_changed
from approvals.models import Policy, StandingGrant
from tests.approvals.policy_helpers import open_ticket, person
from tests.approvals.test_consumers import connect
from tests.approvals_factories import session_for

BIG = {"purpose": "laptop", "amount": 2500.0}


def _client(user) -> Client:
    c = Client()
    c.force_login(user)
    return c


def test_an_approver_outside_the_tickets_groups_finds_nothing_anywhere(demo):
    olga = person("olga", approver=True)
    ticket = open_ticket(args=BIG)
    c = _client(olga)
    assert c.get(f"/tickets/{ticket.pk}/").status_code == 404
    for action in ("approve", "reject", "update", "custom", "assign"):
        path = f"/tickets/{ticket.pk}/{action}/"
        assert c.post(path, {"reject-reason": "x", "update-message": "m", "assign": "me"}).status_code == 404, path
    inbox = c.get("/?status=all").content.decode()
    assert f"pending-call-{ticket.pk}" not in inbox and "laptop" not in inbox
    assert ticket.is_open and not ticket.responses.exists()


def test_ticket_page_shows_the_rules_and_the_count_of_approvals(demo):
    ticket = open_ticket(args=BIG)
    services.ticket_approve(ticket=ticket, actor=demo["approver"])
    html = _client(demo["approver2"]).get(f"/tickets/{ticket.pk}/").content.decode()
    assert "Policy <strong>Large reimbursements</strong>" in html and "v1" in html
    assert "1 of 2 approvals</strong>: approver." in html
    assert "one rejection closes it rejected" in html and "Due by" in html
    assert 'Approve <span id="approve-count">(2 of 2)</span>' in html
    assert "(2 of 2)</span>" not in _client(demo["approver"]).get(f"/tickets/{ticket.pk}/").content.decode()
    mine = _client(demo["approver"]).get(f"/tickets/{ticket.pk}/").content.decode()
    assert 'Your approval counts (<span id="counted-count">1 of 2</span>)' in mine
    row = _client(demo["approver2"]).get("/").content.decode()
    assert "1 of 2 approvals" in row


def test_a_custom_approval_held_for_a_quorum_says_so_not_that_the_agent_resumes(demo):
    """A custom response that approves a ticket needing two approvals is held (nothing reaches the agent):
    the page says the approval is recorded, 1 of 2, where it said "Response sent. The agent is resuming"."""
    ticket = open_ticket(args=BIG)
    body = {"custom-body": '{"status": "approved"}', "custom-final": "on"}
    page = _client(demo["approver"]).post(f"/tickets/{ticket.pk}/custom/", body, HTTP_HX_REQUEST="true")
    html = page.content.decode()
    assert page.status_code == 200 and "Your approval is recorded: 1 of 2 approvals." in html, html
    assert "The agent is resuming" not in html


def test_four_eyes_is_said_on_the_page_and_refused_on_post(demo):
    own = open_ticket(session=session_for(user_id="approver"), args=BIG)
    c = _client(demo["approver"])
    html = c.get(f"/tickets/{own.pk}/").content.decode()
    assert "You cannot answer this ticket: four-eyes: you requested this" in html and ">Approve" not in html
    r = c.post(f"/tickets/{own.pk}/approve/", {}, HTTP_HX_REQUEST="true")
    assert r.status_code == 403 and "four-eyes" in r.content.decode()


def test_edit_before_approve_on_the_page_and_the_diff(demo):
    ticket = open_ticket()
    c = _client(demo["approver"])
    page = c.get(f"/tickets/{ticket.pk}/").content.decode()
    assert 'name="approve-e_amount"' in page and 'name="approve-args_hash"' in page
    r = c.post(
        f"/tickets/{ticket.pk}/approve/",
        {"approve-args_hash": ticket.args_hash, "approve-e_purpose": "meals", "approve-e_amount": "150"},
    )
    assert r.status_code == 302, r.content.decode()[:500]
    html = c.get(f"/tickets/{ticket.pk}/").content.decode()
    assert 'id="args-diff"' in html and "<del>$200.00</del>" in html and "<ins>$150.00</ins>" in html
    assert "Edited by <strong>approver</strong>" in html
    ticket.refresh_from_db()
    assert ticket.edited_args == {"purpose": "meals", "amount": 150}


def test_a_stale_page_is_refused_with_409_and_sends_nothing(demo):
    ticket = open_ticket()
    r = _client(demo["approver"]).post(
        f"/tickets/{ticket.pk}/approve/", {"approve-args_hash": "a" * 64}, HTTP_HX_REQUEST="true"
    )
    assert r.status_code == 409 and "changed since you saw them" in r.content.decode()
    assert not ticket.responses.exists()


def test_a_grant_given_on_the_page_is_listed_and_revoked(demo):
    ticket = open_ticket()
    c = _client(demo["approver"])
    r = c.post(
        f"/tickets/{ticket.pk}/approve/",
        {"approve-grant_scope": "session", "approve-grant_for": "2", "approve-grant_unit": "hours"},
    )
    assert r.status_code == 302
    grant = StandingGrant.objects.get()
    assert (grant.expires_at - grant.created_at).total_seconds() == pytest.approx(7200, abs=5)
    listed = c.get("/grants/").content.decode()
    assert f'id="grant-{grant.pk}"' in listed and "Revoke" in listed
    assert "Revoke" not in _client(demo["approver2"]).get("/grants/").content.decode()
    assert _client(demo["approver2"]).post(f"/grants/{grant.pk}/revoke/").status_code == 403
    assert c.post(f"/grants/{grant.pk}/revoke/").status_code == 302
    grant.refresh_from_db()
    assert grant.revoked_by == demo["approver"]


def test_policies_page_for_agent_admins_create_edit_dry_run_delete(demo):
    c = _client(demo["agentadmin"])
    assert "Large reimbursements" in c.get("/policies/").content.decode()
    bad = c.post("/policies/new/", {"name": "Bad", "condition": "amount >", "required_approvals": "1", "priority": "0"})
    assert (
        bad.status_code == 400
        and "Invalid condition: The condition ends where a value was expected." in bad.content.decode()
    )
    assert not Policy.objects.filter(name="Bad").exists()
    form = {
        "name": "Hardware",
        "enabled": "on",
        "tool": "ask_for_approval",
        "condition": 'lower(purpose) == "hardware"',
        "priority": "0",
        "required_approvals": "2",
        "due_in_seconds": "1d 4h",
        "remind_before_seconds": "2h",
        "allow_grants": "on",
    }
    r = c.post("/policies/new/", form)
    assert r.status_code == 302, r.content.decode()[:800]
    policy = Policy.objects.get(name="Hardware")
    assert (policy.due_in_seconds, policy.remind_before_seconds, policy.version) == (100800, 7200, 1)
    page = c.get(f"/policies/{policy.pk}/").content.decode()
    assert 'value="1d 4h"' in page and "Dry run" in page
    c.post(f"/policies/{policy.pk}/", {**form, "required_approvals": "3"})
    policy.refresh_from_db()
    assert (policy.required_approvals, policy.version) == (3, 2)
    dry = c.get(f"/policies/{policy.pk}/dry-run/?last=10", HTTP_HX_REQUEST="true").content.decode()
    assert 'id="dry-run"' in dry and "of the last 0 closed tickets match" in dry
    assert c.post(f"/policies/{policy.pk}/delete/").status_code == 302
    assert not Policy.objects.filter(name="Hardware").exists()
    assert _client(demo["approver"]).get("/policies/").status_code == 403


def test_policy_admin_form_in_the_django_admin_refuses_a_bad_condition(demo):
    c = _client(demo["agentadmin"])
    assert c.get("/admin/approvals/policy/").status_code == 200
    r = c.post(
        "/admin/approvals/policy/add/",
        {"name": "X", "condition": "amount >>> 1", "required_approvals": "1", "priority": "0"},
    )
    assert r.status_code == 200 and "Invalid condition" in r.content.decode()
    assert not Policy.objects.filter(name="X").exists()


pytestmark_sockets = pytest.mark.django_db(transaction=True)


@pytestmark_sockets
async def test_sockets_keep_a_routed_ticket_from_an_outsider(demo):
    olga = await database_sync_to_async(person)("olga", approver=True)
    ticket = await database_sync_to_async(open_ticket)(args=BIG)
    page, connected = await connect(f"/ws/tickets/{ticket.pk}/", olga)
    assert not connected
    inbox, connected = await connect("/ws/approvals/", olga)
    assert connected
    insider, _ = await connect("/ws/approvals/", demo["approver2"])
    await database_sync_to_async(notify_ticket_changed)(ticket_id=ticket.pk, session_pk=ticket.session_id)
    seen = await insider.receive_from(timeout=5)
    frames = [seen, await insider.receive_from(timeout=5)]  # the row, then the counts
    assert any(f"pending-call-{ticket.pk}" in f for f in frames)
    told = [await inbox.receive_from(timeout=5)]  # the outsider hears only its own counts: 0
    while not await inbox.receive_nothing(timeout=0.3):
        told.append(await inbox.receive_from(timeout=1))
    assert ">0<" in told[0] and "0 tickets" in "".join(told)
    assert not any(f"pending-call-{ticket.pk}" in f or "laptop" in f for f in told)
    for comm in (inbox, insider):
        await comm.disconnect()
    assert REFUSED == 4003
