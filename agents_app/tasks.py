"""Celery tasks: thin, they take ids. Every task is routed to a named queue (settings.CELERY_TASK_ROUTES,
checked by a test against QUEUES)."""

from __future__ import annotations

from celery import shared_task

AGENTS_QUEUE = "agents"
NOTIFICATIONS_QUEUE = "notifications"  # notifications.tasks: email and webhook deliveries
QUEUES = (AGENTS_QUEUE, NOTIFICATIONS_QUEUE)


@shared_task(acks_late=True)
def session_drain(session_pk: int) -> int:
    """Run a session's queued turns, oldest first, under its lease (the sweeper's path, and every
    enqueue's when ADKWEB_WAKE_LIST is off; counted with the wake-ups' drains: agents_app.wake_worker)."""
    from .wake_worker import drain_counted

    return drain_counted(session_pk)


@shared_task
def turns_requeue_owed() -> int:
    """Re-enqueue sessions whose owed work no worker is doing; then ANALYZE the tables that hold rows but no
    planner statistics yet (adkweb.postgresql.statistics: the pages' plans right after a bulk load)."""
    from adkweb.postgresql.statistics import analyze_missing

    from .enqueue import owed_sessions_enqueue

    count = owed_sessions_enqueue()
    analyze_missing()
    return count
