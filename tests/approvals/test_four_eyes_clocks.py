"""Four-eyes does not compare two machines' clocks. The askers of a ticket were read as the messages sent
in its conversation up to its created_at: a message turn's created_at is stamped by the web process, the
ticket's by the worker. With the worker's clock behind the web's by more than a run takes, the message that
asked the agent for the ticket read as written after it: its writer was no asker, and decided (or counted
toward the quorum of) what they had asked for. Now the ticket's own event says which turn opened it, and
the askers are those whose messages came up to that turn (by id, not by clock)."""

from __future__ import annotations

from datetime import timedelta

from django.contrib.auth.models import Group, User
from django.test import Client

from agents_app.models import Turn
from approvals import services
from approvals.models import PendingCall, Response
from approvals.permissions import decide_refusal, decides_q
from tests.approvals.policy_helpers import open_ticket, person, policy
from tests.approvals_factories import asks, session_for, staff, stamped, turn_event

BIG = {"purpose": "laptop", "amount": 2500.0}  # the demo's "Large reimbursements": finance, 2 of N, four-eyes
REFUSED = "four-eyes: you asked the agent in this conversation before it opened this ticket (for requester)"


def _opened_by(turn: Turn, *, behind: timedelta = timedelta(minutes=5), **fields) -> PendingCall:
    """A ticket the run of `turn` opened (its event is the turn's), stamped by a worker whose clock is
    `behind` the web process's: its created_at earlier than the message that asked for it."""
    return stamped(open_ticket(session=turn.session, event=turn_event(turn), **fields), turn.created_at - behind)


def test_an_asker_stays_off_the_ticket_when_the_workers_clock_is_behind(demo):
    sam = staff("sam", "finance")
    ticket = _opened_by(asks(sam, session_for()), args=BIG)
    assert ticket.four_eyes and ticket.created_at < Turn.objects.get(created_by=sam).created_at

    api = Client()
    api.force_login(sam)
    r = api.post(f"/api/pending-calls/{ticket.pk}/approve", {}, content_type="application/json")
    assert r.status_code == 403 and REFUSED in r.json()["detail"], r.content
    page = api.post(f"/tickets/{ticket.pk}/approve/", {})
    assert page.status_code == 403 and REFUSED in page.content.decode(), page.status_code
    assert REFUSED in api.get(f"/tickets/{ticket.pk}/").content.decode()
    ticket.refresh_from_db()
    assert ticket.is_open and not Response.objects.filter(pending_call=ticket).exists()


def test_an_askers_held_approval_is_not_counted_when_the_workers_clock_is_behind(demo):
    finance = Group.objects.get(name="finance")
    sam, fay = staff("sam", "finance"), person("fay", finance)
    ticket = _opened_by(asks(sam, session_for()), args=BIG)
    assert ticket.required_approvals == 2
    Response.objects.create(
        pending_call=ticket, action="approve", payload={}, final=False, actor=sam, actor_username="sam"
    )
    assert not Response.objects.filter(pending_call=ticket, actor=sam).filter(decides_q()).exists()
    c = Client()
    c.force_login(fay)
    first = c.post(f"/api/pending-calls/{ticket.pk}/approve", {}, content_type="application/json")
    assert first.status_code == 201 and first.json()["final"] is False, first.content  # 1 of 2: sam's not counted
    assert PendingCall.objects.get(pk=ticket.pk).is_open


def test_a_message_queued_after_the_turn_that_opened_it_asked_for_nothing_whatever_the_clocks(demo):
    """The turn decides, both ways: a message sent after the run that opened the ticket (while it ran,
    or after it paused) did not ask for it, even with the ticket stamped later by the worker's clock."""
    lea = staff("lea", "finance")
    session = session_for()
    turn = asks(User.objects.get(username="requester"), session)
    later = asks(lea, session)
    ticket = _opened_by(turn, behind=-timedelta(minutes=5), args=BIG)
    assert ticket.created_at > later.created_at
    assert decide_refusal(lea, ticket) is None


def test_the_dry_run_refuses_an_askers_decision_when_the_workers_clock_was_behind(demo):
    sam = staff("sam", "approvers")
    ticket = _opened_by(asks(sam, session_for()), args={"purpose": "meals", "amount": 200.0})
    services.ticket_approve(ticket=ticket, actor=sam)  # the default rule has no four-eyes
    strict = policy("strict", tool="ask_for_approval", four_eyes=True, priority=50)
    client = Client()
    client.force_login(demo["agentadmin"])
    out = client.get(f"/api/policies/{strict.pk}/dry-run?last=10").json()
    assert [t["wouldBe"] for t in out["tickets"] if t["id"] == ticket.pk] == ["refused: four-eyes"], out
    assert out["fourEyesRefused"] == 1, out
