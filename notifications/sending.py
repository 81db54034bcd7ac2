"""Attempts of deliveries: claim them (so a duplicate task cannot send one twice), send, record each
attempt, and say when to try again (exponential backoff from ADKWEB_NOTIFY_RETRY_DELAYS). An event's
deliveries are tried together (`deliveries_attempt`), a retry one by one (`delivery_attempt`)."""

from __future__ import annotations

import functools
import logging
import random
import time
import traceback
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection as database
from django.db import transaction
from django.utils import timezone

from adkweb.raw_rows import raw
from approvals.models import PendingCall

from .models import ApprovalLink, Delivery, DeliveryAttempt, NotificationEvent
from .outcome import Outcome

logger = logging.getLogger(__name__)
EARLY = timedelta(seconds=2)  # a retry message may arrive a little before next_attempt_at (clock skew)


def retry_delay(attempt: int) -> float:
    """Seconds to wait after failed attempt `attempt` (1-based): the schedule, with ±10% jitter."""
    delays = settings.ADKWEB_NOTIFY_RETRY_DELAYS or [10.0]
    base = delays[min(max(attempt, 1), len(delays)) - 1]
    return base * random.uniform(0.9, 1.1)


def _claim(delivery_ids: list[int], known: Known | None = None) -> list[tuple[Delivery, Outcome | ApprovalLink | None]]:
    """Mark the owed, due deliveries among these as sending (a duplicate task or the sweeper cannot
    send them twice), each email with what `email_prepare` says (a skip, or the link it carries):
    one transaction for them all (or the caller's: the fan-out claims in the transaction that wrote
    them). Returns those claimed, by id; those not ours are left out. `known`: the event and the
    people the caller has just read (`Known`); the ticket is read again here all the same."""
    from .emails import email_prepare
    from .selectors import preferences_of

    with transaction.atomic(savepoint=False):
        rows = _claimed_rows(delivery_ids, timezone.now(), known)
        if not rows:
            return []
        claimed: list[tuple[Delivery, Outcome | ApprovalLink | None]] = []
        emails = [d for d in rows if d.channel == Delivery.Channel.EMAIL and d.recipient is not None]
        prefs = preferences_of([d.recipient for d in emails]) if emails else {}  # one query for the batch
        for delivery in rows:
            prepared: Outcome | ApprovalLink | None = None
            if delivery.channel == Delivery.Channel.EMAIL:
                try:
                    with transaction.atomic():  # a savepoint: one email's failure leaves the others claimed
                        prepared = email_prepare(delivery, prefs)
                except Exception as exc:
                    prepared = _failed(delivery, exc)
            claimed.append((delivery, prepared))
    return claimed


@dataclass(frozen=True)
class Known:
    """What the fan-out read just before it claims an event's emails: the event and its recipients
    by pk. The claim then takes each delivery's row from its own `UPDATE … RETURNING` and reads the
    ticket again (its status, routing and arguments as they are inside the claim's transaction),
    instead of reading every delivery with its event, ticket and recipient joined."""

    event: NotificationEvent
    people: dict[int, Any]


def _claimed_rows(delivery_ids: list[int], now: datetime, known: Known | None) -> list[Delivery]:
    """The deliveries `_owed_marked_sending` claimed, with their event, ticket and recipient (or
    endpoint), by pk."""
    if known is None:
        pks = _owed_marked_sending(delivery_ids, now)
        related = ("event", "ticket__closed_by", "ticket__edited_by", "recipient", "endpoint")
        return list(Delivery.objects.select_related(*related).filter(pk__in=pks).order_by("pk")) if pks else []
    rows = sorted(_owed_marked_sending(delivery_ids, now, returning=Delivery), key=lambda d: d.pk)
    if any(d.event_id != known.event.pk or d.recipient_id not in known.people for d in rows):
        return _attached(rows)  # not the caller's (never, from the fan-out): each read as usual
    ticket_ids = {d.ticket_id for d in rows if d.ticket_id is not None}
    if len(ticket_ids) > 1:
        return _attached(rows)
    # The ticket as it is now (a decision, an edit of its arguments, a routing since the fan-out read it).
    tickets = {t.pk: t for t in raw(PendingCall, _TICKET_SQL, list(ticket_ids))} if ticket_ids else {}
    for delivery in rows:
        delivery.event, delivery.recipient = known.event, known.people[delivery.recipient_id]
        delivery.ticket = tickets.get(delivery.ticket_id)
    return rows


