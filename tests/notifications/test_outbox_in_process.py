"""Embedded mode (the worker in this process, on the memory broker): an outbox row's fan-out runs on the
process's quiet thread (notifications.outbox, adkweb.quiet_work), with no Celery message. Each decider is
emailed once; a row whose work never ran (the process died before it was free) stays owed and the
sweeper sends it as a task; the fan-out run twice writes once. Services mode keeps the task (the other
notification tests spy on it)."""

from __future__ import annotations

import pytest
from django.db import transaction

from adkweb import quiet_work
from adkweb.notify import TICKET_OPENED, notify
from notifications import outbox, services
from notifications.models import Delivery, NotificationEvent
from tests.approvals_factories import ticket
from tests.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)
APPROVERS = ["admin@example.com", "approver2@example.com", "approver@example.com"]


@pytest.fixture
def embedded(settings, monkeypatch) -> list[tuple[str, tuple]]:
    """Embedded mode's settings; the Celery messages sent, recorded (none goes)."""
    from adkweb.celery import app

    settings.ADKWEB_EMBEDDED_WORKER = True
    settings.CELERY_BROKER_TRANSPORT = "adkweb.memory_broker:Transport"
    sent: list[tuple[str, tuple]] = []
    monkeypatch.setattr(app, "send_task", lambda name, args=(), **kw: sent.append((name, tuple(args))))
    return sent


def _emailed(event: NotificationEvent) -> list[str]:
    rows = Delivery.objects.filter(event=event, channel=Delivery.Channel.EMAIL)
    return sorted(d.target for d in rows if d.status == Delivery.Status.DELIVERED)


def test_a_committed_row_is_fanned_out_on_the_quiet_thread_without_a_task(emails, smtp_server, embedded):
    call = ticket()
    with transaction.atomic():
        notify(TICKET_OPENED, ticket=call)
    event = NotificationEvent.objects.get(ticket=call, name=TICKET_OPENED)
    assert wait_for(lambda: _emailed(event) == APPROVERS, timeout=20, what="the ticket's emails")
    event.refresh_from_db()
    assert event.fanned_out_at is not None
    assert embedded == []  # no event_fan_out (nor any other) message
    assert sorted(m["To"] for m in smtp_server.messages) == APPROVERS  # each decider once


def test_a_row_whose_quiet_work_never_ran_stays_owed_for_the_sweeper(emails, smtp_server, embedded, monkeypatch):
    monkeypatch.setattr(quiet_work, "when_quiet", lambda fn, *args: None)  # the process died before it was free
    call = ticket()
    with transaction.atomic():
        notify(TICKET_OPENED, ticket=call)
    event = NotificationEvent.objects.get(ticket=call, name=TICKET_OPENED)
    assert event.fanned_out_at is None and embedded == []
    NotificationEvent.objects.filter(pk=event.pk).update(created_at=event.created_at.replace(year=2000))
    assert services.notifications_sweep() >= 1
    assert ("notifications.tasks.event_fan_out", (event.pk,)) in embedded
    outbox.fan_out_now(event.pk)  # the sweeper's task runs; a quiet run after it writes nothing more
    outbox.fan_out_now(event.pk)
    assert _emailed(event) == APPROVERS and Delivery.objects.filter(event=event).count() == 3
    assert sorted(m["To"] for m in smtp_server.messages) == APPROVERS


def test_in_services_mode_the_row_goes_as_a_task(emails, settings, monkeypatch):
    from adkweb.celery import app

    settings.ADKWEB_EMBEDDED_WORKER = False
    sent: list[tuple[str, tuple]] = []
    monkeypatch.setattr(app, "send_task", lambda name, args=(), **kw: sent.append((name, tuple(args))))
    call = ticket()
    with transaction.atomic():
        notify(TICKET_OPENED, ticket=call)
    event = NotificationEvent.objects.get(ticket=call, name=TICKET_OPENED)
    assert sent == [("notifications.tasks.event_fan_out", (event.pk,))]


def test_the_handler_and_its_outbox_are_registered_together_at_startup():
    """services.notify runs only as the registered handler (adkweb.notify.notify), and the app registers
    it with its outbox in one call (notifications.apps): notify's work after commit always has the
    outbox's `committed` (no fallback to the task of its own)."""
    from adkweb import notify as shared

    box = shared.outbox()
    assert shared._handler is services.notify and box is not None and box.committed is outbox.committed


def test_a_handler_registered_without_its_outbox_still_records_the_event_and_never_raises(emails, embedded, caplog):
    """notify never raises into the caller: were the handler ever registered without its outbox, the
    event is still recorded in the caller's transaction, owed, an error says why, and the sweeper sends it."""
    from adkweb import notify as shared

    call = ticket()
    box = shared.outbox()
    shared.register(services.notify)
    try:
        with transaction.atomic():
            notify(TICKET_OPENED, ticket=call)
    finally:
        shared.register(services.notify, box)
    event = NotificationEvent.objects.get(ticket=call, name=TICKET_OPENED)
    assert event.fanned_out_at is None and embedded == []
    assert "no outbox is registered" in caplog.text
    NotificationEvent.objects.filter(pk=event.pk).update(created_at=event.created_at.replace(year=2000))
    assert services.notifications_sweep() >= 1
    assert ("notifications.tasks.event_fan_out", (event.pk,)) in embedded


def test_a_fan_out_that_cannot_start_leaves_the_row_owed_and_the_caller_unharmed(emails, embedded, monkeypatch, caplog):
    """The outbox's work runs in the caller's commit callbacks (a decision's, a turn's): if it cannot start
    (the quiet thread refused), the caller's transaction still ends normally, its later callbacks still run,
    and the row stays owed for the sweeper."""

    def refused(fn, *args):
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(quiet_work, "when_quiet", refused)
    call = ticket()
    later: list[str] = []
    with transaction.atomic():
        notify(TICKET_OPENED, ticket=call)
        transaction.on_commit(lambda: later.append("ran"))
    event = NotificationEvent.objects.get(ticket=call, name=TICKET_OPENED)
    assert event.fanned_out_at is None and later == ["ran"]
    assert "the sweeper will send it" in caplog.text
