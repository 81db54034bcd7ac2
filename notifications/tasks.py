"""Celery tasks of notifications: thin, they take ids. All run on the `notifications` queue
(settings.CELERY_TASK_ROUTES), so a slow SMTP server or webhook never holds up an agent's turn."""

from __future__ import annotations

from celery import shared_task

NOTIFICATIONS_QUEUE = "notifications"


@shared_task(acks_late=True)
def event_fan_out(event_id: int) -> int:
    """Create an event's deliveries and send them: its emails in this task, each webhook in a
    `delivery_send` of its own; a failed email is retried by a `delivery_send` after its delay."""
    from .outbox import fan_out_now

    return fan_out_now(event_id)


@shared_task(bind=True, acks_late=True, max_retries=None)
def delivery_send(self, delivery_id: int) -> None:  # noqa: ANN001  (Celery's bound task)
    """Try one delivery; on failure Celery retries it after the next backoff delay."""
    from .sending import delivery_attempt

    delay = delivery_attempt(delivery_id=delivery_id)
    if delay is not None:
        raise self.retry(countdown=delay)


@shared_task
def notifications_sweep() -> int:
    """Re-send what a lost broker message or a dead worker left owed."""
    from .services import notifications_sweep as sweep

    return sweep()
