"""The fan-out reads who is owed what before the transaction that writes the deliveries (on SQLite a
write transaction holds the whole file from its BEGIN: those reads kept the turn that opened the
ticket waiting), and that transaction still writes an event's deliveries once."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from notifications import services
from notifications.models import Delivery, NotificationEvent
from tests.approvals_factories import ticket

pytestmark = pytest.mark.django_db(transaction=True)


def _words(captured: CaptureQueriesContext) -> list[str]:
    return [" ".join(q["sql"].split()[:1]) + (" auth_user" if "auth_user" in q["sql"] else "") for q in captured]


def test_who_is_owed_what_is_read_before_the_write_transaction(emails):
    event = NotificationEvent.objects.create(name="ticket.opened", ticket=ticket())
    with CaptureQueriesContext(connection) as captured:
        owed = services.event_fan_out(event_id=event.pk)
    assert len(owed) == 3 and Delivery.objects.filter(event=event).count() == 3  # the 3 approvers
    words = _words(captured)
    begin = next(i for i, w in enumerate(words) if w.startswith("BEGIN"))
    assert any(w.endswith("auth_user") for w in words[:begin])  # the recipients, before
    # In the transaction: the event's lock, the one INSERT, its mark, the list of what is owed.
    assert words[begin:] == ["BEGIN", "SELECT", "INSERT", "UPDATE", "SELECT", "COMMIT"]


def test_a_fan_out_that_won_meanwhile_is_not_repeated(emails, monkeypatch):
    """Another run fans the event out between this one's reads and its transaction: nothing twice."""
    event = NotificationEvent.objects.create(name="ticket.opened", ticket=ticket())
    plan = services._fan_out_plan
    first: list[int] = []

    def planned_then_overtaken(event_id: int):
        rows = plan(event_id)
        monkeypatch.setattr(services, "_fan_out_plan", plan)
        first.extend(services.event_fan_out(event_id=event_id))  # the other run, all the way
        Delivery.objects.filter(pk=first[0]).update(attempts=1)  # and it already tried one
        return rows

    monkeypatch.setattr(services, "_fan_out_plan", planned_then_overtaken)
    assert sorted(services.event_fan_out(event_id=event.pk)) == sorted(first[1:])
    assert Delivery.objects.filter(event=event).count() == 3


def test_an_event_not_seen_by_the_reads_is_planned_in_the_transaction(emails, monkeypatch):
    event = NotificationEvent.objects.create(name="ticket.opened", ticket=ticket())
    plan = services._fan_out_plan
    calls: list[int] = []

    def unseen_first(event_id: int):
        calls.append(event_id)
        return None if len(calls) == 1 else plan(event_id)

    monkeypatch.setattr(services, "_fan_out_plan", unseen_first)
    assert len(services.event_fan_out(event_id=event.pk)) == 3 and len(calls) == 2
