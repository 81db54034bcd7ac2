"""An event that provably owes no delivery is recorded already fanned out, and no fan-out task is
sent for it: a requester's own decision (nobody is emailed about their own decision) or a failed
turn, with no webhook endpoint subscribed. Everything else is fanned out as before: a ticket's
deciders are always looked for, a decision by someone else emails the requester, and a subscribed
endpoint gets its POST."""

from __future__ import annotations

from typing import Any

import pytest
from django.core import mail

from agents_app.models import Turn
from approvals.models import PendingCall
from notifications import services, tasks
from notifications.models import Delivery, NotificationEvent, WebhookEndpoint
from tests.approvals_factories import session_for, ticket

FAN_OUT = "notifications.tasks.event_fan_out"


@pytest.fixture
def sent_tasks(monkeypatch) -> list[tuple[str, tuple]]:
    """The tasks the code sends to the broker (name, args), not run."""
    from adkweb.celery import app

    sent: list[tuple[str, tuple]] = []
    monkeypatch.setattr(app, "send_task", lambda name, args=(), **kw: sent.append((name, tuple(args))))
    return sent


def _decide(client: Any, user: Any, call: PendingCall, capture: Any) -> NotificationEvent:
    client.force_login(user)
    with capture(execute=True):  # commit hooks run, as after a real request
        r = client.post(f"/tickets/{call.pk}/approve/")
    assert r.status_code == 302 and PendingCall.objects.get(pk=call.pk).status == "approved"
    return NotificationEvent.objects.get(name="ticket.decided", ticket=call)


def test_a_requesters_own_decision_with_no_endpoint_is_recorded_fanned_out_with_no_task(
    emails, client, sent_tasks, django_capture_on_commit_callbacks
):
    call = ticket(session=session_for(user_id="approver"))  # the approver's own request
    event = _decide(client, emails["approver"], call, django_capture_on_commit_callbacks)
    assert event.fanned_out_at is not None and event.data["by"] == "approver"  # recorded, as before
    assert FAN_OUT not in [name for name, _ in sent_tasks]
    assert not Delivery.objects.filter(event=event).exists() and mail.outbox == []
    # What the fan-out itself would have found (the sweeper running it anyway): nobody.
    NotificationEvent.objects.filter(pk=event.pk).update(fanned_out_at=None)
    tasks.event_fan_out(event.pk)
    assert not Delivery.objects.filter(event=event).exists() and mail.outbox == []


def test_an_endpoint_subscribed_to_the_event_still_gets_its_post(
    emails, client, sent_tasks, django_capture_on_commit_callbacks
):
    hook = WebhookEndpoint.objects.create(url="https://hooks.example.com/a", secret="s" * 20, events=["ticket.decided"])
    call = ticket(session=session_for(user_id="approver"))
    event = _decide(client, emails["approver"], call, django_capture_on_commit_callbacks)
    assert event.fanned_out_at is None and (FAN_OUT, (event.pk,)) in sent_tasks
    assert services.event_fan_out(event_id=event.pk)
    assert [d.endpoint for d in Delivery.objects.filter(event=event)] == [hook]


def test_a_decision_by_someone_else_still_emails_the_requester(
    emails, client, sent_tasks, django_capture_on_commit_callbacks
):
    call = ticket()  # requested by "requester", decided by the approver
    event = _decide(client, emails["approver"], call, django_capture_on_commit_callbacks)
    assert event.fanned_out_at is None and (FAN_OUT, (event.pk,)) in sent_tasks
    tasks.event_fan_out(event.pk)
    assert [m.to for m in mail.outbox] == [["requester@example.com"]]


def test_an_opened_ticket_is_always_fanned_out_to_its_deciders(emails, sent_tasks, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        call = ticket()
        services.notify("ticket.opened", ticket=call)
    event = NotificationEvent.objects.get(name="ticket.opened", ticket=call)
    assert event.fanned_out_at is None and (FAN_OUT, (event.pk,)) in sent_tasks
    tasks.event_fan_out(event.pk)
    assert sorted(m.to[0] for m in mail.outbox) == [
        "admin@example.com",
        "approver2@example.com",
        "approver@example.com",
    ]


def test_a_failed_turn_is_fanned_out_only_when_an_endpoint_subscribes(
    demo, sent_tasks, django_capture_on_commit_callbacks
):
    turn = Turn.objects.create(session=session_for(), kind="message", content={}, status=Turn.Status.FAILED)
    with django_capture_on_commit_callbacks(execute=True):
        services.notify("turn.failed", turn=turn, data={"error": "boom"})
    quiet = NotificationEvent.objects.get(name="turn.failed")
    assert quiet.fanned_out_at is not None and sent_tasks == []
    WebhookEndpoint.objects.create(url="https://hooks.example.com/a", secret="s" * 20, events=["turn.failed"])
    WebhookEndpoint.objects.create(
        url="https://hooks.example.com/b", secret="s" * 20, events=["turn.failed"], enabled=False
    )
    with django_capture_on_commit_callbacks(execute=True):
        services.notify("turn.failed", turn=turn, data={"error": "boom"})
    told = NotificationEvent.objects.exclude(pk=quiet.pk).get(name="turn.failed")
    assert told.fanned_out_at is None and sent_tasks == [(FAN_OUT, (told.pk,))]
    assert len(services.event_fan_out(event_id=told.pk)) == 1  # the enabled endpoint's POST


def test_when_the_endpoints_cannot_be_read_the_event_is_recorded_and_fanned_out(
    emails, client, sent_tasks, django_capture_on_commit_callbacks, monkeypatch
):
    """The check is an optimisation: its failure never costs the event (recorded, its task sent)."""
    from django.db import DatabaseError

    from notifications import selectors

    def broken(**kwargs):
        raise DatabaseError("the endpoints' table is not there")

    monkeypatch.setattr(selectors, "webhook_endpoints_for", broken)
    # On PostgreSQL the decision's statement asks the question itself (approvals.record): failing there
    monkeypatch.setattr(selectors, "webhook_endpoints_subscribed_sql", lambda **kwargs: ("(1 / 0 = 1)", []))
    call = ticket(session=session_for(user_id="approver"))
    event = _decide(client, emails["approver"], call, django_capture_on_commit_callbacks)
    assert event.fanned_out_at is None and (FAN_OUT, (event.pk,)) in sent_tasks
