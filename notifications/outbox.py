"""An outbox row's work after its commit (`committed`, the outbox's callable: adkweb.notify.Outbox):
fan the event out and send what it owes.

With the worker in this process on the memory broker (embedded mode), the work runs here once the
process is free (adkweb.quiet_work: the broker's background rule, without a message: ~0.9 ms of CPU
less an event, and no Celery send in the turn's append). Otherwise the `event_fan_out` task. Either
way the row stays owed (`fanned_out_at` empty) until the fan-out commits, so a process that dies first,
or a send or run that fails, leaves it to the sweeper (services.notifications_sweep), and a fan-out
that runs twice writes once (it locks the row and checks `fanned_out_at`)."""

from __future__ import annotations

import logging

from django.conf import settings

logger = logging.getLogger(__name__)


def in_process() -> bool:
    """Whether the broker's messages stay in this process and its worker runs here (embedded mode)."""
    return bool(settings.ADKWEB_EMBEDDED_WORKER) and (
        getattr(settings, "CELERY_BROKER_TRANSPORT", "") == "adkweb.memory_broker:Transport"
    )


def committed(event_id: int) -> None:
    """An outbox row just committed: its fan-out, here when the process is free or as a task. Never
    raises: it runs in the commit's callbacks of the caller's transaction (a decision, a turn's append),
    whose answer and later callbacks must not depend on it; the row stays owed for the sweeper."""
    from .services import enqueue

    if not in_process():
        enqueue("event_fan_out", event_id)  # logs a broker failure itself
        return
    from adkweb.quiet_work import when_quiet

    try:
        when_quiet(fan_out_now, event_id)
    except Exception:  # e.g. the quiet thread could not start (the interpreter shutting down)
        logger.warning("Could not start outbox row %s's fan-out; the sweeper will send it.", event_id, exc_info=True)


def fan_out_now(event_id: int) -> int:
    """Create an event's deliveries and send them: its emails here, each webhook in a `delivery_send`
    task of its own; a failed email is retried by a `delivery_send` after its delay. Returns how many
    retries were sent (the `event_fan_out` task's body)."""
    from .services import enqueue, event_deliver

    retries = event_deliver(event_id=event_id)
    for delivery_id, delay in retries.items():
        enqueue("delivery_send", delivery_id, countdown=delay)
    return len(retries)
