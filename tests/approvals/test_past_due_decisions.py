"""A ticket past its due time takes no decision from a person, whether or not the sweeper has expired
it yet. Before, a ticket is expired only when the deadline sweep (Celery beat, or the embedded sweeper,
every ADKWEB_DEADLINE_SWEEP_SECONDS; never while beat is down) reaches it, and until then an approval
was taken as if no deadline had passed: the policy's "nobody decided by then: it expires" was the
sweeper's timing, and a quorum's last approval, given after the due time, paid what the policy had
let expire. Now every path a person decides by (the API, the ticket page, a one-tap link, the inbox's
bulk approve, a function response on /run) is refused with 409 naming the due time, nothing recorded,
and the sweep expires the ticket as before (the agent is told it expired)."""

from __future__ import annotations

import json
import re
from datetime import timedelta

from django.test import Client
from django.urls import reverse
from django.utils import timezone

from agents_app.models import Turn
from approvals import deadlines, services
from approvals.models import PendingCall, Response
from notifications import bulk, links
from tests.approvals.policy_helpers import open_ticket, person, policy, team

SMALL = {"purpose": "meals", "amount": 200.0}
BIG = {"purpose": "laptop", "amount": 2500.0}


def _past_due(ticket: PendingCall) -> None:
    """Its due time came five seconds ago; the sweep has not run since."""
    PendingCall.objects.filter(pk=ticket.pk).update(due_at=timezone.now() - timedelta(seconds=5))
    ticket.refresh_from_db()


def _text(html: str) -> str:
    """The page's text, its tags gone (a relative time is a <time> of its own: "(in <time …>59 minutes</time>)")."""
    return re.sub(r"<[^>]+>", "", html)


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _api(user, ticket: PendingCall, action: str, body: dict | None = None):
    path = f"/api/pending-calls/{ticket.pk}/{action}"
    return _client(user).post(path, json.dumps(body or {}), content_type="application/json")


def _nothing_recorded(ticket: PendingCall, responses: int = 0) -> None:
    ticket.refresh_from_db()
    assert ticket.is_open, ticket.status
    assert Response.objects.filter(pending_call=ticket).count() == responses
    assert not Turn.objects.filter(session=ticket.session).exists()


def _expired_by_the_sweep(ticket: PendingCall) -> Response:
    assert deadlines.deadlines_sweep()["expired"] == 1
    ticket.refresh_from_db()
    assert ticket.status == "expired"
    (turn,) = Turn.objects.filter(session=ticket.session)
    assert turn.content["parts"][0]["function_response"]["response"]["status"] == "expired"
    return Response.objects.get(pending_call=ticket, final=True)


def test_an_approval_after_the_due_time_is_refused_and_the_sweep_expires_the_ticket(demo):
    policy("quick", tool="ask_for_approval", due_in_seconds=60)
    ticket = open_ticket(args=SMALL)
    _past_due(ticket)
    r = _api(demo["approver"], ticket, "approve", {"argsHash": ticket.args_hash})
    assert r.status_code == 409, r.content
    detail = r.json()["detail"]
    assert f"Ticket #{ticket.pk} was due at " in detail and "Nothing was sent" in detail, detail
    r = _api(demo["approver"], ticket, "reject", {"reason": "late"})
    assert r.status_code == 409, r.content
    r = _api(demo["approver"], ticket, "responses", {"response": {"status": "checking"}, "final": False})
    assert r.status_code == 409, r.content
    _nothing_recorded(ticket)
    expiry = _expired_by_the_sweep(ticket)
    assert (expiry.action, expiry.source) == ("expire", "expiry")


def test_a_quorums_last_approval_after_the_due_time_does_not_close_it_approved(demo):
    ticket = open_ticket(args=BIG)  # the demo's Large reimbursements: two from finance, due in a day
    assert ticket.required_approvals == 2 and ticket.due_at is not None
    first = services.ticket_approve(ticket=ticket, actor=demo["approver"], args_hash=ticket.args_hash)
    assert first.final is False
    _past_due(ticket)
    r = _api(demo["approver2"], ticket, "approve", {"argsHash": ticket.args_hash})
    assert r.status_code == 409 and "was due at" in r.json()["detail"], r.content
    _nothing_recorded(ticket, responses=1)
    expiry = _expired_by_the_sweep(ticket)
    assert expiry.counted == [first.pk]  # the record: one approval counted when it expired


