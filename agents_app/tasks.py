"""Celery tasks: thin, they take ids. Every task names its queue (see QUEUES)."""

from __future__ import annotations

from celery import shared_task

AGENTS_QUEUE = "agents"
QUEUES = (AGENTS_QUEUE,)


@shared_task(queue=AGENTS_QUEUE, acks_late=True)
def session_drain(session_pk: int) -> int:
    """Run a session's queued turns, oldest first, under its lease."""
    from .runner import session_drain as drain

    return drain(session_pk)


@shared_task(queue=AGENTS_QUEUE)
def turns_requeue_owed() -> int:
    """Re-enqueue sessions whose owed work no worker is doing."""
    from .services import turns_requeue_owed as requeue

    return requeue()
