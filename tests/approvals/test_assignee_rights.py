"""An assignee who loses the right to decide their ticket gives it back. Before, a person taken out of the
approvers (or of a policy's groups, or deactivated) stayed assigned: the ticket sat in their "mine",
shown as theirs on its page and in the inbox, though they could no longer decide it, and nobody else saw
it as theirs to take. Now the change of their rights unassigns it, with a 'given back' history entry
naming them and why (approvals.assignees); the next approver takes it. A change that leaves them the
right leaves the assignment."""

from __future__ import annotations

from django.contrib.auth.models import Group, Permission, User
from django.test import Client

from approvals import services
from approvals.models import PendingCall, TicketActivity
from tests.approvals.policy_helpers import open_ticket, person, team
from tests.approvals_factories import ticket

BIG = {"purpose": "laptop", "amount": 2500.0}  # the demo's "Large reimbursements": finance


def _client(user) -> Client:
    c = Client()
    c.force_login(user)
    return c


def _taken(call: PendingCall, user: User) -> PendingCall:
    services.ticket_assign(ticket=call, actor=user, assignee=user)
    assert PendingCall.objects.get(pk=call.pk).assigned_to_id == user.pk
    return call


def _given_back(call: PendingCall, username: str) -> str:
    call.refresh_from_db()
    assert call.assigned_to is None
    [entry] = TicketActivity.objects.filter(ticket=call, kind="given_back")
    assert entry.message.startswith(f"Given back: {username} may no longer decide it (")
    assert entry.detail["username"] == username
    return entry.message


def test_an_approver_taken_out_of_the_approvers_gives_their_ticket_back(demo):
    call = _taken(ticket(), demo["approver"])
    kept = _taken(ticket(), demo["approver2"])
    demo["approver"].groups.remove(Group.objects.get(name="approvers"))
    line = _given_back(call, "approver")
    assert "only approvers answer this kind of ticket." in line
    assert PendingCall.objects.get(pk=kept.pk).assigned_to == demo["approver2"]  # not theirs: kept
    assert f'id="pending-call-{call.pk}"' not in _client(demo["approver"]).get("/?mine=on").content.decode()
    other = _client(demo["approver2"])
    page = other.get(f"/tickets/{call.pk}/").content.decode()
    assert "Nobody is assigned." in page and ">Assign to me</button>" in page and "Given back: approver" in page
    assert other.post(f"/tickets/{call.pk}/assign/", {"assign": "me"}).status_code == 302
    assert PendingCall.objects.get(pk=call.pk).assigned_to == demo["approver2"]


def test_a_member_taken_out_of_the_tickets_group_gives_it_back_and_one_added_elsewhere_keeps_it(demo):
    fay = person("fay", team("finance"))
    big = open_ticket(args=BIG)
    assert big.routed
    _taken(big, fay)
    fay.groups.add(team("audit"))  # a change that leaves the right: kept, no entry
    assert PendingCall.objects.get(pk=big.pk).assigned_to == fay
    assert not TicketActivity.objects.filter(ticket=big, kind="given_back").exists()
    Group.objects.get(name="finance").user_set.remove(fay)  # from the group's side
    assert "only members of finance decide this ticket." in _given_back(big, "fay")


def test_a_deactivated_assignee_gives_their_tickets_back(demo):
    call = _taken(ticket(), demo["approver"])
    user = User.objects.get(pk=demo["approver"].pk)
    user.is_active = False
    user.save()
    assert "their account was deactivated." in _given_back(call, "approver")


def test_the_admin_user_form_taking_a_group_away_gives_the_ticket_back(demo):
    call = _taken(ticket(), demo["approver"])
    target = demo["approver"]
    url = f"/admin/auth/user/{target.pk}/change/"
    admin = _client(demo["admin"])
    form = admin.get(url).context["adminform"].form
    data = {k: v for k, v in form.initial.items() if v is not None and k not in ("password", "groups")}
    data.update(
        groups=[g.pk for g in target.groups.exclude(name="approvers")],
        user_permissions=[],
        date_joined_0=target.date_joined.strftime("%Y-%m-%d"),
        date_joined_1=target.date_joined.strftime("%H:%M:%S"),
        is_active="on",
    )
    data.pop("date_joined", None)
    data.pop("last_login", None)
    r = admin.post(url, data)
    assert r.status_code == 302, r.context["adminform"].form.errors if r.context else r.status_code
    assert not User.objects.get(pk=target.pk).groups.filter(name="approvers").exists()
    _given_back(call, "approver")


def test_a_group_losing_the_approvers_permission_gives_its_members_tickets_back(demo):
    call = _taken(ticket(), demo["approver"])
    approvers = Group.objects.get(name="approvers")
    approvers.permissions.remove(Permission.objects.get(codename="decide_tickets"))
    _given_back(call, "approver")


def test_a_deleted_assignee_gives_their_open_tickets_back_with_an_entry_naming_them(demo):
    """The FK's SET_NULL cleared the assignment of a deleted person with no trace in the ticket's history."""
    call = _taken(ticket(), demo["approver"])
    closed = _taken(ticket(), demo["approver"])
    services.ticket_reject(ticket=closed, actor=demo["approver2"], reason="no")
    User.objects.get(username="approver").delete()
    assert "their account was deleted." in _given_back(call, "approver")
    assert not TicketActivity.objects.filter(ticket=closed, kind="given_back").exists()  # decided: not given back
    page = _client(demo["approver2"]).get(f"/tickets/{call.pk}/").content.decode()
    assert "Nobody is assigned." in page and "Given back: approver may no longer decide it" in page
