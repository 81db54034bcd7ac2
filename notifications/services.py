"""Writes of notifications: `notify` (the entry point other apps ticket), fanning an event out into
deliveries, resending, the sweeper that re-sends what a lost broker message left owed. A person's choices are
notifications.choices'; webhook endpoints' writes notifications.endpoints'; the fan-out's statements and
its INSERT of the deliveries notifications.fan_out_writes' (imported back here)."""

from __future__ import annotations

import logging
import uuid
from datetime import timedelta
from typing import Any, cast

from django.db import DatabaseError, connection, transaction
from django.db.models import F
from django.utils import timezone

from adkweb import compiled
from adkweb.notify import outbox as shared_outbox

from . import selectors, webhooks
from .events import EVENTS
from .fan_out_writes import (
    _EVENT_LOCKED,
    _FANNED_OUT,
    _OWED,
    _SKIPPED_ATTEMPTS,
    _announce_after_commit,
    _deliveries_insert,
)
from .models import Delivery, NotificationEvent
from .outcome import closed_before_sending

logger = logging.getLogger(__name__)
SWEEP_GRACE = timedelta(seconds=15)  # younger work is still in the broker's hands
STALE_SENDING = timedelta(minutes=5)  # a worker that claimed a delivery and died
LOST_LAST_ATTEMPT = (
    "The worker sending its last attempt stopped before it could record the outcome (it may have gone "
    "out); no attempts are left: resend it to try again."
)


def notify(event: str, *, ticket: Any = None, turn: Any = None, data: dict | None = None) -> None:
    """Tell people about an event: recorded in the caller's transaction, sent by Celery after commit.
    Other apps call it as `adkweb.notify.notify`. Never raises into the caller (a failure here must
    not lose or delay a decision); an unknown event name is a programming error and does raise."""
    if event not in EVENTS:
        raise ValueError(f"Unknown notification event {event!r}; use one of {', '.join(EVENTS)}.")
    # An event that provably owes nothing is recorded as fanned out: no task, no fan-out.
    done = timezone.now() if _nothing_owed(event, ticket) else None
    try:
        row_id = _recorded(NotificationEvent(name=event, ticket=ticket, turn=turn, data=data or {}, fanned_out_at=done))
    except DatabaseError:
        logger.exception("Could not record the notification %s; nothing will be sent for it.", event)
        return
    if done is None:  # its work after commit: this app's outbox's (notifications.outbox.committed)
        box = shared_outbox()  # registered with this handler (notifications.apps)
        if box is None:  # registered without it: the row stays owed, and the sweeper sends it
            logger.error("Notification %s recorded, but no outbox is registered; the sweeper will send it.", event)
            return
        transaction.on_commit(lambda: box.committed(row_id))


_SAVEPOINT = "adkweb_outbox"


def _recorded(row: NotificationEvent) -> int:
    """Insert the outbox row in a savepoint of the caller's transaction (a failed insert leaves that
    transaction usable) and return its id. On PostgreSQL, inside a transaction, the savepoint, the
    INSERT and the release go in one round trip (one query string; the ORM's savepoint and create
    took three, the INSERT compiled per call), the savepoint rolled back if the INSERT fails."""
    db = transaction.get_connection()
    sqlite = db.vendor == "sqlite" and db.in_atomic_block
    if db.vendor != "postgresql" and not sqlite:
        with transaction.atomic():  # a savepoint: a failed insert leaves the caller's transaction usable
            row.save(force_insert=True)
        return cast(int, row.pk)
    fields = [f for f in NotificationEvent._meta.concrete_fields if not f.primary_key]
    params = [f.get_db_prep_save(f.pre_save(row, True), db) for f in fields]
    columns = ", ".join(db.ops.quote_name(f.column) for f in fields)
    insert = f"INSERT INTO {NotificationEvent._meta.db_table} ({columns}) VALUES ({', '.join(['%s'] * len(fields))})"
    if sqlite:
        # A statement SQLite refuses undoes its own changes, not its transaction's: no savepoint (the
        # ORM's savepoint, compiled INSERT and release were ~0.3 ms of a decision in embedded mode).
        with db.cursor() as cursor:
            cursor.execute(f"{insert} RETURNING id", params)
            found = cursor.fetchone()
        assert found is not None
        return cast(int, found[0])
    with db.cursor() as cursor:
        try:
            cursor.execute(f"SAVEPOINT {_SAVEPOINT}; {insert} RETURNING id; RELEASE SAVEPOINT {_SAVEPOINT}", params)
        except DatabaseError:
            cursor.execute(f"ROLLBACK TO SAVEPOINT {_SAVEPOINT}; RELEASE SAVEPOINT {_SAVEPOINT}")
            raise
        cursor.nextset()  # the INSERT's row (the savepoint's result first)
        found = cursor.fetchone()
    assert found is not None
    return cast(int, found[0])


def owes(event: str, ticket: Any) -> bool:
    """Whether an event may owe anyone anything (False: `notify` records it as fanned out, and sends no
    task); for a caller that writes the outbox row in its own SQL (adkweb.notify.Outbox)."""
    return not _nothing_owed(event, ticket)


