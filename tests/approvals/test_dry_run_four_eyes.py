"""The policy dry run counts four-eyes as a real decision does. A decision under four-eyes is refused to
the ticket's requester and to anyone who sent a message in its conversation (approvals.permissions.askers:
Django staff write in other people's conversations), and their held approvals do not count toward a
quorum; the dry run asked only whether the ticket was closed by its requester, so a four-eyes policy
tried on tickets a staff asker approved said "routed to ..." (allowed) where the real decision would be
refused, and counted the asker's approval toward the quorum. Now it says what a real decision would:
"refused: four-eyes" (fourEyesRefused), and a quorum short of the asker's approval; a message sent after
the ticket opened bars nothing (it did not ask for it)."""

from __future__ import annotations

from django.contrib.auth.models import Group, User
from django.test import Client

from approvals import services
from approvals.models import PendingCall
from tests.approvals.policy_helpers import open_ticket, person, policy
from tests.approvals_factories import asks, session_for

SMALL = {"purpose": "meals", "amount": 200.0}  # the default rule: one approval from any approver


def _staff(username: str) -> User:
    user = User.objects.create_user(username, password="x", is_staff=True)
    user.groups.add(Group.objects.get(name="approvers"))
    return User.objects.get(pk=user.pk)


def _dry_run(demo, pid: int) -> dict:
    client = Client()
    client.force_login(demo["agentadmin"])
    r = client.get(f"/api/policies/{pid}/dry-run?last=10")
    assert r.status_code == 200, r.content
    return r.json()


def _would_be(out: dict, ticket: PendingCall) -> str:
    return next(t["wouldBe"] for t in out["tickets"] if t["id"] == ticket.pk)


def test_a_ticket_decided_by_a_staff_member_who_asked_for_it_is_refused_under_four_eyes(demo):
    sam = _staff("sam")
    session = session_for()  # the requester's conversation
    asks(sam, session)
    ticket = open_ticket(session=session, args=SMALL)
    services.ticket_approve(ticket=ticket, actor=sam)  # the default rule has no four-eyes
    ticket.refresh_from_db()
    assert ticket.status == "approved" and ticket.closed_by == sam
    strict = policy("strict", tool="ask_for_approval", four_eyes=True, priority=50)
    out = _dry_run(demo, strict.pk)
    assert _would_be(out, ticket) == "refused: four-eyes", out
    assert out["fourEyesRefused"] == 1, out
    client = Client()
    client.force_login(demo["agentadmin"])
    page = client.get(f"/policies/{strict.pk}/dry-run/?last=10", HTTP_HX_REQUEST="true").content.decode()
    assert "refused under four-eyes" in page, page
    assert "in its conversation up to and including the turn that opened it): 1<" in page, page


def test_an_askers_approval_does_not_count_toward_the_quorum_in_the_dry_run(demo):
    sam, vera = _staff("sam"), person("vera", approver=True)
    session = session_for()
    asks(sam, session)
    ticket = open_ticket(session=session, args=SMALL)
    services.ticket_approve(ticket=ticket, actor=vera)
    # Sam's approval, given before the ticket closed, alongside vera's (as a quorum's held one would be).
    from approvals.models import Response

    Response.objects.create(pending_call=ticket, action="approve", final=False, actor=sam, payload={})
    two = policy("two", tool="ask_for_approval", four_eyes=True, required_approvals=2, priority=50)
    out = _dry_run(demo, two.pk)
    assert _would_be(out, ticket) == "waiting: 1 of 2 approvals", out
    assert out["tooFewApprovals"] == 1, out


def test_a_message_sent_after_the_decision_bars_nothing(demo):
    sam = _staff("sam")
    session = session_for()
    ticket = open_ticket(session=session, args=SMALL)
    services.ticket_approve(ticket=ticket, actor=sam)
    asks(sam, session)  # afterwards: the decision came first
    strict = policy("strict", tool="ask_for_approval", four_eyes=True, priority=50)
    out = _dry_run(demo, strict.pk)
    assert _would_be(out, ticket).startswith("routed to"), out
    assert out["fourEyesRefused"] == 0, out


def test_a_message_sent_after_the_ticket_opened_bars_nothing(demo):
    """As a decision reads four-eyes (approvals.permissions.asking_turns): the askers are fixed when the
    ticket opens; one who wrote in the conversation while it waited, then decided it, did not ask for it."""
    sam = _staff("sam")
    session = session_for()
    ticket = open_ticket(session=session, args=SMALL)
    asks(sam, session)  # while it waited
    services.ticket_approve(ticket=ticket, actor=sam)
    strict = policy("strict", tool="ask_for_approval", four_eyes=True, priority=50)
    out = _dry_run(demo, strict.pk)
    assert _would_be(out, ticket).startswith("routed to"), out
    assert out["fourEyesRefused"] == 0, out


def test_the_requesters_own_decision_is_refused_as_before(demo):
    requester = demo["requester"]
    requester.groups.add(Group.objects.get(name="approvers"))
    requester = User.objects.get(pk=requester.pk)
    ticket = open_ticket(args=SMALL)
    services.ticket_approve(ticket=ticket, actor=requester)
    strict = policy("strict", tool="ask_for_approval", four_eyes=True, priority=50)
    out = _dry_run(demo, strict.pk)
    assert _would_be(out, ticket) == "refused: four-eyes", out
