"""What notifications say of a ticket whose arguments an approver edited is what an approval approves
(or approved): the edited arguments, marked as edited and by whom, the agent's beside them. A decider's
reminder showed the agent's amount while its one-tap link (bound to the arguments as they are now)
approved the edited one, and the one-tap page showed the agent's too; the requester was told "approved"
beside the amount they had asked for; webhooks' and Slack's summaries showed the agent's."""

from __future__ import annotations

import re
import uuid

import pytest
from django.core import mail
from django.test import Client

from approvals.hashing import args_hash
from approvals.models import PendingCall
from notifications import tasks, webhooks
from notifications.models import ApprovalLink, NotificationEvent, WebhookEndpoint
from tests.approvals.policy_helpers import open_ticket
from tests.approvals.test_edited_summaries import BIG, CHANGE, EDITED, edit
from tests.notifications.test_rendered_once import no_tasks  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db(transaction=True)


def _as(user) -> Client:  # noqa: ANN001 - a User
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def edited(emails, no_tasks) -> PendingCall:  # noqa: F811 - the fixture imported above
    """A 2-of-N ticket whose amount approver2 edited with their approval (1 of 2)."""
    return edit(_as(emails["approver2"]), open_ticket(args=BIG), EDITED)


def _email_to(address: str) -> mail.EmailMessage:
    found = [m for m in mail.outbox if m.to == [address]]
    assert len(found) == 1, [(m.to, m.subject) for m in mail.outbox]
    return found[0]


def test_a_deciders_reminder_shows_the_arguments_its_one_tap_link_approves(edited):
    event = NotificationEvent.objects.create(name="ticket.reminder", ticket=edited, data={"due_at": None})
    tasks.event_fan_out(event.pk)
    message = _email_to("approver@example.com")
    html = message.alternatives[0].content
    assert "amount: $1,800.00" in message.body and "amount: $2,500.00" not in message.body
    assert f"Arguments edited by approver2: {CHANGE}" in message.body
    assert "$1,800.00</td>" in html and "$2,500.00</td>" not in html and "edited by approver2" in html
    assert "laptop · $1,800.00" in message.subject and "(edited)" in message.subject
    link = ApprovalLink.objects.get(user__username="approver")
    assert link.args_hash == args_hash(EDITED)  # what the link approves
    token = re.search(r"/a/([^/\s]+)/", message.body).group(1)
    page = Client().get(f"/a/{token}/").content.decode()
    assert "<dd>$1,800.00</dd>" in page and "<dd>$2,500.00</dd>" not in page
    assert f"Arguments edited by approver2: {CHANGE}" in page


def test_the_requester_is_told_the_arguments_their_request_was_approved_with(emails, no_tasks):  # noqa: F811
    small = edit(
        _as(emails["approver"]),
        open_ticket(args={"purpose": "meals", "amount": 200.0}),
        {"purpose": "meals", "amount": 150.0},
    )
    assert small.status == "approved"
    event = NotificationEvent.objects.get(name="ticket.decided", ticket=small)
    tasks.event_fan_out(event.pk)
    message = _email_to("requester@example.com")
    assert "amount: $150.00" in message.body and "amount: $200.00" not in message.body
    assert "Arguments edited by approver: amount $200.00 → $150.00" in message.body
    assert "edited by approver" in message.alternatives[0].content


def test_webhook_and_slack_payloads_summarise_the_edited_arguments(edited):
    event = NotificationEvent.objects.create(name="ticket.reminder", ticket=edited, data={})
    body = webhooks.payload(event=event, endpoint=WebhookEndpoint(format="json"), delivery_id=uuid.uuid4())
    ticket = body["ticket"]
    assert ticket["summary"] == "laptop · $1,800.00" and ticket["args"] == BIG
    assert ticket["edited_args"] == EDITED and ticket["edited_by"] == "approver2"
    slack = webhooks.payload(event=event, endpoint=WebhookEndpoint(format="slack"), delivery_id=uuid.uuid4())
    assert f"laptop · $1,800.00 (edited by approver2: {CHANGE})" in slack["text"]
    plain = open_ticket(args={"purpose": "taxi", "amount": 30.0})
    event = NotificationEvent.objects.create(name="ticket.opened", ticket=plain, data={})
    body = webhooks.payload(event=event, endpoint=WebhookEndpoint(format="json"), delivery_id=uuid.uuid4())
    assert body["ticket"]["edited_args"] is None and body["ticket"]["edited_by"] is None
