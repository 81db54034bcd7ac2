"""Two tasks trying one event's emails at once on PostgreSQL (a redelivered fan-out beside the first,
the sweeper beside a slow worker): the batch's claim locks the rows it takes, the other waits and
then finds them sending, so each person gets one email and each delivery one attempt."""

from __future__ import annotations

import threading
import time

import pytest
from django.core import mail
from django.db import connection

from notifications import emails as notification_emails
from notifications import sending, services
from notifications.models import Delivery, DeliveryAttempt, NotificationEvent
from tests.approvals_factories import ticket


@pytest.mark.django_db(transaction=True)
def test_two_batches_claiming_the_same_emails_send_each_once(demo, monkeypatch):
    for name, user in demo.items():
        user.email = f"{name}@example.com"
        user.save(update_fields=["email"])
    event = NotificationEvent.objects.create(name="ticket.opened", ticket=ticket())
    ids = services.event_fan_out(event_id=event.pk)
    assert len(ids) >= 2

    prepare, first_in = notification_emails.email_prepare, threading.Event()

    def slow_prepare(delivery, *args):  # the first batch holds its claim a while, inside its transaction
        first_in.set()
        time.sleep(0.3)
        return prepare(delivery, *args)

    monkeypatch.setattr(notification_emails, "email_prepare", slow_prepare)
    errors: list[BaseException] = []

    def batch() -> None:
        try:
            sending.deliveries_attempt(delivery_ids=ids)
        except BaseException as exc:  # shown by the assertion below
            errors.append(exc)
        finally:
            connection.close()

    first = threading.Thread(target=batch)
    first.start()
    assert first_in.wait(10)
    second = threading.Thread(target=batch)  # starts while the first holds the rows
    second.start()
    first.join(30)
    second.join(30)
    assert not errors, errors
    rows = Delivery.objects.filter(pk__in=ids)
    assert sorted(m.to[0] for m in mail.outbox) == sorted(rows.values_list("target", flat=True))
    assert {(d.status, d.attempts) for d in rows} == {("delivered", 1)}
    assert DeliveryAttempt.objects.filter(delivery__in=ids).count() == len(ids)
