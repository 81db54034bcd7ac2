"""An event's emails are sent by its fan-out task, together: one claim, one connection to the mail
server, one record of every attempt. Pinned here: each recipient gets exactly one email, also when
the task runs twice (a redelivered message, a crash before the fan-out said so); a failed email is
retried alone, later, by a task of its own; a webhook still gets a task of its own; two batches that
claim the same deliveries send each once."""

from __future__ import annotations

from typing import Any

import pytest
from django.core import mail
from django.core.mail import EmailMultiAlternatives

from notifications import sending, tasks
from notifications.models import ApprovalLink, Delivery, DeliveryAttempt, NotificationEvent, WebhookEndpoint
from tests.approvals_factories import ticket

APPROVERS = ["admin@example.com", "approver2@example.com", "approver@example.com"]


@pytest.fixture
def sent_tasks(monkeypatch) -> list[tuple[str, tuple, Any]]:
    """The tasks the code sends to the broker (name, args, countdown), not run."""
    from adkweb.celery import app

    sent: list[tuple[str, tuple, Any]] = []
    monkeypatch.setattr(
        app, "send_task", lambda name, args=(), countdown=None, **kw: sent.append((name, args, countdown))
    )
    return sent


@pytest.fixture
def approver2_refused(monkeypatch, settings):
    """The mail server refuses approver2's email (one retry, a minute later); returns the real `send`,
    to put back when the server is back."""
    settings.ADKWEB_NOTIFY_RETRY_DELAYS = [60.0]
    send = EmailMultiAlternatives.send

    def refuse_one(message, *args, **kwargs):
        if message.to == ["approver2@example.com"]:
            raise ConnectionRefusedError("the mail server refused approver2")
        return send(message, *args, **kwargs)

    monkeypatch.setattr(EmailMultiAlternatives, "send", refuse_one)
    return send


def _emails() -> list[Delivery]:
    return list(Delivery.objects.filter(channel="email").order_by("target"))


def test_one_event_n_recipients_n_deliveries_each_sent_once_under_a_retried_task(emails, sent_tasks):
    hook = WebhookEndpoint.objects.create(url="https://hooks.example.com/a", secret="s" * 20, events=["ticket.opened"])
    event = NotificationEvent.objects.create(name="ticket.opened", ticket=ticket())

    tasks.event_fan_out(event.pk)  # the task's body, as a worker runs it
    assert sorted(m.to[0] for m in mail.outbox) == APPROVERS
    rows = _emails()
    assert [(d.target, d.status, d.attempts) for d in rows] == [(t, "delivered", 1) for t in APPROVERS]
    assert DeliveryAttempt.objects.filter(delivery__channel="email", ok=True).count() == 3
    assert ApprovalLink.objects.count() == 3  # each decider's email carries their own one-tap link
    webhook = Delivery.objects.get(channel="webhook", endpoint=hook)
    # No task per email: only the webhook's own (an endpoint that hangs delays nobody else).
    assert sent_tasks == [("notifications.tasks.delivery_send", (webhook.pk,), None)]

    # The same message delivered again, and once more as if the first run died before saying it fanned out.
    tasks.event_fan_out(event.pk)
    NotificationEvent.objects.filter(pk=event.pk).update(fanned_out_at=None)
    tasks.event_fan_out(event.pk)
    assert len(mail.outbox) == 3 and ApprovalLink.objects.count() == 3
    assert [(d.status, d.attempts) for d in _emails()] == [("delivered", 1)] * 3
    assert DeliveryAttempt.objects.filter(delivery__channel="email").count() == 3
    assert {name for name, _, _ in sent_tasks} == {"notifications.tasks.delivery_send"}
    assert {args for _, args, _ in sent_tasks} == {(webhook.pk,)}  # never tried yet: its own claim decides


def test_a_failed_email_is_retried_alone_and_the_others_are_delivered(
    emails, sent_tasks, approver2_refused, monkeypatch
):
    event = NotificationEvent.objects.create(name="ticket.opened", ticket=ticket())
    tasks.event_fan_out(event.pk)

    assert sorted(m.to[0] for m in mail.outbox) == ["admin@example.com", "approver@example.com"]
    by_target = {d.target: d for d in _emails()}
    failed = by_target["approver2@example.com"]
    assert failed.status == "retrying" and "refused approver2" in failed.last_error and failed.attempts == 1
    assert failed.attempt_log.get().ok is False
    assert not ApprovalLink.objects.filter(user=failed.recipient).exists(), "no live link for an email never sent"
    assert all(by_target[t].status == "delivered" for t in ("admin@example.com", "approver@example.com"))
    ((name, args, countdown),) = sent_tasks
    assert (name, args) == ("notifications.tasks.delivery_send", (failed.pk,)) and 54 <= countdown <= 66

    monkeypatch.setattr(EmailMultiAlternatives, "send", approver2_refused)  # the server is back: the retry task runs
    Delivery.objects.filter(pk=failed.pk).update(next_attempt_at=None)  # as if its delay had passed
    tasks.delivery_send(failed.pk)
    failed.refresh_from_db()
    assert (failed.status, failed.attempts) == ("delivered", 2) and len(mail.outbox) == 3