def owed_sql(event: str, ticket: Any) -> bool | tuple[str, list[Any]]:
    """`owes` for a caller that writes the event's row in its own statement on PostgreSQL: True when the
    event is owed, known without a query (emails may be); else the question `owes` would read the
    endpoints for, as an SQL condition with its parameters (true: an enabled endpoint subscribes),
    to ask in that statement (adkweb.notify.Outbox.owed_sql)."""
    if selectors.emails_may_be_owed(event_name=event, ticket=ticket):
        return True
    return selectors.webhook_endpoints_subscribed_sql(event_name=event)


def _nothing_owed(event: str, ticket: Any) -> bool:
    """No email owed (`selectors.emails_may_be_owed`) and no enabled endpoint subscribed. A failed
    read says False: the event is then fanned out as any other, and the fan-out decides."""
    if selectors.emails_may_be_owed(event_name=event, ticket=ticket):
        return False
    try:  # in a savepoint: a failed read leaves the caller's transaction usable
        return not selectors.webhook_endpoints_for(event_name=event, in_savepoint=True)
    except DatabaseError:
        logger.warning("Could not read the webhook endpoints for %s; fanning it out.", event, exc_info=True)
        return False


def enqueue(task_name: str, *args: Any, countdown: float | None = None) -> None:
    """Send a notifications task (by name: tasks call services, not the other way round); a broker
    failure is logged, and the sweeper sends it later."""
    from adkweb.celery import app

    try:
        app.send_task(f"notifications.tasks.{task_name}", args=args, countdown=countdown)
    except Exception:
        logger.warning("Could not enqueue %s%s; the sweeper will retry.", task_name, args, exc_info=True)


def event_deliver(*, event_id: int) -> dict[int, float]:
    """Fan an event out and send what it owes: its emails here, together, claimed in the transaction
    that writes its deliveries (one write transaction fewer; on SQLite one hold of the file fewer in
    the way of the turn that opened the ticket), then sent through one connection to the mail server
    and recorded in one transaction (`sending.deliveries_send`); each webhook in a task of its own (an
    endpoint that hangs until its timeout delays nobody else). Returns the emails' retry delays by
    delivery id (the caller sends each retry)."""
    from .sending import Known, _claim, deliveries_send

    planned = _fan_out_plan(event_id)
    with transaction.atomic():
        owed, written = _fan_out_locked(event_id, planned)
        emails = [delivery_id for delivery_id, channel in owed if channel == Delivery.Channel.EMAIL]
        known = None
        if written:  # the event and the people just read: the claim reads only the ticket again
            people = {d.recipient.pk: d.recipient for d in written if d.recipient is not None}
            known = Known(event=written[0].event, people=people)
        claimed = _claim(emails, known=known) if emails else []
    for delivery_id, channel in owed:
        if channel != Delivery.Channel.EMAIL:
            enqueue("delivery_send", delivery_id)
    return deliveries_send(claimed)


def event_fan_out(*, event_id: int) -> list[int]:
    """Create the deliveries an event owes (once), and return the ids of those never tried."""
    planned = _fan_out_plan(event_id)
    with transaction.atomic():
        return [delivery_id for delivery_id, _ in _fan_out_locked(event_id, planned)[0]]


def _fan_out_locked(event_id: int, planned: list[Delivery] | None) -> tuple[list[tuple[int, str]], list[Delivery]]:
    """In the caller's transaction: the deliveries an event owes, with each one's channel, and the rows
    this call wrote (none when another fan-out did first). Who is owed what (the recipients, their
    permissions and preferences, the webhook endpoints) is read before (`planned`), outside the
    transaction: on SQLite a write transaction holds the whole database file from its BEGIN, and
    these reads kept every other writer (the turn that opened the ticket, requests) waiting on them
    (bench/README.md, phase 9 embedded). Here the event is locked, what was planned is written unless
    another fan-out did first (`fanned_out_at`), and what is owed is listed."""
    with connection.cursor() as cursor:  # plain statements: the ORM compiled each of these per call
        cursor.execute(_EVENT_LOCKED + (" FOR UPDATE" if connection.vendor == "postgresql" else ""), [event_id])
        found = cursor.fetchone()
        if found is None:
            return [], []  # the transaction that recorded it was rolled back after all
        rows: list[Delivery] = []
        if found[0] is None:
            # One INSERT; a delivery already there (one per event and person, or endpoint) is kept as it is.
            rows = (planned if planned is not None else _fan_out_plan(event_id)) or []  # not seen before the lock
            _deliveries_insert(rows)
            cursor.execute(_FANNED_OUT, [connection.ops.adapt_datetimefield_value(timezone.now()), event_id])
            skipped = [row for row in rows if row.status == Delivery.Status.SKIPPED]
            if skipped:  # written skipped (the ticket closed first): each one's attempt, as a skip records it
                cursor.execute(_SKIPPED_ATTEMPTS, [False, event_id, Delivery.Status.SKIPPED.value])
                _announce_after_commit(skipped[0])
        cursor.execute(_OWED, [event_id, *[status.value for status in Delivery.OWED]])
        return [(pk, channel) for pk, channel in cursor.fetchall()], rows


