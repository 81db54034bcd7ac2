"""The outbox row of a notification (notifications.services.notify) on PostgreSQL: recorded in the
caller's transaction, in a savepoint of its own sent with the INSERT and its release in one round trip;
an INSERT the database refuses is rolled back to that savepoint, logged, and the caller's transaction
goes on and commits its own writes (a decision is never lost to its notification)."""

from __future__ import annotations

import logging

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from adkweb.notify import TICKET_DECIDED, notify
from approvals.models import PendingCall
from notifications.models import NotificationEvent
from tests.approvals_factories import ticket

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_connections")]


def test_the_outbox_row_is_recorded_in_one_round_trip(demo):
    call = ticket()
    with transaction.atomic(), CaptureQueriesContext(connection) as queries:
        notify(TICKET_DECIDED, ticket=call, data={"status": "approved", "by": "approver", "comment": "ok"})
    inserts = [q["sql"] for q in queries.captured_queries if "notifications_notificationevent" in q["sql"]]
    assert len(inserts) == 1 and inserts[0].startswith("SAVEPOINT"), inserts
    row = NotificationEvent.objects.get(ticket=call, name=TICKET_DECIDED)
    assert (row.name, row.turn_id, row.data) == (
        TICKET_DECIDED,
        None,
        {"status": "approved", "by": "approver", "comment": "ok"},
    )
    assert row.created_at is not None


def test_a_row_the_database_refuses_leaves_the_callers_transaction_usable(demo, caplog):
    """jsonb refuses a NUL character: the INSERT fails inside the caller's transaction, which then
    writes on and commits."""
    call = ticket()
    with caplog.at_level(logging.ERROR, logger="notifications.services"), transaction.atomic():
        notify(TICKET_DECIDED, ticket=call, data={"comment": "\x00"})
        call.status = PendingCall.Status.APPROVED
        call.save(update_fields=["status"])  # the caller goes on
        notify(TICKET_DECIDED, ticket=call, data={"comment": "after"})
    assert PendingCall.objects.get(pk=call.pk).status == PendingCall.Status.APPROVED
    assert [r.data for r in NotificationEvent.objects.filter(ticket=call, name=TICKET_DECIDED)] == [
        {"comment": "after"}
    ]
    assert "Could not record the notification ticket.decided" in caplog.text
