"""A quorum ticket's held approvals count while their givers may still decide it (the check a new
answer meets, approvals.permissions.decide_refusal): an approver since removed from the ticket's
groups, who lost the approvers' permission or was deactivated keeps their approval in the ticket's
history, shown as no longer counting, and the ticket waits for another approver's."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from agents_app.models import Turn
from tests.approvals.policy_helpers import open_ticket, person, policy, team

BIG = {"purpose": "laptop", "amount": 2500.0}  # the demo's "Large reimbursements": finance, 2 of N, four-eyes


def _post(client: Client, url: str, body: dict | None = None):
    return client.post(url, data=body or {}, content_type="application/json")


def _leave_finance(user: User) -> None:
    user.groups.remove(Group.objects.get(name="finance"))


def _leave_approvers(user: User) -> None:
    user.groups.remove(Group.objects.get(name="approvers"))


def _deactivate(user: User) -> None:
    user.is_active = False
    user.save(update_fields=["is_active"])


@pytest.mark.parametrize(
    "lose, routed",
    [(_leave_finance, True), (_deactivate, True), (_leave_approvers, False)],
    ids=["removed from the ticket's group", "deactivated", "lost the approvers' permission"],
)
def test_an_approval_stops_counting_once_its_giver_may_no_longer_decide(api, demo, lose, routed):
    fay = person("fay", team("finance"), approver=True)
    if not routed:  # no groups: the approvers (decide_tickets) decide it, two of them
        policy("any two approvers", tool="ask_for_approval", priority=10, required_approvals=2)
    ticket = open_ticket(args=BIG)
    assert ticket.routed is routed and ticket.required_approvals == 2
    url = f"/api/pending-calls/{ticket.pk}"
    first = _post(api(demo["approver"]), url + "/approve", {"argsHash": ticket.args_hash})
    assert first.status_code == 201 and first.json()["final"] is False
    lose(demo["approver"])

    second = _post(api(demo["approver2"]), url + "/approve", {"argsHash": ticket.args_hash})
    assert second.status_code == 201, second.content
    assert (second.json()["final"], second.json()["turn"]) == (False, None)  # held: 1 of 2
    assert not Turn.objects.filter(session=ticket.session).exists()  # the agent is not resumed
    body = api(demo["approver2"]).get(url).json()
    assert body["status"] == "pending" and [a["who"] for a in body["approvals"]] == ["approver2"]
    assert [a["who"] for a in body["lapsedApprovals"]] == ["approver"]
    assert [r["actor"] for r in body["responses"]] == ["approver", "approver2"]  # the record keeps both
    page = api(demo["approver2"]).get(f"/tickets/{ticket.pk}/").content.decode()
    assert "1 of 2 approvals</strong>: approver2." in page
    assert "No longer counted: approver (may no longer decide this ticket)." in page
    assert page.count("approval, no longer counts") == 1 and "approval, held for the others" in page
    row = api(demo["approver2"]).get("/").content.decode()
    assert f'<tr id="pending-call-{ticket.pk}"' in row and "1 of 2 approvals" in row

    third = _post(api(fay), url + "/approve", {"argsHash": ticket.args_hash})
    assert third.status_code == 201 and third.json()["final"] is True and third.json()["turn"] is not None
    ticket.refresh_from_db()
    assert (ticket.status, ticket.closed_by) == ("approved", fay)
    assert Turn.objects.filter(session=ticket.session).count() == 1


def test_the_approval_counts_again_once_its_giver_may_decide_again(api, demo):
    """The rule is who may decide now: back in the group, the approval counts (and is not given twice)."""
    ticket = open_ticket(args=BIG)
    url = f"/api/pending-calls/{ticket.pk}"
    assert _post(api(demo["approver"]), url + "/approve").status_code == 201
    _leave_finance(demo["approver"])
    assert api(demo["approver2"]).get(url).json()["approvals"] == []
    demo["approver"].groups.add(Group.objects.get(name="finance"))
    again = _post(api(User.objects.get(username="approver")), url + "/approve")
    assert again.status_code == 403 and "already counts (1 of 2)" in again.json()["detail"]
    done = _post(api(demo["approver2"]), url + "/approve")
    assert done.status_code == 201 and done.json()["final"] is True


def test_a_closed_ticket_keeps_the_approvals_it_closed_with(api, demo):
    """Who may decide later does not rewrite a decided ticket: its approvals stay as they counted."""
    ticket = open_ticket(args=BIG)
    url = f"/api/pending-calls/{ticket.pk}"
    for who in ("approver", "approver2"):
        assert _post(api(demo[who]), url + "/approve").status_code == 201
    _leave_finance(demo["approver"])
    body = api(demo["approver2"]).get(url).json()
    assert body["status"] == "approved" and [a["who"] for a in body["approvals"]] == ["approver", "approver2"]
    assert body["lapsedApprovals"] == []
