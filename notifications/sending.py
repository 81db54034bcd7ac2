"""One attempt of one delivery: claim it (so a duplicate task cannot send it twice), send, record
the attempt, and say when to try again (exponential backoff from ADKWEB_NOTIFY_RETRY_DELAYS)."""

from __future__ import annotations

import logging
import random
import time
import traceback
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from .models import Delivery, DeliveryAttempt
from .outcome import Outcome

logger = logging.getLogger(__name__)
EARLY = timedelta(seconds=2)  # a retry message may arrive a little before next_attempt_at (clock skew)


def retry_delay(attempt: int) -> float:
    """Seconds to wait after failed attempt `attempt` (1-based): the schedule, with ±10% jitter."""
    delays = settings.ADKWEB_NOTIFY_RETRY_DELAYS or [10.0]
    base = delays[min(max(attempt, 1), len(delays)) - 1]
    return base * random.uniform(0.9, 1.1)


def delivery_claim(delivery_id: int) -> Delivery | None:
    """Mark an owed, due delivery as sending (one atomic UPDATE), or None if it is not ours to send."""
    now = timezone.now()
    due = Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now + EARLY)
    claimed = (
        Delivery.objects.filter(due, pk=delivery_id, status__in=Delivery.OWED)
        .filter(attempts__lt=F("max_attempts"))
        .update(status=Delivery.Status.SENDING, attempts=F("attempts") + 1, updated_at=now)
    )
    if not claimed:
        return None
    return Delivery.objects.select_related("event", "ticket__closed_by", "recipient", "endpoint").get(pk=delivery_id)


def _send(delivery: Delivery) -> Outcome:
    from .emails import email_send
    from .webhooks import webhook_send

    try:
        return email_send(delivery) if delivery.channel == Delivery.Channel.EMAIL else webhook_send(delivery)
    except Exception as exc:  # an SMTP error, a template bug: recorded on the row, retried
        logger.warning("Delivery %s failed", delivery.pk, exc_info=True)
        return Outcome.fail(traceback.format_exception_only(type(exc), exc)[-1].strip())


def delivery_attempt(*, delivery_id: int) -> float | None:
    """Try a delivery once; returns seconds until the next try, or None when there is nothing more to do."""
    delivery = delivery_claim(delivery_id)
    if delivery is None:
        return None
    started, clock = timezone.now(), time.monotonic()
    outcome = _send(delivery)
    return delivery_record(delivery, outcome, started=started, duration=time.monotonic() - clock)


@transaction.atomic
def delivery_record(delivery: Delivery, outcome: Outcome, *, started: datetime, duration: float) -> float | None:
    """Keep the attempt and move the delivery on: delivered, skipped, retrying or failed."""
    DeliveryAttempt.objects.create(
        delivery=delivery,
        number=delivery.attempts,
        started_at=started,
        duration_ms=int(duration * 1000),
        ok=outcome.ok,
        status_code=outcome.status_code,
        error=outcome.error,
    )
    now, delay = timezone.now(), None
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
    delivery.save(
        update_fields=[
            "status",
            "target",
            "last_status_code",
            "last_error",
            "delivered_at",
            "next_attempt_at",
            "updated_at",
        ]
    )
    if delivery.ticket is not None:
        ticket_id, session_pk = delivery.ticket.pk, delivery.ticket.session_id
        transaction.on_commit(lambda: _announce(ticket_id, session_pk))
    return delay


def _announce(ticket_id: int, session_pk: int) -> None:
    """The ticket page shows delivery status: tell it (not the inboxes) that it changed."""
    from approvals.events import notify_ticket_changed

    try:
        notify_ticket_changed(ticket_id=ticket_id, session_pk=session_pk, inbox=False)
    except Exception:
        logger.warning("Could not announce delivery status of ticket %s", ticket_id, exc_info=True)
