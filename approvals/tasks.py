"""Celery tasks of the human side: thin, routed to the agents queue (settings.CELERY_TASK_ROUTES)."""

from __future__ import annotations

from celery import shared_task


@shared_task
def deadlines_sweep() -> dict[str, int]:
    """Record every reminder, escalation and expiry that is due (beat sends this; so does the
    embedded sweeper in `make run`)."""
    from .deadlines import deadlines_sweep as sweep

    return sweep()