def _fan_out_plan(event_id: int) -> list[Delivery] | None:
    """The deliveries an event owes, as unsaved rows (None: fanned out already, or no such event)."""
    from django.conf import settings

    # The event, its ticket (its deciders, or its requester) and its turn (a turn's session only for a
    # webhook's payload, read then), each by pk in a statement compiled once per process (the ORM
    # compiled this select_related per call: ~1-2 ms of an event's fan-out).
    event = _by_pk(NotificationEvent, event_id)
    if event is None or event.fanned_out_at is not None:
        return None
    ticket_id, turn_id = event.ticket_id, event.turn_id
    event.ticket = None if ticket_id is None else _by_pk(NotificationEvent.ticket.field.related_model, ticket_id)
    event.turn = None if turn_id is None else _by_pk(NotificationEvent.turn.field.related_model, turn_id)
    owed = dict(event=event, ticket=event.ticket, max_attempts=len(settings.ADKWEB_NOTIFY_RETRY_DELAYS) + 1)
    # A ticket closed before its event is fanned out (decided while the email waited for a quiet moment)
    # owes its deciders no email: the claim would skip each one (`emails.email_prepare`), after a
    # transaction of its own, and record each skip in another. A closed ticket is never opened again, so
    # they are written skipped here, with their one attempt, in the fan-out's transaction: the same rows
    # the ticket page shows, nothing claimed, rendered or recorded after.
    closed = closed_before_sending(event.ticket) if event.ticket is not None and event.ticket.is_closed else ""
    rows = []
    for user, role in selectors.email_recipients(event=event):
        row = Delivery(**owed, channel=Delivery.Channel.EMAIL, recipient=user, role=role, target=user.email)
        if closed and role == "decider":
            row.status, row.attempts, row.last_error = Delivery.Status.SKIPPED, 1, closed
        rows.append(row)
    stale = webhooks.stale_for(event.name, event.ticket)  # an opening or a call to act, its ticket closed first
    for endpoint in selectors.webhook_endpoints_for(event_name=event.name):
        delivery_id = uuid.uuid4()
        payload = webhooks.payload(event=event, endpoint=endpoint, delivery_id=delivery_id)
        row = Delivery(
            **owed, channel="webhook", endpoint=endpoint, target=endpoint.url, payload=payload, uuid=delivery_id
        )
        if stale:  # written skipped, as the deciders' emails above, where its send would skip it (`webhook_send`)
            row.status, row.attempts, row.last_error = Delivery.Status.SKIPPED, 1, stale
        rows.append(row)
    return rows


def _by_pk(model: Any, pk: int) -> Any:
    found = compiled.instances(model, f"notify_by_pk:{model._meta.label}", lambda pk: model.objects.filter(pk=pk), pk)
    return found[0] if found else None


def delivery_resend(*, delivery: Delivery) -> Delivery:
    """Try a delivery again now, with a fresh set of retries (its attempts so far are kept)."""
    from django.conf import settings

    Delivery.objects.filter(pk=delivery.pk).exclude(status=Delivery.Status.SENDING).update(
        status=Delivery.Status.PENDING,
        next_attempt_at=None,
        max_attempts=delivery.attempts + len(settings.ADKWEB_NOTIFY_RETRY_DELAYS) + 1,
        updated_at=timezone.now(),
    )
    pk = delivery.pk
    transaction.on_commit(lambda: enqueue("delivery_send", pk))
    delivery.refresh_from_db()
    return delivery


def notifications_sweep() -> int:
    """Send again what a lost broker message or a dead worker left owed; returns how many."""
    now = timezone.now()
    owed_events = NotificationEvent.objects.filter(fanned_out_at__isnull=True, created_at__lt=now - SWEEP_GRACE)
    for pk in owed_events.values_list("pk", flat=True)[:500]:
        enqueue("event_fan_out", pk)
    n = owed_events.count()
    stale = Delivery.objects.filter(status=Delivery.Status.SENDING, updated_at__lt=now - STALE_SENDING)
    # Its last attempt died with its worker: no claim takes it again (none has attempts left), so it is
    # failed, saying so, where "retrying" waited for ever (an admin may resend it).
    stale.filter(attempts__gte=F("max_attempts")).update(
        status=Delivery.Status.FAILED, next_attempt_at=None, updated_at=now, last_error=LOST_LAST_ATTEMPT
    )
    stale.update(status=Delivery.Status.RETRYING, next_attempt_at=now, updated_at=now)
    owed = Delivery.objects.filter(status__in=Delivery.OWED, updated_at__lt=now - SWEEP_GRACE).exclude(
        next_attempt_at__gt=now - SWEEP_GRACE
    )
    for pk in owed.values_list("pk", flat=True)[:500]:
        enqueue("delivery_send", pk)
        n += 1
    return n
