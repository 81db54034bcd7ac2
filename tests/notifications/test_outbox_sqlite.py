"""The outbox row of a notification (notifications.services.notify) on SQLite, inside the caller's
transaction: one plain INSERT, no savepoint (a statement SQLite refuses undoes only itself). A refused
INSERT is logged, and the caller's transaction goes on and commits its own writes (a decision is never
lost to its notification), as on PostgreSQL (tests/integration/test_notifications_outbox_postgres.py)."""

from __future__ import annotations

import logging

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from adkweb.notify import TICKET_DECIDED, notify
from approvals.models import PendingCall
from notifications.models import NotificationEvent
from tests.approvals_factories import ticket

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's path"),
]


def test_the_outbox_row_is_one_insert_without_a_savepoint(demo):
    call = ticket()
    with transaction.atomic(), CaptureQueriesContext(connection) as queries:
        notify(TICKET_DECIDED, ticket=call, data={"status": "approved", "by": "approver", "comment": "d\u00e9j\u00e0"})
    sql = [q["sql"] for q in queries.captured_queries]
    assert not [s for s in sql if "SAVEPOINT" in s], sql
    assert len([s for s in sql if s.startswith("INSERT INTO")]) == 1, sql
    row = NotificationEvent.objects.get(ticket=call, name=TICKET_DECIDED)
    assert (row.turn_id, row.data) == (None, {"status": "approved", "by": "approver", "comment": "d\u00e9j\u00e0"})
    assert row.created_at is not None


def test_a_row_the_database_refuses_leaves_the_callers_transaction_usable(demo, caplog):
    call = ticket()
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TEMP TRIGGER refuse_outbox BEFORE INSERT ON notifications_notificationevent "
            "WHEN NEW.data LIKE '%refuse me%' BEGIN SELECT RAISE(ABORT, 'refused'); END"
        )
    try:
        with caplog.at_level(logging.ERROR, logger="notifications.services"), transaction.atomic():
            notify(TICKET_DECIDED, ticket=call, data={"comment": "refuse me"})
            call.status = PendingCall.Status.APPROVED
            call.save(update_fields=["status"])  # the caller goes on
            notify(TICKET_DECIDED, ticket=call, data={"comment": "after"})
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TRIGGER IF EXISTS refuse_outbox")
    assert PendingCall.objects.get(pk=call.pk).status == PendingCall.Status.APPROVED
    assert [r.data for r in NotificationEvent.objects.filter(ticket=call, name=TICKET_DECIDED)] == [
        {"comment": "after"}
    ]
    assert "Could not record the notification ticket.decided" in caplog.text


def test_the_endpoints_read_before_a_notice_takes_no_savepoint(demo):
    from notifications.models import WebhookEndpoint
    from notifications.selectors import webhook_endpoints_for

    WebhookEndpoint.objects.create(name="hook", url="https://example.com/h", events=[TICKET_DECIDED], enabled=True)
    with transaction.atomic(), CaptureQueriesContext(connection) as queries:
        found = webhook_endpoints_for(event_name=TICKET_DECIDED, in_savepoint=True)
    assert [e.name for e in found] == ["hook"]
    assert not [q["sql"] for q in queries.captured_queries if "SAVEPOINT" in q["sql"]]
