"""A ticket decided before its `ticket.opened` event was fanned out (embedded mode holds a ticket's
emails for a quiet moment, and a person can answer within it): its deciders are owed no email. The
fan-out writes their rows skipped, each with its one attempt, in its own transaction: nobody is
emailed, no one-tap link is made, and the ticket page shows the same rows a claim's skip would have
left; nothing is claimed, rendered or recorded after (one write transaction, not three)."""

from __future__ import annotations

import pytest
from django.core import mail
from django.db import connection
from django.test.utils import CaptureQueriesContext

from approvals.models import PendingCall
from approvals.services import ticket_approve
from notifications import sending, tasks
from notifications.models import ApprovalLink, Delivery, DeliveryAttempt, NotificationEvent, WebhookEndpoint
from notifications.templatetags.notifications_tags import ticket_notifications
from tests.approvals_factories import ticket

pytestmark = pytest.mark.django_db(transaction=True)
APPROVERS = ["admin@example.com", "approver2@example.com", "approver@example.com"]
REASON = "The ticket was approved before the email went out."


@pytest.fixture
def sent(monkeypatch) -> list[tuple]:
    from adkweb.celery import app

    tasks_sent: list[tuple] = []
    monkeypatch.setattr(app, "send_task", lambda name, args=(), **kw: tasks_sent.append((name, *args)))
    return tasks_sent


@pytest.fixture
def announced(monkeypatch) -> list[int]:
    told: list[int] = []
    monkeypatch.setattr(sending, "_announce", lambda ticket_id, session_pk: told.append(ticket_id))
    return told


def _approved_first(emails) -> NotificationEvent:
    t = ticket()
    event = NotificationEvent.objects.create(name="ticket.opened", ticket=t)
    ticket_approve(ticket=PendingCall.objects.get(pk=t.pk), actor=emails["approver"])
    return event


def test_a_ticket_decided_before_its_fan_out_emails_nobody_and_shows_each_decider_skipped(emails, sent, announced):
    event = _approved_first(emails)
    with CaptureQueriesContext(connection) as queries:
        tasks.event_fan_out(event.pk)
    assert mail.outbox == [] and not ApprovalLink.objects.exists()
    rows = list(Delivery.objects.filter(event=event).order_by("target"))
    assert [d.target for d in rows] == APPROVERS  # one row per decider, as the claim's skip left them
    for d in rows:
        assert (d.channel, d.role, d.status, d.attempts, d.last_error) == ("email", "decider", "skipped", 1, REASON)
        assert (d.next_attempt_at, d.delivered_at, d.last_status_code) == (None, None, None)
        attempts = list(d.attempt_log.all())
        assert [(a.number, a.ok, a.status_code, a.error) for a in attempts] == [(1, False, None, REASON)]
    assert announced == [event.ticket_id]  # the ticket page is told once, after the commit
    sql = [q["sql"] for q in queries.captured_queries]
    assert len([s for s in sql if s.startswith("BEGIN")]) == 1, sql  # no claim, no record after
    assert not any("RETURNING" in s and s.startswith("UPDATE") for s in sql), sql

    # What the ticket page shows approvers: the rows, skipped, with their one attempt and the reason.
    shown = ticket_notifications(PendingCall.objects.get(pk=event.ticket_id), emails["approver"])
    assert shown["show_rows"] and str(shown["summary"]) == ""  # "none sent"
    assert sorted(label for _, label in shown["deliveries"]) == ["admin", "approver", "approver2"]


def test_the_fan_out_run_again_or_a_retry_of_a_skipped_email_changes_nothing(emails, sent, announced):
    event = _approved_first(emails)
    tasks.event_fan_out(event.pk)
    before = sorted(Delivery.objects.filter(event=event).values_list("pk", "status", "attempts", "updated_at"))
    tasks.event_fan_out(event.pk)  # the broker redelivered it
    for pk, *_ in before:
        tasks.delivery_send(pk)  # the sweeper, or a stray retry
    assert sorted(Delivery.objects.filter(event=event).values_list("pk", "status", "attempts", "updated_at")) == before
    assert DeliveryAttempt.objects.filter(delivery__event=event).count() == 3
    assert mail.outbox == [] and announced == [event.ticket_id]


def test_its_webhook_is_written_skipped_too(emails, sent, announced):
    """Before: the deciders' emails were skipped and the ticket.opened webhook went out all the same, the
    ticket already approved ("Approval needed" for a ticket nobody can decide any more). Now it is written
    skipped with them, as a ticket decided as it opened sends no ticket.opened: its close has its own event."""
    hook = WebhookEndpoint.objects.create(url="http://127.0.0.1:9/hook", secret="s", events=["ticket.opened"])
    emails["approver2"].email = ""  # no address: no row, as before
    emails["approver2"].save(update_fields=["email"])
    event = _approved_first(emails)
    tasks.event_fan_out(event.pk)
    email_rows = Delivery.objects.filter(event=event, channel="email")
    assert sorted(email_rows.values_list("target", "status")) == [
        ("admin@example.com", "skipped"),
        ("approver@example.com", "skipped"),
    ]
    post = Delivery.objects.get(event=event, channel="webhook")
    reason = "The ticket was approved before this ticket.opened went out."
    assert (post.endpoint_id, post.status, post.attempts, post.last_error) == (hook.pk, "skipped", 1, reason)
    assert ("notifications.tasks.delivery_send", post.pk) not in sent  # nothing left to send
    [attempt] = DeliveryAttempt.objects.filter(delivery=post)
    assert (attempt.number, attempt.ok, attempt.error) == (1, False, reason)


def test_a_ticket_still_open_at_its_fan_out_emails_its_deciders(emails, sent, announced):
    event = NotificationEvent.objects.create(name="ticket.opened", ticket=ticket())
    tasks.event_fan_out(event.pk)
    assert sorted(m.to[0] for m in mail.outbox) == APPROVERS
    assert set(Delivery.objects.filter(event=event).values_list("status", "attempts")) == {("delivered", 1)}
