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
