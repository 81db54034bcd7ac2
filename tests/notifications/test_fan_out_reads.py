"""An event's fan-out reads its event, ticket and turn, and the enabled webhook endpoints, in
statements compiled once per process (adkweb.compiled.instances). Pinned here: events of different
tickets fanned out one after another each reach their own ticket's deciders, with their own ticket
and turn on each delivery; an event fanned out already is not planned again; an endpoint enabled
or subscribed after an earlier fan-out is seen by the next one."""

from __future__ import annotations

import pytest
from django.core import mail

from agents_app.models import Turn
from notifications import selectors, services, tasks
from notifications.models import Delivery, NotificationEvent, WebhookEndpoint
from tests.approvals_factories import ticket

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def no_tasks(monkeypatch) -> None:
    from adkweb.celery import app

    monkeypatch.setattr(app, "send_task", lambda *args, **kwargs: None)


def test_events_of_different_tickets_each_reach_their_own(emails, no_tasks):
    first, second = ticket(args={"purpose": "meals", "amount": 1.0}), ticket(args={"purpose": "taxi", "amount": 2.0})
    turn = Turn.objects.create(session=second.session, kind=Turn.Kind.MESSAGE, content={})
    events = [
        NotificationEvent.objects.create(name="ticket.opened", ticket=first),
        NotificationEvent.objects.create(name="ticket.opened", ticket=second, turn=turn),
    ]
    for event, (t, purpose) in zip(events, [(first, "meals"), (second, "taxi")], strict=True):
        mail.outbox.clear()
        tasks.event_fan_out(event.pk)
        deliveries = list(Delivery.objects.filter(event=event))
        assert deliveries and {(d.ticket_id, d.status) for d in deliveries} == {(t.pk, Delivery.Status.DELIVERED)}
        assert len(mail.outbox) == len(deliveries)
        assert all(purpose in message.body for message in mail.outbox)
    planned = services._fan_out_plan(events[1].pk)
    assert planned is None  # fanned out already
    event = NotificationEvent.objects.create(name="ticket.opened", ticket=second, turn=turn)
    (row, *_) = services._fan_out_plan(event.pk) or []
    assert (row.event.pk, row.ticket.pk, row.event.ticket.pk, row.event.turn.pk) == (
        event.pk,
        second.pk,
        second.pk,
        turn.pk,
    )


def test_an_endpoint_enabled_after_a_fan_out_is_seen_by_the_next(emails, no_tasks):
    endpoint = WebhookEndpoint.objects.create(url="http://127.0.0.1:9/hook", secret="s", events=["ticket.opened"])
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(enabled=False)
    assert selectors.webhook_endpoints_for(event_name="ticket.opened") == []
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(enabled=True)
    assert [e.pk for e in selectors.webhook_endpoints_for(event_name="ticket.opened")] == [endpoint.pk]
    assert selectors.webhook_endpoints_for(event_name="ticket.decided") == []
    event = NotificationEvent.objects.create(name="ticket.opened", ticket=ticket())
    planned = services._fan_out_plan(event.pk) or []
    assert [d.endpoint_id for d in planned if d.channel == "webhook"] == [endpoint.pk]
