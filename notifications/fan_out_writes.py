"""The fan-out's writes, in its transaction (notifications.services._fan_out_locked runs them, the
event locked): the statements that lock the event, mark it fanned out, record the skipped deliveries'
attempts and list what is owed, and the one INSERT of the planned deliveries. Split out of
notifications.services, which imports them back (tests call `services._deliveries_insert`)."""

from __future__ import annotations

import functools
from typing import Any

from django.db import connection

from .models import Delivery, DeliveryAttempt, NotificationEvent


def _deliveries_insert(rows: list[Delivery]) -> None:
    """`Delivery.objects.bulk_create(rows, ignore_conflicts=True)`: a delivery already there (one per
    event and person, or endpoint) is kept as it is. On SQLite the ORM's one `INSERT OR IGNORE`, its
    SQL written once per process and count of rows (the ORM compiled it per fan-out: ~0.3 ms of a
    fan-out's ~1.3), the values each field's own (`pre_save`: the times; the driver's form: JSON, UUIDs)."""
    if connection.vendor != "sqlite":
        Delivery.objects.bulk_create(rows, ignore_conflicts=True)
        return
    if not rows:
        return
    params = [f.get_db_prep_save(f.pre_save(row, True), connection) for row in rows for f in _DELIVERY_FIELDS]
    with connection.cursor() as cursor:
        cursor.execute(_delivery_insert(len(rows)), params)
    for row in rows:
        row._state.adding, row._state.db = False, connection.alias  # as bulk_create leaves them


_DELIVERY_FIELDS: list[Any] = [f for f in Delivery._meta.concrete_fields if not f.primary_key]


@functools.lru_cache(maxsize=32)
def _delivery_insert(n: int) -> str:
    """SQLite's `INSERT OR IGNORE` of `n` deliveries, as the ORM's bulk_create writes it."""
    quote = connection.ops.quote_name
    columns = ", ".join(quote(f.column) for f in _DELIVERY_FIELDS)  # concrete: each has its column
    values = ", ".join([f"({', '.join(['%s'] * len(_DELIVERY_FIELDS))})"] * n)
    return f"INSERT OR IGNORE INTO {quote(Delivery._meta.db_table)} ({columns}) VALUES {values}"


def _announce_after_commit(delivery: Delivery) -> None:
    """The ticket page shows its deliveries: told once, after the commit (as `deliveries_record` does)."""
    from .sending import announce_after_commit

    ticket = delivery.ticket
    if ticket is not None:
        announce_after_commit(ticket.pk, ticket.session_id)


_EVENT_LOCKED = f"SELECT fanned_out_at FROM {NotificationEvent._meta.db_table} WHERE id = %s"
_FANNED_OUT = f"UPDATE {NotificationEvent._meta.db_table} SET fanned_out_at = %s WHERE id = %s"
_SKIPPED_ATTEMPTS = (
    f"INSERT INTO {DeliveryAttempt._meta.db_table} "
    "(delivery_id, number, started_at, duration_ms, ok, status_code, error) "
    f"SELECT d.id, d.attempts, d.updated_at, 0, %s, NULL, d.last_error FROM {Delivery._meta.db_table} d "
    "WHERE d.event_id = %s AND d.status = %s AND d.attempts = 1 "
    f"AND NOT EXISTS (SELECT 1 FROM {DeliveryAttempt._meta.db_table} a WHERE a.delivery_id = d.id)"
)
_OWED = (
    f"SELECT id, channel FROM {Delivery._meta.db_table} WHERE event_id = %s AND status IN (%s, %s) AND attempts = 0 "
    "ORDER BY id"
)
