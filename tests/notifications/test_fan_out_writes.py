"""A fan-out's writes and the recipients' preferences in statements written once per process: on
SQLite the deliveries' one `INSERT OR IGNORE` (the ORM compiled it per fan-out), and the
preferences of a ticket's deciders compiled once per count of people. Pinned here: the rows are
the ORM's, column by column (times, UUIDs, a webhook's JSON body, a skipped row's reason); a
delivery already there is kept as it is; each call's people get their own preferences."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.db.models.sql.compiler import SQLCompiler, SQLInsertCompiler
from django.test.utils import CaptureQueriesContext

from notifications import selectors, services
from notifications.models import Delivery, NotificationEvent, NotificationPreference, WebhookEndpoint
from tests.approvals_factories import ticket

pytestmark = pytest.mark.django_db(transaction=True)
COLUMNS = [f.attname for f in Delivery._meta.concrete_fields if f.attname not in ("id", "created_at", "updated_at")]


def _planned(emails) -> tuple[NotificationEvent, list[Delivery]]:
    WebhookEndpoint.objects.create(url="http://127.0.0.1:9/hook", secret="s", events=["ticket.opened"])
    event = NotificationEvent.objects.create(name="ticket.opened", ticket=ticket(args={"purpose": "é <b>", "n": 1}))
    rows = services._fan_out_plan(event.pk)
    assert rows is not None and {r.channel for r in rows} == {"email", "webhook"}
    return event, rows


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's path")
def test_the_fan_outs_rows_are_the_orms_in_one_statement_written_once(emails, monkeypatch):
    event, rows = _planned(emails)
    rows[0].status, rows[0].attempts, rows[0].last_error = Delivery.Status.SKIPPED, 1, "why ✓"

    def compiled_per_call(*args, **kwargs):
        raise AssertionError("the ORM compiled the fan-out's INSERT")

    monkeypatch.setattr(SQLInsertCompiler, "as_sql", compiled_per_call)
    with CaptureQueriesContext(connection) as queries, transaction.atomic():
        services._deliveries_insert(rows)
    inserts = [q["sql"] for q in queries.captured_queries if "INSERT" in q["sql"]]
    assert len(inserts) == 1 and inserts[0].startswith('INSERT OR IGNORE INTO "notifications_delivery" ("uuid"')
    monkeypatch.undo()
    stored = {d.uuid: d for d in Delivery.objects.filter(event=event)}
    assert len(stored) == len(rows)
    for row in rows:  # as the ORM would have stored each one (its own values read back)
        got = stored[row.uuid]
        assert [getattr(got, c) for c in COLUMNS] == [getattr(row, c) for c in COLUMNS]
        assert got.created_at == row.created_at and got.updated_at == row.updated_at
        assert got.created_at is not None and not row._state.adding
    hook = next(d for d in stored.values() if d.channel == "webhook")
    assert hook.payload["ticket"]["args"] == {"purpose": "é <b>", "n": 1}  # JSON, read back as the ORM does
    assert stored[rows[0].uuid].last_error == "why ✓"


def test_a_delivery_already_there_is_kept_as_it_is(emails):
    event, rows = _planned(emails)
    with transaction.atomic():
        services._deliveries_insert(rows)
    first = Delivery.objects.filter(event=event, channel="email").order_by("pk").first()
    Delivery.objects.filter(pk=first.pk).update(status=Delivery.Status.DELIVERED, attempts=1)
    again = [Delivery(**{c: getattr(r, c) for c in COLUMNS if c != "uuid"}) for r in rows]  # new UUIDs
    with transaction.atomic():
        services._deliveries_insert(again)  # the same events and people: none written twice
    assert Delivery.objects.filter(event=event).count() == len(rows)
    kept = Delivery.objects.get(pk=first.pk)
    assert (kept.status, kept.attempts) == (Delivery.Status.DELIVERED, 1)


def test_each_calls_people_get_their_own_preferences_compiled_once(emails, monkeypatch):
    people = list(get_user_model().objects.order_by("pk"))
    assert len(people) >= 4
    NotificationPreference.objects.create(user=people[0], email_enabled=False)
    NotificationPreference.objects.create(user=people[2], only_my_groups=True)
    first = selectors.preferences_of(people[:2])
    with monkeypatch.context() as m:  # as many people again: the query compiled before, not per call
        m.setattr(SQLCompiler, "as_sql", lambda *a, **k: pytest.fail("compiled per call"))
        second = selectors.preferences_of(people[2:4])
    assert {pk: p.email_enabled for pk, p in first.items()} == {people[0].pk: False}
    assert {pk: p.only_my_groups for pk, p in second.items()} == {people[2].pk: True}
    assert selectors.preferences_of([people[1], people[3]]) == {}  # none saved: the defaults
    many = people * 6  # beyond the compiled counts: the ORM's query
    assert set(selectors.preferences_of(many)) == {people[0].pk, people[2].pk}
    assert selectors.preferences_of([]) == {}