_TICKET_SQL = f"SELECT * FROM {PendingCall._meta.db_table} WHERE id = %s"


def _attached(rows: list[Delivery]) -> list[Delivery]:
    related = ("event", "ticket__closed_by", "ticket__edited_by", "recipient", "endpoint")
    return list(Delivery.objects.select_related(*related).filter(pk__in=[d.pk for d in rows]).order_by("pk"))


def _owed_marked_sending(delivery_ids: list[int], now: datetime, returning: type[Delivery] | None = None) -> Any:
    """The owed, due deliveries among these (not yet at their last attempt), marked sending with one
    more attempt, in one statement; their ids (`returning=Delivery`: their rows as updated). Its rows
    stay locked to the end of the caller's transaction (PostgreSQL; SQLite's transaction is a
    writer's from its BEGIN): a concurrent claim waits, then finds them sending and leaves them."""
    if not delivery_ids:
        return []
    adapt = database.ops.adapt_datetimefield_value
    ids = ", ".join(["%s"] * len(delivery_ids))
    sql = (
        f"UPDATE {Delivery._meta.db_table} SET status = %s, attempts = attempts + 1, updated_at = %s "
        f"WHERE id IN ({ids}) AND status IN (%s, %s) AND attempts < max_attempts "
        "AND (next_attempt_at IS NULL OR next_attempt_at <= %s) RETURNING "
    )
    params = [Delivery.Status.SENDING.value, adapt(now), *delivery_ids, *[s.value for s in Delivery.OWED]]
    params.append(adapt(now + EARLY))
    if returning is not None:
        return raw(returning, sql + "*", params)
    with database.cursor() as cursor:
        cursor.execute(sql + "id", params)
        return [row[0] for row in cursor.fetchall()]


def _failed(delivery: Delivery, exc: BaseException) -> Outcome:
    """An SMTP error, a template bug: recorded on the row, retried."""
    logger.warning("Delivery %s failed", delivery.pk, exc_info=exc)
    return Outcome.fail(traceback.format_exception_only(type(exc), exc)[-1].strip())


def _send(
    delivery: Delivery, prepared: Outcome | ApprovalLink | None, connection: Any, rendered: Any = None
) -> Outcome:
    from .emails import email_deliver
    from .webhooks import webhook_send

    if isinstance(prepared, Outcome):
        return prepared
    try:
        if delivery.channel != Delivery.Channel.EMAIL:
            return webhook_send(delivery)
        connection.open()  # once for the batch's emails (a no-op while open)
        return email_deliver(delivery, prepared, connection, rendered)
    except Exception as exc:
        if delivery.channel == Delivery.Channel.EMAIL:
            connection.close()  # maybe broken: the next email opens a new one
        return _failed(delivery, exc)


def deliveries_attempt(*, delivery_ids: list[int]) -> dict[int, float]:
    """Try these deliveries once, together: one transaction claims them (and makes the deciders'
    one-tap links), the emails go through one connection to the mail server, one transaction records
    every attempt, and each ticket's page is told once. Those not owed or not due now (sent already,
    claimed by another task) are left alone. Returns {delivery id: seconds until its next try} for
    the attempts that failed and may be retried."""
    return deliveries_send(_claim(delivery_ids))


def deliveries_send(claimed: list[tuple[Delivery, Outcome | ApprovalLink | None]]) -> dict[int, float]:
    """Send what `_claim` claimed (committed): the emails through one connection, each ticket's and
    audience's email rendered once (`emails.Rendered`), then one transaction records every attempt.
    Returns the retry delays by delivery id."""
    from .emails import Rendered, email_connection

    if not claimed:
        return {}
    connection = email_connection() if any(d.channel == Delivery.Channel.EMAIL for d, _ in claimed) else None
    rendered = Rendered()
    tried: list[tuple[Delivery, Outcome, datetime, float]] = []
    try:
        for delivery, prepared in claimed:
            started, clock = timezone.now(), time.monotonic()
            outcome = _send(delivery, prepared, connection, rendered)
            tried.append((delivery, outcome, started, time.monotonic() - clock))
    finally:
        if connection is not None:
            connection.close()
    return deliveries_record(tried)