def test_every_path_a_person_decides_by_is_refused_past_the_due_time(demo):
    policy("quick", tool="ask_for_approval", due_in_seconds=60)
    ticket = open_ticket(args=SMALL)
    link = links.link_create(ticket=ticket, user=demo["approver"])
    _past_due(ticket)
    page = _client(demo["approver"]).post(reverse("approvals:ticket-act", args=[ticket.pk, "approve"]), {})
    assert page.status_code == 409 and "was due at" in page.content.decode()
    token = links.link_token(link, "approve")
    tapped = Client().post(reverse("notifications:approval-link", args=[token]))
    assert tapped.status_code == 409 and "was due at" in tapped.content.decode()
    (result,) = bulk.tickets_decide(ticket_ids=[ticket.pk], actor=demo["approver"], action="approve")
    assert not result.ok and "was due at" in result.message
    _nothing_recorded(ticket)
    link.refresh_from_db()
    assert link.used_at is None


def test_a_run_function_response_past_the_due_time_is_refused(demo):
    policy("quick", tool="ask_for_approval", due_in_seconds=60)
    ticket = open_ticket(args=SMALL)
    _past_due(ticket)
    answer = {"functionResponse": {"id": ticket.call_id, "name": ticket.call_name, "response": {"status": "approved"}}}
    body = {
        "appName": ticket.app_name,
        "userId": ticket.requester,
        "sessionId": ticket.session.session_id,
        "newMessage": {"role": "user", "parts": [answer]},
    }
    r = _client(demo["admin"]).post("/api/adk/run", json.dumps(body), content_type="application/json")
    assert r.status_code == 409 and "was due at" in r.json()["detail"], r.content
    _nothing_recorded(ticket)


def test_before_the_due_time_decisions_go_as_before(demo):
    finance = team("finance")
    fay = person("fay", finance)
    policy("quick", tool="ask_for_approval", due_in_seconds=60, groups=(finance,))
    ticket = open_ticket(args=SMALL)
    r = _api(fay, ticket, "approve", {"argsHash": ticket.args_hash})
    assert r.status_code == 201 and r.json()["final"] is True, r.content
    ticket.refresh_from_db()
    assert ticket.status == "approved"
    assert deadlines.deadlines_sweep()["expired"] == 0


def test_the_page_and_the_inbox_say_a_past_due_ticket_expires_and_offer_no_decision(demo):
    """Between the due time and the sweep the page said "(in 0 minutes)" and offered Approve, Reject,
    "Copy approval link" and "Assign to me", each refused 409; the inbox row said "due in 0 minutes"."""
    ticket = open_ticket(args=BIG)  # two from finance: the page would offer "Approve (1 of 2)"
    _past_due(ticket)
    approver = _client(demo["approver"])
    page = approver.get(reverse("approvals:ticket", args=[ticket.pk])).content.decode()
    assert 'id="past-due"' in page and "it expires and the agent is told" in page, page
    assert "(in 0" not in _text(page) and "Undecided by then" not in page
    assert f"You cannot answer this ticket: Ticket #{ticket.pk} was due at " in page
    for offer in ('id="approve-count"', ">Reject</button>", "Copy approval link", "Assign to me"):
        assert offer not in page, offer
    inbox = approver.get(reverse("approvals:inbox")).content.decode()
    row = inbox[inbox.index(f'id="pending-call-{ticket.pk}"') :].split("</tr>")[0]
    assert "past due: it expires" in row and "due in" not in row, row
    PendingCall.objects.filter(pk=ticket.pk).update(due_at=timezone.now() + timedelta(hours=1))
    page = approver.get(reverse("approvals:ticket", args=[ticket.pk])).content.decode()
    assert 'id="approve-count">(1 of 2)' in page and "Copy approval link" in page and "(in 59" in _text(page)
    inbox = approver.get(reverse("approvals:inbox")).content.decode()
    assert "due in 59" in _text(inbox) and "past due" not in inbox


def test_a_past_due_ticket_cannot_be_taken(demo):
    """The page no longer offers "Assign to me" past the due time; the page's assign and the API's took it
    all the same (200), a ticket nobody may decide any more then shown as someone's."""
    ticket = open_ticket(args=SMALL)
    _past_due(ticket)
    approver = _client(demo["approver"])
    r = approver.post(f"/tickets/{ticket.pk}/assign/", {"assign": "me"}, HTTP_HX_REQUEST="true")
    assert r.status_code == 409 and "nobody decided it by then: it expires" in r.content.decode()
    r = approver.post(
        f"/api/pending-calls/{ticket.pk}/assign", json.dumps({"assignee": "me"}), content_type="application/json"
    )
    assert r.status_code == 409, r.content
    assert r.json()["detail"].endswith("it expires (the agent is told so). Nothing was changed.")
    ticket.refresh_from_db()
    assert ticket.assigned_to is None and ticket.status == "pending"
