"""A one-tap link lasts no longer than its ticket can be decided: a ticket past its due time takes no
person's decision (approvals.decision_plan.PastDue). A link made an hour before the due time said it
worked "until" a day later (the ticket page's "Copy approval link", the email, the confirmation page),
and opened after the due time (before the sweep expired the ticket) it still offered its Approve
button, which could only refuse."""

from __future__ import annotations

import re
import time
from datetime import timedelta

from django.test import Client
from django.utils import timezone

from approvals import deadlines
from approvals.models import PendingCall, Response
from notifications import links
from notifications.models import ApprovalLink
from tests.approvals.policy_helpers import open_ticket, policy


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def _hourly():
    policy("Hourly", tool="ask_for_approval", due_in_seconds=3600, priority=10)
    ticket = open_ticket(args={"purpose": "meals", "amount": 200.0})
    assert ticket.policy_name == "Hourly" and ticket.due_at is not None
    return ticket


def _shown(at) -> str:
    return timezone.localtime(at).strftime("%Y-%m-%d %H:%M %Z")


def test_a_link_lasts_until_its_tickets_due_time(demo):
    ticket = _hourly()
    c = Client()
    c.force_login(demo["approver"])
    r = c.post(f"/notifications/tickets/{ticket.pk}/link/", HTTP_HX_REQUEST="true")
    assert r.status_code == 200
    link = ApprovalLink.objects.get()
    assert link.expires_at == ticket.due_at, (link.expires_at, ticket.due_at)
    assert f"until {_shown(ticket.due_at)}" in _text(r.content.decode())
    page = _text(Client().get(f"/a/{links.link_token(link, 'approve')}/").content.decode())
    assert f"expires {_shown(ticket.due_at)}" in page
    other = open_ticket(args={"purpose": "taxi", "amount": 30.0}, tool_name="other")
    far = links.link_create(ticket=other, user=demo["approver"])
    assert far.expires_at - far.created_at == timedelta(hours=24)  # no due time: the setting's 24 h


def test_after_the_due_time_a_link_offers_no_decision(demo):
    ticket = _hourly()
    PendingCall.objects.filter(pk=ticket.pk).update(due_at=timezone.now() + timedelta(seconds=1))  # its last second
    link = links.link_create(ticket=PendingCall.objects.get(pk=ticket.pk), user=demo["approver"])
    time.sleep(1.05)  # past its due time; the sweep has not run
    r = Client().get(f"/a/{links.link_token(link, 'approve')}/")
    text = _text(r.content.decode())
    assert r.status_code == 410 and "This link has expired." in text, text
    assert "Approve this request" not in text
    assert Client().post(f"/a/{links.link_token(link, 'approve')}/").status_code == 410
    assert not Response.objects.filter(pending_call=ticket).exists()
    assert deadlines.deadlines_sweep()["expired"] == 1
    r = Client().get(f"/a/{links.link_token(link, 'approve')}/")  # expired by the sweep: says so
    assert r.status_code == 409 and f"Ticket #{ticket.pk} is already expired." in _text(r.content.decode())


def test_no_link_is_made_for_a_ticket_past_its_due_time(demo):
    """Between the ticket's due time and the deadline sweep, "Copy approval link" (posted from a page
    loaded before) made a link that was born expired (it lasts until the due time) and showed it as if
    it worked. Now it is refused 409 with the due-time message and no link is written; links.link_create
    refuses it (PastDue) for every caller; the decider's email is skipped, not sent with a dead link.
    The page itself offers no "Copy approval link" then (ceb6db9): asserted here too."""
    from notifications.emails import email_prepare
    from notifications.models import Delivery
    from notifications.outcome import Outcome

    ticket = _hourly()
    PendingCall.objects.filter(pk=ticket.pk).update(due_at=timezone.now() - timedelta(seconds=5))
    ticket.refresh_from_db()
    c = Client()
    c.force_login(demo["approver"])
    page = c.get(f"/tickets/{ticket.pk}/").content.decode()
    assert "Copy approval link" not in page and 'id="past-due"' in page
    for htmx in ({"HTTP_HX_REQUEST": "true"}, {}):
        r = c.post(f"/notifications/tickets/{ticket.pk}/link/", **htmx)
        text = _text(r.content.decode())
        assert r.status_code == 409, (r.status_code, text)
        assert f"Ticket #{ticket.pk} was due at" in text and "it expires" in text, text
        assert "/a/" not in text
    assert not ApprovalLink.objects.exists()
    try:
        links.link_create(ticket=ticket, user=demo["approver"])
    except Exception as exc:  # the one rule: PendingCall.past_due, said by approvals' PastDue (409)
        assert getattr(exc, "status", None) == 409 and "was due at" in str(exc), exc
    else:
        raise AssertionError("a link was made for a past-due ticket")
    assert not ApprovalLink.objects.exists()
    delivery = Delivery(ticket=ticket, recipient=demo["approver"], role="decider", channel="email")
    outcome = email_prepare(delivery)
    assert isinstance(outcome, Outcome) and outcome.skipped and "was due at" in outcome.error, outcome
    assert not ApprovalLink.objects.exists()