def delivery_attempt(*, delivery_id: int) -> float | None:
    """Try a delivery once; returns seconds until the next try, or None when there is nothing more to do."""
    return deliveries_attempt(delivery_ids=[delivery_id]).get(delivery_id)


def _moved_on(delivery: Delivery, outcome: Outcome, now: datetime) -> float | None:
    """Set a tried delivery's status: delivered, skipped, retrying (returns the delay) or failed."""
    delay = None
    delivery.last_status_code, delivery.last_error = outcome.status_code, outcome.error
    if outcome.ok:
        delivery.status, delivery.delivered_at, delivery.next_attempt_at = Delivery.Status.DELIVERED, now, None
    elif outcome.skipped:
        delivery.status, delivery.next_attempt_at = Delivery.Status.SKIPPED, None
    elif delivery.attempts < delivery.max_attempts:
        # Attempts since the delivery was (re)sent: a resend starts the schedule over.
        delay = retry_delay(delivery.attempts - (delivery.max_attempts - len(settings.ADKWEB_NOTIFY_RETRY_DELAYS) - 1))
        delivery.status, delivery.next_attempt_at = Delivery.Status.RETRYING, now + timedelta(seconds=delay)
    else:
        delivery.status, delivery.next_attempt_at = Delivery.Status.FAILED, None
    return delay


@transaction.atomic
def deliveries_record(tried: list[tuple[Delivery, Outcome, datetime, float]]) -> dict[int, float]:
    """Keep each attempt and move each delivery on (one transaction); returns the retry delays by id."""
    now, delays = timezone.now(), {}
    DeliveryAttempt.objects.bulk_create(
        DeliveryAttempt(
            delivery=delivery,
            number=delivery.attempts,
            started_at=started,
            duration_ms=int(duration * 1000),
            ok=outcome.ok,
            status_code=outcome.status_code,
            error=outcome.error,
        )
        for delivery, outcome, started, duration in tried
    )
    tickets: dict[int, int] = {}
    rows: list[list[Any]] = []
    for delivery, outcome, _, _ in tried:
        delay = _moved_on(delivery, outcome, now)
        if delay is not None:
            delays[delivery.pk] = delay
        delivery.updated_at = now
        rows.append([getattr(delivery, name) for name in _RECORDED] + [delivery.pk])
        if delivery.ticket is not None:
            tickets[delivery.ticket.pk] = delivery.ticket.session_id
    _record_rows(rows)
    for ticket_id, session_pk in tickets.items():  # its page shows delivery status: once per ticket
        announce_after_commit(ticket_id, session_pk)
    return delays


def announce_after_commit(ticket_id: int, session_pk: int) -> None:
    """Once the transaction commits, tell the ticket's page that its deliveries changed."""
    transaction.on_commit(functools.partial(_announce, ticket_id, session_pk))


_RECORDED = ("status", "target", "last_status_code", "last_error", "delivered_at", "next_attempt_at", "updated_at")


def _record_rows(rows: list[list[Any]]) -> None:
    """Each tried delivery's new state (`_RECORDED`, then its pk per row) in one prepared `UPDATE` run
    for every row: what `save(update_fields=_RECORDED)` wrote one compiled statement at a time."""
    if not rows:
        return
    adapt = database.ops.adapt_datetimefield_value
    dates = [i for i, name in enumerate(_RECORDED) if name in ("delivered_at", "next_attempt_at", "updated_at")]
    for row in rows:
        for i in dates:
            row[i] = adapt(row[i])
        row[0] = Delivery.Status(row[0]).value  # a plain str for the driver, as the ORM would pass
    sets = ", ".join(f"{name} = %s" for name in _RECORDED)
    with database.cursor() as cursor:
        cursor.executemany(f"UPDATE {Delivery._meta.db_table} SET {sets} WHERE id = %s", rows)


def _announce(ticket_id: int, session_pk: int) -> None:
    """The ticket page shows delivery status: tell it (not the inboxes) that it changed."""
    from approvals.events import notify_ticket_changed

    try:
        notify_ticket_changed(ticket_id=ticket_id, session_pk=session_pk, inbox=False)
    except Exception:
        logger.warning("Could not announce delivery status of ticket %s", ticket_id, exc_info=True)