def test_a_batch_claims_only_what_is_still_owed(emails, sent_tasks):
    event = NotificationEvent.objects.create(name="ticket.opened", ticket=ticket())
    from notifications import services

    ids = services.event_fan_out(event_id=event.pk)
    assert len(ids) == 3
    Delivery.objects.filter(pk=ids[0]).update(status="sending", attempts=1)  # another worker has it
    assert sending.deliveries_attempt(delivery_ids=ids) == {}
    assert len(mail.outbox) == 2
    assert sending.deliveries_attempt(delivery_ids=ids) == {}  # the others went out: nothing left to claim
    assert len(mail.outbox) == 2
    assert Delivery.objects.get(pk=ids[0]).status == "sending"


def test_a_batch_claims_only_deliveries_due_now_with_attempts_left(emails, sent_tasks):
    """A retry not due yet (beyond the 2 s a message may arrive early) and a delivery at its last
    attempt are left alone; a retry due within those 2 s is sent; each claim counts one attempt.
    The claim marks what it takes in one statement (no read of the rows first)."""
    from datetime import timedelta

    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from notifications import services

    event = NotificationEvent.objects.create(name="ticket.opened", ticket=ticket())
    later, spent, soon = services.event_fan_out(event_id=event.pk)
    now = timezone.now()
    Delivery.objects.filter(pk=later).update(status="retrying", attempts=1, next_attempt_at=now + timedelta(seconds=60))
    Delivery.objects.filter(pk=spent).update(status="retrying", attempts=4, max_attempts=4)
    Delivery.objects.filter(pk=soon).update(status="retrying", attempts=1, next_attempt_at=now + timedelta(seconds=1))
    with CaptureQueriesContext(connection) as queries:
        assert sending.deliveries_attempt(delivery_ids=[later, spent, soon]) == {}
    claim = [q["sql"] for q in queries.captured_queries if "notifications_delivery" in q["sql"]][0]
    assert claim.startswith("UPDATE") and claim.endswith("RETURNING id")  # marked sending in one statement
    assert [m.to[0] for m in mail.outbox] == [Delivery.objects.get(pk=soon).target]
    got = {d.pk: (d.status, d.attempts) for d in Delivery.objects.filter(pk__in=[later, spent, soon])}
    assert got == {later: ("retrying", 1), spent: ("retrying", 4), soon: ("delivered", 2)}


def test_an_events_deliveries_are_made_in_one_insert_and_its_preferences_read_once_per_step(emails, sent_tasks):
    """The fan-out writes its deliveries in one INSERT and the batch's claim reads its recipients'
    preferences in one query (not one per email), with what each email says unchanged: one each,
    with its link, and a person who turned emails off since the fan-out is skipped at sending."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from notifications.models import NotificationPreference

    event = NotificationEvent.objects.create(name="ticket.opened", ticket=ticket())
    original = sending._claim

    def claim_after_a_change(ids, **known):  # approver2 turns emails off between the fan-out and the sending
        NotificationPreference.objects.create(user=emails["approver2"], email_enabled=False)
        return original(ids, **known)

    sending._claim = claim_after_a_change
    try:
        with CaptureQueriesContext(connection) as queries:
            tasks.event_fan_out(event.pk)
    finally:
        sending._claim = original
    sql = [q["sql"] for q in queries.captured_queries]
    assert len([s for s in sql if s.startswith("INSERT") and 'INTO "notifications_delivery"' in s]) == 1
    assert len([s for s in sql if 'FROM "notifications_notificationpreference"' in s]) == 2  # fan-out, claim
    assert sorted(m.to[0] for m in mail.outbox) == ["admin@example.com", "approver@example.com"]
    skipped = Delivery.objects.get(recipient=emails["approver2"])
    assert skipped.status == "skipped" and "turned ticket emails off" in skipped.last_error
    assert ApprovalLink.objects.count() == 2


def test_a_batchs_attempts_are_recorded_in_one_update(emails, sent_tasks, approver2_refused):
    """Every tried delivery's new state (delivered with its time, or retrying with its next attempt and
    error) is written by one statement run for each row, not a compiled save per delivery."""
    from datetime import timedelta

    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    event = NotificationEvent.objects.create(name="ticket.opened", ticket=ticket())
    before = timezone.now()
    with CaptureQueriesContext(connection) as queries:
        tasks.event_fan_out(event.pk)
    table = Delivery._meta.db_table
    updates = [q["sql"] for q in queries.captured_queries if f"UPDATE {table} " in q["sql"].replace('"', "")]
    assert len(updates) == 2, updates  # the claim, then the record of all three
    by_target = {d.target: d for d in _emails()}
    for target in ("admin@example.com", "approver@example.com"):
        done = by_target[target]
        assert done.status == "delivered" and done.next_attempt_at is None and done.last_error == ""
        assert before <= done.delivered_at <= timezone.now() and done.updated_at >= before
    failed = by_target["approver2@example.com"]
    assert failed.status == "retrying" and failed.delivered_at is None and failed.updated_at >= before
    assert "refused approver2" in failed.last_error and failed.last_status_code is None
    assert before + timedelta(seconds=50) <= failed.next_attempt_at <= timezone.now() + timedelta(seconds=70)
